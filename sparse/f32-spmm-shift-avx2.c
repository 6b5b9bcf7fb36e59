// The aligned-shift CSR micro-kernel, AVX2 (contract: sparse/spmm-shift.h,
// V = 8).
#include "sparse/spmm-shift.h"

#include <assert.h>
#include <immintrin.h>
#include <math.h>

#define AI __attribute__((always_inline))

// The first n (1..8) lanes.
static inline __m256i first_lanes(size_t n) {
    static const int32_t t[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(t + 8 - n));
}

// acc shifted down by S lanes, the top S lanes from next: lanes S..7 of acc
// then lanes 0..S-1 of next (S = 1..3). vpalignr shifts within 128-bit
// halves, so it takes (acc's high half, next's low half) as the upper source.
static inline AI __m256 shift_lanes(__m256 acc, __m256 next, const int S) {
    const __m256i a = _mm256_castps_si256(acc);
    const __m256i t = _mm256_castps_si256(_mm256_permute2f128_ps(acc, next, 0x21));
    return _mm256_castsi256_ps(S == 1   ? _mm256_alignr_epi8(t, a, 4)
                               : S == 2 ? _mm256_alignr_epi8(t, a, 8)
                                        : _mm256_alignr_epi8(t, a, 12));
}

static inline AI void store(__m256 a, const float *r, float *o, int tail, __m256i last, int clamp, __m256 vmin,
                            __m256 vmax) {
    if (r) a = _mm256_add_ps(a, tail ? _mm256_maskload_ps(r, last) : _mm256_loadu_ps(r));
    if (clamp) a = _mm256_min_ps(_mm256_max_ps(a, vmin), vmax);
    if (tail)
        _mm256_maskstore_ps(o, last, a);
    else
        _mm256_storeu_ps(o, a);
}

// ACC[0..NVL) += x[8v..] * wv over the N entries of one tap (aligned loads).
#define TAP_FMA_(ACC, NVL, N)                                            \
    for (uint32_t j = 0; j < (N); j++) {                                 \
        const float *x = in + *off++;                                    \
        const __m256 wv = _mm256_broadcast_ss(w++);                      \
        _Pragma("GCC unroll 9") for (int v = 0; v < (NVL); v++) ACC[v] = \
            _mm256_fmadd_ps(_mm256_load_ps(x + 8 * v), wv, ACC[v]);      \
    }

// One tile of NV vectors for S (1..3) taps of column stride SW (1 or 2): tap
// s is shifted by s / SW lanes. A shifted tap accumulates into a1 (NV + 1
// vectors), folded into a0 right after its entries, so at most 2 NV + 2 ymm
// registers are live (NV <= 6 for shifted taps). MASKED: the last vector
// stores only the pixels set in `last` (its loads stay full vectors).
static inline AI void shift_tile(const int NV, const int S, const int SW, const int MASKED, __m256i last, size_t nblk,
                                 const float *in, const float *w, const int32_t *off, const uint32_t *snnz,
                                 const float *res, size_t res_stride, float *out, size_t out_stride, int clamp,
                                 __m256 vmin, __m256 vmax) {
    const int inplace = !clamp && res == out && res_stride == out_stride;
    for (size_t b = 0; b < nblk; b++, snnz += S) {
        const uint32_t n0 = snnz[0], n1 = S > 1 ? snnz[1] : 0, n2 = S > 2 ? snnz[2] : 0;
        if (inplace && n0 + n1 + n2 == 0 && w[0] == 0.0f) {
            w += 1;
            continue;
        }
        __m256 a0[8], a1[9];
        const __m256 vb = _mm256_set1_ps(w[0]);
        w += 1;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) a0[v] = vb;
        TAP_FMA_(a0, NV, n0);
        if (S > 1 && SW == 2) TAP_FMA_(a0, NV, n1); // the other phase plane, unshifted
        if (S > 1 && SW == 1 && n1) {               // tap 1: shifted by 1 lane
#pragma GCC unroll 9
            for (int v = 0; v <= NV; v++) a1[v] = _mm256_setzero_ps();
            TAP_FMA_(a1, NV + 1, n1);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) a0[v] = _mm256_add_ps(a0[v], shift_lanes(a1[v], a1[v + 1], 1));
        }
        if (S > 2 && n2) { // tap 2: shifted by 2 (stride 1) or 1 (stride 2) lanes
#pragma GCC unroll 9
            for (int v = 0; v <= NV; v++) a1[v] = _mm256_setzero_ps();
            TAP_FMA_(a1, NV + 1, n2);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) a0[v] = _mm256_add_ps(a0[v], shift_lanes(a1[v], a1[v + 1], SW == 1 ? 2 : 1));
        }
        float *o = out + b * out_stride;
        const float *r = res ? res + b * res_stride : NULL;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            store(a0[v], r ? r + 8 * v : NULL, o + 8 * v, MASKED && v == NV - 1, last, clamp, vmin, vmax);
    }
}
#undef TAP_FMA_

