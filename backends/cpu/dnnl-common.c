// oneDNN plumbing shared by every dense operator: the engine, threads, status
// conversion, per-worker contexts, the per-batch primitive cache and execution.

#include "backends/cpu/dnnl-impl.h"
#include "core/log.h"

#include <dnnl_debug.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cd_dnnl_ctx {
    dnnl_stream_t stream; // in-order CPU stream; used by one thread at a time
    void *scratch;        // user-managed scratchpad, 64-byte aligned
    size_t scratch_cap;   // bytes allocated in scratch
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t g_engine;
static int g_init_rc;
static atomic_int g_threads; // 0: not set, use the OpenMP default

int cd_dnnl_status(dnnl_status_t st, const char *call, const char *file, int line) {
    if (st == dnnl_success) return 0;
    cd_rt_log(CD_RT_LOG_ERROR, "dnnl: %s failed at %s:%d: %s", call, file, line, dnnl_status2str(st));
    switch (st) {
    case dnnl_out_of_memory: return CD_ENOMEM;
    case dnnl_unimplemented: return CD_EUNSUPPORTED;
    default: return CD_EINTERNAL;
    }
}

static void init_once(void) { g_init_rc = CD_DNNL(dnnl_engine_create(&g_engine, dnnl_cpu, 0)); }

int cd_dnnl_init(void) {
    pthread_once(&g_once, init_once);
    return g_init_rc;
}

dnnl_engine_t cd_dnnl_engine(void) { return g_engine; }

const char *cd_dnnl_isa(void) {
    if (cd_dnnl_init()) return "none";
    const char *s = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()); // "cpu_isa_avx2"
    return strncmp(s, "cpu_isa_", 8) == 0 ? s + 8 : s;
}

int cd_dnnl_impl_is_reference(const char *impl) {
    // oneDNN names its reference loops "ref:any", "ref_fused..." (the jit
    // and gemm kernels are "jit:avx2", "brgemm:...", "gemm:jit", ...).
    return impl && (strncmp(impl, "ref", 3) == 0 || strstr(impl, ":ref") != NULL);
}

int cd_dnnl_set_threads(int n) {
    if (n < 1) return CD_EPARAMS;
    atomic_store(&g_threads, n);
    omp_set_num_threads(n);
    return 0;
}

int cd_dnnl_get_threads(void) {
    int n = atomic_load(&g_threads);
    return n > 0 ? n : omp_get_max_threads();
}

