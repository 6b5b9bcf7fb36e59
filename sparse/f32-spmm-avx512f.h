#ifndef CD_SPARSE_F32_SPMM_AVX512F_H
#define CD_SPARSE_F32_SPMM_AVX512F_H

// Register-tile body shared by the AVX-512 sparse micro-kernels
// (f32-spmm-*-avx512f.c). Include only from files built with -mavx512f.
// The contract is in sparse/spmm-ukernel.h.

#include "sparse/spmm-ukernel.h"

#include <assert.h>
#include <immintrin.h>
#include <math.h>

// Adds the residual (when r), clamps (when clamp) and stores one vector
// (masked when tail).
static inline __attribute__((always_inline)) void cd_spmm_store_avx512f(__m512 a, const float *r, float *o, int tail,
                                                                        __mmask16 last, int clamp, __m512 vmin,
                                                                        __m512 vmax) {
    if (r) a = _mm512_add_ps(a, tail ? _mm512_maskz_loadu_ps(last, r) : _mm512_loadu_ps(r));
    if (clamp) a = _mm512_min_ps(_mm512_max_ps(a, vmin), vmax);
    if (tail)
        _mm512_mask_storeu_ps(o, last, a);
    else
        _mm512_storeu_ps(o, a);
}

// One channel per block, a tile of NV (<= 8) vectors: two accumulator sets
// take alternate entries, so 2*NV independent FMA chains hide the FMA
// latency. MASKED: the last vector holds only the pixels set in `last`
// (loads and stores are masked, nothing else is read).
static inline __attribute__((always_inline)) void cd_spmm_tile1_avx512f(const int NV, const int MASKED, __mmask16 last,
                                                                        size_t nblk, const float *in, const float *w,
                                                                        const int32_t *off, const uint32_t *nnz,
                                                                        const float *res, size_t res_stride, float *out,
                                                                        size_t out_stride, int clamp, __m512 vmin,
                                                                        __m512 vmax) {
    // Accumulating in place without clamp (a later column block): a block
    // with no entries and a zero bias leaves its output as it is.
    const int inplace = !clamp && res == out && res_stride == out_stride;
    for (size_t b = 0; b < nblk; b++) {
        if (inplace && nnz[b] == 0 && w[0] == 0.0f) {
            w += 1;
            continue;
        }
        // Fixed-size arrays, fully unrolled with constant indices: registers.
        __m512 a0[8], a1[8];
        const __m512 vb = _mm512_set1_ps(w[0]);
        w += 1;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            a0[v] = vb;
            a1[v] = _mm512_setzero_ps();
        }
        uint32_t j = nnz[b];
        for (; j >= 2; j -= 2) {
            const float *x0 = in + off[0], *x1 = in + off[1];
            off += 2;
            const __m512 w0 = _mm512_set1_ps(w[0]), w1 = _mm512_set1_ps(w[1]);
            w += 2;
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) {
                const int t = MASKED && v == NV - 1;
                a0[v] = _mm512_fmadd_ps(t ? _mm512_maskz_loadu_ps(last, x0 + 16 * v) : _mm512_loadu_ps(x0 + 16 * v), w0,
                                        a0[v]);
                a1[v] = _mm512_fmadd_ps(t ? _mm512_maskz_loadu_ps(last, x1 + 16 * v) : _mm512_loadu_ps(x1 + 16 * v), w1,
                                        a1[v]);
            }
        }
        if (j) {
            const float *x0 = in + *off++;
            const __m512 w0 = _mm512_set1_ps(*w++);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) {
                const int t = MASKED && v == NV - 1;
                a0[v] = _mm512_fmadd_ps(t ? _mm512_maskz_loadu_ps(last, x0 + 16 * v) : _mm512_loadu_ps(x0 + 16 * v), w0,
                                        a0[v]);
            }
        }
        float *o = out + b * out_stride;
        const float *r = res ? res + b * res_stride : NULL;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            cd_spmm_store_avx512f(_mm512_add_ps(a0[v], a1[v]), r ? r + 16 * v : NULL, o + 16 * v, MASKED && v == NV - 1,
                                  last, clamp, vmin, vmax);
    }
}

