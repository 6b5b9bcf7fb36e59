// Band rows, AVX-512 (sparse/band-rows.h): phase-plane rows against the scalar rule
// row[j] = 0 <= stride*j + sh < w ? x[stride*j + sh] : 0, on random row
// lengths, widths, shifts (left padding) and strides 1/2, with the input row
// at the start, in the middle and at the end of an exact-size buffer (so
// ASan sees any read past the tensor) and guard values after the row.

#include "sparse/band-rows.h"
#include "sparse/sparse-conv.h"
#include "tests/unit/test-sparse-util.h"

#include <math.h>

CD_TEST(sparse_phase_row_matches_rule) {
    if (!cd_sparse_isa_supported(CD_SPARSE_ISA_AVX512F)) return;
    for (int it = 0; it < 400; it++) {
        const int stride = cd_test_randi(1, 2), w = cd_test_randi(1, 80);
        const int sh = cd_test_randi(-3, 3);
        const size_t n = (size_t)cd_test_randi(1, 70);
        const int rows = cd_test_randi(1, 3), at = cd_test_randi(0, rows - 1);
        const size_t total = (size_t)rows * w;
        float *x = malloc(total * sizeof *x), *row = malloc((n + 16) * sizeof *row);
        uint16_t *masks = malloc(stride * ((n + 15) / 16) * sizeof *masks);
        CHECK(x && row && masks);
        sp_fill_random(x, total);
        for (size_t j = 0; j < n + 16; j++) row[j] = NAN;
        cd_phase_row_masks(masks, n, w, sh, stride);
        const float *xr = x + (size_t)at * w;
        const long o = (long)(xr - x);
        cd_f32_phase_row__avx512f(row, n, xr, -o, (long)total - o, sh, stride, masks);
        for (size_t j = 0; j < n; j++) {
            const long s = (long)stride * (long)j + sh;
            const float want = s >= 0 && s < w ? xr[s] : 0.0f;
            if (row[j] != want)
                fprintf(stderr, "n%zu w%d sh%d stride%d row %d/%d: j=%zu got %g want %g\n", n, w, sh,
                        stride, at, rows, j, row[j], want);
            CHECK(row[j] == want);
        }
        for (size_t j = n; j < n + 16; j++) CHECK(isnan(row[j])); // nothing written past n
        free(x);
        free(row);
        free(masks);
    }
}

// Output rows out of a band slot: exactly rows x cols copied between
// pitches, nothing written past a row's cols (the gaps keep their guard).
CD_TEST(sparse_copy_rows_matches_memcpy) {
    if (!cd_sparse_isa_supported(CD_SPARSE_ISA_AVX512F)) return;
    for (int it = 0; it < 200; it++) {
        const size_t rows = (size_t)cd_test_randi(1, 9), cols = (size_t)cd_test_randi(1, 70);
        const size_t sp = cols + (size_t)cd_test_randi(0, 20), dp = cols + (size_t)cd_test_randi(0, 5);
        const size_t sn = (rows - 1) * sp + cols, dn = (rows - 1) * dp + cols;
        float *src = malloc(sn * sizeof *src), *dst = malloc(dn * sizeof *dst); // exact sizes
        CHECK(src && dst);
        sp_fill_random(src, sn);
        for (size_t j = 0; j < dn; j++) dst[j] = NAN;
        cd_f32_copy_rows__avx512f(dst, dp, src, sp, rows, cols);
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
