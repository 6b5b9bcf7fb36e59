#ifndef CD_BACKENDS_BACKEND_H
#define CD_BACKENDS_BACKEND_H

// The device interface. The planner and the executor talk to a device only
// through this vtable (in the style of ggml-backend-impl.h): an opaque
// cd_backend_t, a small table of function pointers filled by each backend
// with labelled initialisers, NULL for the slots marked optional, and one
// public wrapper per slot (backends/backend.c) that checks the optional ones.
//
// Operators: every operator goes through one pair of slots, op_init and
// op_run, on a tagged description (cd_bop_desc: the family in .op, its
// parameters in .u). A backend switches on d->op once, in op_init, and keeps
// what it chose in its op state. Adding an operator family is: a cd_bop value
// and its cd_bop_desc fields, a reference kernel (kernels/cpu/ref.h), the
// case in each backend's supports_op/op_init/op_run, and a row in the
// conformance table (tests/unit/test-backend-ops.c).
//
// What a backend is (name, synchronous or not, device memory, the blocked
// layout it plans in, its instruction set) is in its cd_backend_caps: callers
// ask the caps, never compare backend names.
//
// Memory: buffers are device memory (host memory when caps.device_memory is
// false); a cd_btensor points into one. Weight-dependent work happens once at
// load in op_init, which returns backend-owned op state; per request only
// op_run executes. Op states are immutable after init and may be run from
// several threads at once (each with its own activation buffers).
//
// Layouts: a tensor carries its layout (kernels/op-desc.h). supports_op says
// whether the backend runs an op with its activations in a given layout; the
// planner keeps one layout across consecutive layers and asks for a reorder
// only where the next op needs another.

#include "core/limits.h"
#include "kernels/op-desc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cd_backend *cd_backend_t;
typedef struct cd_op_state cd_op_state;       // backend-defined prepared op
typedef struct cd_backend_ctx cd_backend_ctx; // per-thread execution context

// A tensor as a backend sees it at run time.
typedef struct {
    void *data;       // device memory (a host pointer on cpu)
    cd_layout layout; // a blocked layout only for rank-4 tensors
    int rank;
    int64_t shape[CD_MAX_RANK]; // logical dims in NCHW order, dim 0 = batch
} cd_btensor;

// A tensor as described at planning time: per-item shape (dim 0 is 1 for an
// activation, scaled by the batch at run time) and layout. A constant operand
// (weights of a broadcast Mul, BatchNorm scale) is not batched: is_const = 1
// and its dims are used as they are.
typedef struct {
    int rank;
    int64_t shape[CD_MAX_RANK];
    cd_layout layout;
    int is_const;
    int int8;        // 1: one-byte integers (u8/s8), a quantized activation between two int8
                     // convs (cd_conv_quant src_int / dst_int); 0: float32
    int int8_signed; // with int8: s8, else u8 (a conv reads it from its quantization;
                     // a max pool between two int8 convs from here)
} cd_tdesc;

// The operator families: the tag of cd_bop_desc (the member of its u that
// applies). Every backend runs them all through op_init/op_run.
typedef enum {
    CD_BOP_CONV2D = 0,
    CD_BOP_GEMM,
    CD_BOP_POOL,
    CD_BOP_BINARY,
    CD_BOP_ACTIVATION,
    CD_BOP_SOFTMAX,
    CD_BOP_CONCAT,
    CD_BOP_TRANSPOSE,
    CD_BOP_REORDER,
    CD_BOP_FAKEQUANT, // quantize-dequantize of an activation (QDQ models)
    CD_BOP_PAD,       // u.pad; NCHW (any rank)
    CD_BOP_SLICE,     // u.slice (one output of a Split too); NCHW (any rank)
    CD_BOP_REDUCE,    // u.reduce; NCHW (any rank)
    CD_BOP_LAYERNORM, // u.ln, gamma in w and beta in bias (len values); NCHW
    CD_BOP_RESIZE,    // u.resize; NCHW
    CD_BOP_DECONV,    // u.deconv (ConvTranspose), w [c][k/groups][r][s], bias k or NULL; NCHW
    CD_BOP_GATHER,    // u.gather (indices host memory, only during init); NCHW (any rank)
    CD_BOP_TILE,      // no parameters (Tile, Expand: the shapes say it); NCHW (any rank)
    CD_BOP_COUNT
} cd_bop;

