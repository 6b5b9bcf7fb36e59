#ifndef CD_BACKENDS_CPU_DNNL_H
#define CD_BACKENDS_CPU_DNNL_H

// Dense CPU operators on oneDNN (Debian's libdnnl 2.6, OpenMP threading).
//
// The contract for the CPU backend, in short:
//
//  * Create every operator at model load (cd_dnnl_*_create). All
//    weight-dependent work happens there: weights are reordered ("packed")
//    into the layout oneDNN's chosen implementation wants, bias is copied, the
//    primitive for batch 1 is created. The caller may free its weights right
//    after create returns.
//  * oneDNN primitives are shape-specific, so an operator holds one primitive
//    per batch size 1..max_batch. They are created lazily by the first run with
//    that batch, or eagerly by cd_dnnl_op_prepare (call it at load for every
//    batch size you will use if first-request latency matters: creating a conv
//    primitive costs 0.1-2 ms).
//  * Per call only compute runs: cd_dnnl_op_run wraps the caller's buffers
//    (no copies, except a residual that is not already in dst), executes and
//    waits.
//
// Layouts (kernels/op-desc.h): CD_LAYOUT_NCHW is plain NCHW. CD_LAYOUT_NCHW16C
// and CD_LAYOUT_NCHW8C are oneDNN's nChw16c / nChw8c: [N][ceil(C/B)][H][W][B];
// channels padded to a multiple of B. CD_LAYOUT_NHWC is plain nhwc, the
// layout of the int8 conv's integer activations (cd_dnnl_conv_i8_create).
// Size buffers with
// cd_dnnl_tensor_floats(). Padded channels of every blocked input must be
// zero; every operator here writes zeros into the padded channels of a blocked
// output (oneDNN's rule), so a chain of these operators keeps that invariant
// by itself. Which blocked layout is fast depends on the CPU:
// cd_dnnl_blocked_layout(). Buffers need no particular alignment
// (64-byte alignment is faster).
//
// Threads and sharing:
//
//  * One process-wide engine (created by cd_dnnl_init). cd_dnnl_set_threads
//    sets the OpenMP team size every cd_dnnl_op_run uses, on whatever thread
//    calls it (the count is applied to the calling thread at the start of each
//    run, because OpenMP's thread count is per calling thread). The runtime
//    calls it from cd_runtime_init. Several worker threads each running a
//    kernel each open their own OpenMP team: 2 workers x 2 threads on 2 cores
//    oversubscribe; size workers x threads to the cores.
//  * A cd_dnnl_op is shared by all workers: after create it is read-only
//    except for the lazy per-batch primitive slots, which are filled under a
//    mutex inside the op (double-checked, atomic publish). oneDNN primitives are
//    safe to execute concurrently because every primitive here is created with
//    the user-managed scratchpad.
//  * A cd_dnnl_ctx is per worker (never used by two threads at once): it owns
//    the dnnl stream and the scratchpad buffer. The scratchpad grows on demand
//    inside run (the only allocation a run may do); reserve it at load with
//    cd_dnnl_ctx_reserve(ctx, max of the sizes cd_dnnl_op_prepare reports) to
//    keep runs allocation-free.
//
// Errors: functions return 0 or a negative CD_E* code (core/errors.h). A
// failing oneDNN call is logged once (core/log.h) with the call, file:line and
// status name, and converted: dnnl_out_of_memory -> CD_ENOMEM,
// dnnl_unimplemented -> CD_EUNSUPPORTED, anything else -> CD_EINTERNAL.
// Nothing aborts. Arguments outside the documented ranges give CD_EPARAMS.
//
// The *_supports() queries answer "can create() build this?" by trying to
// build the oneDNN primitive for batch 1 (cheap; oneDNN caches primitive
// descriptors). They return 1 or 0 and never log.

#include "backends/backend-opts.h"
#include "kernels/op-desc.h"

#include <stddef.h>
#include <stdint.h>

// ---- process-wide ------------------------------------------------------------

// Creates the CPU engine. Idempotent and thread-safe; every create function
// calls it. Returns 0, or CD_EINTERNAL when oneDNN has no CPU engine.
int cd_dnnl_init(void);

