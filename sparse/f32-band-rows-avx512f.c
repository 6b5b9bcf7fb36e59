// Band rows in and out, AVX-512 (contract: sparse/band-rows.h).
#include "sparse/band-rows.h"

#include <assert.h>
#include <immintrin.h>

// The 16 floats from x[s0], lanes outside mask m zeroed.
static inline __m512 window(const float *x, long s0, long lo, long hi, __mmask16 m) {
    if (s0 >= lo && s0 + 16 <= hi) return _mm512_maskz_mov_ps(m, _mm512_loadu_ps(x + s0));
    // At an end of the tensor: masked-off lanes never touch memory (the
    // address is formed as an integer: it may lie before the array).
    return _mm512_maskz_loadu_ps(m, (const float *)((uintptr_t)x + (intptr_t)s0 * (intptr_t)sizeof(float)));
}

// The row of cd_f32_phase_row__avx512f, shared with the im2col taps.
static inline void phase_row(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                             const uint16_t *masks) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (size_t j = 0; j < n; j += 16, masks += stride) {
        const long s0 = (long)stride * (long)j + sh;
        __m512 v = window(x, s0, lo, hi, masks[0]);
        if (stride == 2) v = _mm512_permutex2var_ps(v, even, window(x, s0 + 16, lo, hi, masks[1]));
        if (n - j >= 16)
            _mm512_storeu_ps(row + j, v);
        else
            _mm512_mask_storeu_ps(row + j, (__mmask16)((1u << (n - j)) - 1u), v);
    }
}

void cd_f32_phase_row__avx512f(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                               const uint16_t *masks) {
    assert(stride == 1 || stride == 2);
    assert(lo <= 0);
    phase_row(row, n, x, lo, hi, sh, stride, masks);
}

void cd_f32_copy_rows__avx512f(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, size_t rows,
                               size_t cols) {
    const __mmask16 tail = (__mmask16)((1u << (cols % 16)) - 1u);
    for (size_t r = 0; r < rows; r++, dst += dst_pitch, src += src_pitch) {
        size_t j = 0;
        for (; j + 16 <= cols; j += 16) _mm512_storeu_ps(dst + j, _mm512_loadu_ps(src + j));
        if (tail) _mm512_mask_storeu_ps(dst + j, tail, _mm512_maskz_loadu_ps(tail, src + j));
    }
}

void cd_f32_im2col_tap__avx512f(float *dst, int oh, int ow, const float *x, int h, int w, long lo, long hi, int y0,
                                int row_stride, int sh, int stride, const uint16_t *masks) {
    assert(ow >= 1 && ow <= 16 && (stride == 1 || stride == 2));
    for (int oy = 0; oy < oh; oy++, dst += ow) {
        const int y = y0 + oy * row_stride;
        const long base = (long)y * w;
        if (y < 0 || y >= h)
            _mm512_mask_storeu_ps(dst, (__mmask16)((1u << ow) - 1u), _mm512_setzero_ps());
        else
            phase_row(dst, (size_t)ow, x + base, lo - base, hi - base, sh, stride, masks);
    }
}
