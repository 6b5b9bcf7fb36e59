// Band rows in and out, AVX2 (contract: sparse/band-rows.h, V = 8).
#include "sparse/band-rows.h"

#include <assert.h>
#include <immintrin.h>

// The lanes of window mask m (bit k set: lane k all ones), for a blend-free
// AND or a masked load.
static inline __m256i lanes_of(unsigned m) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), bit), bit);
}

// The first n (0..8) lanes.
static inline __m256i first_lanes(size_t n) {
    static const int32_t t[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(t + 8 - n));
}

// The 8 floats from x[s0], lanes outside mask m zeroed.
static inline __m256 window(const float *x, long s0, long lo, long hi, unsigned m) {
    if (s0 >= lo && s0 + 8 <= hi) {
        const __m256 v = _mm256_loadu_ps(x + s0);
        return m == 0xffu ? v : _mm256_and_ps(v, _mm256_castsi256_ps(lanes_of(m)));
    }
    // At an end of the tensor: vmaskmovps never touches masked-off lanes
    // (the address is formed as an integer: it may lie before the array).
    return _mm256_maskload_ps((const float *)((uintptr_t)x + (intptr_t)s0 * (intptr_t)sizeof(float)), lanes_of(m));
}

// Lanes 0, 2, 4, 6 of a then of b.
static inline __m256 evens(__m256 a, __m256 b) {
    const __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); // a0 a2 b0 b2 | a4 a6 b4 b6
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

// The row of cd_f32_phase_row__avx2, shared with the im2col taps.
static inline void phase_row(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                             const uint16_t *masks) {
    for (size_t j = 0; j < n; j += 8, masks += stride) {
        const long s0 = (long)stride * (long)j + sh;
        __m256 v = window(x, s0, lo, hi, masks[0]);
        if (stride == 2) v = evens(v, window(x, s0 + 8, lo, hi, masks[1]));
        if (n - j >= 8)
            _mm256_storeu_ps(row + j, v);
        else
            _mm256_maskstore_ps(row + j, first_lanes(n - j), v);
    }
}

void cd_f32_phase_row__avx2(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                            const uint16_t *masks) {
    assert(stride == 1 || stride == 2);
    assert(lo <= 0);
    phase_row(row, n, x, lo, hi, sh, stride, masks);
}

void cd_f32_copy_rows__avx2(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, size_t rows,
                            size_t cols) {
    const __m256i tail = first_lanes(cols % 8);
    for (size_t r = 0; r < rows; r++, dst += dst_pitch, src += src_pitch) {
        size_t j = 0;
        for (; j + 8 <= cols; j += 8) _mm256_storeu_ps(dst + j, _mm256_loadu_ps(src + j));
        if (cols % 8) _mm256_maskstore_ps(dst + j, tail, _mm256_maskload_ps(src + j, tail));
    }
}

void cd_f32_im2col_tap__avx2(float *dst, int oh, int ow, const float *x, int h, int w, long lo, long hi, int y0,
                             int row_stride, int sh, int stride, const uint16_t *masks) {
    assert(ow >= 1 && ow <= 16 && (stride == 1 || stride == 2));
    const __m256i tail = first_lanes((size_t)(ow > 8 ? ow - 8 : ow));
    for (int oy = 0; oy < oh; oy++, dst += ow) {
        const int y = y0 + oy * row_stride;
        const long base = (long)y * w;
        if (y < 0 || y >= h) {
            if (ow > 8) _mm256_storeu_ps(dst, _mm256_setzero_ps());
            _mm256_maskstore_ps(dst + (ow > 8 ? 8 : 0), tail, _mm256_setzero_ps());
        } else {
            phase_row(dst, (size_t)ow, x + base, lo - base, hi - base, sh, stride, masks);
        }
    }
}
