#ifndef CD_SPARSE_F32_SPMM_SIMD_H
#define CD_SPARSE_F32_SPMM_SIMD_H

// Register-tile body of the AVX2 and AVX-512 sparse micro-kernels
// (f32-spmm-*-avx2.c, f32-spmm-*-avx512f.c), written once in the vector
// vocabulary of sparse/f32-simd.h (V = CD_VN floats): the includer picks the
// ISA first. The contract is in sparse/spmm-ukernel.h.

#include "sparse/f32-simd.h"
#include "sparse/spmm-ukernel.h"

#include <assert.h>
#include <math.h>

// One channel per block keeps two accumulator sets in half the registers:
// tiles of up to this many vectors (AVX2 4, AVX-512 8).
#define CD_SPMM_NV1_MAX (CD_VREGS / 4)

// The work of a block beyond its FMAs, per ISA as measured fastest on CSR
// layers with few entries per block (the choices differ there by 1-3%):
//   CD_SPMM_CLAMP_ALWAYS  clamp even without bounds, so never skip a block in
//                         place either (AVX2: the branches cost more than
//                         they save)
//   CD_SPMM_SUM_EARLY     a one-channel tile sums its two sets before the odd
//                         last entry (AVX2), not at the store (AVX-512)
#if defined(CD_SIMD_AVX2)
#define CD_SPMM_CLAMP_ALWAYS 1
#define CD_SPMM_SUM_EARLY 1
#else
#define CD_SPMM_CLAMP_ALWAYS 0
#define CD_SPMM_SUM_EARLY 0
#endif

// A full vector, or when T the lanes in `last`. A macro: through an inline
// function GCC spent more instructions on the masked tiles' addresses.
#define CD_SPMM_LOAD_(P, T, LAST) ((T) ? cd_v_maskz_loadu(LAST, P) : cd_v_loadu(P))

// Adds the residual (when r), clamps (when clamp) and stores one vector
// (masked when tail).
static inline CD_V_AI void cd_spmm_store(cd_vf a, const float *r, float *o, int tail, cd_vmask last, int clamp,
                                         cd_vf vmin, cd_vf vmax) {
    if (r) a = cd_v_add(a, CD_SPMM_LOAD_(r, tail, last));
    if (clamp) a = cd_v_min(cd_v_max(a, vmin), vmax);
    if (tail)
        cd_v_mask_storeu(o, last, a);
    else
        cd_v_storeu(o, a);
}

// One channel per block, a tile of NV (<= CD_SPMM_NV1_MAX) vectors: two
// accumulator sets take alternate entries, so 2*NV independent FMA chains
// hide the FMA latency (summed as CD_SPMM_SUM_EARLY says). MASKED: the last
// vector holds only the pixels set in `last` (loads and stores are masked,
// nothing else is read).
static inline CD_V_AI void cd_spmm_tile1(const int NV, const int MASKED, cd_vmask last, size_t nblk, const float *in,
                                         const float *w, const int32_t *off, const uint32_t *nnz, const float *res,
                                         size_t res_stride, float *out, size_t out_stride, int clamp, cd_vf vmin,
                                         cd_vf vmax) {
    // Accumulating in place without clamp (a later column block): a block
    // with no entries and a zero bias leaves its output as it is.
    const int inplace = !clamp && res == out && res_stride == out_stride;
    for (size_t b = 0; b < nblk; b++) {
        if (inplace && nnz[b] == 0 && w[0] == 0.0f) {
            w += 1;
            continue;
        }
        // Fixed-size arrays, fully unrolled with constant indices: registers.
        cd_vf a0[8], a1[8];
        const cd_vf vb = cd_v_bcast(w);
        w += 1;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            a0[v] = vb;
            a1[v] = cd_v_zero();
        }
        uint32_t j = nnz[b];
        for (; j >= 2; j -= 2) {
            const float *x0 = in + off[0], *x1 = in + off[1];
            off += 2;
            const cd_vf w0 = cd_v_bcast(w), w1 = cd_v_bcast(w + 1);
            w += 2;
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) {
                const int t = MASKED && v == NV - 1;
                a0[v] = cd_v_fmadd(CD_SPMM_LOAD_(x0 + CD_VN * v, t, last), w0, a0[v]);
                a1[v] = cd_v_fmadd(CD_SPMM_LOAD_(x1 + CD_VN * v, t, last), w1, a1[v]);
            }
        }
#pragma GCC unroll 8
        for (int v = 0; v < NV && CD_SPMM_SUM_EARLY; v++) a0[v] = cd_v_add(a0[v], a1[v]);
        if (j) {
            const float *x0 = in + *off++;
            const cd_vf w0 = cd_v_bcast(w++);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++)
                a0[v] = cd_v_fmadd(CD_SPMM_LOAD_(x0 + CD_VN * v, MASKED && v == NV - 1, last), w0, a0[v]);
        }
        float *o = out + b * out_stride;
        const float *r = res ? res + b * res_stride : NULL;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            cd_spmm_store(CD_SPMM_SUM_EARLY ? a0[v] : cd_v_add(a0[v], a1[v]), r ? r + CD_VN * v : NULL, o + CD_VN * v,
                          MASKED && v == NV - 1, last, clamp, vmin, vmax);
    }
}