// Sets the OpenMP thread count used by every later run (n >= 1; values above
// omp_get_num_procs() are allowed but oversubscribe). Also applies it to the
// calling thread at once. Returns 0 or CD_EPARAMS.
int cd_dnnl_set_threads(int n);
// The thread count runs use (omp_get_max_threads() of the first caller until
// cd_dnnl_set_threads is called).
int cd_dnnl_get_threads(void);

// The blocked layout oneDNN's fast convolutions use on this CPU, decided once
// by letting oneDNN choose the source layout of a 3x3 conv (format_tag::any)
// and checking that it builds a kernel other than its reference loop there:
// NCHW16C on AVX-512, NCHW8C on AVX2 (or under ONEDNN_MAX_CPU_ISA=AVX2); NCHW
// when no blocked layout runs fast. An nChw16c conv on an AVX2-only CPU runs
// oneDNN's reference loop, about 1000x slower than nChw8c there.
cd_layout cd_dnnl_blocked_layout(void);

// oneDNN's effective instruction set, e.g. "avx512_core", "avx2" (honours
// ONEDNN_MAX_CPU_ISA).
const char *cd_dnnl_isa(void);

// 1 when a oneDNN implementation name (cd_dnnl_op_impl) is one of its
// reference loops ("ref:any", ...), the slow last resort.
int cd_dnnl_impl_is_reference(const char *impl);

// Floats needed for an activation tensor of n x c x h x w in layout l
// (the blocked layouts pad c up to a multiple of their block). 0 for a bad
// layout.
size_t cd_dnnl_tensor_floats(cd_layout l, int n, int c, int h, int w);

// ---- per-worker context --------------------------------------------------------

typedef struct cd_dnnl_ctx cd_dnnl_ctx;

// Creates a context (stream + empty scratchpad). 0, CD_ENOMEM or CD_EINTERNAL.
int cd_dnnl_ctx_create(cd_dnnl_ctx **out);
// Grows the scratchpad to at least bytes (never shrinks). 0 or CD_ENOMEM.
int cd_dnnl_ctx_reserve(cd_dnnl_ctx *ctx, size_t bytes);
// Current scratchpad capacity in bytes.
size_t cd_dnnl_ctx_scratch_bytes(const cd_dnnl_ctx *ctx);
void cd_dnnl_ctx_free(cd_dnnl_ctx *ctx);

// ---- operators: common handle -----------------------------------------------------

// One dense operator (any kind below), shared by all workers.
typedef struct cd_dnnl_op cd_dnnl_op;

// Makes sure the primitive for this batch size exists (1 <= batch <=
// max_batch) and reports the scratchpad bytes one run needs (scratch_bytes may
// be NULL). 0, CD_EPARAMS, or the creation error.
int cd_dnnl_op_prepare(cd_dnnl_op *op, int batch, size_t *scratch_bytes);

// Runs the operator on batch items (1 <= batch <= max_batch). src holds
// nsrc pointers as listed per kind below; dst is written entirely (including
// NCHW16C channel padding). Returns 0, CD_EPARAMS (batch out of range, nsrc
// wrong, NULL pointer), CD_ENOMEM (scratchpad growth) or CD_EINTERNAL.
// The ctx must not be used by another thread during the call.
int cd_dnnl_op_run(cd_dnnl_op *op, cd_dnnl_ctx *ctx, int batch, int nsrc, const float *const *src, float *dst);
// The same for operators whose tensors are not all float32 (the int8 conv):
// each pointer is the tensor's bytes in the type its create documents.
// cd_dnnl_op_run is this with float pointers.
int cd_dnnl_op_run_any(cd_dnnl_op *op, cd_dnnl_ctx *ctx, int batch, int nsrc, const void *const *src, void *dst);

// Bytes of packed weights and bias the op owns (0 for weightless ops).
size_t cd_dnnl_op_weight_bytes(const cd_dnnl_op *op);

// oneDNN's implementation name for this batch size (e.g.
// "jit:avx512_core", "gemm:jit"), for `convctl plan`; creates the primitive
// if needed. A static string "?" when it cannot be built. The pointer stays
// valid until the op is freed.
const char *cd_dnnl_op_impl(cd_dnnl_op *op, int batch);

