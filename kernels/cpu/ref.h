#ifndef CD_KERNELS_CPU_REF_H
#define CD_KERNELS_CPU_REF_H

// Reference kernels: the plainest correct loops, NCHW float32. Every fast
// kernel (CPU, sparse, HIP) is tested against these. Not for production use.

#include "kernels/op-desc.h"

#include <stddef.h>
#include <stdint.h>

// dst[n,k,oh,ow] = act(sum w[k,c',r,s] * src[n,g*C/G+c',ih,iw] + bias[k]
//                      (+ residual[n,k,oh,ow] when d->has_residual)).
// src NCHW, w OIHW (I = c/groups), bias K or NULL, residual shaped like dst or
// NULL. d->oh and d->ow must be set (see cd_conv_out_dims).
void cd_ref_conv2d(const cd_conv_desc *d, const float *src, const float *w, const float *bias, const float *residual,
                   float *dst);

// int8 convolution (kernels/op-desc.h cd_conv_quant), NCHW. The s32
// accumulators: acc[n,k,oh,ow] = sum (xq - in_zp) * wq over the taps inside
// the input (a padding tap adds 0), xq the integers of the input (n x c x h x
// w), wq OIHW s8.
void cd_ref_conv2d_i8_acc(const cd_conv_desc *d, const int32_t *xq, int in_zp, const int8_t *wq, int32_t *acc);
// The whole op: src float32 grid values (q->src_int 0) or u8/s8 integers
// (src_int 1, as uint8_t/int8_t), dst float32 or integers likewise,
// residual shaped like dst (float32, or integers when q->res_int) or NULL,
// bias K floats or NULL.
void cd_ref_conv2d_i8(const cd_conv_desc *d, const cd_conv_quant *q, const void *src, const int8_t *wq,
                      const float *bias, const void *residual, void *dst);

// Max or average pooling, NCHW. d->oh/d->ow must be set (cd_pool_out_dims).
void cd_ref_pool2d(const cd_pool_desc *d, const float *src, float *dst);
// Fills d->oh and d->ow (honours ceil_mode, ONNX rule).
void cd_pool_out_dims(cd_pool_desc *d);

// ---- references for the other operators (kernels/cpu/ref-*.c) -------------

// Fully connected: dst[m,n] = act(sum_k src[m,k] * w[n,k] + bias[n]).
// src M x K row-major, w N x K row-major (already transposed/scaled at load),
// bias N or NULL.
void cd_ref_gemm(int m, int n, int k, const float *src, const float *w, const float *bias, cd_activation act,
                 float *dst);

// Elementwise a (op) b with NumPy broadcasting, then act. All three shapes are
// given at the same rank (pad shorter ones with leading 1s); each dim of a and
// b equals the dst dim or 1.
void cd_ref_binary(cd_binary_kind kind, int rank, const int64_t *a_shape, const float *a, const int64_t *b_shape,
                   const float *b, const int64_t *dst_shape, cd_activation act, float *dst);

// a (kind) b for one pair of values: the element operation of cd_ref_binary
// (also what compaction folds constants with).
float cd_ref_binary_op(cd_binary_kind kind, float a, float b);

// dst[i] = act(src[i]) for n elements (src may equal dst).
void cd_ref_activation(cd_activation act, size_t n, const float *src, float *dst);

// Fake quantization (kernels/op-desc.h cd_fakequant_apply) of n elements:
// per tensor (d->channels 1: scale[0], zero_point[0]) or per channel, the
// channel of element i being i / inner % d->channels (NCHW: inner is the
// product of the dims after d->axis). src may equal dst.
void cd_ref_fakequant(const cd_fakequant_desc *d, size_t n, size_t inner, const float *scale, const float *zero_point,
                      const float *src, float *dst);
// The dynamic form (d->dynamic): items of per_item elements, each quantized
// with the parameters of its own minimum and maximum (cd_dynquant_params).
void cd_ref_fakequant_dynamic(const cd_fakequant_desc *d, size_t items, size_t per_item, const float *src, float *dst);

