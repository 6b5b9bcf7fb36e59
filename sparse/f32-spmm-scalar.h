#ifndef CD_SPARSE_F32_SPMM_SCALAR_H
#define CD_SPARSE_F32_SPMM_SCALAR_H

// Portable C body of the sparse micro-kernels (f32-spmm-*-scalar.c): no
// intrinsics, runs on any CPU; the compiler may still vectorise the pixel
// loops. The contract is in sparse/spmm-ukernel.h.

#include "sparse/spmm-ukernel.h"

#include <assert.h>

// Pixels handled per register tile.
#define CD_SPMM_SCALAR_MR 8

// One tile of `cnt` (1..8) pixels for every block, NR channels per block.
static inline __attribute__((always_inline)) void cd_spmm_tile_scalar(const int NR, size_t cnt, size_t nblk,
                                                                      const float *in, const float *w,
                                                                      const int32_t *off, const uint32_t *nnz,
                                                                      const float *res, size_t res_stride, float *out,
                                                                      size_t out_stride, float vmin, float vmax) {
    for (size_t b = 0; b < nblk; b++) {
        float acc[8][CD_SPMM_SCALAR_MR];
        for (int i = 0; i < NR; i++)
            for (size_t p = 0; p < CD_SPMM_SCALAR_MR; p++) acc[i][p] = w[i];
        w += NR;
        for (uint32_t j = nnz[b]; j != 0; j--) {
            const float *x = in + *off++;
            if (cnt == CD_SPMM_SCALAR_MR) {
                for (int i = 0; i < NR; i++)
                    for (size_t p = 0; p < CD_SPMM_SCALAR_MR; p++) acc[i][p] += x[p] * w[i];
            } else {
                for (int i = 0; i < NR; i++)
                    for (size_t p = 0; p < cnt; p++) acc[i][p] += x[p] * w[i];
            }
            w += NR;
        }
        for (int i = 0; i < NR; i++) {
            float *o = out + (b * NR + i) * out_stride;
            const float *r = res ? res + (b * NR + i) * res_stride : NULL;
            for (size_t p = 0; p < cnt; p++) {
                float a = acc[i][p];
                if (r) a += r[p];
                a = a < vmin ? vmin : a;
                o[p] = a > vmax ? vmax : a;
            }
        }
    }
}

// Defines micro-kernel NAME with NR_ channels per block.
#define CD_SPMM_SCALAR_KERNEL(NAME, NR_)                                                                          \
    void NAME(size_t mc, size_t nblk, const float *in, const float *w, const int32_t *off, const uint32_t *nnz,   \
              const float *res, size_t res_stride, float *out, size_t out_stride, const cd_spmm_params *params) { \
        assert(mc > 0 && in && w && out && params);                                                               \
        for (size_t m = 0; m < mc; m += CD_SPMM_SCALAR_MR) {                                                      \
            size_t cnt = mc - m < CD_SPMM_SCALAR_MR ? mc - m : CD_SPMM_SCALAR_MR;                                 \
            cd_spmm_tile_scalar(NR_, cnt, nblk, in + m, w, off, nnz, res ? res + m : NULL, res_stride, out + m,   \
                                out_stride, params->min, params->max);                                            \
        }                                                                                                         \
    }

#endif // CD_SPARSE_F32_SPMM_SCALAR_H