// Frees the op and everything it owns. NULL is a no-op. No run may be in
// flight.
void cd_dnnl_op_free(cd_dnnl_op *op);

// ---- convolution -------------------------------------------------------------------
//
// dst = act(conv(src, w) + bias [+ residual]) in one oneDNN primitive (bias
// fused, residual via a sum post-op, activation via eltwise post-ops).
// d->n is ignored (the batch is per call); d->oh/d->ow must be set
// (cd_conv_out_dims). w is OIHW with I = c / groups, bias K floats or NULL.
// run: nsrc = 1 {src}, or nsrc = 2 {src, residual} when d->has_residual. The
// residual has dst's shape and layout; pass residual == dst (the arena keeps the
// skip tensor in the output buffer) to save a copy: otherwise it is copied into
// dst before the conv. src must not overlap dst.
// Any group count that divides c and k works (depthwise included); src and dst
// layouts are independent (NCHW src -> NCHW16C dst is the usual first layer).

int cd_dnnl_conv_supports(const cd_conv_desc *d, cd_layout src, cd_layout dst);
int cd_dnnl_conv_create(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                        const float *bias, cd_dnnl_op **out);
// The same, with our own kernels offered beside oneDNN's as the CPU
// backend's switches say (backend-opts.h: winograd, dw3x3; NULL: the
// defaults, auto: each timed against oneDNN's at create).
int cd_dnnl_conv_create_sw(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                           const float *bias, const cd_backend_opts *sw, cd_dnnl_op **out);
// The same with a FakeQuant per tensor of the output after the act
// (fq: scale, zero point, qmin, qmax; kernels/op-desc.h cd_fakequant_apply,
// bit for bit: oneDNN divides by the scale, rounds half to even, clamps and
// multiplies back in its epilogue; our depthwise kernel, when it times
// faster for d, does the same ops in its own). When a Winograd conv times
// faster for d, CD_EUNSUPPORTED (the conv then runs without it and the
// FakeQuant as a layer of its own); also for an act other than none, Relu or
// Clip.
int cd_dnnl_conv_create_fq(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                           const float *bias, const cd_backend_opts *sw, const float fq[4], cd_dnnl_op **out);
// The same in bf16, an opt-in precision (backends/cpu/dnnl-conv-bf16.c): src
// and weights rounded to bf16 (to nearest even), products accumulated in
// f32, bias, residual and act as above, dst f32. nhwc 0: the bf16 source in
// src's layout, oneDNN's jit_bf16 writing dst in place; 1: source and output
// in nhwc (oneDNN 2.6's AMX kernels take nothing else), reordered at both
// ends. CD_EUNSUPPORTED for grouped convs (slower than f32 in bf16), where
// oneDNN has no bf16 instructions on this CPU (cd_dnnl_bf16_native), only its
// reference loop for d, or fails to make its kernel at batch 1 or max_batch
// (both are built here).
int cd_dnnl_conv_bf16_create(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, int nhwc,
                             const float *w, const float *bias, cd_dnnl_op **out);
// 1 when oneDNN runs bf16 natively here (avx512_core_bf16 or AMX, within
// ONEDNN_MAX_CPU_ISA); elsewhere it would emulate it, slower than f32.
int cd_dnnl_bf16_native(void);
// 1 when op is such a bf16 conv (made by cd_dnnl_conv_bf16_create, or kept
// by cd_dnnl_conv_create_sw's bf16 offer).
int cd_dnnl_op_is_bf16(const cd_dnnl_op *op);

// oneDNN's own Winograd conv of d (dnnl_convolution_winograd; f32 on AVX-512
// only in oneDNN 2.6), nothing else offered: a candidate of cd_wino_offer
// (backends/cpu/winograd.h). It keeps a copy of w (counted in its weight
// bytes): its per-batch weight formats are packed from it. CD_EUNSUPPORTED
// when oneDNN declines d at any batch 1..max_batch on this CPU.
int cd_dnnl_conv_create_wino(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                             const float *bias, cd_dnnl_op **out);