// Softmax over the middle axis of an [outer, len, inner] array.
void cd_ref_softmax(size_t outer, size_t len, size_t inner, const float *src, float *dst);

// dst = src transposed: dst dim i is src dim perm[i]. shape is src's.
void cd_ref_transpose(int rank, const int64_t *shape, const int *perm, const float *src, float *dst);

// Concatenates n arrays along axis. Each srcs[i] has shape shapes[i] (rank
// dims), equal to the others except along axis.
void cd_ref_concat(int rank, int axis, int n, const int64_t *const *shapes, const float *const *srcs, float *dst);

// Layout conversion between any two layouts of kernels/op-desc.h (NCHW and
// the blocked ones: channels padded to a multiple of the block, blocks
// innermost). Padding channels are written as 0.
void cd_ref_reorder(cd_layout from, cd_layout to, int n, int c, int h, int w, const float *src, float *dst);
// Elements of an n,c,h,w activation stored in layout l (padding included).
size_t cd_layout_numel(cd_layout l, int n, int c, int h, int w);

// ---- pad, slice, reductions, layer norm (ref-pad-slice.c, ref-reduce.c) ----

// dst = src padded as d says (kernels/op-desc.h cd_pad_desc), any rank up
// to CD_MAX_RANK; shapes include the batch. REFLECT needs every padded dim
// of src to have at least 2 elements unless its pads are 0 (ONNX's rule: the
// lowering checks it).
void cd_ref_pad(const cd_pad_desc *d, int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape,
                float *dst);

// dst = the strided selection of src (cd_slice_desc) of shape dst_shape.
// elem is the element size in bytes (4 for float activations, 8 when the
// lowering folds integer shape constants).
void cd_ref_slice(const cd_slice_desc *d, int rank, const int64_t *src_shape, const void *src, const int64_t *dst_shape,
                  void *dst, size_t elem);

// The same as cd_ref_slice on floats, as one memcpy per contiguous run
// (kernels/cpu/slice-runs.c: the CPU backend's kernel; not a reference).
void cd_cpu_slice_runs(const cd_slice_desc *d, int rank, const int64_t *src_shape, const float *src,
                       const int64_t *dst_shape, float *dst);

// 1 when perm keeps dim 0, rotates dims 1..keep-1 so that dim split comes
// first and keeps dims keep.. in place (NCHW -> NHWC: split 2, keep 4;
// NHWC -> NCHW: split 3, keep 4; the channel shuffle 0,2,1,3,4: split 2,
// keep 3), with *split and *keep set; else 0. Then cd_cpu_transpose_2d with
// them equals cd_ref_transpose, as a tiled transpose per item
// (kernels/cpu/transpose-2d.c: the CPU backend's kernel; not a reference).
int cd_cpu_transpose_rotation(int rank, const int *perm, int *split, int *keep);
void cd_cpu_transpose_2d(int rank, const int64_t *shape, int split, int keep, const float *src, float *dst);

// Sum, mean or max of src over the dims in d->mask; dst holds the kept dims
// in order. A dim of size 0 is not allowed.
void cd_ref_reduce(const cd_reduce_desc *d, int rank, const int64_t *src_shape, const float *src, float *dst);

// Layer normalization of rows rows of d->len (cd_layernorm_desc), gamma and
// beta d->len values (beta may be NULL).
void cd_ref_layernorm(const cd_layernorm_desc *d, int64_t rows, const float *src, const float *gamma, const float *beta,
                      float *dst);

// ---- resize, transposed conv (ref-resize.c) ----

// dst (batch x c x oh x ow) = src (batch x c x h x w) resized as d says.
void cd_ref_resize(const cd_resize_desc *d, int batch, const float *src, float *dst);

// dst (batch x k x oh x ow) = act(ConvTranspose(src, w) + bias), w in ONNX's
// [c][k / groups][r][s] layout, bias k values or NULL.
void cd_ref_deconv(const cd_deconv_desc *d, int batch, const float *src, const float *w, const float *bias, float *dst);

#endif // CD_KERNELS_CPU_REF_H