// NR (4 or 8) channels per block, a tile of NV (<= 4, NR*NV <= 16) vectors:
// each input vector loaded once feeds NR accumulators.
static inline __attribute__((always_inline)) void cd_spmm_tilen_avx512f(
    const int NV, const int NR, const int MASKED, __mmask16 last, size_t nblk, const float *in, const float *w,
    const int32_t *off, const uint32_t *nnz, const float *res, size_t res_stride, float *out, size_t out_stride,
    int clamp, __m512 vmin, __m512 vmax) {
    for (size_t b = 0; b < nblk; b++) {
        __m512 acc[8][4];
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++) {
            const __m512 vb = _mm512_set1_ps(w[i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = vb;
        }
        w += NR;
        for (uint32_t j = nnz[b]; j != 0; j--) {
            const float *x = in + *off++;
            __m512 vx[4];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                vx[v] = (MASKED && v == NV - 1) ? _mm512_maskz_loadu_ps(last, x + 16 * v) : _mm512_loadu_ps(x + 16 * v);
#pragma GCC unroll 8
            for (int i = 0; i < NR; i++) {
                const __m512 vw = _mm512_set1_ps(w[i]);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(vx[v], vw, acc[i][v]);
            }
            w += NR;
        }
#pragma GCC unroll 8
        for (int i = 0; i < NR; i++) {
            float *o = out + (b * NR + i) * out_stride;
            const float *r = res ? res + (b * NR + i) * res_stride : NULL;
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                cd_spmm_store_avx512f(acc[i][v], r ? r + 16 * v : NULL, o + 16 * v, MASKED && v == NV - 1, last, clamp,
                                      vmin, vmax);
        }
    }
}

// One tile of either kind.
static inline __attribute__((always_inline)) void cd_spmm_tile_avx512f(const int NV, const int NR, const int MASKED,
                                                                       __mmask16 last, size_t nblk, const float *in,
                                                                       const float *w, const int32_t *off,
                                                                       const uint32_t *nnz, const float *res,
                                                                       size_t res_stride, float *out, size_t out_stride,
                                                                       int clamp, __m512 vmin, __m512 vmax) {
    if (NR == 1)
        cd_spmm_tile1_avx512f(NV, MASKED, last, nblk, in, w, off, nnz, res, res_stride, out, out_stride, clamp, vmin,
                              vmax);
    else
        cd_spmm_tilen_avx512f(NV > 4 ? 4 : NV, NR, MASKED, last, nblk, in, w, off, nnz, res, res_stride, out,
                              out_stride, clamp, vmin, vmax);
}

// The body of a kernel with MR = 16*NVMAX pixels per tile and NR channels
// per block: full tiles, then the remaining pixels in one masked tile. With
// one channel per block (few accumulators) the last full tile merges with the
// remainder (up to 8 vectors), so no pass over the weights is spent on a few
// leftover pixels.
static inline __attribute__((always_inline)) void cd_spmm_run_avx512f(const int NVMAX, const int NR, size_t mc,
                                                                      size_t nblk, const float *in, const float *w,
                                                                      const int32_t *off, const uint32_t *nnz,
                                                                      const float *res, size_t res_stride, float *out,
                                                                      size_t out_stride, const cd_spmm_params *params) {
    assert(mc > 0 && in && w && out && params);
    const __m512 vmin = _mm512_set1_ps(params->min);
    const __m512 vmax = _mm512_set1_ps(params->max);
    // No clamp (partial sums of early column blocks, no activation): skip it.
    const int clamp = params->min > -INFINITY || params->max < INFINITY;
    const size_t MR = 16 * (size_t)NVMAX;
    // Leave this much for the last tile (at most 8 vectors).
    const size_t keep = NR == 1 && NVMAX <= 4 ? 2 * MR : MR;
    size_t m = 0;
    for (; mc - m >= keep; m += MR)
        cd_spmm_tile_avx512f(NVMAX, NR, 0, 0xffff, nblk, in + m, w, off, nnz, res ? res + m : NULL, res_stride, out + m,
                             out_stride, clamp, vmin, vmax);
    const size_t rem = mc - m;
    if (rem == 0) return;
    const size_t nv = (rem + 15) / 16;
    const __mmask16 last = (__mmask16)((1u << (rem - 16 * (nv - 1))) - 1u);
    const float *r = res ? res + m : NULL;
#define CD_SPMM_AVX512F_TAIL_(NV_)                                                                                     \
    cd_spmm_tile_avx512f(NV_, NR, 1, last, nblk, in + m, w, off, nnz, r, res_stride, out + m, out_stride, clamp, vmin, \
                         vmax)
    switch (nv) {
    case 1: CD_SPMM_AVX512F_TAIL_(1); break;
    case 2: CD_SPMM_AVX512F_TAIL_(2); break;
    case 3: CD_SPMM_AVX512F_TAIL_(3); break;
    case 4: CD_SPMM_AVX512F_TAIL_(4); break;
    default:
        if (NR == 1) {
            switch (nv) {
            case 5: CD_SPMM_AVX512F_TAIL_(5); break;
            case 6: CD_SPMM_AVX512F_TAIL_(6); break;
            case 7: CD_SPMM_AVX512F_TAIL_(7); break;
            default:
                assert(nv == 8);
                CD_SPMM_AVX512F_TAIL_(8);
                break;
            }
        } else {
            assert(0 && "tail longer than the tile");
        }
        break;
    }
#undef CD_SPMM_AVX512F_TAIL_
}

// Defines micro-kernel NAME with a tile of MR_ pixels (16, 32, 48 or 64)
// and NR_ channels per block.
#define CD_SPMM_AVX512F_KERNEL(NAME, MR_, NR_)                                                                     \
    void NAME(size_t mc, size_t nblk, const float *in, const float *w, const int32_t *off, const uint32_t *nnz,    \
              const float *res, size_t res_stride, float *out, size_t out_stride, const cd_spmm_params *params) {  \
        cd_spmm_run_avx512f((MR_) / 16, NR_, mc, nblk, in, w, off, nnz, res, res_stride, out, out_stride, params); \
    }

#endif // CD_SPARSE_F32_SPMM_AVX512F_H
