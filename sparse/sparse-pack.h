#ifndef CD_SPARSE_SPARSE_PACK_H
#define CD_SPARSE_SPARSE_PACK_H

// Packed sparse conv/FC weights: the one in-memory format of CSR (blocks of
// one output channel) and BSR (blocks of NR = 4 or 8 consecutive output
// channels sharing each input position). Built once at load by cd_csr_pack /
// cd_bsr_pack; read per request by the micro-kernels (sparse/spmm-ukernel.h).
//
// The weight of one group is a kpg x (cpg*R*S) matrix; column j = (c*R + r)*S
// + s is input channel c, tap (r, s). The caller maps every column to the
// input element it multiplies (`tap_off[j]`, relative to the group's input
// base), so the kernels never see R, S, strides or padding.
//
// Blocks, per group in output-channel order: main_blocks blocks of NR
// channels (channels b*NR .. b*NR+NR-1), then tail_rows blocks of one
// channel each (the last kpg % NR channels). Block index over the layer:
// g * blocks + local index. An entry of a block is a column where any of its
// channels has a nonzero; zeros inside a block entry are stored (fill < 1).
//
// One 64-byte aligned allocation `mem`, sections each 64-byte aligned:
//
//   values   float[]    for each block: nb biases (nb = NR or 1), then for
//                       each entry nb weights (channel-minor)
//   offsets  int32[]    for each block, for each entry: tap_off[column]
//   nnz      uint32[]   entries per block
//   first    size_t[]   per block + 1: index of its first entry in offsets
//   vfirst   size_t[]   per block: index of its first bias in values
//   snnz     uint32[]   only in a shift pack (cd_sparse_pack_build_shift):
//                       per block `shifts` counts, entries per column tap s
//
// A micro-kernel call over blocks b0..b1 (all of one kind) takes
// values + vfirst[b0], offsets + first[b0], nnz + b0 and walks them in order.
//
// A shift pack (CSR only, for the aligned-shift kernel of
// sparse/spmm-shift.h) is the same with, in each block, the entries ordered
// by column tap s = j % shifts (then by column), snnz[b*shifts + s] entries
// of tap s each; its caller's tap_off leaves the s term out of the offsets.

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int nr;          // channels per main block: 1 (CSR), 4 or 8 (BSR)
    int groups;      // conv groups
    int kpg;         // output channels per group
    int cols;        // columns per group: cpg * R * S
    int main_blocks; // per group: kpg / nr
    int tail_rows;   // per group: kpg % nr (one-channel blocks)
    int blocks;      // per group: main_blocks + tail_rows
    size_t entries;  // block entries over the layer (length of offsets)
    size_t nnz;      // nonzero weights over the layer (not counting fill)
    int32_t max_off; // largest tap offset stored (0 when none)
    float *values;   // see the layout above
    int32_t *offsets;
    uint32_t *nnz_map;
    size_t *first;
    size_t *vfirst;
    int shifts;          // shift pack: column taps per row (S), else 0
    uint32_t *shift_nnz; // shift pack: [blocks * shifts] entries per tap, else NULL
    void *mem;           // the one allocation (free with cd_sparse_pack_free)
    size_t mem_size;     // its size in bytes
} cd_sparse_pack;

// Packs OIHW weights w (K = groups*kpg filters of `cols` columns each) with
// optional bias (K floats, NULL = zeros) into blocks of `nr` channels.
// tap_off[cols] maps each column to its input element offset (>= 0).
// Returns 0, CD_EPARAMS for bad sizes, CD_ENOMEM. On error *p is zeroed.
int cd_sparse_pack_build(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off,
                         int nr, cd_sparse_pack *p);

// As cd_sparse_pack_build with nr = 1, the entries of each block ordered by
// column tap s = j % shifts (columns j = (c*R + r)*S + s, shifts = S in
// 1..8) and counted per tap in shift_nnz. Returns 0, CD_EPARAMS, CD_ENOMEM.
int cd_sparse_pack_build_shift(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off,
                               int shifts, cd_sparse_pack *p);

// Frees the allocation and zeroes *p (safe on a zeroed pack).
void cd_sparse_pack_free(cd_sparse_pack *p);

// Bytes of weight data the pack holds (values + offsets + maps).
size_t cd_sparse_pack_bytes(const cd_sparse_pack *p);

// Weights the pack stores (nonzeros plus the zeros that fill its blocks).
size_t cd_sparse_pack_stored(const cd_sparse_pack *p);

#endif // CD_SPARSE_SPARSE_PACK_H
