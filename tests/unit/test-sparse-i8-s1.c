// The stride-1 plane rows of the int8 sparse conv (sparse/i8-spmm.h
// cd_i8_s1_rows, sparse/i8-s1-rows-simd.h) at every ISA level this run has
// (a named skip for the others): the rows against the rule on random
// geometries, nothing written outside the plane rows (guard bytes), nothing
// read outside the tensor (the tensor against inaccessible pages, so a read
// past it faults without ASan too), and whole stride-1 convs on inputs
// against those pages, accumulators bit-exact against the reference.

#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "sparse/i8-spmm.h"
#include "sparse/sparse-conv-i8.h"
#include "tests/unit/test-sparse-i8-levels.h"
#include "tests/unit/test-sparse-util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD 0xA5
#define GUARD_BYTES 80

// A random geometry for rows of w bytes (w >= 1): leading pads (mostly
// 0..2, sometimes past a vector), trailing pads likewise.
static cd_i8_s1_rows random_rows(int w) {
    cd_i8_s1_rows g = {.w = w, .zp = (uint8_t)cd_test_randi(0, 255)};
    g.flip = cd_test_randi(0, 1) ? 0x80 : 0;
    g.j0 = cd_test_randi(0, 3) ? cd_test_randi(0, 2) : cd_test_randi(0, 70);
    g.wph = g.j0 + w + (cd_test_randi(0, 3) ? cd_test_randi(0, 2) : cd_test_randi(0, 70));
    return g;
}

// Runs g over nrows rows of src (stride src_stride, inside the tensor
// [lo, end)) at isa and checks every plane row against the plain rule and
// the guard bytes around the plane.
static void check_rows(cd_sparse_isa isa, const cd_i8_s1_rows *g, const uint8_t *src, const uint8_t *lo,
                       const uint8_t *end, size_t src_stride, size_t nrows, const char *where) {
    const size_t plane = nrows * (size_t)g->wph;
    uint8_t *buf = malloc(plane + 2 * GUARD_BYTES);
    CHECK(buf != NULL);
    memset(buf, GUARD, plane + 2 * GUARD_BYTES);
    uint8_t *dst = buf + GUARD_BYTES;
    cd_i8_isa(isa)->s1_rows(g, src, lo, end, src_stride, nrows, dst);
    for (size_t i = 0; i < nrows; i++)
        for (int j = 0; j < g->wph; j++) {
            const int in = j >= g->j0 && j < g->j0 + g->w;
            const uint8_t want = in ? src[i * src_stride + (size_t)(j - g->j0)] ^ g->flip : g->zp;
            const uint8_t got = dst[i * g->wph + j];
            if (got != want)
                CD_CHECK_FAIL_("%s %s: row %zu col %d = %d, want %d (w %d wph %d j0 %d rows %zu)",
                               cd_sparse_isa_name(isa), where, i, j, got, want, g->w, g->wph, g->j0, nrows);
        }
    for (int j = 0; j < GUARD_BYTES; j++)
        if (buf[j] != GUARD || dst[plane + j] != GUARD)
            CD_CHECK_FAIL_("%s %s: written outside the plane rows (w %d wph %d j0 %d rows %zu)",
                           cd_sparse_isa_name(isa), where, g->w, g->wph, g->j0, nrows);
    free(buf);
}

I8_LEVEL_TEST(sparse_i8_s1_rows_match_rule) {
    for (int it = 0; it < 400; it++) {
        const int w = cd_test_randi(0, 3) ? cd_test_randi(1, 70) : cd_test_randi(70, 300);
        const cd_i8_s1_rows g = random_rows(w);
        const size_t nrows = (size_t)cd_test_randi(1, 5), stride = (size_t)w * cd_test_randi(1, 3);
        const size_t total = (nrows - 1) * stride + w; // exact: ASan sees a read past it
        uint8_t *x = malloc(total);
        CHECK(x != NULL);
        for (size_t i = 0; i < total; i++) x[i] = (uint8_t)cd_test_randi(0, 255);
        check_rows(isa, &g, x, x, x + total, stride, nrows, "exact-size tensor");
        // The rows inside a larger tensor (an image's middle channel).
        const size_t before = (size_t)cd_test_randi(0, 100), after = (size_t)cd_test_randi(0, 100);
        uint8_t *big = malloc(before + total + after);
        CHECK(big != NULL);
        memset(big, GUARD, before + total + after);
        memcpy(big + before, x, total);
        check_rows(isa, &g, big + before, big, big + before + total + after, stride, nrows, "rows inside a tensor");
        free(big);
        free(x);
    }
}

// The tensor against an inaccessible page, at its end or at its start.
I8_LEVEL_TEST(sparse_i8_s1_rows_read_nothing_outside_tensor_guard_pages) {
    size_t page;
    uint8_t *map = i8_guarded_pages(&page);
    for (int it = 0; it < 300; it++) {
        const int w = cd_test_randi(1, 150);
        const cd_i8_s1_rows g = random_rows(w);
        const size_t nrows = (size_t)cd_test_randi(1, 4), stride = (size_t)w * cd_test_randi(1, 2);
        const size_t total = (nrows - 1) * stride + w;
        const int at_end = cd_test_randi(0, 1);
        uint8_t *x = i8_tensor_against_page(map, page, total, at_end);
        check_rows(isa, &g, x, x, x + total, stride, nrows,
                   at_end ? "tensor against the page after" : "tensor against the page before");
    }
    munmap(map, 4 * page);
}

// A random stride_w 1 conv whose planes are not direct: kernels 3x3, 5x5,
// 1xk and kx1, asymmetric pads 0..2, stride_h 1..2, groups, batch 1..2,
// rows narrower than 16 and wider than 64.
static cd_conv_desc random_stride1_desc(void) {
    cd_conv_desc d;
    do {
        const int groups = cd_test_randi(0, 3) ? 1 : 2, k = cd_test_randi(0, 1) ? 3 : 5, shape = cd_test_randi(0, 3);
        d = cd_conv_square(groups * cd_test_randi(1, 4), cd_test_randi(1, 12), cd_test_randi(1, 90),
                           groups * cd_test_randi(1, 12), k, 1, 0);
        d.r = shape == 1 ? 1 : k;
        d.s = shape == 2 ? 1 : k;
        d.groups = groups;
        d.stride_h = cd_test_randi(0, 3) ? 1 : 2;
        d.pad_t = cd_test_randi(0, 2);
        d.pad_l = cd_test_randi(0, 2);
        d.pad_b = cd_test_randi(0, 2);
        d.pad_r = cd_test_randi(0, 2);
        if (!d.pad_l) d.pad_r = cd_test_randi(1, 2); // keep it off the direct path
        d.n = cd_test_randi(1, 2);
        cd_conv_out_dims(&d);
    } while (d.oh < 1 || d.ow < 1);
    return d;
}

// Whole stride-1 convs (u8 and s8 input, sparsities 0 to 100%) whose input
// tensor ends or starts against an inaccessible page: accumulators equal
// the reference's.
I8_LEVEL_TEST(sparse_i8_stride1_conv_reads_nothing_outside_tensor_guard_pages) {
    for (int it = 0; it < 40; it++) {
        const cd_conv_desc d = random_stride1_desc();
        i8_conv_against_guard_pages(isa, &d, it % 2, (it / 2 % 4) / 3.0, it); // sparsity 0, 1/3, 2/3, 1
    }
}
