#ifndef CD_BACKENDS_CPU_DNNL_IMPL_H
#define CD_BACKENDS_CPU_DNNL_IMPL_H

// Internals shared by backends/cpu/dnnl-*.c. Not for use outside backends/cpu.

#include "backends/cpu/dnnl.h"
#include "core/errors.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdatomic.h>

// Converts a dnnl status at the boundary: 0 for dnnl_success, otherwise logs
// "dnnl: CALL failed at FILE:LINE: STATUS" and returns CD_ENOMEM,
// CD_EUNSUPPORTED or CD_EINTERNAL. Use as: if ((rc = CD_DNNL(dnnl_x(...)))) goto fail;
#define CD_DNNL(call) cd_dnnl_status((call), #call, __FILE__, __LINE__)
int cd_dnnl_status(dnnl_status_t st, const char *call, const char *file, int line);

// The process-wide CPU engine (cd_dnnl_init must have succeeded).
dnnl_engine_t cd_dnnl_engine(void);

// Applies the configured thread count to the calling thread (cheap check).
void cd_dnnl_apply_threads(void);

// Plain f32 memory descriptor for an n x c x h x w activation in layout l.
// 0 or CD_EPARAMS.
int cd_dnnl_md_act(dnnl_memory_desc_t *md, int n, int c, int h, int w, cd_layout l);
// The same with element type dt (the int8 conv's u8/s8/s32 tensors).
int cd_dnnl_md_act_dt(dnnl_memory_desc_t *md, int n, int c, int h, int w, cd_layout l, dnnl_data_type_t dt);

// Checks a conv descriptor's ranges, its derived output size and its
// activation for the conv wrappers. 0 or CD_EPARAMS.
int cd_dnnl_conv_check(const cd_conv_desc *d, cd_layout src, cd_layout dst);
// Weights md of a conv: OIHW (groups 1) or GOIHW of type dt, tag any or the plain one.
int cd_dnnl_conv_weights_md(dnnl_memory_desc_t *md, const cd_conv_desc *d, dnnl_data_type_t dt, dnnl_format_tag_t tag);

// Primitive attributes with the user-managed scratchpad and, when act is not
// NONE, the eltwise post-op(s) for act (after a sum post-op when with_sum).
// Caller destroys *attr. 0 or a CD_E* code.
int cd_dnnl_attr(dnnl_primitive_attr_t *attr, int with_sum, cd_activation act);

// Appends the eltwise post-op(s) of act (none for CD_ACT_NONE).
int cd_dnnl_post_ops_act(dnnl_post_ops_t po, cd_activation act);

// Maps an activation to oneDNN eltwise algorithms: up to 2 steps (HARDSIGMOID
// is linear then clip). Returns the number of steps (0 for NONE), or
// CD_EPARAMS for an unknown kind.
typedef struct {
    dnnl_alg_kind_t alg;
    float alpha, beta;
} cd_dnnl_elt_step;
int cd_dnnl_act_steps(cd_activation act, cd_dnnl_elt_step steps[2]);

// One batch size's executable form of an op: up to eight primitives, run in
// the order its kind's exec chooses (the int8 conv: boundary reorders around
// the conv, which is pd[0] so that cd_dnnl_op_impl names it).
#define CD_DNNL_MAX_PRIMS 8
typedef struct {
    dnnl_primitive_desc_t pd[CD_DNNL_MAX_PRIMS];
    dnnl_primitive_t prim[CD_DNNL_MAX_PRIMS];
    int nprim;
    size_t scratch_bytes; // max over the primitives
    int wset;             // conv: index of the packed weight set it uses
} cd_dnnl_prim;

// What one kind of op does (its file's static table).
typedef struct {
    // Creates p->pd[] (and sets p->nprim) for this batch; under the op's mu.
    // May update kind state (conv packs a new weight set). 0 or a CD_E* code.
    int (*build)(cd_dnnl_op *op, int batch, cd_dnnl_prim *p);
    // Executes p on the caller's buffers (arguments already validated).
    int (*exec)(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                float *dst);
    void (*fini)(cd_dnnl_op *op); // frees priv's contents (optional)
    // The kernel that runs p when it is not oneDNN's own (optional; NULL:
    // oneDNN's implementation name).
    const char *(*impl)(cd_dnnl_op *op, const cd_dnnl_prim *p, int batch);
} cd_dnnl_kind;

struct cd_dnnl_op {
    int max_batch;
    int nsrc;                       // sources run() expects
    pthread_mutex_t mu;             // guards slot creation and kind state
    _Atomic(cd_dnnl_prim *) *slots; // [max_batch + 1], slot 0 unused
    const cd_dnnl_kind *kind;
    void *priv;          // kind-specific state (owned)
    size_t weight_bytes; // packed weights + bias (under mu)
};

