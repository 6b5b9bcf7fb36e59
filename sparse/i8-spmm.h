#ifndef CD_SPARSE_I8_SPMM_H
#define CD_SPARSE_I8_SPMM_H

// The int8 sparse micro-kernels and their epilogue, one set per ISA
// (sparse/i8-spmm-*.c), used by sparse/sparse-conv-i8-run.c.
//
// Packed weights (sparse/sparse-conv-i8.c): a block is NR output rows (1 for
// CSR, 4 for BSR 4x1) sharing a column list; its columns come in quads (the
// last one padded with zero weights at a repeated offset). Per quad the
// stream `off` holds 4 int32 input offsets (bytes) and `w` holds NR words
// of 4 s8 weights: word i = row i's weights for the quad's 4 columns.
// `nq[b]` is block b's quad count, of which the first `nqs[b]` are
// "short": every weight in [-64, 64], so a u8 x s8 pair sum fits s16 and
// vpmaddubsw cannot saturate (the kernels without VNNI take those in 3
// instructions instead of 6; the others ignore nqs, the packing then makes
// none). A kernel call computes, for nblk blocks
// and one tile of TILE pixels m (TILE fixed per kernel, see cd_i8_isa_info):
//
//   acc[(b*NR + i)*TILE + m] = init[b*NR + i]
//                              + sum_q sum_j w[b][q][i][j] * in[off[b][q][j] + m]
//
// in wrapping s32 arithmetic (exact whenever the true sum fits s32: the
// reference's condition). in is u8. Kernels read in[off + m] for m < TILE
// whatever the valid pixel count: the caller's planes have the slack.
// Micro-kernels never allocate and never fail.

#include "kernels/op-desc.h"
#include "sparse/spmm-ukernel.h"

#include <stddef.h>
#include <stdint.h>

typedef void (*cd_i8_spmm_fn)(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                              const uint32_t *nqs, const int32_t *init, int32_t *acc);

// The epilogue of one output channel over n consecutive pixels.
typedef struct {
    cd_conv_quant q;   // the quantization (w_scale unused: see mult)
    cd_activation act; // applied after bias and residual
    int has_residual;  // add res
    float qmin, qmax;  // the output type's range
} cd_i8_epilogue;

// dst[i] = the epilogue of acc[i] (kernels/op-desc.h): res (floats, or
// u8/s8 when q.res_int; NULL without residual) at the same index, dst float
// or u8/s8 (q.dst_int).
typedef void (*cd_i8_epilogue_fn)(const cd_i8_epilogue *e, float mult, float bias, const int32_t *acc, size_t n,
                                  const void *res, void *dst);

// A stretch of valid output pixels of a tile: accumulators m .. m+len-1 of
// the tile go to output elements out .. out+len-1 (of the first row), with
// residual elements res .. res+len-1 (out, unless one residual image, a
// border map, serves every image of the pass).
typedef struct {
    uint32_t m, len;
    size_t out, res;
} cd_i8_run;

// The epilogue of nrows output channels over a tile's runs: row r's
// accumulators at acc + r*acc_stride, its channel's mult[r] and bias[r],
// its output at element r*row_stride + run.out of dst, its residual (NULL
// without) at r*row_stride + run.res of res (floats, or 1-byte integers when
// q.res_int).
typedef void (*cd_i8_epilogue_rows_fn)(const cd_i8_epilogue *e, const float *mult, const float *bias, int nrows,
                                       const int32_t *acc, size_t acc_stride, const cd_i8_run *runs, int nruns,
                                       const void *res, void *dst, size_t row_stride);

// dst[i] = the u8 of x[i] (cd_conv_quant_in, + 128 when q->in_signed).
typedef void (*cd_i8_quant_row_fn)(const cd_conv_quant *q, const float *x, size_t n, uint8_t *dst);

