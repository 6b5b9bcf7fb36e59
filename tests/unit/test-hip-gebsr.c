// The GEBSR packer and its CPU product (backends/hip/sparse/gebsr-pack.h) against a
// dense double-precision reference: fresh random shapes (rows mostly not a
// multiple of the block rows), 4x1 and 8x1 blocks (plus general r x c blocks
// for the layout), 0% / 90% / 100% zeros, single weights or aligned blocks.
// The layout checks are those rocsparse_sgebsrmm (rocsparse_direction_row)
// relies on; the hip-emu backend runs its BSR4/BSR8 layers through the same
// arrays (tests/unit/test-hip-backend.c, *_gebsr_route_*).

#include "backends/hip/sparse/gebsr-pack.h"
#include "core/errors.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

static float *gb_rbuf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) abort();
    for (size_t i = 0; i < n; i++) {
        float v = cd_test_randf(-1.0f, 1.0f);
        p[i] = v == 0.0f ? 0.5f : v;
    }
    return p;
}

// Zeroes w (rows x cols): single weights with probability frac (bh = 1), or
// aligned bh x 1 blocks at each column.
static void gb_zero(float *w, int rows, int cols, int bh, double frac) {
    for (int r0 = 0; r0 < rows; r0 += bh)
        for (int j = 0; j < cols; j++)
            if (frac >= 1.0 || cd_test_randf(0, 1) < frac)
                for (int i = r0; i < r0 + bh && i < rows; i++) w[(size_t)i * cols + j] = 0.0f;
}

// The layout: block rows/columns, row_ptr monotone from 0 to nnzb, column
// indices ascending and in range, every stored block nonzero, every nonzero
// weight in exactly its block at its row-major place, padding zero.
static void check_layout(const float *w, int rows, int cols, const cd_gebsr *g) {
    int rbd = g->row_block_dim, cbd = g->col_block_dim;
    CHECK_EQ(g->mb, (rows + rbd - 1) / rbd);
    CHECK_EQ(g->kb, (cols + cbd - 1) / cbd);
    CHECK_EQ(g->row_ptr[0], 0);
    CHECK_EQ(g->row_ptr[g->mb], g->nnzb);
    size_t found = 0, nnz = 0;
    for (size_t i = 0; i < (size_t)rows * cols; i++) nnz += w[i] != 0.0f;
    for (int br = 0; br < g->mb; br++) {
        CHECK(g->row_ptr[br] <= g->row_ptr[br + 1]);
        for (int b = g->row_ptr[br]; b < g->row_ptr[br + 1]; b++) {
            int bc = g->col_ind[b];
            CHECK(bc >= 0 && bc < g->kb);
            if (b > g->row_ptr[br]) CHECK(bc > g->col_ind[b - 1]);
            int any = 0;
            for (int i = 0; i < rbd; i++)
                for (int j = 0; j < cbd; j++) {
                    int r = br * rbd + i, c = bc * cbd + j;
                    float v = g->val[(size_t)b * rbd * cbd + (size_t)i * cbd + j];
                    if (r >= rows || c >= cols) {
                        CHECK(v == 0.0f); // padding
                        continue;
                    }
                    CHECK(v == w[(size_t)r * cols + c]);
                    found += v != 0.0f;
                    any |= v != 0.0f;
                }
            CHECK(any);
        }
    }
    CHECK_EQ(found, nnz);
}

