// Band rows (sparse/band-rows.h) at every ISA level this machine runs that
// has them (AVX-512, AVX2; CONVD_MAX_ISA lowers the set): phase-plane rows and
// im2col taps against the scalar rule
// row[j] = 0 <= stride*j + sh < w ? x[stride*j + sh] : 0, on random row
// lengths, widths, shifts (left padding) and strides 1/2, with the input row
// at the start, in the middle and at the end of an exact-size buffer (so
// ASan sees any read past the tensor), next to inaccessible pages (so any
// read outside the tensor faults without ASan too) and guard values after
// the row; row copies against memcpy. The portable rows are
// tests/unit/test-sparse-conv.c's scalar runs.

#include "sparse/band-rows.h"
#include "sparse/sparse-conv.h"
#include "tests/unit/test-sparse-util.h"

#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    cd_sparse_isa isa;
    int vec; // floats per vector: the masks' window
    void (*phase_row)(float *, size_t, const float *, long, long, int, int, const uint16_t *);
    void (*im2col_tap)(float *, int, int, const float *, int, int, long, long, int, int, int, int, const uint16_t *);
    void (*copy_rows)(float *, size_t, const float *, size_t, size_t, size_t);
} band_isa;

static const band_isa k_band_isas[] = {
    {CD_SPARSE_ISA_AVX512F, 16, cd_f32_phase_row__avx512f, cd_f32_im2col_tap__avx512f, cd_f32_copy_rows__avx512f},
    {CD_SPARSE_ISA_AVX2, 8, cd_f32_phase_row__avx2, cd_f32_im2col_tap__avx2, cd_f32_copy_rows__avx2},
};

// One test per ISA with band rows, NAME__avx512f and NAME__avx2: each runs
// the body at its ISA, or is a named skip where this run lacks that ISA.
#define BAND_TEST(name)                       \
    static void name##_at(const band_isa *b); \
    CD_TEST(name##__avx512f) {                \
        sp_require_isa(k_band_isas[0].isa);   \
        name##_at(&k_band_isas[0]);           \
    }                                         \
    CD_TEST(name##__avx2) {                   \
        sp_require_isa(k_band_isas[1].isa);   \
        name##_at(&k_band_isas[1]);           \
    }                                         \
    static void name##_at(const band_isa *b)

// Checks row[0..n) against the rule for input row xr of width w, and that
// row[n..n+16) kept its NaN guard.
static void check_row(const band_isa *b, const float *row, size_t n, const float *xr, int w, int sh, int stride,
                      const char *where) {
    for (size_t j = 0; j < n; j++) {
        const long s = (long)stride * (long)j + sh;
        const float want = s >= 0 && s < w ? xr[s] : 0.0f;
        if (row[j] != want)
            CD_CHECK_FAIL_("%s %s: n%zu w%d sh%d stride%d: j=%zu got %g want %g", cd_sparse_isa_name(b->isa), where, n,
                           w, sh, stride, j, row[j], want);
    }
    for (size_t j = n; j < n + 16; j++)
        if (!isnan(row[j])) CD_CHECK_FAIL_("%s %s: wrote row[%zu] past n %zu", cd_sparse_isa_name(b->isa), where, j, n);
}

BAND_TEST(sparse_phase_row_matches_rule_row_at_start_middle_end) {
    for (int it = 0; it < 400; it++) {
        const int stride = cd_test_randi(1, 2), w = cd_test_randi(1, 80);
        // Shifts past a whole vector either way too (rows all padding).
        const int sh = cd_test_randi(0, 3) ? cd_test_randi(-3, 3) : cd_test_randi(-20, w + 4);
        const size_t n = (size_t)cd_test_randi(1, 70);
        const int rows = cd_test_randi(1, 3), at = cd_test_randi(0, rows - 1);
        const size_t total = (size_t)rows * w;
        float *x = malloc(total * sizeof *x), *row = malloc((n + 16) * sizeof *row);
        uint16_t *masks = malloc(stride * ((n + b->vec - 1) / b->vec) * sizeof *masks);
        CHECK(x && row && masks);
        sp_fill_random(x, total);
        for (size_t j = 0; j < n + 16; j++) row[j] = NAN;
        cd_phase_row_masks(masks, n, w, sh, stride, b->vec);
        const float *xr = x + (size_t)at * w;
        const long o = (long)(xr - x);
        b->phase_row(row, n, xr, -o, (long)total - o, sh, stride, masks);
        check_row(b, row, n, xr, w, sh, stride, at == 0 ? "first row" : at == rows - 1 ? "last row" : "middle row");
        free(x);
        free(row);
        free(masks);
    }
}