// The stride-2 columns of input rows, as phase-plane rows of both column
// phases in one pass. For each of the nb planes b (the used column
// phases), input row i (src + i * src_stride, w bytes) gives plane row i
// (dst[b] + i * wph):
//   row[j] = src_row[2 * (j - j0[b]) + first[b]] ^ flip  for j0[b] <= j < j1[b]
//   row[j] = zp                                          for the other j < wph.
// first[b] is 0 or 1 and the gathered bytes lie in the row. Reads nothing
// outside the rows' w bytes and [src, src_end) (the vector bodies may read
// past a row's end up to src_end); writes exactly the plane rows.
typedef struct {
    int w, wph;                 // input row bytes, plane row bytes
    int nb;                     // planes: 1 or 2
    int j0[2], j1[2], first[2]; // per plane
    uint8_t zp, flip;           // the pads' byte; 0x80 for s8 input, else 0
} cd_i8_s2_rows;

typedef void (*cd_i8_s2_rows_fn)(const cd_i8_s2_rows *g, const uint8_t *src, const uint8_t *src_end, size_t src_stride,
                                 size_t nrows, uint8_t *const dst[2]);

// The stride-1 columns of input rows as plane rows (the only column phase
// of a stride_w 1 layer). Input row i (src + i * src_stride, w bytes) gives
// plane row i (dst + i * wph):
//   row[j] = src_row[j - j0] ^ flip  for j0 <= j < j0 + w
//   row[j] = zp                      for the other j < wph,
// with j0 + w <= wph. Reads nothing outside the rows' w bytes and
// [src_lo, src_end), which holds them (the vector bodies may read around a
// row within it: pass the whole tensor's bounds); writes exactly the plane
// rows.
typedef struct {
    int w, wph, j0;   // input row bytes, plane row bytes, left pads
    uint8_t zp, flip; // the pads' byte; 0x80 for s8 input, else 0
} cd_i8_s1_rows;

typedef void (*cd_i8_s1_rows_fn)(const cd_i8_s1_rows *g, const uint8_t *src, const uint8_t *src_lo,
                                 const uint8_t *src_end, size_t src_stride, size_t nrows, uint8_t *dst);

// The kernel and the epilogue in one pass (no accumulators in memory), for
// a layer whose epilogue is plain (cd_i8_out_plain: u8/s8 out, no residual
// or border map, no mid grid, ReLU or none; most layers of a QDQ model).
// Row r of the call (block b's row i is b*NR + i) writes, for each run,
// accumulators m .. m+len-1 of the tile to elements r * row_stride +
// run.out .. of dst; the bytes are those the epilogue writes from the
// accumulators of the kernels above. (A residual block's epilogue, done
// the same way, measured no faster: its arithmetic, not the accumulators'
// store and reload, bounds it.)
typedef struct {
    const cd_i8_epilogue *e;
    const float *mult, *bias; // of the call's row 0
    uint8_t *dst;             // the call's row 0
    size_t row_stride;        // elements between rows
    const cd_i8_run *runs;
    int nruns;
} cd_i8_out;

typedef void (*cd_i8_spmm_out_fn)(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w,
                                  const uint32_t *nq, const uint32_t *nqs, const int32_t *init, const cd_i8_out *o);

static inline int cd_i8_out_plain(const cd_i8_epilogue *e) {
    const cd_conv_quant *q = &e->q;
    return !e->has_residual && q->dst_int && q->out_scale > 0.0f && !(q->mid_scale > 0.0f) &&
           (e->act.kind == CD_ACT_RELU || e->act.kind == CD_ACT_NONE);
}

// What one ISA brings.
typedef struct {
    const char *name1, *name4;           // kernel names (CSR, BSR4)
    cd_i8_spmm_fn csr, bsr4;             // NR 1 and NR 4
    cd_i8_spmm_out_fn csr_out, bsr4_out; // with the plain epilogue; NULL below AVX-512
    int tile;                            // pixels per call
    int short_quads;                     // 1: the kernels gain from short quads (nqs)
    cd_i8_epilogue_rows_fn epilogue;
    cd_i8_quant_row_fn quant_row;
    cd_i8_s2_rows_fn s2_rows;
    cd_i8_s1_rows_fn s1_rows;
} cd_i8_isa_info;