// Everything needed to prepare (or ask about) one operation: a tagged
// description, op selecting the member of u.
typedef struct {
    cd_bop op;
    int max_batch; // largest batch the op will run with
    int nsrc;
    cd_tdesc src[CD_OP_MAX_IN]; // inputs (CONV2D: src and, with a residual, the residual)
    cd_tdesc dst;               // output (REORDER: dst.layout is the target)
    union {
        cd_conv_desc conv; // n = 1; act and has_residual included
        cd_gemm_desc gemm;
        cd_pool_desc pool; // n = 1
        cd_binary_desc binary;
        cd_activation act;
        cd_softmax_desc softmax;
        int axis;              // CONCAT
        int perm[CD_MAX_RANK]; // TRANSPOSE: dst dim i = src dim perm[i]
        cd_fakequant_desc fq;  // FAKEQUANT
        cd_pad_desc pad;       // PAD
        cd_slice_desc slice;   // SLICE
        cd_reduce_desc reduce; // REDUCE
        cd_layernorm_desc ln;  // LAYERNORM
        cd_resize_desc resize; // RESIZE
        cd_deconv_desc deconv; // DECONV
        cd_gather_desc gather; // GATHER
    } u;
    const float *w;    // CONV2D (OIHW), GEMM (n x k), LAYERNORM (gamma, beta): host memory,
    const float *bias; // only during init; NULL for no bias
    // CONV2D / GEMM (rows == 1): the planner's kernel choice. 0 = the
    // backend's dense kernel; 1 = the sparse kernels (sparse/sparse-conv.h,
    // activations in NCHW), with sparse_format a cd_sparse_format (0 = the
    // sparse library's own choice). A backend without sparse kernels answers
    // supports_op false for sparse = 1 (backends that predate the field see 0).
    int sparse;
    int sparse_format;
    // FAKEQUANT: u.fq.channels scales and zero points (integers), host
    // memory, only during init.
    const float *scale;
    const float *zero_point;
    // CONV2D: the planner's int8 choice. quant non-NULL: run on int8 kernels
    // (kernels/op-desc.h cd_conv_quant: the activations' quantization, the
    // weights' per-channel scales, the storage of src and dst) over the s8
    // weights wq (OIHW), with bias; sparse / sparse_format choose among them
    // as for float. Host memory, only during init. A backend without int8
    // kernels answers supports_op false.
    const cd_conv_quant *quant;
    const int8_t *wq;
    // CONV2D in float32 (quant NULL): fq_scale > 0 fake-quantizes the output
    // after the act, per tensor (kernels/op-desc.h cd_fakequant_apply with
    // fq_zp, fq_qmin, fq_qmax): the QuantizeLinear + DequantizeLinear a QDQ
    // model puts after a conv the planner runs in float32, done in the conv's
    // epilogue instead of a pass of its own. A kernel that cannot declines.
    float fq_scale, fq_zp, fq_qmin, fq_qmax;
} cd_bop_desc;

