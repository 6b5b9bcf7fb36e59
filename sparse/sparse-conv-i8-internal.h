#ifndef CD_SPARSE_SPARSE_CONV_I8_INTERNAL_H
#define CD_SPARSE_SPARSE_CONV_I8_INTERNAL_H

// What the two halves of the int8 sparse conv share: sparse-conv-i8.c
// builds it at load (geometry, packing), sparse-conv-i8-run.c runs it.

#include "sparse/i8-spmm.h"
#include "sparse/sparse-conv-i8.h"

#include <stddef.h>
#include <stdint.h>

// Rows per work item: one micro-kernel call (16 CSR rows or 4 BSR4
// blocks) over one pixel tile, then their epilogue.
#define I8_CHUNK_ROWS 16

// A run of rows of one group packed in one format.
typedef struct {
    int group;    // the rows' group
    int row0;     // first output channel (of all K)
    int nr;       // rows per block: 1 (CSR) or 4 (BSR4)
    int nblk;     // blocks
    size_t blk0;  // first block (index into nq)
    size_t quad0; // first quad (4 offsets each)
    size_t w0;    // first weight byte (4 * nr per quad)
} i8_chunk;

// The planes of one row phase a of a stride-2 layer: the rows i in
// [i0, i1) come from input rows i*stride_h + a - pad_t (k->s2_rows over
// g.nb column phases, plane slot[b] each); the others are all padding.
typedef struct {
    cd_i8_s2_rows g; // g.nb 0: no used slot has this row phase
    int slot[2];
    int i0, i1;
} i8_s2_pass;

struct cd_sparse_conv_i8 {
    cd_conv_desc d; // the layer, oh/ow filled
    int cpg, kpg;   // channels per group in / out
    cd_sparse_format format;
    cd_sparse_isa isa;
    const cd_i8_isa_info *k;
    cd_i8_epilogue epi; // the quantization (w_scale NULL: see mult)
    int fused_out;      // the epilogue runs inside the kernel (k->csr_out, k->bsr4_out; cd_i8_out_plain)
    float *mult;        // [K] in_scale * w_scale[k], in float
    float *bias;        // [K] (zeros without bias)
    float *border;      // [K, OH, OW] owned copy of cd_conv_desc.border, or NULL (the residual of every image)
    int32_t *init;      // [K] -zp_u8 * (sum of row k's weights), wrapping
    int zp_u8;          // the input zero point as u8 (+128 for s8)
    int direct;         // 1x1, stride 1, unpadded: planes are the channels
    // Prepared input: per group, channel, slot (used stride phase), image
    // of the fold: a plane of hph x wph u8, padded with zp_u8.
    int nslots;
    int *slot_a, *slot_b; // [nslots] row and column phase
    int hph, wph;
    // Stride-2 columns (stride_w 2, not direct): per row phase a < stride_h,
    // the planes of its used column phases, filled by k->s2_rows.
    i8_s2_pass *s2;      // [stride_h], or NULL
    int s1_on;           // stride_w 1, not direct: every slot's rows from k->s1_rows
    cd_i8_s1_rows s1;    // their geometry (the same for every slot)
    size_t img_plane;    // hph * wph
    int fold;            // images per pass
    size_t plane;        // fold * img_plane, to 64
    size_t chan_stride;  // nslots * plane
    size_t group_in;     // cpg * chan_stride
    size_t slack;        // bytes read past the last group's planes
    size_t prep_bytes;   // groups * group_in + slack, to 64
    size_t thread_bytes; // per thread: the accumulator tile, rowq, the runs
    size_t rowq_bytes;   // per thread: u8 of an input row (a channel: stride_w 1 or 2)
    int threads;         // OpenMP threads at create
    // Packed weights (sparse/i8-spmm.h) and the work items over them.
    int32_t *off;
    int8_t *w;
    uint32_t *nq, *nqs; // per block: quads, of which short (i8-spmm.h)
    i8_chunk *chunks;
    int nchunks;
    size_t nnz, entries, packed_bytes;
};

#endif // CD_SPARSE_SPARSE_CONV_I8_INTERNAL_H