void cd_dnnl_apply_threads(void) {
    // Inside a parallel region (an executor lane, runtime/executor.h) the
    // caller chose one thread: oneDNN then runs its primitives on it alone.
    if (omp_in_parallel()) return;
    int n = atomic_load(&g_threads);
    if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

size_t cd_dnnl_tensor_floats(cd_layout l, int n, int c, int h, int w) {
    if (n < 0 || c < 0 || h < 0 || w < 0) return 0;
    if (!cd_layout_valid(l)) return 0;
    return (size_t)n * (size_t)cd_layout_padded_c(l, c) * h * w;
}

int cd_dnnl_md_act(dnnl_memory_desc_t *md, int n, int c, int h, int w, cd_layout l) {
    return cd_dnnl_md_act_dt(md, n, c, h, w, l, dnnl_f32);
}

int cd_dnnl_md_act_dt(dnnl_memory_desc_t *md, int n, int c, int h, int w, cd_layout l, dnnl_data_type_t dt) {
    if (n < 1 || c < 1 || h < 1 || w < 1) return CD_EPARAMS;
    dnnl_dims_t dims = {n, c, h, w};
    dnnl_format_tag_t tag;
    switch (l) {
    case CD_LAYOUT_NCHW: tag = dnnl_nchw; break;
    case CD_LAYOUT_NCHW16C: tag = dnnl_nChw16c; break;
    case CD_LAYOUT_NCHW8C: tag = dnnl_nChw8c; break;
    case CD_LAYOUT_NHWC: tag = dnnl_nhwc; break;
    default: return CD_EPARAMS;
    }
    return CD_DNNL(dnnl_memory_desc_init_by_tag(md, 4, dims, dt, tag));
}

int cd_dnnl_act_steps(cd_activation act, cd_dnnl_elt_step steps[2]) {
    switch (act.kind) {
    case CD_ACT_NONE: return 0;
    case CD_ACT_RELU:
        // clip to [0, inf], not oneDNN's relu: that computes alpha * x below 0,
        // and 0 * -inf is NaN where Relu(-inf) is 0. (A NaN stays NaN.)
        steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_clip, 0.0f, INFINITY};
        return 1;
    case CD_ACT_LEAKYRELU: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_relu, act.alpha, 0.0f}; return 1;
    case CD_ACT_CLIP: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_clip, act.alpha, act.beta}; return 1;
    case CD_ACT_SIGMOID: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_logistic, 0.0f, 0.0f}; return 1;
    case CD_ACT_HARDSWISH:
        // oneDNN 2.6: x * relu6(x + 3) / 6, the ONNX definition.
        steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_hardswish, 0.0f, 0.0f};
        return 1;
    case CD_ACT_HARDSIGMOID:
        // 2.6 has no hardsigmoid: clip(alpha * x + beta, 0, 1).
        steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_linear, act.alpha, act.beta};
        steps[1] = (cd_dnnl_elt_step){dnnl_eltwise_clip, 0.0f, 1.0f};
        return 2;
    case CD_ACT_TANH: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_tanh, 0.0f, 0.0f}; return 1;
    case CD_ACT_MISH: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_mish, 0.0f, 0.0f}; return 1;
    case CD_ACT_NEG: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_linear, -1.0f, 0.0f}; return 1;
    case CD_ACT_ABS: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_abs, 0.0f, 0.0f}; return 1;
    case CD_ACT_SQRT: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_sqrt, 0.0f, 0.0f}; return 1;
    case CD_ACT_GELU: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_gelu_erf, 0.0f, 0.0f}; return 1;
    case CD_ACT_GELU_TANH: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_gelu_tanh, 0.0f, 0.0f}; return 1;
    // oneDNN's pow is alpha * x^beta.
    case CD_ACT_POW: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_pow, 1.0f, act.alpha}; return 1;
    // swish is x * sigmoid(alpha * x).
    case CD_ACT_SILU: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_swish, 1.0f, 0.0f}; return 1;
    // soft_relu in 2.6 is log(1 + exp(x)); erf has no oneDNN eltwise: reference.
    case CD_ACT_SOFTPLUS: steps[0] = (cd_dnnl_elt_step){dnnl_eltwise_soft_relu, 0.0f, 0.0f}; return 1;
    case CD_ACT_ERF: return CD_EPARAMS;
    }
    return CD_EPARAMS;
}

int cd_dnnl_post_ops_act(dnnl_post_ops_t po, cd_activation act) {
    cd_dnnl_elt_step steps[2];
    int n = cd_dnnl_act_steps(act, steps);
    if (n < 0) return n;
    for (int i = 0; i < n; i++) {
        int rc = CD_DNNL(dnnl_post_ops_append_eltwise(po, 1.0f, steps[i].alg, steps[i].alpha, steps[i].beta));
        if (rc) return rc;
    }
    return 0;
}

int cd_dnnl_attr(dnnl_primitive_attr_t *attr, int with_sum, cd_activation act) {
    dnnl_post_ops_t po = NULL;
    int rc = CD_DNNL(dnnl_primitive_attr_create(attr));
    if (rc) return rc;
    if ((rc = CD_DNNL(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user)))) goto fail;
    if (with_sum || act.kind != CD_ACT_NONE) {
        if ((rc = CD_DNNL(dnnl_post_ops_create(&po)))) goto fail;
        if (with_sum && (rc = CD_DNNL(dnnl_post_ops_append_sum(po, 1.0f)))) goto fail;
        if ((rc = cd_dnnl_post_ops_act(po, act))) goto fail;
        if ((rc = CD_DNNL(dnnl_primitive_attr_set_post_ops(*attr, po)))) goto fail;
        dnnl_post_ops_destroy(po);
    }
    return 0;
fail:
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
    return rc;
}

void *cd_dnnl_alloc(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, n ? n : 64);
}

int cd_dnnl_pd_try(const void *op_desc, const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd) {
    if (cd_dnnl_init()) return 0;
    dnnl_primitive_desc_t p = NULL;
    // A query, not an error path: the status is checked, not logged.
    dnnl_status_t st = dnnl_primitive_desc_create(&p, op_desc, attr, g_engine, NULL);
    if (st != dnnl_success) return 0;
    if (pd)
        *pd = p;
    else
        dnnl_primitive_desc_destroy(p);
    return 1;
}