// Allocates an op of `kind` whose state is a copy of the priv_size bytes at
// priv, with its slot array and mutex. 0 or CD_ENOMEM/CD_EPARAMS (nothing
// allocated then; fini is not called).
int cd_dnnl_op_new(const cd_dnnl_kind *kind, int max_batch, int nsrc, const void *priv, size_t priv_size,
                   cd_dnnl_op **out);
// Builds op's batch-1 primitives (packing any weights its state points at)
// and hands op out, or frees it and returns the error.
int cd_dnnl_op_ready(cd_dnnl_op *op, cd_dnnl_op **out);

// The primitive set for a batch, building it on first use. 0 or an error.
int cd_dnnl_op_get(cd_dnnl_op *op, int batch, cd_dnnl_prim **out);

// An execution argument: DNNL_ARG_* id and the caller's pointer. The memory
// descriptor comes from the primitive descriptor.
typedef struct {
    int arg;
    const void *ptr;
} cd_dnnl_arg;

// The ctx scratchpad grown to at least bytes, for kinds that keep temporary
// tensors after their primitives' scratchpad (p->scratch_bytes counts both).
// NULL when growing fails.
void *cd_dnnl_ctx_scratch(cd_dnnl_ctx *ctx, size_t bytes);

// Executes primitive i of p with the args (plus the ctx scratchpad) on the
// ctx stream and waits. 0 or an error.
int cd_dnnl_exec(cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int i, int nargs, const cd_dnnl_arg *args);

// Reorders src (md smd) into dst (md dmd) on a temporary stream; for packing at
// create time. 0 or an error.
int cd_dnnl_reorder_now(const dnnl_memory_desc_t *smd, const void *src, const dnnl_memory_desc_t *dmd, void *dst);

// Packed weights of one operator. Implementations chosen for different batch
// sizes may want different weight layouts; each distinct one is packed once
// (in practice there is one). Guarded by the op's mutex.
#define CD_DNNL_MAX_WSETS 4
typedef struct {
    dnnl_memory_desc_t user_md;               // layout of the caller's weights
    const void *user;                         // caller's weights, only during create
    dnnl_memory_desc_t md[CD_DNNL_MAX_WSETS]; // packed layouts chosen by oneDNN
    void *data[CD_DNNL_MAX_WSETS];            // packed weights, 64-byte aligned, owned
    int n;                                    // number of packed sets
} cd_dnnl_weights;

// Index of the packed set with layout md, packing it first if needed (set 0
// from the caller's weights, which must then be alive; later sets from set 0,
// or from ws->user while the op keeps it: oneDNN's Winograd formats).
// 0 or an error.
int cd_dnnl_weights_for(cd_dnnl_weights *ws, const dnnl_memory_desc_t *md, int *idx);
// Bytes held by all packed sets.
size_t cd_dnnl_weights_bytes(const cd_dnnl_weights *ws);
void cd_dnnl_weights_fini(cd_dnnl_weights *ws);

// 64-byte aligned allocation of at least bytes (rounded up); NULL on failure.
void *cd_dnnl_alloc(size_t bytes);

// Creates a primitive descriptor from an op descriptor, quietly: returns 1 when
// oneDNN can build it (and stores it in *pd if pd is not NULL), else 0.
int cd_dnnl_pd_try(const void *op_desc, const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd);
// 1 when pd's kernel is not oneDNN's reference loop; destroys pd.
int cd_dnnl_pd_fast(dnnl_primitive_desc_t pd);
// For ops without post-ops: 1 when oneDNN builds op_desc on a kernel other
// than its reference loop.
int cd_dnnl_plain_fast(const void *op_desc);

// For ops without post-ops (pool, softmax, plain eltwise): whether oneDNN can
// build op_desc with the project's attributes (user scratchpad), quietly
// (1 or 0) ...
int cd_dnnl_plain_try(const void *op_desc);
// ... and building it as primitive i of p (sets p->nprim = i + 1). Returns 0
// or a negative code.
int cd_dnnl_plain_build(cd_dnnl_prim *p, int i, const void *op_desc);

// The bf16 conv offered for the f32 conv *op of d (cd_backend_opts.bf16
// mode: 0 off, 1 auto: where one of its wirings times faster, 2 on: wherever
// it runs, the faster wiring); *op is replaced (and freed) when it is taken.
// 0, or CD_ENOMEM (*op untouched).
int cd_dnnl_conv_bf16_offer(cd_dnnl_op **op, const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch,
                            const float *w, const float *bias, int mode);
#endif // CD_BACKENDS_CPU_DNNL_IMPL_H
