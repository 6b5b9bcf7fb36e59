#ifndef CD_SPARSE_F32_SPMM_SHIFT_SIMD_H
#define CD_SPARSE_F32_SPMM_SHIFT_SIMD_H

// The aligned-shift CSR micro-kernel of sparse/spmm-shift.h, written once in
// the vector vocabulary of sparse/f32-simd.h (V = CD_VN): f32-spmm-shift-avx2.c
// and f32-spmm-shift-avx512f.c each include it after choosing their ISA, which
// names what it defines (cd_f32_spmm_shift__<isa>), and after defining
//   CD_SHIFT_FOLD    1: a shifted tap folds into acc0 right after its entries
//                    (one spare set of accumulators); 0: taps 1 and 2 keep a
//                    set each to the end of the block
//   CD_SHIFT_NVMAX   the widest tile, in vectors, when a tap is shifted
//                    (8 without one)

#include "sparse/f32-simd.h"
#include "sparse/f32-spmm-simd.h"
#include "sparse/spmm-shift.h"

#include <assert.h>
#include <math.h>

#if !defined(CD_SHIFT_FOLD) || !defined(CD_SHIFT_NVMAX)
#error "define CD_SHIFT_FOLD and CD_SHIFT_NVMAX before including sparse/f32-spmm-shift-simd.h"
#endif

// ACC[0..NVL) += x[V v..] * wv over the N entries of one tap (aligned loads).
#define SHIFT_TAP_(ACC, NVL, N)                                          \
    for (uint32_t j = 0; j < (N); j++) {                                 \
        const float *x = in + *off++;                                    \
        const cd_vf wv = cd_v_bcast(w++);                                \
        _Pragma("GCC unroll 9") for (int v = 0; v < (NVL); v++) ACC[v] = \
            cd_v_fmadd(cd_v_load(x + CD_VN * v), wv, ACC[v]);            \
    }

// acc[v] += the NV vectors of a tap's set t (NV + 1 of them) shifted down by S lanes.
static inline CD_V_AI void shift_fold(const int NV, cd_vf *acc, const cd_vf *t, const int S) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) acc[v] = cd_v_add(acc[v], cd_v_shift_down(t[v], t[v + 1], S));
}

static inline CD_V_AI void shift_zero(const int N, cd_vf *t) {
#pragma GCC unroll 9
    for (int v = 0; v < N; v++) t[v] = cd_v_zero();
}

// One tile of NV (<= 8) vectors for S (1..3) taps of column stride SW (1 or
// 2): tap s is shifted by s / SW lanes (stride 2: taps 0 and 1 read two phase
// planes unshifted, tap 2 the first plane one lane on). A shifted tap
// accumulates NV + 1 vectors. MASKED: the last vector stores only the pixels
// set in `last` (its loads stay full vectors).
static inline CD_V_AI void shift_tile(const int NV, const int S, const int SW, const int MASKED, cd_vmask last,
                                      size_t nblk, const float *in, const float *w, const int32_t *off,
                                      const uint32_t *snnz, const float *res, size_t res_stride, float *out,
                                      size_t out_stride, int clamp, cd_vf vmin, cd_vf vmax) {
    const int inplace = !clamp && res == out && res_stride == out_stride;
    for (size_t b = 0; b < nblk; b++, snnz += S) {
        const uint32_t n0 = snnz[0], n1 = S > 1 ? snnz[1] : 0, n2 = S > 2 ? snnz[2] : 0;
        if (inplace && n0 + n1 + n2 == 0 && w[0] == 0.0f) {
            w += 1;
            continue;
        }
        cd_vf a0[8], a1[9], a2[9];
        const cd_vf vb = cd_v_set1(w[0]);
        w += 1;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) a0[v] = vb;
        SHIFT_TAP_(a0, NV, n0);
        if (S > 1 && SW == 2) SHIFT_TAP_(a0, NV, n1); // the other phase plane, unshifted
        // Folding, a tap with no entries is skipped; otherwise its set stays
        // live (zero) to the end.
        if (S > 1 && SW == 1 && (n1 || !CD_SHIFT_FOLD)) { // tap 1: shifted by 1 lane
            shift_zero(NV + 1, a1);
            SHIFT_TAP_(a1, NV + 1, n1);
            if (CD_SHIFT_FOLD) shift_fold(NV, a0, a1, 1);
        }
        if (S > 2 && (n2 || !CD_SHIFT_FOLD)) { // tap 2: shifted by 2 (stride 1) or 1 (stride 2) lanes
            shift_zero(NV + 1, a2);
            SHIFT_TAP_(a2, NV + 1, n2);
            if (CD_SHIFT_FOLD) shift_fold(NV, a0, a2, SW == 1 ? 2 : 1);
        }
        float *o = out + b * out_stride;
        const float *r = res ? res + b * res_stride : NULL;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            cd_vf acc = a0[v]; // not folding: the shifted sets join here
            if (!CD_SHIFT_FOLD && S > 1 && SW == 1) acc = cd_v_add(acc, cd_v_shift_down(a1[v], a1[v + 1], 1));
            if (!CD_SHIFT_FOLD && S > 2) acc = cd_v_add(acc, cd_v_shift_down(a2[v], a2[v + 1], SW == 1 ? 2 : 1));
            cd_spmm_store(acc, r ? r + CD_VN * v : NULL, o + CD_VN * v, MASKED && v == NV - 1, last, clamp, vmin, vmax);
        }
    }
}
#undef SHIFT_TAP_

