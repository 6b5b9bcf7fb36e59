// The stride-2 phase-plane rows of the int8 sparse conv (sparse/i8-spmm.h
// cd_i8_s2_rows, sparse/i8-phase2-simd.h) at every ISA level this run has
// (a named skip for the others): the rows against the rule on random
// geometries, nothing written outside the plane rows (guard bytes), nothing
// read outside the tensor (the tensor against inaccessible pages, so a read
// past it faults without ASan too), and whole stride-2 convs on inputs
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
#define GUARD_BYTES 64

// A random geometry for rows of w bytes (w >= 1): nb planes, each with
// its own first byte, leading pads and trailing pads.
static cd_i8_s2_rows random_rows(int w) {
    cd_i8_s2_rows g = {.w = w, .nb = cd_test_randi(1, 2), .zp = (uint8_t)cd_test_randi(0, 255)};
    g.flip = cd_test_randi(0, 1) ? 0x80 : 0;
    int wph = 0;
    for (int b = 0; b < g.nb; b++) {
        g.first[b] = w >= 2 ? cd_test_randi(0, 1) : 0;
        const int avail = (w - g.first[b] + 1) / 2; // bytes first, first + 2, ... in the row
        const int count = cd_test_randi(0, 3) ? avail : cd_test_randi(0, avail);
        g.j0[b] = cd_test_randi(0, 3) ? cd_test_randi(0, 2) : cd_test_randi(0, 70);
        g.j1[b] = g.j0[b] + count;
        if (g.j1[b] > wph) wph = g.j1[b];
    }
    g.wph = wph + (cd_test_randi(0, 3) ? cd_test_randi(0, 2) : cd_test_randi(0, 70));
    if (g.wph == 0) g.wph = 1;
    return g;
}

// Runs g over nrows rows of src (stride src_stride, the tensor ending at
// src_end) at isa and checks every plane row against the rule and the
// guard bytes around each plane.
static void check_rows(cd_sparse_isa isa, const cd_i8_s2_rows *g, const uint8_t *src, const uint8_t *src_end,
                       size_t src_stride, size_t nrows, const char *where) {
    const size_t plane = nrows * (size_t)g->wph;
    uint8_t *buf[2], *dst[2] = {NULL, NULL};
    for (int b = 0; b < 2; b++) {
        buf[b] = malloc(plane + 2 * GUARD_BYTES);
        CHECK(buf[b] != NULL);
        memset(buf[b], GUARD, plane + 2 * GUARD_BYTES);
        dst[b] = buf[b] + GUARD_BYTES;
    }
    cd_i8_isa(isa)->s2_rows(g, src, src_end, src_stride, nrows, dst);
    for (int b = 0; b < g->nb; b++) {
        for (size_t i = 0; i < nrows; i++)
            for (int j = 0; j < g->wph; j++) {
                const int in = j >= g->j0[b] && j < g->j1[b];
                const uint8_t want =
                    in ? src[i * src_stride + 2 * (size_t)(j - g->j0[b]) + g->first[b]] ^ g->flip : g->zp;
                const uint8_t got = dst[b][i * g->wph + j];
                if (got != want)
                    CD_CHECK_FAIL_("%s %s: plane %d row %zu col %d = %d, want %d (w %d wph %d j0 %d j1 %d first %d)",
                                   cd_sparse_isa_name(isa), where, b, i, j, got, want, g->w, g->wph, g->j0[b], g->j1[b],
                                   g->first[b]);
            }
        for (int j = 0; j < GUARD_BYTES; j++)
            if (buf[b][j] != GUARD || dst[b][plane + j] != GUARD)
                CD_CHECK_FAIL_("%s %s: plane %d written outside its rows", cd_sparse_isa_name(isa), where, b);
    }
    for (int j = 0; j < (int)(plane + 2 * GUARD_BYTES); j++)
        if (g->nb == 1 && buf[1][j] != GUARD)
            CD_CHECK_FAIL_("%s %s: unused plane written", cd_sparse_isa_name(isa), where);
    free(buf[0]);
    free(buf[1]);
}

I8_LEVEL_TEST(sparse_i8_s2_rows_match_rule) {
    for (int it = 0; it < 400; it++) {
        const int w = cd_test_randi(0, 3) ? cd_test_randi(1, 70) : cd_test_randi(70, 300);
        const cd_i8_s2_rows g = random_rows(w);
        const size_t nrows = (size_t)cd_test_randi(1, 4), stride = (size_t)w * cd_test_randi(1, 3);
        const size_t total = (nrows - 1) * stride + w; // exact: ASan sees a read past it
        uint8_t *x = malloc(total);
        CHECK(x != NULL);
        for (size_t i = 0; i < total; i++) x[i] = (uint8_t)cd_test_randi(0, 255);
        check_rows(isa, &g, x, x + total, stride, nrows, "exact-size tensor");
        free(x);
    }
}

// The tensor against an inaccessible page, at its end or at its start.
I8_LEVEL_TEST(sparse_i8_s2_rows_read_nothing_outside_tensor_guard_pages) {
    size_t page;
    uint8_t *map = i8_guarded_pages(&page);
    for (int it = 0; it < 300; it++) {
        const int w = cd_test_randi(1, 150);
        const cd_i8_s2_rows g = random_rows(w);
        const size_t nrows = (size_t)cd_test_randi(1, 4), stride = (size_t)w * cd_test_randi(1, 2);
        const size_t total = (nrows - 1) * stride + w;
        const int at_end = cd_test_randi(0, 1);
        uint8_t *x = i8_tensor_against_page(map, page, total, at_end);
        check_rows(isa, &g, x, x + total, stride, nrows,
                   at_end ? "tensor against the page after" : "tensor against the page before");
    }
    munmap(map, 4 * page);
}

// Whole stride-2 convs (u8 and s8 input, any row stride, pads, odd and
// even sizes, batch 1..2) whose input tensor ends or starts against an
// inaccessible page: accumulators equal the reference's.
I8_LEVEL_TEST(sparse_i8_stride2_conv_reads_nothing_outside_tensor_guard_pages) {
    for (int it = 0; it < 40; it++) {
        cd_conv_desc d;
        do {
            const int r = cd_test_randi(1, 3);
            d = cd_conv_square(cd_test_randi(1, 6), cd_test_randi(1, 20), cd_test_randi(1, 90), cd_test_randi(1, 9), r,
                               2, cd_test_randi(0, 2));
            d.stride_h = cd_test_randi(1, 3);
            d.pad_r = cd_test_randi(0, 3);
            d.pad_b = cd_test_randi(0, 3);
            d.n = cd_test_randi(1, 2);
            cd_conv_out_dims(&d);
        } while (d.oh < 1 || d.ow < 1);
        i8_conv_against_guard_pages(isa, &d, it % 2, (it % 4) / 3.0, it); // sparsity 0, 1/3, 2/3, 1
    }
}
