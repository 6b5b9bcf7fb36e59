#ifndef CD_SPARSE_SPARSE_CONV_I8_H
#define CD_SPARSE_SPARSE_CONV_I8_H

// Sparse int8 convolution on the CPU, NCHW, for quantized models
// (kernels/op-desc.h cd_conv_quant: u8/s8 activations with a zero point,
// per-channel symmetric s8 weights, s32 accumulation, the shared epilogue).
// Results equal kernels/cpu/ref-conv-i8.c's bit for bit.
//
// How a layer runs. The input is prepared per run as u8 "phase planes"
// (s8 inputs get +128, the zero point with them): for each input channel
// and each used stride phase (a, b), rows i*stride_h + a and columns
// j*stride_w + b of the input padded with the zero point, so every nonzero
// (c, r, s) reads one plane at one constant offset and the output pixels
// (oh, ow) are the plane pixels oh*wph + ow ("junk" columns ow >= OW and
// rows oh >= OH are computed and dropped). 1x1 stride-1 unpadded layers are
// the case where that plane is the input channel itself (nothing dropped).
// Float inputs (src_int 0) are quantized while the planes are written.
// Stride-2 columns are gathered a row at a time for every column phase
// (sparse/i8-spmm.h cd_i8_s2_rows), pads included.
// Images of a batch are folded into the pixel axis (up to `fold` per pass:
// their planes one after another), so one pass over the weights serves
// them all and small planes (7x7, 14x14) still fill whole tiles.
// Padding holds the zero point; each row's accumulator starts at
// -zp * (sum of its weights), so pads contribute exactly 0.
//
// The micro-kernels (sparse/i8-spmm.h) put pixels in the vector lanes and
// reduce 4 nonzeros of a row per 32-bit lane: the 4 input rows of a quad of
// nonzeros (whatever their columns) are interleaved byte-wise with unpacks,
// then one vpdpbusd (VNNI) or its exact 16-bit emulation (vpmaddwd on the
// even and odd bytes: AVX-512 without VNNI, AVX2; vpmaddubsw for the quads
// whose weights are all in [-64, 64], packed first) per 4 nonzeros; with BSR
// 4x1 one interleave serves 4 output channels. Not done: column blocking
// (the f32 kernels' cin blocks), FC-specific paths (an FC runs as a 1x1
// conv on a 1x1 input: correct, folded over the batch, not tuned).

#include "kernels/op-desc.h"
#include "sparse/sparse-conv.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cd_sparse_conv_i8 cd_sparse_conv_i8;

// Creates an int8 sparse conv. d: geometry (any stride, pad, dilation,
// groups; d->n ignored, oh/ow recomputed); wq: OIHW s8 weights; bias: K
// floats or NULL; q: the quantization (q->w_scale K floats, copied; nothing
// of q is kept by pointer); opt: format (AUTO, CSR or BSR4) and ISA forcing
// (NULL = auto). d->border (a map added to every image, kernels/op-desc.h) is
// copied. Returns 0 and *out, CD_EPARAMS (bad shape or quantization),
// CD_EUNSUPPORTED (ISA unavailable, BSR8, sizes beyond 32-bit offsets, a
// border map with a residual or a mid rounding) or CD_ENOMEM.
int cd_sparse_conv_i8_create(const cd_conv_desc *d, const int8_t *wq, const float *bias, const cd_conv_quant *q,
                             const cd_sparse_conv_options *opt, cd_sparse_conv_i8 **out);

// Bytes of scratch a run of `batch` images needs (64-byte aligned), for the
// threads of create. 0 for batch < 1.
size_t cd_sparse_conv_i8_workspace_size(const cd_sparse_conv_i8 *h, int batch);

// dst = the int8 conv of src. src NCHW: float grid values (src_int 0) or
// u8/s8 (src_int 1); dst NCHW: float (dst_int 0: y, or its grid value when
// out_scale > 0) or u8/s8 (dst_int 1). residual: NCHW shaped like dst, float
// or u8/s8 (res_int 1), required iff d->has_residual. ws: cd_sparse_conv_i8_workspace_size bytes,
// 64-byte aligned. Thread-safe with distinct ws. Returns 0 or CD_EPARAMS.
int cd_sparse_conv_i8_run_ws(const cd_sparse_conv_i8 *h, const void *src, const void *residual, void *dst, int batch,
                             void *ws);

// As cd_sparse_conv_i8_run_ws, but writes the raw s32 accumulators
// (batch x K x OH x OW, kernels/cpu/ref-conv-i8.c cd_ref_conv2d_i8_acc's)
// instead of the epilogue's output: for tests. Returns 0 or CD_EPARAMS.
int cd_sparse_conv_i8_run_acc(const cd_sparse_conv_i8 *h, const void *src, int32_t *acc, int batch, void *ws);

// The preparation alone: what a run does before its multiplies (the u8
// planes of each fold of images, in turn, into ws), for benchmarks and
// tests. Returns 0 or CD_EPARAMS.
int cd_sparse_conv_i8_prepare_ws(const cd_sparse_conv_i8 *h, const void *src, int batch, void *ws);

// Fills *info (mode: "direct" for 1x1 stride-1 unpadded, else "planes";
// cin_blocks and bands 1, shift 0). Returns 0.
int cd_sparse_conv_i8_get_info(const cd_sparse_conv_i8 *h, cd_sparse_conv_info *info);

// Images folded into one pass (the workspace holds planes for that many).
int cd_sparse_conv_i8_fold(const cd_sparse_conv_i8 *h);

// Frees h (NULL is fine).
void cd_sparse_conv_i8_free(cd_sparse_conv_i8 *h);

#endif // CD_SPARSE_SPARSE_CONV_I8_H
