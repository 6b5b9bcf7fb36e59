// The aligned-shift CSR micro-kernel, AVX-512 (contract: sparse/spmm-shift.h).
#include "sparse/spmm-shift.h"

#define CD_SIMD_AVX512F
#include "sparse/f32-spmm-simd.h"

#include <assert.h>
#include <immintrin.h>
#include <math.h>

// acc[v] shifted down by S lanes, the top S lanes from next: lanes S..15 of
// acc then lanes 0..S-1 of next (S = 1..3).
static inline __attribute__((always_inline)) __m512 shift_lanes(__m512 acc, __m512 next, const int S) {
    const __m512i a = _mm512_castps_si512(acc), n = _mm512_castps_si512(next);
    return _mm512_castsi512_ps(S == 1   ? _mm512_alignr_epi32(n, a, 1)
                               : S == 2 ? _mm512_alignr_epi32(n, a, 2)
                                        : _mm512_alignr_epi32(n, a, 3));
}

// acc[0..nv) += x[16v..] * wv for NVL vectors (aligned loads).
#define SHIFT_FMA_(ACC, NVL)                                             \
    do {                                                                 \
        _Pragma("GCC unroll 9") for (int v = 0; v < (NVL); v++) ACC[v] = \
            _mm512_fmadd_ps(_mm512_load_ps(x + 16 * v), wv, ACC[v]);     \
    } while (0)

// One tile of NV (<= 8) vectors for S (1..3) taps of column stride SW (1 or
// 2): tap s is shifted by s / SW lanes (stride 2: taps 0 and 1 read two phase
// planes unshifted, tap 2 the first plane one lane on). MASKED: the last
// vector stores only the pixels set in `last` (its loads stay full vectors).
static inline __attribute__((always_inline)) void shift_tile(const int NV, const int S, const int SW, const int MASKED,
                                                             __mmask16 last, size_t nblk, const float *in,
                                                             const float *w, const int32_t *off, const uint32_t *snnz,
                                                             const float *res, size_t res_stride, float *out,
                                                             size_t out_stride, int clamp, __m512 vmin, __m512 vmax) {
    const int inplace = !clamp && res == out && res_stride == out_stride;
    for (size_t b = 0; b < nblk; b++, snnz += S) {
        const uint32_t n0 = snnz[0], n1 = S > 1 ? snnz[1] : 0, n2 = S > 2 ? snnz[2] : 0;
        if (inplace && n0 + n1 + n2 == 0 && w[0] == 0.0f) {
            w += 1;
            continue;
        }
        __m512 a0[8], a1[9], a2[9];
        const __m512 vb = _mm512_set1_ps(w[0]);
        w += 1;
#pragma GCC unroll 9
        for (int v = 0; v <= NV; v++) {
            if (v < NV) a0[v] = vb;
            a1[v] = _mm512_setzero_ps();
            a2[v] = _mm512_setzero_ps();
        }
        for (uint32_t j = 0; j < n0; j++) {
            const float *x = in + *off++;
            const __m512 wv = _mm512_set1_ps(*w++);
            SHIFT_FMA_(a0, NV);
        }
        if (S > 1 && SW == 1)
            for (uint32_t j = 0; j < n1; j++) {
                const float *x = in + *off++;
                const __m512 wv = _mm512_set1_ps(*w++);
                SHIFT_FMA_(a1, NV + 1);
            }
        if (S > 1 && SW == 2) // tap 1: the other phase plane, unshifted
            for (uint32_t j = 0; j < n1; j++) {
                const float *x = in + *off++;
                const __m512 wv = _mm512_set1_ps(*w++);
                SHIFT_FMA_(a0, NV);
            }
        if (S > 2) // tap 2: shifted by 2 (stride 1) or 1 (stride 2) lanes
            for (uint32_t j = 0; j < n2; j++) {
                const float *x = in + *off++;
                const __m512 wv = _mm512_set1_ps(*w++);
                SHIFT_FMA_(a2, NV + 1);
            }
        float *o = out + b * out_stride;
        const float *r = res ? res + b * res_stride : NULL;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            __m512 acc = a0[v];
            if (S > 1 && SW == 1) acc = _mm512_add_ps(acc, shift_lanes(a1[v], a1[v + 1], 1));
            if (S > 2) acc = _mm512_add_ps(acc, shift_lanes(a2[v], a2[v + 1], SW == 1 ? 2 : 1));
            cd_spmm_store(acc, r ? r + 16 * v : NULL, o + 16 * v, MASKED && v == NV - 1, last, clamp, vmin, vmax);
        }
    }
}
#undef SHIFT_FMA_

