// AVX-512 depthwise 3x3 micro-kernel: one output row of one 16-channel block.
// One zmm holds the 16 channels of a pixel; the 9 taps stay in registers;
// interior pixels go 8, 4 or 1 at a time without bounds checks, the border
// pixels one by one with checks.

#include "kernels/cpu/dwconv.h"

#include <immintrin.h>

// Interior tile of NX output pixels starting at x: every tap in range.
#define DW_TILE(NX)                                                                     \
    do {                                                                                \
        __m512 acc[NX];                                                                 \
        _Pragma("GCC unroll 8") for (int j = 0; j < NX; j++) acc[j] = vb;              \
        for (int i = 0; i < nrow; i++) {                                                \
            const float *base = row[i] + (size_t)(x * sw - a->pad_l) * 16;             \
            _Pragma("GCC unroll 3") for (int s = 0; s < 3; s++) {                      \
                const __m512 wv = wt[tap[i] + s];                                       \
                _Pragma("GCC unroll 8") for (int j = 0; j < NX; j++) acc[j] =          \
                    _mm512_fmadd_ps(_mm512_loadu_ps(base + (size_t)(j * sw + s) * 16), \
                                    wv, acc[j]);                                        \
            }                                                                           \
        }                                                                               \
        _Pragma("GCC unroll 8") for (int j = 0; j < NX; j++)                           \
            _mm512_storeu_ps(dst + (size_t)(x + j) * 16,                             \
                             _mm512_min_ps(_mm512_max_ps(acc[j], lo), hi));             \
        x += NX;                                                                        \
    } while (0)

void cd_f32_dwconv3x3_row__avx512f(const cd_dwconv3x3_row_args *a) {
    __m512 wt[9];
#pragma GCC unroll 9
    for (int i = 0; i < 9; i++) wt[i] = _mm512_loadu_ps(a->wts + i * 16);
    const __m512 vb = _mm512_loadu_ps(a->bias);
    const __m512 lo = _mm512_set1_ps(a->lo), hi = _mm512_set1_ps(a->hi);
    const int sw = a->stride_w;
    // Interior: output columns whose three taps all fall inside [0, w).
    int x_lo = (a->pad_l + sw - 1) / sw;
    int x_hi = a->w - 3 + a->pad_l >= 0 ? (a->w - 3 + a->pad_l) / sw : -1; // inclusive
    if (x_hi > a->ow - 1) x_hi = a->ow - 1;
    for (int y = a->y; y < a->y + a->ny; y++) {
        float *dst = a->dst + (size_t)(y - a->y) * a->ow * 16;
        const float *row[3];
        int nrow = 0, tap[3];
        for (int r = 0; r < 3; r++) {
            int ih = y * a->stride_h - a->pad_t + r;
            if (ih < 0 || ih >= a->h) continue;
            row[nrow] = a->src + (size_t)ih * a->w * 16;
            tap[nrow++] = r * 3;
        }
        int x = 0;
        while (x < a->ow) {
            if (x >= x_lo && x + 7 <= x_hi) {
                DW_TILE(8);
            } else if (x >= x_lo && x + 3 <= x_hi) {
                DW_TILE(4);
            } else if (x >= x_lo && x <= x_hi) {
                DW_TILE(1);
            } else {
                __m512 acc = vb;
                for (int i = 0; i < nrow; i++)
                    for (int s = 0; s < 3; s++) {
                        int iw = x * sw - a->pad_l + s;
                        if (iw < 0 || iw >= a->w) continue;
                        acc = _mm512_fmadd_ps(_mm512_loadu_ps(row[i] + (size_t)iw * 16),
                                              wt[tap[i] + s], acc);
                    }
                _mm512_storeu_ps(dst + (size_t)x * 16, _mm512_min_ps(_mm512_max_ps(acc, lo), hi));
                x++;
            }
        }
    }
}