// NR (4 or 8) channels per block, a tile of NV (<= 4) vectors, NR*NV
// accumulators (at most half the registers: AVX2 8, AVX-512 16): each input
// vector loaded once feeds NR of them.
static inline CD_V_AI void cd_spmm_tilen(const int NV, const int NR, const int MASKED, cd_vmask last, size_t nblk,
                                         const float *in, const float *w, const int32_t *off, const uint32_t *nnz,
                                         const float *res, size_t res_stride, float *out, size_t out_stride, int clamp,
                                         cd_vf vmin, cd_vf vmax) {
    for (size_t b = 0; b < nblk; b++) {
        cd_vf acc[8][4];
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++) {
            const cd_vf vb = cd_v_set1(w[i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = vb;
        }
        w += NR;
        for (uint32_t j = nnz[b]; j != 0; j--) {
            const float *x = in + *off++;
            cd_vf vx[4];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) vx[v] = CD_SPMM_LOAD_(x + CD_VN * v, MASKED && v == NV - 1, last);
#pragma GCC unroll 8
            for (int i = 0; i < NR; i++) {
                const cd_vf vw = cd_v_bcast(w + i);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) acc[i][v] = cd_v_fmadd(vx[v], vw, acc[i][v]);
            }
            w += NR;
        }
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++) {
            float *o = out + (b * NR + i) * out_stride;
            const float *r = res ? res + (b * NR + i) * res_stride : NULL;
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                cd_spmm_store(acc[i][v], r ? r + CD_VN * v : NULL, o + CD_VN * v, MASKED && v == NV - 1, last, clamp,
                              vmin, vmax);
        }
    }
}

// One tile of either kind.
static inline CD_V_AI void cd_spmm_tile(const int NV, const int NR, const int MASKED, cd_vmask last, size_t nblk,
                                        const float *in, const float *w, const int32_t *off, const uint32_t *nnz,
                                        const float *res, size_t res_stride, float *out, size_t out_stride, int clamp,
                                        cd_vf vmin, cd_vf vmax) {
    if (NR == 1)
        cd_spmm_tile1(NV, MASKED, last, nblk, in, w, off, nnz, res, res_stride, out, out_stride, clamp, vmin, vmax);
    else
        cd_spmm_tilen(NV > 4 ? 4 : NV, NR, MASKED, last, nblk, in, w, off, nnz, res, res_stride, out, out_stride, clamp,
                      vmin, vmax);
}

// The body of a kernel with MR = V*NVMAX pixels per tile and NR channels per
// block: full tiles, then the remaining pixels in one masked tile. With one
// channel per block, when the registers hold a tile of 2*NVMAX vectors
// (AVX-512 64x1), the last full tile merges with the remainder, so no pass
// over the weights is spent on a few leftover pixels.
static inline CD_V_AI void cd_spmm_run(const int NVMAX, const int NR, size_t mc, size_t nblk, const float *in,
                                       const float *w, const int32_t *off, const uint32_t *nnz, const float *res,
                                       size_t res_stride, float *out, size_t out_stride, const cd_spmm_params *params) {
    assert(mc > 0 && in && w && out && params);
    const cd_vf vmin = cd_v_set1(params->min);
    const cd_vf vmax = cd_v_set1(params->max);
    // No clamp (partial sums of early column blocks, no activation): skip it.
    const int clamp = CD_SPMM_CLAMP_ALWAYS || params->min > -INFINITY || params->max < INFINITY;
    const size_t MR = CD_VN * (size_t)NVMAX;
    // Leave this much for the last tile.
    const size_t keep = NR == 1 && 2 * NVMAX <= CD_SPMM_NV1_MAX ? 2 * MR : MR;
    size_t m = 0;
    for (; mc - m >= keep; m += MR)
        cd_spmm_tile(NVMAX, NR, 0, cd_v_first(CD_VN), nblk, in + m, w, off, nnz, res ? res + m : NULL, res_stride,
                     out + m, out_stride, clamp, vmin, vmax);
    const size_t rem = mc - m;
    if (rem == 0) return;
    const size_t nv = (rem + CD_VN - 1) / CD_VN;
    const cd_vmask last = cd_v_first(rem - CD_VN * (nv - 1));
    const float *r = res ? res + m : NULL;
#define CD_SPMM_TAIL_(NV_) \
    cd_spmm_tile(NV_, NR, 1, last, nblk, in + m, w, off, nnz, r, res_stride, out + m, out_stride, clamp, vmin, vmax)
    switch (nv) {
    case 1: CD_SPMM_TAIL_(1); break;
    case 2: CD_SPMM_TAIL_(2); break;
    case 3: CD_SPMM_TAIL_(3); break;
    case 4: CD_SPMM_TAIL_(4); break;
    default:
        if (NR == 1 && CD_SPMM_NV1_MAX > 4) {
            switch (nv) {
            case 5: CD_SPMM_TAIL_(5); break;
            case 6: CD_SPMM_TAIL_(6); break;
            case 7: CD_SPMM_TAIL_(7); break;
            default:
                assert(nv == 8);
                CD_SPMM_TAIL_(8);
                break;
            }
        } else {
            assert(0 && "tail longer than the tile");
        }
        break;
    }
#undef CD_SPMM_TAIL_
}

// Defines micro-kernel NAME with a tile of MR_ pixels (a multiple of V, at
// most 4 vectors) and NR_ channels per block.
#define CD_SPMM_SIMD_KERNEL(NAME, MR_, NR_)                                                                       \
    void NAME(size_t mc, size_t nblk, const float *in, const float *w, const int32_t *off, const uint32_t *nnz,   \
              const float *res, size_t res_stride, float *out, size_t out_stride, const cd_spmm_params *params) { \
        cd_spmm_run((MR_) / CD_VN, NR_, mc, nblk, in, w, off, nnz, res, res_stride, out, out_stride, params);     \
    }

#endif // CD_SPARSE_F32_SPMM_SIMD_H
