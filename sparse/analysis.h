#ifndef CD_SPARSE_ANALYSIS_H
#define CD_SPARSE_ANALYSIS_H

// Structure analysis of one conv/FC weight (OIHW float32; FC is K x C x 1 x 1)
// at load: what the planner (runtime/) needs to choose dense, compacted dense,
// CSR or BSR, and what `convctl plan` prints per layer.
//
// Views used: per group, the weight is a kpg x cols matrix with cols =
// cpg*R*S and column j = (c*R + r)*S + s (OIHW memory order).
//   - a block RxC is R consecutive filters (output channels) x C consecutive
//     columns of that matrix; blocks tile it from (0, 0), edge blocks are cut;
//   - N:M counts groups of M consecutive columns of one filter (the GEMM
//     reduction order, as NVIDIA's 2:4), the last group of a row may be
//     shorter; a group conforms when it has at most N nonzeros.

#include <stddef.h>

// Block shapes examined, in this order (index into cd_sparse_analysis.blocks).
#define CD_SPARSE_NBLOCK_SHAPES 4
extern const int cd_sparse_block_shapes[CD_SPARSE_NBLOCK_SHAPES][2]; // {1,4},{4,1},{8,1},{4,4}

// A block shape counts as found when its fill is at least this.
#define CD_SPARSE_BLOCK_FILL_MIN 0.75

typedef struct {
    int bh, bw;            // filters x columns
    size_t nonzero_blocks; // blocks holding at least one nonzero
    size_t blocks;         // all blocks
    double fill;           // nnz / (weights in nonzero blocks); 1 when nnz == 0
} cd_sparse_block_stat;

typedef struct {
    int k, cpg, r, s, groups; // the shape analysed
    size_t total;             // weights: k * cpg * r * s
    size_t nnz;               // nonzero weights
    double density;           // nnz / total
    int zero_out_channels;    // filters whose weights are all zero
    int zero_in_channels;     // input channels (of cpg*groups) no filter reads
    size_t connections;       // k * cpg kernel connections (filter, input channel)
    size_t zero_connections;  // of which the whole R x S kernel is zero
    cd_sparse_block_stat blocks[CD_SPARSE_NBLOCK_SHAPES];
    int best_block; // index into blocks: the largest block area with
                    // fill >= CD_SPARSE_BLOCK_FILL_MIN (higher fill on
                    // ties); -1 when none (or nnz == 0)
    double nm_2_4;  // fraction of 4-column groups with <= 2 nonzeros
    double nm_4_8;  // fraction of 8-column groups with <= 4 nonzeros
    int is_2_4;     // every group conforms to 2:4
    int is_4_8;     // every group conforms to 4:8
} cd_sparse_analysis;

// Analyses weights w (OIHW: k filters of cpg*r*s, groups groups, k divisible
// by groups). Returns 0, or CD_EPARAMS for a bad shape.
int cd_sparse_analyze(const float *w, int k, int cpg, int r, int s, int groups, cd_sparse_analysis *out);

// Marks zero filters (zero_out[k] = 1) and input channels no filter reads
// (zero_in[groups*cpg] = 1); either array may be NULL. Same shape rules as
// cd_sparse_analyze. Returns 0 or CD_EPARAMS.
int cd_sparse_zero_masks(const float *w, int k, int cpg, int r, int s, int groups, unsigned char *zero_out,
                         unsigned char *zero_in);

// Writes a one-line summary ("density 0.100 zero-filters 3/64 ...") into buf
// (always NUL-terminated when n > 0). Returns the length it needed (like
// snprintf).
int cd_sparse_analysis_format(const cd_sparse_analysis *a, char *buf, size_t n);

#endif // CD_SPARSE_ANALYSIS_H