// Full tiles of NVMAX (4 or 8) vectors, the rest (up to 8 vectors, masked
// stores at the end) in one tile, for S taps. With 8, S = 3 keeps 8 + 9 + 9
// accumulators and the weight broadcast in the 32 zmm registers.
static inline __attribute__((always_inline)) void shift_run(const int NVMAX, const int S, const int SW, size_t mc,
                                                            size_t nblk, const float *in, const float *w,
                                                            const int32_t *off, const uint32_t *snnz, const float *res,
                                                            size_t res_stride, float *out, size_t out_stride,
                                                            const cd_spmm_params *params) {
    const __m512 vmin = _mm512_set1_ps(params->min);
    const __m512 vmax = _mm512_set1_ps(params->max);
    const int clamp = params->min > -INFINITY || params->max < INFINITY;
    size_t m = 0;
    const size_t MR = 16 * (size_t)NVMAX, keep = NVMAX <= 4 ? 2 * MR : MR;
    for (; mc - m >= keep; m += MR)
        shift_tile(NVMAX, S, SW, 0, 0xffff, nblk, in + m, w, off, snnz, res ? res + m : NULL, res_stride, out + m,
                   out_stride, clamp, vmin, vmax);
    const size_t rem = mc - m;
    if (rem == 0) return;
    const size_t nv = (rem + 15) / 16;
    const __mmask16 last = (__mmask16)((1u << (rem - 16 * (nv - 1))) - 1u);
    const int masked = rem % 16 != 0;
    const float *r = res ? res + m : NULL;
#define SHIFT_TAIL_(NV_)                                                                                             \
    do {                                                                                                             \
        if (masked)                                                                                                  \
            shift_tile(NV_, S, SW, 1, last, nblk, in + m, w, off, snnz, r, res_stride, out + m, out_stride, clamp,   \
                       vmin, vmax);                                                                                  \
        else                                                                                                         \
            shift_tile(NV_, S, SW, 0, 0xffff, nblk, in + m, w, off, snnz, r, res_stride, out + m, out_stride, clamp, \
                       vmin, vmax);                                                                                  \
    } while (0)
    CD_SHIFT_NV_SWITCH(nv, SHIFT_TAIL_);
#undef SHIFT_TAIL_
}

void cd_f32_spmm_shift__avx512f(size_t mc, size_t nblk, int shifts, int stride, const float *in, const float *w,
                                const int32_t *off, const uint32_t *snnz, const float *res, size_t res_stride,
                                float *out, size_t out_stride, const cd_spmm_params *params) {
    assert(mc > 0 && in && w && out && params && shifts >= 1 && shifts <= 3);
    assert(stride == 1 || (stride == 2 && shifts >= 2));
    assert(((uintptr_t)in & 63) == 0);
    // Tiles of 8 vectors (measured on ResNet-50 3x3 at 80-95%, 1 thread:
    // 1.3x faster than tiles of 4, whose s > 0 taps load 5 vectors per 4).
#define SHIFT_RUN_(S_, SW_) shift_run(8, S_, SW_, mc, nblk, in, w, off, snnz, res, res_stride, out, out_stride, params)
    if (stride == 2) {
        if (shifts == 2)
            SHIFT_RUN_(2, 2);
        else
            SHIFT_RUN_(3, 2);
        return;
    }
    switch (shifts) {
    case 1: SHIFT_RUN_(1, 1); break;
    case 2: SHIFT_RUN_(2, 1); break;
    default: SHIFT_RUN_(3, 1); break;
    }
#undef SHIFT_RUN_
}