// ---- int8 convolution -------------------------------------------------------------
//
// The quantized conv of kernels/op-desc.h (cd_conv_quant): u8/s8 activations,
// s8 weights wq (OIHW, I = c / groups, symmetric, scales q->w_scale, K floats),
// bias K floats or NULL, s32 accumulation and the project's epilogue. Same
// d, layouts, batches, residual and errors as cd_dnnl_conv_create; run it
// with cd_dnnl_op_run_any: src and dst are in the plan's layouts (NCHW,
// NCHW16C, NCHW8C) and hold float32 grid values (q->src_int / q->dst_int 0)
// or the integers themselves as bytes (1: uint8_t, int8_t when *_signed),
// sized by cd_dnnl_tensor_floats() elements of that type. The residual
// (nsrc 2, d->has_residual) is always float32 y values in dst's layout; with
// a float32 dst (out_scale 0) passing residual == dst saves a copy.
//
// Inside, oneDNN runs its int8 kernel in the layout it picks (nhwc, u8 src)
// and the op converts at its boundary with reorders: a quantizing one of the
// f32 grid (scale 1 / in_scale, zero point) or a relayout of the integers
// (s8 shifted by +128 to u8, its zero point with it: exact) into a scratch
// tensor, and the matching one on the way out. Temporaries live in the ctx
// scratchpad (cd_dnnl_op_prepare counts them).
//
// Numerics. oneDNN 2.6 computes dst = oscale * (acc + bias) for int8, so the
// op passes bias[k] / mult[k] (mult = in_scale * w_scale[k]) and oscale =
// mult[k]: y differs from the reference's fmaf(acc, mult, bias) by float
// rounding only (well within 1e-4 of |mult * acc| + |bias|). A quantized output
// (out_scale > 0) with act NONE, RELU or CLIP and no residual is written by
// the conv itself (oscale mult / out_scale, clip bounds / out_scale, dst zero
// point); otherwise the conv writes y in f32 (sum post-op for the residual,
// any activation) and a reorder quantizes it with the scale 1 / out_scale.
// Either way q = rint(y') + out_zp where y' is y / out_scale rounded
// differently from the reference's rintf(y / out_scale): when y / out_scale
// is within float rounding of a half-integer the two round to neighbouring
// integers, so q may differ by one step there, nowhere else.
//
// A QDQ residual block (q->mid_scale > 0: y0 rounded to the mid grid, then
// + residual, act, the output's grid): the conv writes y0's integers on the
// mid grid (scale mult / mid_scale, mid zero point), a dequantizing reorder
// adds them into the residual (sum post-op), the activation runs in place,
// and the output reorder(s) follow. The mid rounding may be one mid step off
// where y0 / mid_scale sits at a half, so such an output may differ from the
// reference by ceil(mid_scale / out_scale) + 1 steps there (a float output by
// mid_scale).
// q->res_int: the residual is integers of q->res_signed's type in layout dst,
// dequantized ((r - res_zp) * res_scale, a reorder in dst's layout) into y
// before the sum. Not implemented (supports() 0, create CD_EUNSUPPORTED): a
// two-step activation (HARDSIGMOID) after a mid rounding.
//
// supports() is 1 only on a CPU with VNNI (see below), when oneDNN builds a
// non-reference (jit) kernel for it there and q is well formed (in_scale > 0, every w_scale > 0 and
// finite, zero points in their type's range, dst_int only with out_scale > 0).
// On CPUs without VNNI (ONEDNN_MAX_CPU_ISA=AVX512_CORE, AVX2) oneDNN's u8 x s8
// kernels add pairs of products in 16 bits with saturation (vpmaddubsw), so
// create() there refuses weights outside [-64, 64] with CD_EUNSUPPORTED
// (2 * 255 * 64 fits; 7-bit weights are what oneDNN asks for on those CPUs),
// and supports() answers 0 there, since it cannot see the weights and
// quantizers use the whole s8 range (the planner then keeps such layers on
// another kernel). Splitting the weights into two 7-bit halves (two convs)
// would lift that; not done.
// Two oneDNN 2.6 bugs are avoided inside (tests name them): its reorder out
// of plain nchw drops a zero point for some shapes (the op quantizes in nchw,
// then relayouts), and its AVX2 strided 1x1 int8 kernel races at batch > 1
// (the op takes oneDNN's next implementation there).