int cd_dnnl_pd_fast(dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    const int ok = impl && !cd_dnnl_impl_is_reference(impl);
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

// op_desc's primitive descriptor with the plain attributes (NULL pd: only
// whether oneDNN builds it). 1 or 0.
static int plain_pd(const void *op_desc, dnnl_primitive_desc_t *pd) {
    dnnl_primitive_attr_t attr = NULL;
    if (cd_dnnl_attr(&attr, 0, (cd_activation){CD_ACT_NONE, 0, 0})) return 0;
    const int ok = cd_dnnl_pd_try(op_desc, attr, pd);
    dnnl_primitive_attr_destroy(attr);
    return ok;
}

int cd_dnnl_plain_fast(const void *op_desc) {
    dnnl_primitive_desc_t pd = NULL;
    return plain_pd(op_desc, &pd) && cd_dnnl_pd_fast(pd);
}

int cd_dnnl_plain_try(const void *op_desc) { return plain_pd(op_desc, NULL); }

int cd_dnnl_plain_build(cd_dnnl_prim *p, int i, const void *op_desc) {
    dnnl_primitive_attr_t attr = NULL;
    int rc = cd_dnnl_attr(&attr, 0, (cd_activation){CD_ACT_NONE, 0, 0});
    if (rc) return rc;
    rc = CD_DNNL(dnnl_primitive_desc_create(&p->pd[i], op_desc, attr, cd_dnnl_engine(), NULL));
    dnnl_primitive_attr_destroy(attr);
    if (!rc) p->nprim = i + 1;
    return rc;
}

// ---- contexts -------------------------------------------------------------------

int cd_dnnl_ctx_create(cd_dnnl_ctx **out) {
    *out = NULL;
    int rc = cd_dnnl_init();
    if (rc) return rc;
    cd_dnnl_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return CD_ENOMEM;
    if ((rc = CD_DNNL(dnnl_stream_create(&ctx->stream, g_engine, dnnl_stream_default_flags)))) {
        free(ctx);
        return rc;
    }
    *out = ctx;
    return 0;
}

int cd_dnnl_ctx_reserve(cd_dnnl_ctx *ctx, size_t bytes) {
    if (bytes <= ctx->scratch_cap) return 0;
    void *p = cd_dnnl_alloc(bytes);
    if (!p) return CD_ENOMEM;
    free(ctx->scratch);
    ctx->scratch = p;
    ctx->scratch_cap = bytes;
    return 0;
}

void *cd_dnnl_ctx_scratch(cd_dnnl_ctx *ctx, size_t bytes) {
    // Never NULL on success: an op that needs no scratch still gets a base
    // its (zero) offsets can apply to.
    return cd_dnnl_ctx_reserve(ctx, bytes ? bytes : 64) ? NULL : ctx->scratch;
}

size_t cd_dnnl_ctx_scratch_bytes(const cd_dnnl_ctx *ctx) { return ctx->scratch_cap; }

void cd_dnnl_ctx_free(cd_dnnl_ctx *ctx) {
    if (!ctx) return;
    if (ctx->stream) dnnl_stream_destroy(ctx->stream);
    free(ctx->scratch);
    free(ctx);
}

// ---- execution --------------------------------------------------------------------

#define CD_DNNL_MAX_ARGS 40

int cd_dnnl_exec(cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int i, int nargs, const cd_dnnl_arg *args) {
    dnnl_exec_arg_t ea[CD_DNNL_MAX_ARGS];
    int n = 0, rc = 0;
    if (nargs + 1 > CD_DNNL_MAX_ARGS) return CD_EPARAMS;
    for (int a = 0; a < nargs; a++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(p->pd[i], dnnl_query_exec_arg_md, args[a].arg);
        if (!md) {
            rc = CD_EINTERNAL;
            goto out;
        }
        ea[n].arg = args[a].arg;
        if ((rc = CD_DNNL(dnnl_memory_create(&ea[n].memory, md, g_engine, (void *)args[a].ptr)))) goto out;
        n++;
    }
    if (p->scratch_bytes) {
        if ((rc = cd_dnnl_ctx_reserve(ctx, p->scratch_bytes))) goto out;
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(p->pd[i], dnnl_query_scratchpad_md, 0);
        if (md && dnnl_memory_desc_get_size(md) > 0) {
            ea[n].arg = DNNL_ARG_SCRATCHPAD;
            if ((rc = CD_DNNL(dnnl_memory_create(&ea[n].memory, md, g_engine, ctx->scratch)))) goto out;
            n++;
        }
    }
    cd_dnnl_apply_threads();
    if ((rc = CD_DNNL(dnnl_primitive_execute(p->prim[i], ctx->stream, n, ea)))) goto out;
    rc = CD_DNNL(dnnl_stream_wait(ctx->stream));
out:
    for (int a = 0; a < n; a++) dnnl_memory_destroy(ea[a].memory);
    return rc;
}

int cd_dnnl_reorder_now(const dnnl_memory_desc_t *smd, const void *src, const dnnl_memory_desc_t *dmd, void *dst) {
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t sm = NULL, dm = NULL;
    int rc;
    if ((rc = CD_DNNL(dnnl_reorder_primitive_desc_create(&pd, smd, g_engine, dmd, g_engine, NULL)))) goto out;
    if ((rc = CD_DNNL(dnnl_primitive_create(&prim, pd)))) goto out;
    if ((rc = CD_DNNL(dnnl_stream_create(&stream, g_engine, dnnl_stream_default_flags)))) goto out;
    if ((rc = CD_DNNL(dnnl_memory_create(&sm, smd, g_engine, (void *)src)))) goto out;
    if ((rc = CD_DNNL(dnnl_memory_create(&dm, dmd, g_engine, dst)))) goto out;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, sm}, {DNNL_ARG_TO, dm}};
    cd_dnnl_apply_threads();
    if ((rc = CD_DNNL(dnnl_primitive_execute(prim, stream, 2, args)))) goto out;
    rc = CD_DNNL(dnnl_stream_wait(stream));