// One tile of nv (1..NVMAX) vectors; the last masked when `masked`.
static inline CD_V_AI void shift_tile_nv(const int NVMAX, const int S, const int SW, size_t nv, int masked,
                                         cd_vmask last, size_t nblk, const float *in, const float *w,
                                         const int32_t *off, const uint32_t *snnz, const float *res, size_t res_stride,
                                         float *out, size_t out_stride, int clamp, cd_vf vmin, cd_vf vmax) {
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

// The mc pixels for S taps in tiles of at most 8 vectors (CD_SHIFT_NVMAX
// when a tap is shifted), balanced (16 vectors at NVMAX 6 run as 6 + 5 + 5,
// not 6 + 6 + 4): a small last tile would pay its shifted taps' extra
// vector load on few pixels.
static inline CD_V_AI void shift_run(const int S, const int SW, size_t mc, size_t nblk, const float *in, const float *w,
                                     const int32_t *off, const uint32_t *snnz, const float *res, size_t res_stride,
                                     float *out, size_t out_stride, const cd_spmm_params *params) {
    const int NVMAX = S > 2 || (S > 1 && SW == 1) ? CD_SHIFT_NVMAX : 8;
    const cd_vf vmin = cd_v_set1(params->min);
    const cd_vf vmax = cd_v_set1(params->max);
    const int clamp = params->min > -INFINITY || params->max < INFINITY;
    const size_t nvt = (mc + CD_VN - 1) / CD_VN, tiles = (nvt + NVMAX - 1) / NVMAX;
    const size_t per = nvt / tiles, extra = nvt % tiles; // the first `extra` tiles get one more
    const cd_vmask last = cd_v_first(mc - CD_VN * (nvt - 1));
    size_t v0 = 0;
    for (size_t t = 0; t < tiles; t++) {
        const size_t nv = per + (t < extra), m = CD_VN * v0;
        const int masked = t == tiles - 1 && mc % CD_VN != 0;
        shift_tile_nv(NVMAX, S, SW, nv, masked, last, nblk, in + m, w, off, snnz, res ? res + m : NULL, res_stride,
                      out + m, out_stride, clamp, vmin, vmax);
        v0 += nv;
    }
}

void CD_SIMD_FN(cd_f32_spmm_shift)(size_t mc, size_t nblk, int shifts, int stride, const float *in, const float *w,
                                   const int32_t *off, const uint32_t *snnz, const float *res, size_t res_stride,
                                   float *out, size_t out_stride, const cd_spmm_params *params) {
    assert(mc > 0 && in && w && out && params && shifts >= 1 && shifts <= 3);
    assert(stride == 1 || (stride == 2 && shifts >= 2));
    assert(((uintptr_t)in & (sizeof(cd_vf) - 1)) == 0);
#define SHIFT_RUN_(S_, SW_) shift_run(S_, SW_, mc, nblk, in, w, off, snnz, res, res_stride, out, out_stride, params)
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

#endif // CD_SPARSE_F32_SPMM_SHIFT_SIMD_H