// What a backend is and does, for the planner and the executor to ask
// instead of testing names. Static strings; the values are fixed for the
// life of the backend (cd_backend_get_caps may be called at any time).
typedef struct {
    const char *name;         // "cpu", "hip", "hip-emu": for messages and cd_model_device
    const char *description;  // one line for start-up logs ("hip-emu (the HIP kernels ...)")
    bool async;               // op_run and the *_async copies only queue work on the
                              // context's stream: submitting batch i+1 before waiting
                              // for batch i overlaps them (cd_model_overlaps)
    bool device_memory;       // buffers are device memory, not the host's (kernels run
                              // on the device); false: host memory, host kernels, on
                              // which the planner's CPU cost model applies
    cd_layout blocked_layout; // the blocked activation layout the planner keeps dense
                              // chains in on this backend (NCHW: none)
    cd_layout native_layout;  // the blocked layout the device's fast dense kernels want
                              // (the CPU's: oneDNN's choice, nChw16c on AVX-512, nChw8c
                              // on AVX2), even when blocked_layout is NCHW because a
                              // mode forces plain kernels; NCHW: none
    bool residual_in_place;   // a CONV2D op may run with its residual (srcs[1]) and
                              // dst the same buffer (every kernel reads an output's
                              // residual before writing it); the planner then lets a
                              // residual conv write into its skip tensor
    const char *isa;          // instruction set of the dense kernels ("avx512_core",
                              // "avx2"), NULL where that means nothing
} cd_backend_caps;

struct cd_backend_i {
    // Fills *out (see cd_backend_caps).
    void (*get_caps)(cd_backend_t be, cd_backend_caps *out);
    // Frees the backend (after every buffer, context and op state it made).
    void (*free)(cd_backend_t be);

    // Device memory: size bytes, 64-byte aligned. 0 or CD_ENOMEM/CD_EDEVICE.
    int (*buffer_alloc)(cd_backend_t be, size_t size, void **out);
    void (*buffer_free)(cd_backend_t be, void *buf);
    // Host <-> device copies of size bytes.
    int (*upload)(cd_backend_t be, void *dst, const void *src, size_t size);
    int (*download)(cd_backend_t be, void *dst, const void *src, size_t size);

    // Per-thread execution state (streams, scratch memory). /* optional */
    int (*ctx_create)(cd_backend_t be, cd_backend_ctx **out);
    void (*ctx_free)(cd_backend_t be, cd_backend_ctx *ctx); /* optional */

    // Whether op d can be prepared as described (layouts included).
    bool (*supports_op)(cd_backend_t be, const cd_bop_desc *d);
    // Prepares op d of any family (packs weights, builds primitives). 0,
    // CD_EUNSUPPORTED, CD_ENOMEM or CD_EINTERNAL.
    int (*op_init)(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out);
    // Runs a prepared op on batch items: srcs[0..nsrc) and dst as planned
    // (CONV2D: src and, with a residual, the residual; BINARY: a, b; CONCAT:
    // the nsrc inputs), data pointing into device memory. 0 or a negative code.
    int (*op_run)(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                  cd_btensor *dst);
    // Name of the kernel a prepared op runs ("dnnl", "ref", ...). /* optional */
    const char *(*op_kernel)(cd_backend_t be, cd_op_state *st);
    // The type a prepared float32 op computes in when it is not float32
    // ("bf16": the CPU's opt-in bf16 convs), else NULL. /* optional */
    const char *(*op_compute_dtype)(cd_backend_t be, cd_op_state *st);
    // Bytes of weights the prepared op holds in device memory. /* optional */
    size_t (*op_weight_bytes)(cd_backend_t be, cd_op_state *st);
    void (*op_state_free)(cd_backend_t be, cd_op_state *st);

    // Waits until queued work is done. /* optional */
    int (*synchronize)(cd_backend_t be, cd_backend_ctx *ctx);