// The kernels of `isa` (VNNI, AVX512F, AVX2, SCALAR), or NULL when the CPU
// (or the cap) does not run it.
const cd_i8_isa_info *cd_i8_isa(cd_sparse_isa isa);

// The portable definitions (the vector ones call the per-run epilogue for
// the activations they do not vectorize).
void cd_i8_epilogue_rows__scalar(const cd_i8_epilogue *e, const float *mult, const float *bias, int nrows,
                                 const int32_t *acc, size_t acc_stride, const cd_i8_run *runs, int nruns,
                                 const void *res, void *dst, size_t row_stride);
void cd_i8_epilogue__scalar(const cd_i8_epilogue *e, float mult, float bias, const int32_t *acc, size_t n,
                            const void *res, void *dst);
void cd_i8_quant_row__scalar(const cd_conv_quant *q, const float *x, size_t n, uint8_t *dst);
void cd_i8_s2_rows__scalar(const cd_i8_s2_rows *g, const uint8_t *src, const uint8_t *src_end, size_t src_stride,
                           size_t nrows, uint8_t *const dst[2]);
void cd_i8_s1_rows__scalar(const cd_i8_s1_rows *g, const uint8_t *src, const uint8_t *src_lo, const uint8_t *src_end,
                           size_t src_stride, size_t nrows, uint8_t *dst);

#define CD_I8_DECLARE(isa)                                                                                           \
    void cd_i8_spmm_csr__##isa(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w,                  \
                               const uint32_t *nq, const uint32_t *nqs, const int32_t *init, int32_t *acc);          \
    void cd_i8_spmm_bsr4__##isa(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w,                 \
                                const uint32_t *nq, const uint32_t *nqs, const int32_t *init, int32_t *acc);         \
    void cd_i8_epilogue_rows__##isa(const cd_i8_epilogue *e, const float *mult, const float *bias, int nrows,        \
                                    const int32_t *acc, size_t acc_stride, const cd_i8_run *runs, int nruns,         \
                                    const void *res, void *dst, size_t row_stride);                                  \
    void cd_i8_quant_row__##isa(const cd_conv_quant *q, const float *x, size_t n, uint8_t *dst);                     \
    void cd_i8_s2_rows__##isa(const cd_i8_s2_rows *g, const uint8_t *src, const uint8_t *src_end, size_t src_stride, \
                              size_t nrows, uint8_t *const dst[2]);                                                  \
    void cd_i8_s1_rows__##isa(const cd_i8_s1_rows *g, const uint8_t *src, const uint8_t *src_lo,                     \
                              const uint8_t *src_end, size_t src_stride, size_t nrows, uint8_t *dst);
CD_I8_DECLARE(avx512vnni)
CD_I8_DECLARE(avx512f)
#define CD_I8_DECLARE_OUT(isa)                                                                                        \
    void cd_i8_spmm_csr_out__##isa(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w,               \
                                   const uint32_t *nq, const uint32_t *nqs, const int32_t *init, const cd_i8_out *o); \
    void cd_i8_spmm_bsr4_out__##isa(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w,              \
                                    const uint32_t *nq, const uint32_t *nqs, const int32_t *init, const cd_i8_out *o);
CD_I8_DECLARE_OUT(avx512vnni)
CD_I8_DECLARE_OUT(avx512f)
#undef CD_I8_DECLARE_OUT
CD_I8_DECLARE(avx2)
void cd_i8_spmm_csr__scalar(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                            const uint32_t *nqs, const int32_t *init, int32_t *acc);
void cd_i8_spmm_bsr4__scalar(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                             const uint32_t *nqs, const int32_t *init, int32_t *acc);
#undef CD_I8_DECLARE

// Pixels per call of the scalar kernels.
#define CD_I8_SCALAR_TILE 16

#endif // CD_SPARSE_I8_SPMM_H
