#ifndef CD_SPARSE_SPARSE_CONV_H
#define CD_SPARSE_SPARSE_CONV_H

// Sparse convolution and FC on the CPU, NCHW float32, for the runtime's
// planner. All weight-dependent work (analysis, format choice, packing, the
// choice of micro-kernel) happens in cd_sparse_conv_create; a run only pads
// the input when the geometry needs it and computes.
//
// How a layer runs (per image and group):
//   - 1x1, stride 1, no padding: SpMM directly on the NCHW planes, the H*W
//     pixels of a channel contiguous (each nonzero = one input plane), or
//     on a copy with aligned planes ("plane") when H*W is not a multiple of
//     the vector;
//   - every other conv: the input is zero-padded and split into stride phases
//     ("phase planes": rows i*stride_h + a, columns j*stride_w + b), so every
//     nonzero (c, r, s) is one shifted-plane offset and the output pixels of
//     a row are contiguous reads (sparse direct convolution, no im2col);
//     stride-2 1x1 is the special case of one phase (a subsample);
//     3x3 CSR layers at column stride 1 or 2 on AVX-512 or AVX2 whose rows
//     pad to whole vectors (16 or 8 floats) by at most 1/8 (stride 1: 56,
//     28, 14 wide, not 7; stride 2: 28, 14 wide outputs; on AVX2 not 56,
//     where one call per row wins by the cost model) take the aligned-shift
//     kernel (sparse/spmm-shift.h): pitch padded, offsets without the
//     column tap's lane shift, every load aligned (AVX-512: stride 1 ~1.4x,
//     stride 2 ~1.15x faster; AVX2 1.1-1.3x; measured;
//     cd_sparse_conv_info.shift);
//     k x k CSR layers with at most 64 output pixels (7x7) denser than 15%
//     take im2col planes instead on AVX-512 and AVX2 (one aligned plane of
//     the output's size per channel and tap; cd_sparse_conv_options.im2col);
//   - FC (1x1 kernel on a 1x1 input): SpMM with the batch as the pixel axis.
// The prepared input of an image is made band by band (bands of output rows,
// at least one per thread, each at most ~640 KiB of planes), each band right
// before it runs, in its thread's slot of the workspace (one slot per
// thread of create, reused band after band, so it stays in L2); on AVX-512
// and AVX2 a plane row is one or two vector loads per vector of output
// (sparse/band-rows.h; the portable code copies between memsets);
// planes are padded to whole
// 64-byte lines, so 1x1 layers whose H*W is not a multiple of 16 floats run
// on an aligned copy too (split loads cost ~1.7x).
// Input channels are split into column blocks sized so that one pass of ~64
// pixels keeps its input rows in L1 (bigger, up to ~32 nonzeros per output
// row and 64 KiB per pass, when the input fits 1 MiB); each block is packed
// apart and later blocks accumulate onto the output of earlier ones.
// Bias, the residual add and the activation are fused into the kernels
// (clamp-type activations) or applied right after them on data still in
// cache (the others). Work runs in one OpenMP parallel region per call.

#include "kernels/op-desc.h"
#include "sparse/spmm-ukernel.h"

#include <stddef.h>

typedef enum {
    CD_SPARSE_FMT_AUTO = 0, // the cheapest by a per-weight cost model: CSR 3,
                            // BSR4 1/fill(4x1), BSR8 0.7/fill(8x1)
    CD_SPARSE_FMT_CSR = 1,  // one block per output channel
    CD_SPARSE_FMT_BSR4 = 2, // blocks of 4 output channels (4x1)
    CD_SPARSE_FMT_BSR8 = 3, // blocks of 8 output channels (8x1)
} cd_sparse_format;

