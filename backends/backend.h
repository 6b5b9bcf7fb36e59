#ifndef CD_BACKENDS_BACKEND_H
#define CD_BACKENDS_BACKEND_H

// The device interface. The planner and the executor talk to a device only
// through this vtable (in the style of ggml-backend-impl.h): an opaque
// cd_backend_t, a table of function pointers filled by each backend with
// labelled initialisers, NULL for the slots marked optional, and one public
// wrapper per slot (backend.c) that checks the optional ones.
//
// Memory: buffers are device memory (host memory for "cpu"); a cd_btensor
// points into one. Weight-dependent work happens once at load in the *_init
// entries, which return backend-owned op state; per request only the run
// entries execute. Op states are immutable after init and may be run from
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
    void *data;                 // device memory (a host pointer on cpu)
    cd_layout layout;           // a blocked layout only for rank-4 tensors
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
} cd_tdesc;

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
    CD_BOP_COUNT
} cd_bop;

// Everything needed to prepare (or ask about) one operation.
typedef struct {
    cd_bop op;
    int max_batch;             // largest batch the op will run with
    int nsrc;
    cd_tdesc src[64];          // inputs (CONV2D: src and, with a residual, the residual)
    cd_tdesc dst;              // output (REORDER: dst.layout is the target)
    union {
        cd_conv_desc conv;     // n = 1; act and has_residual included
        struct {
            int rows, n, k;    // rows per batch item; weights n x k
            cd_activation act;
        } gemm;
        cd_pool_desc pool;     // n = 1
        struct {
            cd_binary_kind kind;
            cd_activation act;
        } binary;
        cd_activation act;
        struct {
            int64_t outer, len, inner; // per batch item; softmax over len
        } softmax;
        int axis;              // CONCAT
        int perm[CD_MAX_RANK]; // TRANSPOSE: dst dim i = src dim perm[i]
    } u;
    const float *w;            // CONV2D (OIHW), GEMM (n x k): host memory,
    const float *bias;         // only during init; NULL for no bias
    // CONV2D / GEMM (rows == 1): the planner's kernel choice. 0 = the
    // backend's dense kernel; 1 = the sparse kernels (sparse/sparse-conv.h,
    // activations in NCHW), with sparse_format a cd_sparse_format (0 = the
    // sparse library's own choice). A backend without sparse kernels answers
    // supports_op false for sparse = 1 (backends that predate the field see 0).
    int sparse;
    int sparse_format;
} cd_bop_desc;

// Prepares op d (packs weights, builds primitives). 0, CD_EUNSUPPORTED,
// CD_ENOMEM or CD_EINTERNAL.
typedef int (*cd_op_init_fn)(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out);
// Runs a prepared op on batch items: srcs[0..nsrc) and dst as planned, data
// pointing into device memory. 0 or a negative code.
typedef int (*cd_op_run_fn)(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                            const cd_btensor *const *srcs, cd_btensor *dst);

struct cd_backend_i {
    // "cpu", "hip" ...
    const char *(*get_name)(cd_backend_t be);
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
    // Name of the kernel a prepared op runs ("dnnl", "ref", ...). /* optional */
    const char *(*op_kernel)(cd_backend_t be, cd_op_state *st);
    // Bytes of weights the prepared op holds in device memory. /* optional */
    size_t (*op_weight_bytes)(cd_backend_t be, cd_op_state *st);
    void (*op_state_free)(cd_backend_t be, cd_op_state *st);

