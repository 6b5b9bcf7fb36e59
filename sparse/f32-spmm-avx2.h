#ifndef CD_SPARSE_F32_SPMM_AVX2_H
#define CD_SPARSE_F32_SPMM_AVX2_H

// Register-tile body shared by the AVX2 sparse micro-kernels
// (f32-spmm-*-avx2.c). Include only from files built with -mavx2 -mfma.
// The contract is in sparse/spmm-ukernel.h.

#include "sparse/spmm-ukernel.h"

#include <assert.h>
#include <immintrin.h>

// Lane mask of the first n (1..8) lanes, for maskload/maskstore.
static inline __m256i cd_spmm_avx2_mask(size_t n) {
    static const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(lanes + 8 - n));
}

// One MR = 8*NV pixel tile for every block: NV ymm accumulators per output
// channel, NR channels per block (NR*NV <= 8 keeps them in the 16 ymm
// registers). MASKED: the last vector holds only the lanes set in `last`.
static inline __attribute__((always_inline)) void cd_spmm_tile_avx2(const int NV, const int NR, const int MASKED,
                                                                    __m256i last, size_t nblk, const float *in,
                                                                    const float *w, const int32_t *off,
                                                                    const uint32_t *nnz, const float *res,
                                                                    size_t res_stride, float *out, size_t out_stride,
                                                                    __m256 vmin, __m256 vmax) {
    for (size_t b = 0; b < nblk; b++) {
        // Fixed-size arrays (NR <= 8, NV <= 4): fully unrolled with constant
        // indices they live in registers.
        __m256 acc[8][4];
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++) {
            const __m256 vb = _mm256_set1_ps(w[i]);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[i][v] = vb;
        }
        w += NR;
        uint32_t j = nnz[b];
        if (NR == 1) {
            // One channel: a second set of accumulators takes every other
            // entry, so 2*NV independent FMA chains hide the FMA latency.
            __m256 acc2[4];
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc2[v] = _mm256_setzero_ps();
            for (; j >= 2; j -= 2) {
                const float *x = in + off[0], *x1 = in + off[1];
                off += 2;
                const __m256 vw = _mm256_broadcast_ss(w);
                const __m256 vw1 = _mm256_broadcast_ss(w + 1);
                w += 2;
#pragma GCC unroll 8
                for (int v = 0; v < NV; v++) {
                    const __m256 a =
                        (MASKED && v == NV - 1) ? _mm256_maskload_ps(x + 8 * v, last) : _mm256_loadu_ps(x + 8 * v);
                    const __m256 a1 =
                        (MASKED && v == NV - 1) ? _mm256_maskload_ps(x1 + 8 * v, last) : _mm256_loadu_ps(x1 + 8 * v);
                    acc[0][v] = _mm256_fmadd_ps(a, vw, acc[0][v]);
                    acc2[v] = _mm256_fmadd_ps(a1, vw1, acc2[v]);
                }
            }
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[0][v] = _mm256_add_ps(acc[0][v], acc2[v]);
        }
        for (; j != 0; j--) {
            const float *x = in + *off++;
            __m256 vx[4];
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++)
                vx[v] = (MASKED && v == NV - 1) ? _mm256_maskload_ps(x + 8 * v, last) : _mm256_loadu_ps(x + 8 * v);
#pragma GCC unroll 8
            for (int i = 0; i < NR; i++) {
                const __m256 vw = _mm256_broadcast_ss(w + i);
#pragma GCC unroll 8
                for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(vx[v], vw, acc[i][v]);
            }
            w += NR;
        }
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++) {
            float *o = out + (b * NR + i) * out_stride;
            const float *r = res ? res + (b * NR + i) * res_stride : NULL;
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) {
                __m256 a = acc[i][v];
                const int tail = MASKED && v == NV - 1;
                if (r) a = _mm256_add_ps(a, tail ? _mm256_maskload_ps(r + 8 * v, last) : _mm256_loadu_ps(r + 8 * v));
                a = _mm256_min_ps(_mm256_max_ps(a, vmin), vmax);
                if (tail)
                    _mm256_maskstore_ps(o + 8 * v, last, a);
                else
                    _mm256_storeu_ps(o + 8 * v, a);
            }
        }
    }
}

// Defines micro-kernel NAME with a tile of MR_ pixels (8, 16 or 32) and NR_
// channels per block: full tiles, then one masked tile for the rest.
#define CD_SPMM_AVX2_KERNEL(NAME, MR_, NR_)                                                                         \
    void NAME(size_t mc, size_t nblk, const float *in, const float *w, const int32_t *off, const uint32_t *nnz,     \
              const float *res, size_t res_stride, float *out, size_t out_stride, const cd_spmm_params *params) {   \
        assert(mc > 0 && in && w && out && params);                                                                 \
        const __m256 vmin = _mm256_set1_ps(params->min);                                                            \
        const __m256 vmax = _mm256_set1_ps(params->max);                                                            \
        size_t m = 0;                                                                                               \
        for (; m + (MR_) <= mc; m += (MR_))                                                                         \
            cd_spmm_tile_avx2((MR_) / 8, NR_, 0, _mm256_setzero_si256(), nblk, in + m, w, off, nnz,                 \
                              res ? res + m : NULL, res_stride, out + m, out_stride, vmin, vmax);                   \
        const size_t rem = mc - m;                                                                                  \
        if (rem == 0) return;                                                                                       \
        const size_t nv = (rem + 7) / 8;                                                                            \
        const __m256i last = cd_spmm_avx2_mask(rem - 8 * (nv - 1));                                                 \
        const float *r = res ? res + m : NULL;                                                                      \
        switch (nv) {                                                                                               \
        case 1:                                                                                                     \
            cd_spmm_tile_avx2(1, NR_, 1, last, nblk, in + m, w, off, nnz, r, res_stride, out + m, out_stride, vmin, \
                              vmax);                                                                                \
            break;                                                                                                  \
        case 2:                                                                                                     \
            cd_spmm_tile_avx2(2, NR_, 1, last, nblk, in + m, w, off, nnz, r, res_stride, out + m, out_stride, vmin, \
                              vmax);                                                                                \
            break;                                                                                                  \
        case 3:                                                                                                     \
            cd_spmm_tile_avx2(3, NR_, 1, last, nblk, in + m, w, off, nnz, r, res_stride, out + m, out_stride, vmin, \
                              vmax);                                                                                \
            break;                                                                                                  \
        default:                                                                                                    \
            assert(nv == 4);                                                                                        \
            cd_spmm_tile_avx2(4, NR_, 1, last, nblk, in + m, w, off, nnz, r, res_stride, out + m, out_stride, vmin, \
                              vmax);                                                                                \
            break;                                                                                                  \
        }                                                                                                           \
    }

#endif // CD_SPARSE_F32_SPMM_AVX2_H