// Packs a random rows x cols matrix with rbd x cbd blocks and checks the
// layout and y += A x (both operand orders the backend uses) against a
// double-precision dense loop; the row past `rows` in y must stay untouched.
static void check_pack(int rows, int cols, int rbd, int cbd, double frac, int blocks) {
    float *w = gb_rbuf((size_t)rows * cols);
    gb_zero(w, rows, cols, blocks ? rbd : 1, frac);
    cd_gebsr g;
    CHECK_EQ(cd_gebsr_pack(w, rows, cols, rbd, cbd, &g), 0);
    check_layout(w, rows, cols, &g);
    if (frac >= 1.0) CHECK_EQ(g.nnzb, 0);
    if (frac == 0.0) CHECK_EQ(g.nnzb, g.mb * g.kb);
    size_t n = (size_t)cd_test_randi(1, 40);
    float *x = gb_rbuf((size_t)cols * n);
    for (int order = 0; order < 2; order++) {
        // order 0: X cols x n, Y rows x n row-major (an NCHW image);
        // order 1: X n x cols, Y n x rows row-major (fully-connected rows).
        size_t x_rs = order ? 1 : n, x_cs = order ? (size_t)cols : 1;
        size_t y_rs = order ? 1 : n, y_cs = order ? (size_t)rows : 1;
        size_t ny = (size_t)rows * n;
        float *y = gb_rbuf(ny + n), *y0 = malloc((ny + n) * sizeof(float)), *want = malloc(ny * sizeof(float));
        memcpy(y0, y, (ny + n) * sizeof(float));
        for (int r = 0; r < rows; r++)
            for (size_t p = 0; p < n; p++) {
                double s = y[r * y_rs + p * y_cs];
                for (int c = 0; c < cols; c++) s += (double)w[(size_t)r * cols + c] * x[c * x_rs + p * x_cs];
                want[r * y_rs + p * y_cs] = (float)s;
            }
        cd_gebsr_mm_host(&g, n, x, x_rs, x_cs, y, y_rs, y_cs);
        CHECK_CLOSE_F32(y, want, ny, 1e-4);
        for (size_t i = ny; i < ny + n; i++) CHECK(y[i] == y0[i]); // nothing written past the rows
        free(y), free(y0), free(want);
    }
    cd_gebsr_free(&g);
    CHECK(g.row_ptr == NULL && g.nnzb == 0);
    free(w), free(x);
}

CD_TEST(hip_gebsr_pack_4x1_8x1_vs_dense_random_shapes) {
    static const double fracs[] = {0.0, 0.9, 1.0};
    for (int iter = 0; iter < 4; iter++)
        for (int rbd = 4; rbd <= 8; rbd += 4)
            for (int f = 0; f < 3; f++) {
                int rows = cd_test_randi(1, 70), cols = cd_test_randi(1, 60);
                check_pack(rows, cols, rbd, 1, fracs[f], 0);
                check_pack(rows, cols, rbd, 1, fracs[f], 1);
            }
}

// K not a multiple of the block rows, explicitly: 1 .. rbd-1 rows left over
// in the last block row (padding), and a single row.
CD_TEST(hip_gebsr_pack_rows_not_multiple_of_block_padding) {
    for (int rbd = 4; rbd <= 8; rbd += 4) {
        check_pack(1, cd_test_randi(1, 30), rbd, 1, 0.5, 0);
        for (int left = 1; left < rbd; left++)
            check_pack(rbd * cd_test_randi(1, 6) + left, cd_test_randi(1, 30), rbd, 1, 0.5, 1);
    }
}

// General r x c blocks (columns padded too): the layout and product hold.
CD_TEST(hip_gebsr_pack_general_blocks) {
    for (int iter = 0; iter < 10; iter++)
        check_pack(cd_test_randi(1, 50), cd_test_randi(1, 50), cd_test_randi(1, 9), cd_test_randi(1, 5),
                   cd_test_randi(0, 1) ? 0.9 : 0.3, cd_test_randi(0, 1));
}

CD_TEST(hip_gebsr_pack_bad_arguments) {
    float w[4] = {1, 2, 3, 4};
    cd_gebsr g;
    CHECK_EQ(cd_gebsr_pack(NULL, 2, 2, 4, 1, &g), CD_EPARAMS);
    CHECK_EQ(cd_gebsr_pack(w, 0, 2, 4, 1, &g), CD_EPARAMS);
    CHECK_EQ(cd_gebsr_pack(w, 2, 0, 4, 1, &g), CD_EPARAMS);
    CHECK_EQ(cd_gebsr_pack(w, 2, 2, 0, 1, &g), CD_EPARAMS);
    CHECK_EQ(cd_gebsr_pack(w, 2, 2, 4, 0, &g), CD_EPARAMS);
    CHECK_EQ(cd_gebsr_pack(w, 2, 2, 65, 1, &g), CD_EPARAMS);
    CHECK(g.row_ptr == NULL);
    cd_gebsr_free(&g);
}
