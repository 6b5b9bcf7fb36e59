#ifndef CD_BACKENDS_HIP_SPARSE_GEBSR_PACK_H
#define CD_BACKENDS_HIP_SPARSE_GEBSR_PACK_H

// General BSR (GEBSR) packing of a dense rows x cols weight matrix for
// rocsparse_sgebsrmm with rocsparse_direction_row, and the CPU product over
// the packed arrays. Plain C, no HIP: compiled into the emulated backend
// (the hip-emu sparse route runs from these arrays) and into the plugin
// (the arrays are what cd_rocsparse_gebsr_init uploads).
//
// Layout (rocSPARSE's, zero-based, int32): mb = ceil(rows / row_block_dim)
// block rows, kb = ceil(cols / col_block_dim) block columns; row_ptr[mb+1],
// col_ind[nnzb] (block columns, ascending within a block row),
// val[nnzb * row_block_dim * col_block_dim] with each block row-major
// (val[b*rbd*cbd + i*cbd + j] = w[(br*rbd + i) * cols + bc*cbd + j]). A
// block is stored when any of its weights is nonzero. Rows (columns) past
// rows (cols) in the last block row (column) are padding: stored as zeros.

#include <stddef.h>

typedef struct {
    int rows, cols;                   // the logical matrix
    int row_block_dim, col_block_dim; // block shape (4x1, 8x1 for the planner's BSR4/BSR8)
    int mb, kb, nnzb;                 // block rows, block columns, stored blocks
    int *row_ptr, *col_ind;           // host arrays, malloc'd
    float *val;
} cd_gebsr;

// Packs w (rows x cols, row-major) into *g. All-zero weights give nnzb = 0
// (row_ptr all zero, col_ind/val one-element placeholders). Returns 0,
// CD_EPARAMS (sizes < 1, block dims < 1 or > 64, NULL w, more than INT_MAX
// stored values) or CD_ENOMEM (*g left empty).
int cd_gebsr_pack(const float *w, int rows, int cols, int row_block_dim, int col_block_dim, cd_gebsr *g);

// Frees the arrays of g (an empty or zeroed g is fine) and zeroes it.
void cd_gebsr_free(cd_gebsr *g);

// y += A x X on the CPU from the packed arrays, for n columns: X(c, p) is
// x[c*x_rs + p*x_cs] (c < cols), Y(r, p) is y[r*y_rs + p*y_cs] (r < rows).
// The padding rows and columns of the blocks are skipped: nothing past rows
// is written, nothing past cols read.
void cd_gebsr_mm_host(const cd_gebsr *g, size_t n, const float *x, size_t x_rs, size_t x_cs, float *y, size_t y_rs,
                      size_t y_cs);

#endif // CD_BACKENDS_HIP_SPARSE_GEBSR_PACK_H
