#ifndef CD_SPARSE_BAND_ROWS_H
#define CD_SPARSE_BAND_ROWS_H

// Rows into and out of a band's workspace slot, AVX-512 and AVX2
// (sparse/sparse-conv.c prepares the planes of k x k and strided layers row
// by row, and copies a MODE_JUNK band's output rows out without their junk
// columns). Each function exists per ISA with the same contract; V below is
// the ISA's vector width in floats (16 AVX-512, 8 AVX2).
//
// cd_f32_phase_row__<isa>: one row of a zero-padded phase plane from one
// input row. The portable path there pays a memset, a copy and a memset per
// row, and for stride 2 a copy the compiler builds from scalar loads: on
// ResNet-50's 3x3 stride-2 layer at 90% that preparation took longer than
// the sparse kernel.
//
// Writes row[j] for 0 <= j < n:
//   row[j] = 0 <= stride*j + sh < w ? x[stride*j + sh] : 0
// with stride 1 or 2 (sh may be negative: left padding).
//
// Per V outputs it loads `stride` windows of V floats (stride 2: a
// two-source permute keeps the even ones) and zeroes the lanes outside the
// row with `masks` (stride masks per V outputs, from cd_phase_row_masks with
// the same V): they depend only on sh and w, and computing them per row cost
// as much as the copy (measured on AVX-512: 0.16 vs 0.085 ms for the planes
// of ResNet-50's 3x3 stride-2 layer). Windows inside x[lo, hi) are read with
// full loads (x may be read from lo <= 0 up to hi >= w: the rest of the
// input tensor); a window past either end is read with a masked load, which
// touches nothing outside the row. Nothing is written past row[n - 1].

#include <stddef.h>
#include <stdint.h>

void cd_f32_phase_row__avx512f(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                               const uint16_t *masks);
void cd_f32_phase_row__avx2(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                            const uint16_t *masks);

// Fills masks[stride * ceil(n / vec)] for a row of n outputs and vectors of
// vec (8 or 16) floats: bit k of window i (the vec floats from
// stride*vec*(i/stride) + vec*(i%stride) + sh) is set where that float lies
// in x[0, w).
void cd_phase_row_masks(uint16_t *masks, size_t n, int w, int sh, int stride, int vec);

// One tap's im2col plane of a small-output conv: for oy < oh, ox < ow,
//   dst[oy * ow + ox] = x[y][stride*ox + sh] with y = y0 + oy * row_stride,
// 0 where y is outside [0, h) or the column outside [0, w); x is an h x w
// plane, read only inside the tensor x[lo, hi) (floats from x) as in
// cd_f32_phase_row__<isa>, whose masks (for n = ow, sh, stride) it takes.
// ow <= 16; writes exactly oh * ow floats.
void cd_f32_im2col_tap__avx512f(float *dst, int oh, int ow, const float *x, int h, int w, long lo, long hi, int y0,
                                int row_stride, int sh, int stride, const uint16_t *masks);
void cd_f32_im2col_tap__avx2(float *dst, int oh, int ow, const float *x, int h, int w, long lo, long hi, int y0,
                             int row_stride, int sh, int stride, const uint16_t *masks);

// dst[r * dst_pitch + j] = src[r * src_pitch + j] for r < rows, j < cols:
// one call per channel of a band instead of a memcpy per row (a memcpy call
// of a 28-float row costs about as much as moving it). Reads and writes
// nothing else.
void cd_f32_copy_rows__avx512f(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, size_t rows,
                               size_t cols);
void cd_f32_copy_rows__avx2(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, size_t rows, size_t cols);

#endif // CD_SPARSE_BAND_ROWS_H