int cd_dnnl_conv_i8_supports(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst);
int cd_dnnl_conv_i8_create(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst, int max_batch,
                           const int8_t *wq, const float *bias, cd_dnnl_op **out);
// The same with the residual (src 1) in layout res instead of dst's: it is
// reordered into y in any case. (An integer residual in NCHW with a zero
// point is declined: oneDNN 2.6's reorder out of nchw may drop it.)
int cd_dnnl_conv_i8_supports_res(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst,
                                 cd_layout res);
int cd_dnnl_conv_i8_create_res(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst,
                               cd_layout res, int max_batch, const int8_t *wq, const float *bias, cd_dnnl_op **out);
// Test hook: the raw s32 accumulators sum (x_q - in_zp) * w_q as int32_t in
// layout dst (channel padding zero); bias, scales, activation, residual and
// q's output fields are ignored (nsrc 1). oneDNN passes its accumulators
// through float32 even for an s32 dst, so they are exact while |acc| < 2^24.
int cd_dnnl_conv_i8_create_acc(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst,
                               int max_batch, const int8_t *wq, cd_dnnl_op **out);
// 1 when oneDNN's int8 kernels on this CPU multiply with VNNI (no 16-bit
// saturation, any s8 weights).
int cd_dnnl_has_vnni(void);

// ---- layout conversion ------------------------------------------------------------
//
// dst = src converted from layout `from` to layout `to` (either direction, or
// a plain copy when equal). run: nsrc = 1.

int cd_dnnl_reorder_supports(cd_layout from, cd_layout to, int c, int h, int w);
int cd_dnnl_reorder_create(cd_layout from, cd_layout to, int c, int h, int w, int max_batch, cd_dnnl_op **out);

// ---- pooling ------------------------------------------------------------------------
//
// Max / average pooling (d->n ignored, d->oh/ow set by cd_pool_out_dims), same
// layout in and out. Global average pooling is kind AVG with kh = h, kw = w,
// strides 1 and no padding. ceil_mode is supported except for AVG with
// count_include_pad when the last window runs past the end padding (oneDNN
// would count those cells; ONNX does not). run: nsrc = 1. The elements:
// float32, or the 1-byte integers of a quantized activation (max pooling
// only, on a jit kernel only: supports says 0 where oneDNN has just its
// reference loop).

typedef enum { CD_DNNL_F32 = 0, CD_DNNL_U8, CD_DNNL_S8 } cd_dnnl_elem;
// The elements of a planned tensor (cd_tdesc.int8, int8_signed).
static inline cd_dnnl_elem cd_dnnl_elem_of(int int8, int is_signed) {
    return !int8 ? CD_DNNL_F32 : is_signed ? CD_DNNL_S8 : CD_DNNL_U8;
}

int cd_dnnl_pool_supports(const cd_pool_desc *d, cd_layout layout, cd_dnnl_elem e);
int cd_dnnl_pool_create(const cd_pool_desc *d, cd_layout layout, cd_dnnl_elem e, int max_batch, cd_dnnl_op **out);

// ---- element-wise ---------------------------------------------------------------------

// A tensor as seen by the weightless operators: per-item dims (the batch is the
// call's), layout, and for the second operand of a binary op whether one item
// is broadcast over the batch.
typedef struct {
    int c, h, w;
    cd_layout layout;
    int batch_bcast; // binary src1 only: 1 = shape [1, c, h, w] for every batch
} cd_dnnl_tdesc;

typedef enum {
    CD_DNNL_ADD = 0, // dst = act(a + b)
    CD_DNNL_MUL = 1, // dst = act(a * b)
    CD_DNNL_MIN = 2, // dst = act(min(a, b))
    CD_DNNL_MAX = 3, // dst = act(max(a, b))
} cd_dnnl_binary_kind;

