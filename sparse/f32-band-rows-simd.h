#ifndef CD_SPARSE_F32_BAND_ROWS_SIMD_H
#define CD_SPARSE_F32_BAND_ROWS_SIMD_H

// The band rows of sparse/band-rows.h, written once in the vector vocabulary
// of sparse/f32-simd.h (V = CD_VN): f32-band-rows-avx2.c and
// f32-band-rows-avx512f.c each include it after choosing their ISA, which
// names what it defines: cd_f32_phase_row__<isa>, cd_f32_copy_rows__<isa>,
// cd_f32_im2col_tap__<isa>.

#include "sparse/band-rows.h"
#include "sparse/f32-simd.h"

#include <assert.h>

// The V floats from x[s0], lanes outside mask m zeroed.
static inline cd_vf window(const float *x, long s0, long lo, long hi, unsigned m) {
    if (s0 >= lo && s0 + CD_VN <= hi) return cd_v_keep(cd_v_loadu(x + s0), m);
    // At an end of the tensor: masked-off lanes never touch memory (the
    // address is formed as an integer: it may lie before the array).
    return cd_v_maskz_loadu(cd_v_bits(m), (const float *)((uintptr_t)x + (intptr_t)s0 * (intptr_t)sizeof(float)));
}

// The row of cd_f32_phase_row__<isa>, shared with the im2col taps.
static inline void phase_row(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                             const uint16_t *masks) {
    for (size_t j = 0; j < n; j += CD_VN, masks += stride) {
        const long s0 = (long)stride * (long)j + sh;
        cd_vf v = window(x, s0, lo, hi, masks[0]);
        if (stride == 2) v = cd_v_evens(v, window(x, s0 + CD_VN, lo, hi, masks[1]));
        if (n - j >= CD_VN)
            cd_v_storeu(row + j, v);
        else
            cd_v_storen(row + j, n - j, v);
    }
}

void CD_SIMD_FN(cd_f32_phase_row)(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                                  const uint16_t *masks) {
    assert(stride == 1 || stride == 2);
    assert(lo <= 0);
    phase_row(row, n, x, lo, hi, sh, stride, masks);
}

void CD_SIMD_FN(cd_f32_copy_rows)(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, size_t rows,
                                  size_t cols) {
    const cd_vmask tail = cd_v_first(cols % CD_VN);
    for (size_t r = 0; r < rows; r++, dst += dst_pitch, src += src_pitch) {
        size_t j = 0;
        for (; j + CD_VN <= cols; j += CD_VN) cd_v_storeu(dst + j, cd_v_loadu(src + j));
        if (cols % CD_VN) cd_v_mask_storeu(dst + j, tail, cd_v_maskz_loadu(tail, src + j));
    }
}

void CD_SIMD_FN(cd_f32_im2col_tap)(float *dst, int oh, int ow, const float *x, int h, int w, long lo, long hi, int y0,
                                   int row_stride, int sh, int stride, const uint16_t *masks) {
    assert(ow >= 1 && ow <= 16 && (stride == 1 || stride == 2));
    // A row outside the plane: V floats at a time, the last 1..V of them masked.
    const int full = (ow - 1) / CD_VN * CD_VN;
    const cd_vmask tail = cd_v_first((size_t)(ow - full));
    for (int oy = 0; oy < oh; oy++, dst += ow) {
        const int y = y0 + oy * row_stride;
        const long base = (long)y * w;
        if (y < 0 || y >= h) {
            for (int j = 0; j < full; j += CD_VN) cd_v_storeu(dst + j, cd_v_zero());
            cd_v_mask_storeu(dst + full, tail, cd_v_zero());
        } else {
            phase_row(dst, (size_t)ow, x + base, lo - base, hi - base, sh, stride, masks);
        }
    }
}

#endif // CD_SPARSE_F32_BAND_ROWS_SIMD_H
