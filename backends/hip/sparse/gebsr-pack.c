// GEBSR packing and the CPU product over it (backends/hip/sparse/gebsr-pack.h).

#include "backends/hip/sparse/gebsr-pack.h"

#include "core/errors.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Whether block (br, bc) of w holds a nonzero weight.
static int block_nonzero(const float *w, int rows, int cols, int rbd, int cbd, int br, int bc) {
    for (int i = 0; i < rbd; i++) {
        int r = br * rbd + i;
        if (r >= rows) break;
        for (int j = 0; j < cbd; j++) {
            int c = bc * cbd + j;
            if (c >= cols) break;
            if (w[(size_t)r * cols + c] != 0.0f) return 1;
        }
    }
    return 0;
}

int cd_gebsr_pack(const float *w, int rows, int cols, int row_block_dim, int col_block_dim, cd_gebsr *g) {
    memset(g, 0, sizeof *g);
    if (!w || rows < 1 || cols < 1 || row_block_dim < 1 || row_block_dim > 64 || col_block_dim < 1 ||
        col_block_dim > 64)
        return CD_EPARAMS;
    int rbd = row_block_dim, cbd = col_block_dim;
    int mb = (int)(((int64_t)rows + rbd - 1) / rbd), kb = (int)(((int64_t)cols + cbd - 1) / cbd);
    // First pass: count the stored blocks.
    int64_t nnzb = 0;
    for (int br = 0; br < mb; br++)
        for (int bc = 0; bc < kb; bc++) nnzb += block_nonzero(w, rows, cols, rbd, cbd, br, bc);
    size_t bsz = (size_t)rbd * cbd;
    if ((uint64_t)nnzb * bsz > (uint64_t)INT_MAX) return CD_EPARAMS;
    g->row_ptr = malloc(((size_t)mb + 1) * sizeof(int));
    g->col_ind = malloc((nnzb ? (size_t)nnzb : 1) * sizeof(int));
    g->val = calloc(nnzb ? (size_t)nnzb * bsz : 1, sizeof(float)); // padding stays zero
    if (!g->row_ptr || !g->col_ind || !g->val) {
        cd_gebsr_free(g);
        return CD_ENOMEM;
    }
    g->rows = rows;
    g->cols = cols;
    g->row_block_dim = rbd;
    g->col_block_dim = cbd;
    g->mb = mb;
    g->kb = kb;
    g->nnzb = (int)nnzb;
    int b = 0;
    for (int br = 0; br < mb; br++) {
        g->row_ptr[br] = b;
        for (int bc = 0; bc < kb; bc++) {
            if (!block_nonzero(w, rows, cols, rbd, cbd, br, bc)) continue;
            g->col_ind[b] = bc;
            float *v = g->val + (size_t)b * bsz;
            for (int i = 0; i < rbd && br * rbd + i < rows; i++)
                for (int j = 0; j < cbd && bc * cbd + j < cols; j++)
                    v[(size_t)i * cbd + j] = w[(size_t)(br * rbd + i) * cols + bc * cbd + j];
            b++;
        }
    }
    g->row_ptr[mb] = b;
    return 0;
}

void cd_gebsr_free(cd_gebsr *g) {
    if (!g) return;
    free(g->row_ptr);
    free(g->col_ind);
    free(g->val);
    memset(g, 0, sizeof *g);
}

void cd_gebsr_mm_host(const cd_gebsr *g, size_t n, const float *x, size_t x_rs, size_t x_cs, float *y, size_t y_rs,
                      size_t y_cs) {
    int rbd = g->row_block_dim, cbd = g->col_block_dim;
    size_t bsz = (size_t)rbd * cbd;
    for (int br = 0; br < g->mb; br++)
        for (int b = g->row_ptr[br]; b < g->row_ptr[br + 1]; b++) {
            const float *v = g->val + (size_t)b * bsz;
            int c0 = g->col_ind[b] * cbd;
            for (int i = 0; i < rbd; i++) {
                int r = br * rbd + i;
                if (r >= g->rows) break; // padding rows: never written
                float *yr = y + (size_t)r * y_rs;
                for (int j = 0; j < cbd; j++) {
                    int c = c0 + j;
                    if (c >= g->cols) break;
                    float a = v[(size_t)i * cbd + j];
                    if (a == 0.0f) continue;
                    const float *xc = x + (size_t)c * x_rs;
                    for (size_t p = 0; p < n; p++) yr[p * y_cs] += a * xc[p * x_cs];
                }
            }
        }
}