typedef struct {
    cd_sparse_format format; // AUTO chooses from the weights
    cd_sparse_isa isa;       // AUTO: cd_sparse_isa_best(); else forced (tests, tuning)
    int cin_block;           // input channels per column block: 0 = sized so a
                             // pass's input rows stay in L1; > 0 forces it
    int shift;               // aligned-shift CSR path (k x k, S <= 3, column
                             // stride 1 or 2, AVX-512 or AVX2, pitch padded
                             // to the vector):
                             // 0 = where measured faster, 1 = wherever
                             // eligible (tests), -1 = never (A/B benches)
    int im2col;              // k x k layers with at most IM2COL pixels of
                             // output (7x7) on AVX-512 or AVX2: one aligned plane per
                             // (channel, tap) instead of shifted planes:
                             // 0 = auto, 1 = wherever eligible, -1 = never
} cd_sparse_conv_options;

typedef struct cd_sparse_conv cd_sparse_conv;

// What a created layer chose (for `convctl plan` and logs).
typedef struct {
    cd_sparse_format format; // never AUTO
    cd_sparse_isa isa;       // never AUTO
    const char *kernel;      // micro-kernel of the main blocks
    const char *tail_kernel; // micro-kernel of leftover rows (CSR one) or NULL
    const char *mode;        // "direct", "plane", "rows", "junk", "fc" or "im2col"
    size_t nnz;              // nonzero weights
    size_t entries;          // stored block entries (each NR weights)
    double fill;             // nnz / stored weights
    size_t packed_bytes;     // size of the packed weights
    int cin_blocks;          // input-channel blocks the weights are split into
    int bands;               // bands of output rows the input is prepared
                             // and run in (1 for "direct" and "fc")
    int shift;               // column taps folded by the aligned-shift
                             // kernel (sparse/spmm-shift.h), 0 when unused
} cd_sparse_conv_info;

// Creates a sparse conv for desc d (d->n is ignored: the batch is per run;
// d->oh/ow are recomputed), weights OIHW (K x C/groups x R x S), bias (K
// floats) or NULL, and options (NULL = all AUTO). Works for any sparsity,
// including an all-zero layer. Returns 0 and *out, CD_EPARAMS (bad shape),
// CD_EUNSUPPORTED (ISA or format unavailable on this CPU, sizes beyond
// 32-bit offsets) or CD_ENOMEM.
int cd_sparse_conv_create(const cd_conv_desc *d, const float *w_oihw, const float *bias,
                          const cd_sparse_conv_options *opt, cd_sparse_conv **out);

// Bytes of scratch cd_sparse_conv_run_ws needs for `batch` images (0 when
// the layer runs straight on its input). It holds a slot per OpenMP thread
// at create; a run uses at most that many threads.
size_t cd_sparse_conv_workspace_size(const cd_sparse_conv *h, int batch);

// dst (batch x K x OH x OW) = act(conv(src) + bias (+ residual)). residual is
// shaped like dst and required iff the desc has has_residual. ws holds
// cd_sparse_conv_workspace_size(h, batch) bytes, 64-byte aligned (NULL when
// that is 0). Thread-safe for concurrent calls with distinct ws. Returns 0 or
// CD_EPARAMS.
int cd_sparse_conv_run_ws(const cd_sparse_conv *h, const float *src, const float *residual, float *dst, int batch,
                          void *ws);

// As cd_sparse_conv_run_ws with a workspace allocated for the call. Returns 0,
// CD_EPARAMS or CD_ENOMEM.
int cd_sparse_conv_run(const cd_sparse_conv *h, const float *src, const float *residual, float *dst, int batch);

// Frees h (NULL is fine).
void cd_sparse_conv_free(cd_sparse_conv *h);

// Fills *info for h. Returns 0.
int cd_sparse_conv_get_info(const cd_sparse_conv *h, cd_sparse_conv_info *info);

// 1 when layers in `format` can run with `isa` on this CPU (AUTO = best).
int cd_sparse_conv_available(cd_sparse_format format, cd_sparse_isa isa);

// 1 when d is a conv the sparse convs (float32 and int8) take: positive
// sizes, groups dividing both channel counts, at most 64 stride phases, and
// every derived size far from int overflow.
int cd_sparse_conv_desc_ok(const cd_conv_desc *d);

// "auto", "csr", "bsr4", "bsr8".
const char *cd_sparse_format_name(cd_sparse_format format);

#endif // CD_SPARSE_SPARSE_CONV_H