out:
    if (sm) dnnl_memory_destroy(sm);
    if (dm) dnnl_memory_destroy(dm);
    if (stream) dnnl_stream_destroy(stream);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return rc;
}

// ---- packed weights -------------------------------------------------------------------

int cd_dnnl_weights_for(cd_dnnl_weights *ws, const dnnl_memory_desc_t *md, int *idx) {
    for (int i = 0; i < ws->n; i++)
        if (dnnl_memory_desc_equal(&ws->md[i], md)) {
            *idx = i;
            return 0;
        }
    if (ws->n == CD_DNNL_MAX_WSETS || (ws->n == 0 && !ws->user)) return CD_EINTERNAL;
    size_t bytes = dnnl_memory_desc_get_size(md);
    void *data = cd_dnnl_alloc(bytes);
    if (!data) return CD_ENOMEM;
    memset(data, 0, bytes); // padded areas of blocked weights must be zero
    int rc = ws->user ? cd_dnnl_reorder_now(&ws->user_md, ws->user, md, data)
                      : cd_dnnl_reorder_now(&ws->md[0], ws->data[0], md, data);
    if (rc) {
        free(data);
        return rc;
    }
    ws->md[ws->n] = *md;
    ws->data[ws->n] = data;
    *idx = ws->n++;
    return 0;
}

size_t cd_dnnl_weights_bytes(const cd_dnnl_weights *ws) {
    size_t b = 0;
    for (int i = 0; i < ws->n; i++) b += dnnl_memory_desc_get_size(&ws->md[i]);
    return b;
}

void cd_dnnl_weights_fini(cd_dnnl_weights *ws) {
    for (int i = 0; i < ws->n; i++) free(ws->data[i]);
    ws->n = 0;
}

// ---- the op handle and its per-batch cache -------------------------------------------

int cd_dnnl_op_new(const cd_dnnl_kind *kind, int max_batch, int nsrc, const void *priv, size_t priv_size,
                   cd_dnnl_op **out) {
    *out = NULL;
    if (max_batch < 1 || max_batch > 1 << 16) return CD_EPARAMS;
    int rc = cd_dnnl_init();
    if (rc) return rc;
    cd_dnnl_op *op = calloc(1, sizeof *op);
    if (!op) return CD_ENOMEM;
    op->slots = calloc((size_t)max_batch + 1, sizeof *op->slots);
    op->priv = malloc(priv_size ? priv_size : 1);
    if (!op->slots || !op->priv) {
        free(op->slots);
        free(op->priv);
        free(op);
        return CD_ENOMEM;
    }
    memcpy(op->priv, priv, priv_size);
    for (int b = 0; b <= max_batch; b++) atomic_init(&op->slots[b], NULL);
    pthread_mutex_init(&op->mu, NULL);
    op->max_batch = max_batch;
    op->nsrc = nsrc;
    op->kind = kind;
    *out = op;
    return 0;
}