    // Host -> device copy ordered before the ops run later on ctx; src may be
    // reused as soon as it returns (the backend stages it). /* optional:
    // the wrapper falls back to upload */
    int (*upload_async)(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size);
    // Device -> host copy ordered after the ops run so far on ctx; dst holds
    // the data once synchronize(ctx) returns 0. /* optional: the wrapper
    // synchronizes, then downloads */
    int (*download_async)(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size);
    // Host memory for n uploads into dst[i] (size[i] bytes each) on ctx: the
    // caller writes host[i], then upload_staged queues the copies from there,
    // so an input is copied once on its way in. host[i] is valid until
    // upload_staged. /* optional: a backend whose buffers are host memory
    // (caps.device_memory 0) hands out dst[i] itself */
    int (*stage_inputs)(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, const size_t *size, void **host);
    // Queues the uploads stage_inputs prepared (the same dst, host, size), ordered
    // before the ops run later on ctx. /* optional with stage_inputs */
    int (*upload_staged)(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, void *const *host,
                         const size_t *size);
    // Bytes of device memory the backend holds now (weights, constants,
    // arenas, workspaces). /* optional: 0, e.g. cpu, whose memory is the host's */
    size_t (*device_bytes)(cd_backend_t be);
};

struct cd_backend {
    const struct cd_backend_i *iface;
    void *context;
};

// ---- wrappers (backend.c): check optional slots, then dispatch ------------------

// The backend's caps; cd_backend_name is their name.
cd_backend_caps cd_backend_get_caps(cd_backend_t be);
const char *cd_backend_name(cd_backend_t be);
void cd_backend_free(cd_backend_t be);
int cd_backend_buffer_alloc(cd_backend_t be, size_t size, void **out);
void cd_backend_buffer_free(cd_backend_t be, void *buf);
int cd_backend_upload(cd_backend_t be, void *dst, const void *src, size_t size);
int cd_backend_download(cd_backend_t be, void *dst, const void *src, size_t size);
int cd_backend_ctx_create(cd_backend_t be, cd_backend_ctx **out);
void cd_backend_ctx_free(cd_backend_t be, cd_backend_ctx *ctx);
bool cd_backend_supports_op(cd_backend_t be, const cd_bop_desc *d);
// Prepares d (op_init).
int cd_backend_op_init(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out);
// Runs a prepared op of family op (the family st was prepared for;
// CD_EUNSUPPORTED for a value that is not a family).
int cd_backend_op_run(cd_backend_t be, cd_bop op, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                      const cd_btensor *const *srcs, cd_btensor *dst);
const char *cd_backend_op_kernel(cd_backend_t be, cd_op_state *st);
// op_compute_dtype's answer (NULL: float32, or no such method).
const char *cd_backend_op_compute_dtype(cd_backend_t be, cd_op_state *st);
size_t cd_backend_op_weight_bytes(cd_backend_t be, cd_op_state *st);
void cd_backend_op_state_free(cd_backend_t be, cd_op_state *st);
int cd_backend_synchronize(cd_backend_t be, cd_backend_ctx *ctx);
int cd_backend_upload_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size);
int cd_backend_download_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size);
// Host buffers for a run's inputs (stage_inputs): dst[i] itself where the
// device memory is host memory; CD_EUNSUPPORTED on a device backend that
// stages nothing (the caller then uploads from buffers of its own).
int cd_backend_stage_inputs(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, const size_t *size,
                            void **host);
// Queues the uploads of what cd_backend_stage_inputs handed out (nothing to do
// where host[i] is dst[i]).
int cd_backend_upload_staged(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, void *const *host,
                             const size_t *size);
size_t cd_backend_device_bytes(cd_backend_t be);
// caps.blocked_layout.
cd_layout cd_backend_blocked_layout(cd_backend_t be);
// True for the name of a reference kernel (cd_backend_op_kernel): our own
// "ref" or oneDNN's "ref:*" loops, the slow last resort of a Conv, Gemm or Pool.
bool cd_backend_kernel_is_reference(const char *kernel);

// Bytes of one item (dim 0 taken as 1) of a tensor in layout (a blocked
// layout pads dim 1 to a multiple of its block); SIZE_MAX when the size does
// not fit size_t or a dim is negative (the planner refuses such a tensor).
size_t cd_tdesc_item_bytes(const cd_tdesc *t);
// "Conv2d", "Gemm", ... for messages.
const char *cd_bop_name(cd_bop op);

#endif // CD_BACKENDS_BACKEND_H