    // One pair per operator family. A NULL init means "family not supported".
    cd_op_init_fn conv2d_init;     // src, [residual]
    cd_op_run_fn conv2d;
    cd_op_init_fn gemm_init;       // src; dst rows x n per item
    cd_op_run_fn gemm;
    cd_op_init_fn pool_init;
    cd_op_run_fn pool;
    cd_op_init_fn binary_init;     // a, b (NumPy broadcasting, equal ranks)
    cd_op_run_fn binary;
    cd_op_init_fn activation_init;
    cd_op_run_fn activation;
    cd_op_init_fn softmax_init;
    cd_op_run_fn softmax;
    cd_op_init_fn concat_init;     // nsrc inputs along u.axis
    cd_op_run_fn concat;
    cd_op_init_fn transpose_init;
    cd_op_run_fn transpose;
    cd_op_init_fn reorder_init;    // src layout -> dst layout (or a copy)
    cd_op_run_fn reorder;

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
    // Bytes of device memory the backend holds now (weights, constants,
    // arenas, workspaces). /* optional: 0, e.g. cpu, whose memory is the host's */
    size_t (*device_bytes)(cd_backend_t be);
    // The blocked activation layout the backend's fast dense kernels want on
    // the device it runs on, decided from that device (the CPU backend:
    // NCHW16C on AVX-512, NCHW8C on AVX2). The planner keeps dense chains in
    // it. /* optional: NCHW, no blocked layout */
    cd_layout (*blocked_layout)(cd_backend_t be);
};

struct cd_backend {
    const struct cd_backend_i *iface;
    void *context;
};

// ---- wrappers (backend.c): check optional slots, then dispatch ------------------

const char *cd_backend_name(cd_backend_t be);
void cd_backend_free(cd_backend_t be);
int cd_backend_buffer_alloc(cd_backend_t be, size_t size, void **out);
void cd_backend_buffer_free(cd_backend_t be, void *buf);
int cd_backend_upload(cd_backend_t be, void *dst, const void *src, size_t size);
int cd_backend_download(cd_backend_t be, void *dst, const void *src, size_t size);
int cd_backend_ctx_create(cd_backend_t be, cd_backend_ctx **out);
void cd_backend_ctx_free(cd_backend_t be, cd_backend_ctx *ctx);
bool cd_backend_supports_op(cd_backend_t be, const cd_bop_desc *d);
// Prepares d through the family's init slot (CD_EUNSUPPORTED when NULL).
int cd_backend_op_init(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out);
// Runs a prepared op of family op.
int cd_backend_op_run(cd_backend_t be, cd_bop op, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                      const cd_btensor *const *srcs, cd_btensor *dst);
const char *cd_backend_op_kernel(cd_backend_t be, cd_op_state *st);
size_t cd_backend_op_weight_bytes(cd_backend_t be, cd_op_state *st);
void cd_backend_op_state_free(cd_backend_t be, cd_op_state *st);
int cd_backend_synchronize(cd_backend_t be, cd_backend_ctx *ctx);
int cd_backend_upload_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size);
int cd_backend_download_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size);
size_t cd_backend_device_bytes(cd_backend_t be);
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

// ---- backends -----------------------------------------------------------------

// The CPU backend (backends/cpu/backend-cpu.c). Returns 0 or CD_ENOMEM.
int cd_backend_cpu_init(cd_backend_t *out);
// Creates the backend named by device: "cpu" (or NULL), "hip-emu" (the HIP
// backend over the CPU emulator, backends/hip/backend-hip.h), "hip" or
// "hip:N" (the HIP backend of the GPU=hip plugin, backends/hip/plugin-loader.c).
// CD_EUNSUPPORTED with err set for any other name, CD_EDEVICE with err set
// when the device or the plugin is not usable here.
int cd_backend_create(const char *device, cd_backend_t *out, char *err, size_t errlen);

// Checks, without creating a backend, that device can run here (for start-up
// checks: the daemon's --device). Returns 0 with a one-line description of the
// device in info, CD_EUNSUPPORTED (not a device name) or CD_EDEVICE (device or
// plugin unusable) with the reason in err.
int cd_backend_probe(const char *device, char *info, size_t infolen, char *err, size_t errlen);

// The plugin side of "hip[:N]" (backends/hip/plugin-loader.c): parses the
// ordinal of "hip" / "hip:N" into *device (1 when the name is one of those, 0
// otherwise).
int cd_hip_device_parse(const char *device, int *ordinal);
// Loads and probes the plugin for device N, then creates its backend.
// Returns 0 or CD_EDEVICE with err set.
int cd_backend_hip_plugin_create(int device, cd_backend_t *out, char *err, size_t errlen);
int cd_backend_hip_plugin_probe(int device, char *info, size_t infolen, char *err, size_t errlen);

#endif // CD_BACKENDS_BACKEND_H