int cd_dnnl_op_ready(cd_dnnl_op *op, cd_dnnl_op **out) {
    int rc = cd_dnnl_op_prepare(op, 1, NULL);
    if (rc) {
        cd_dnnl_op_free(op);
        return rc;
    }
    *out = op;
    return 0;
}

static void prim_free(cd_dnnl_prim *p) {
    if (!p) return;
    for (int i = 0; i < CD_DNNL_MAX_PRIMS; i++) {
        if (p->prim[i]) dnnl_primitive_destroy(p->prim[i]);
        if (p->pd[i]) dnnl_primitive_desc_destroy(p->pd[i]);
    }
    free(p);
}

int cd_dnnl_op_get(cd_dnnl_op *op, int batch, cd_dnnl_prim **out) {
    cd_dnnl_prim *p = atomic_load_explicit(&op->slots[batch], memory_order_acquire);
    if (p) {
        *out = p;
        return 0;
    }
    int rc = 0;
    pthread_mutex_lock(&op->mu);
    p = atomic_load_explicit(&op->slots[batch], memory_order_relaxed);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) {
            rc = CD_ENOMEM;
            goto out;
        }
        if ((rc = op->kind->build(op, batch, p))) goto fail;
        for (int i = 0; i < p->nprim; i++) {
            if ((rc = CD_DNNL(dnnl_primitive_create(&p->prim[i], p->pd[i])))) goto fail;
            const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(p->pd[i], dnnl_query_scratchpad_md, 0);
            size_t sb = md ? dnnl_memory_desc_get_size(md) : 0;
            if (sb > p->scratch_bytes) p->scratch_bytes = sb;
        }
        atomic_store_explicit(&op->slots[batch], p, memory_order_release);
    }
    goto out;
fail:
    prim_free(p);
    p = NULL;
out:
    pthread_mutex_unlock(&op->mu);
    *out = p;
    return rc;
}

int cd_dnnl_op_prepare(cd_dnnl_op *op, int batch, size_t *scratch_bytes) {
    if (!op || batch < 1 || batch > op->max_batch) return CD_EPARAMS;
    cd_dnnl_prim *p;
    int rc = cd_dnnl_op_get(op, batch, &p);
    if (rc) return rc;
    if (scratch_bytes) *scratch_bytes = p->scratch_bytes;
    return 0;
}

int cd_dnnl_op_run(cd_dnnl_op *op, cd_dnnl_ctx *ctx, int batch, int nsrc, const float *const *src, float *dst) {
    return cd_dnnl_op_run_any(op, ctx, batch, nsrc, (const void *const *)src, dst);
}

int cd_dnnl_op_run_any(cd_dnnl_op *op, cd_dnnl_ctx *ctx, int batch, int nsrc, const void *const *src, void *dst) {
    if (!op || !ctx || !dst || batch < 1 || batch > op->max_batch || nsrc != op->nsrc) return CD_EPARAMS;
    for (int i = 0; i < nsrc; i++)
        if (!src || !src[i]) return CD_EPARAMS;
    cd_dnnl_prim *p;
    int rc = cd_dnnl_op_get(op, batch, &p);
    if (rc) return rc;
    // The kinds pass the pointers to oneDNN untyped; float is the common case.
    return op->kind->exec(op, ctx, p, batch, (const float *const *)src, dst);
}

size_t cd_dnnl_op_weight_bytes(const cd_dnnl_op *op) {
    if (!op) return 0;
    // A lazily built batch may pack another weight layout: read under the lock.
    cd_dnnl_op *o = (cd_dnnl_op *)op;
    pthread_mutex_lock(&o->mu);
    size_t b = o->weight_bytes;
    pthread_mutex_unlock(&o->mu);
    return b;
}

const char *cd_dnnl_op_impl(cd_dnnl_op *op, int batch) {
    if (!op || batch < 1 || batch > op->max_batch) return "?";
    cd_dnnl_prim *p;
    if (cd_dnnl_op_get(op, batch, &p)) return "?";
    const char *s = op->kind->impl ? op->kind->impl(op, p, batch) : NULL;
    if (s) return s;
    if (dnnl_primitive_desc_query(p->pd[0], dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s) return "?";
    return s;
}

void cd_dnnl_op_free(cd_dnnl_op *op) {
    if (!op) return;
    for (int b = 0; b <= op->max_batch; b++) prim_free(atomic_load(&op->slots[b]));
    free(op->slots);
    if (op->kind->fini) op->kind->fini(op);
    free(op->priv);
    pthread_mutex_destroy(&op->mu);
    free(op);
}