// One tile of nv (1..NVMAX) vectors; the last masked when `masked`.
static inline AI void shift_tile_nv(const int NVMAX, const int S, const int SW, size_t nv, int masked, __m256i last,
                                    size_t nblk, const float *in, const float *w, const int32_t *off,
                                    const uint32_t *snnz, const float *res, size_t res_stride, float *out,
                                    size_t out_stride, int clamp, __m256 vmin, __m256 vmax) {
#define TILE_(NV_)                                                                                                 \
    do {                                                                                                           \
        if ((NV_) > NVMAX) break; /* never: keeps the code out */                                                  \
        if (masked)                                                                                                \
            shift_tile(NV_, S, SW, 1, last, nblk, in, w, off, snnz, res, res_stride, out, out_stride, clamp, vmin, \
                       vmax);                                                                                      \
        else                                                                                                       \
            shift_tile(NV_, S, SW, 0, last, nblk, in, w, off, snnz, res, res_stride, out, out_stride, clamp, vmin, \
                       vmax);                                                                                      \
    } while (0)
    CD_SHIFT_NV_SWITCH(nv, TILE_);
#undef TILE_
}

// The mc pixels in tiles of at most NVMAX vectors, balanced (16 vectors at
// NVMAX 6 run as 6 + 5 + 5, not 6 + 6 + 4): a small last tile would pay its
// shifted taps' extra vector load on few pixels.
static inline AI void shift_run(const int NVMAX, const int S, const int SW, size_t mc, size_t nblk, const float *in,
                                const float *w, const int32_t *off, const uint32_t *snnz, const float *res,
                                size_t res_stride, float *out, size_t out_stride, const cd_spmm_params *params) {
    const __m256 vmin = _mm256_set1_ps(params->min);
    const __m256 vmax = _mm256_set1_ps(params->max);
    const int clamp = params->min > -INFINITY || params->max < INFINITY;
    const size_t nvt = (mc + 7) / 8, tiles = (nvt + NVMAX - 1) / NVMAX;
    const size_t per = nvt / tiles, extra = nvt % tiles; // the first `extra` tiles get one more
    const __m256i last = first_lanes(mc - 8 * (nvt - 1));
    size_t v0 = 0;
    for (size_t t = 0; t < tiles; t++) {
        const size_t nv = per + (t < extra), m = 8 * v0;
        const int masked = t == tiles - 1 && mc % 8 != 0;
        shift_tile_nv(NVMAX, S, SW, nv, masked, last, nblk, in + m, w, off, snnz, res ? res + m : NULL, res_stride,
                      out + m, out_stride, clamp, vmin, vmax);
        v0 += nv;
    }
}

void cd_f32_spmm_shift__avx2(size_t mc, size_t nblk, int shifts, int stride, const float *in, const float *w,
                             const int32_t *off, const uint32_t *snnz, const float *res, size_t res_stride, float *out,
                             size_t out_stride, const cd_spmm_params *params) {
    assert(mc > 0 && in && w && out && params && shifts >= 1 && shifts <= 3);
    assert(stride == 1 || (stride == 2 && shifts >= 2));
    assert(((uintptr_t)in & 31) == 0);
    // Without a shifted tap only a0 is live: tiles of 8 vectors; with one,
    // 2 NV + 2 registers of 16: tiles of 6.
#define SHIFT_RUN_(NVMAX_, S_, SW_) \
    shift_run(NVMAX_, S_, SW_, mc, nblk, in, w, off, snnz, res, res_stride, out, out_stride, params)
    if (stride == 2) {
        if (shifts == 2)
            SHIFT_RUN_(8, 2, 2);
        else
            SHIFT_RUN_(6, 3, 2);
        return;
    }
    switch (shifts) {
    case 1: SHIFT_RUN_(8, 1, 1); break;
    case 2: SHIFT_RUN_(6, 2, 1); break;
    default: SHIFT_RUN_(6, 3, 1); break;
    }
#undef SHIFT_RUN_
}