// dst = act(a op b); dst has a's shape and layout. b broadcasts numpy-style:
// each of its c, h, w is a's or 1 (e.g. the [N,C,1,1] scale of a
// squeeze-excitation block, which may be NCHW while a is NCHW16C). To broadcast
// a instead, swap the operands (both kinds commute). run: nsrc = 2 {a, b}; dst
// may equal a (in place).
// A blocked operand must be in the CPU's own blocked layout
// (cd_dnnl_blocked_layout()): another one is CD_EUNSUPPORTED (supports 0),
// since oneDNN 2.6 writes past dst for nChw8c on AVX-512.
int cd_dnnl_binary_supports(cd_dnnl_binary_kind kind, cd_dnnl_tdesc a, cd_dnnl_tdesc b, cd_activation act);
int cd_dnnl_binary_create(cd_dnnl_binary_kind kind, cd_dnnl_tdesc a, cd_dnnl_tdesc b, cd_activation act, int max_batch,
                          cd_dnnl_op **out);

// dst = act(src), same shape and layout; dst may equal src. Every cd_act kind,
// including HARDSIGMOID (two oneDNN steps: linear, then clip). run: nsrc = 1.
int cd_dnnl_eltwise_supports(cd_dnnl_tdesc t, cd_activation act);
int cd_dnnl_eltwise_create(cd_dnnl_tdesc t, cd_activation act, int max_batch, cd_dnnl_op **out);

// ---- inner product (Gemm / FC) ------------------------------------------------------
//
// dst[n, k] = act(sum_i src[n, i] * w[k, i] + bias[k]), i over the c*h*w
// elements of one item in NCHW flatten order (so a Flatten after a global pool
// needs no reorder, even from NCHW16C). w is K x (c*h*w) row-major (ONNX Gemm
// with transB = 1; transpose B and fold alpha/beta before calling otherwise),
// bias K floats or NULL. dst is plain N x K. run: nsrc = 1.
int cd_dnnl_ip_supports(cd_dnnl_tdesc src, int k);
int cd_dnnl_ip_create(cd_dnnl_tdesc src, int k, const float *w, const float *bias, cd_activation act, int max_batch,
                      cd_dnnl_op **out);

// ---- concat ---------------------------------------------------------------------------
//
// Concatenation of nsrc tensors along axis 1 (channels), 2 (H) or 3 (W) into a
// dst of layout dst_layout; inputs may mix layouts. run: nsrc = n.
int cd_dnnl_concat_supports(int n, const cd_dnnl_tdesc *srcs, int axis, cd_layout dst_layout);
int cd_dnnl_concat_create(int n, const cd_dnnl_tdesc *srcs, int axis, cd_layout dst_layout, int max_batch,
                          cd_dnnl_op **out);

// ---- softmax --------------------------------------------------------------------------
//
// Softmax along axis 1, 2 or 3 of an N x c x h x w tensor (for a classifier
// head: c classes, h = w = 1), same layout in and out. run: nsrc = 1; dst may
// equal src.
int cd_dnnl_softmax_supports(cd_dnnl_tdesc t, int axis);
int cd_dnnl_softmax_create(cd_dnnl_tdesc t, int axis, int max_batch, cd_dnnl_op **out);

// ---- layer normalization ------------------------------------------------------------
//
// dst = (src - mean) / sqrt(var + eps) * gamma (+ beta) over each row of len
// elements of a plain [batch * rows, len] tensor (kernels/op-desc.h
// cd_layernorm_desc); gamma and beta (NULL: none) len floats, copied.
// run: nsrc = 1.
int cd_dnnl_layernorm_supports(int64_t rows, int64_t len, int with_beta);
int cd_dnnl_layernorm_create(int64_t rows, int64_t len, float eps, const float *gamma, const float *beta, int max_batch,
                             cd_dnnl_op **out);

// ---- transposed convolution (dnnl-deconv.c) ----------------------------------------
//
// dst = act(ConvTranspose(src, w) + bias) (kernels/op-desc.h cd_deconv_desc),
// NCHW src and dst; w in ONNX's [c][k / groups][r][s] layout and bias (k
// floats or NULL) are copied (packed). run: nsrc = 1.
int cd_dnnl_deconv_supports(const cd_deconv_desc *d);
int cd_dnnl_deconv_create(const cd_deconv_desc *d, int max_batch, const float *w, const float *bias, cd_dnnl_op **out);

#endif // CD_BACKENDS_CPU_DNNL_H