// The tensor [lo, hi) placed against an inaccessible page, at its end or
// its start: a full load of a window that crosses the end faults.
BAND_TEST(sparse_phase_row_reads_nothing_outside_tensor_guard_pages) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t span = 4 * page;
    char *map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    CHECK(mprotect(map, page, PROT_NONE) == 0);
    CHECK(mprotect(map + 3 * page, page, PROT_NONE) == 0);
    float *const lo_edge = (float *)(map + page), *const hi_edge = (float *)(map + 3 * page);
    for (int it = 0; it < 300; it++) {
        const int stride = cd_test_randi(1, 2), w = cd_test_randi(1, 60), rows = cd_test_randi(1, 3);
        const int sh = cd_test_randi(-17, 3);
        const size_t n = (size_t)cd_test_randi(1, 40), total = (size_t)rows * w;
        const int at_end = cd_test_randi(0, 1), at = at_end ? rows - 1 : 0;
        float *x = at_end ? hi_edge - total : lo_edge; // the tensor
        sp_fill_random(x, total);
        float row[40 + 16];
        uint16_t masks[2 * 5];
        for (size_t j = 0; j < n + 16; j++) row[j] = NAN;
        cd_phase_row_masks(masks, n, w, sh, stride, b->vec);
        const float *xr = x + (size_t)at * w;
        const long o = (long)(xr - x);
        b->phase_row(row, n, xr, -o, (long)total - o, sh, stride, masks);
        check_row(b, row, n, xr, w, sh, stride,
                  at_end ? "tensor against the page after" : "tensor against the page before");
    }
    munmap(map, span);
}

// im2col taps: rows of y = y0 + oy * row_stride (outside [0, h): zeros),
// columns by the row rule; exactly oh * ow floats written.
BAND_TEST(sparse_im2col_tap_matches_rule_rows_outside_zero) {
    for (int it = 0; it < 300; it++) {
        const int h = cd_test_randi(1, 12), w = cd_test_randi(1, 40), stride = cd_test_randi(1, 2);
        const int oh = cd_test_randi(1, 8), ow = cd_test_randi(1, 16), row_stride = cd_test_randi(1, 2);
        const int y0 = cd_test_randi(-3, 2), sh = cd_test_randi(-3, 3);
        const int planes = cd_test_randi(1, 3), at = cd_test_randi(0, planes - 1);
        const size_t total = (size_t)planes * h * w, out_n = (size_t)oh * ow;
        float *x = malloc(total * sizeof *x), *dst = malloc((out_n + 16) * sizeof *dst);
        uint16_t *masks = malloc(stride * ((ow + b->vec - 1) / b->vec) * sizeof *masks);
        CHECK(x && dst && masks);
        sp_fill_random(x, total);
        for (size_t j = 0; j < out_n + 16; j++) dst[j] = NAN;
        cd_phase_row_masks(masks, (size_t)ow, w, sh, stride, b->vec);
        const float *xp = x + (size_t)at * h * w;
        const long o = (long)(xp - x);
        b->im2col_tap(dst, oh, ow, xp, h, w, -o, (long)total - o, y0, row_stride, sh, stride, masks);
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                const int y = y0 + oy * row_stride, c = stride * ox + sh;
                const float want = y >= 0 && y < h && c >= 0 && c < w ? xp[(size_t)y * w + c] : 0.0f;
                if (dst[oy * ow + ox] != want)
                    CD_CHECK_FAIL_("%s h%d w%d oh%d ow%d y0 %d rs%d sh%d stride%d: (%d,%d) got %g want %g",
                                   cd_sparse_isa_name(b->isa), h, w, oh, ow, y0, row_stride, sh, stride, oy, ox,
                                   dst[oy * ow + ox], want);
            }
        for (size_t j = out_n; j < out_n + 16; j++) CHECK(isnan(dst[j]));
        free(x);
        free(dst);
        free(masks);
    }
}

// Output rows out of a band slot: exactly rows x cols copied between
// pitches, nothing written past a row's cols (the gaps keep their guard).
BAND_TEST(sparse_copy_rows_matches_memcpy_gaps_untouched) {
    for (int it = 0; it < 200; it++) {
        const size_t rows = (size_t)cd_test_randi(1, 9), cols = (size_t)cd_test_randi(1, 70);
        const size_t sp = cols + (size_t)cd_test_randi(0, 20), dp = cols + (size_t)cd_test_randi(0, 5);
        const size_t sn = (rows - 1) * sp + cols, dn = (rows - 1) * dp + cols;
        float *src = malloc(sn * sizeof *src), *dst = malloc(dn * sizeof *dst); // exact sizes
        CHECK(src && dst);
        sp_fill_random(src, sn);
        for (size_t j = 0; j < dn; j++) dst[j] = NAN;
        b->copy_rows(dst, dp, src, sp, rows, cols);
        for (size_t r = 0; r < rows; r++)
            for (size_t j = 0; j < dp && r * dp + j < dn; j++) {
                if (j < cols)
                    CHECK(dst[r * dp + j] == src[r * sp + j]);
                else
                    CHECK(isnan(dst[r * dp + j]));
            }
        free(src);
        free(dst);
    }
}
