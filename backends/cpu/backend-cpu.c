// The CPU backend: host memory, oneDNN kernels (backends/cpu/dnnl.h) where
// they apply (depthwise included: oneDNN's measured faster than our own, see
// docs/PERFORMANCE.md), and the reference kernels (kernels/cpu/ref.h, NCHW
// only) for everything else.
//
// Sharing: op states are read-only after init (oneDNN ops fill their
// per-batch primitive slots under their own lock); a cd_backend_ctx holds the
// oneDNN stream and scratchpad of one executing thread.

#include "backends/cpu/backend-cpu.h"
#include "backends/cpu/backend-cpu-choose.h"
#include "backends/cpu/bop-layouts.h"
#include "backends/backend.h"

#include "backends/cpu/dnnl.h"
#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "backends/cpu/fakequant.h"
#include "kernels/cpu/resize-tables.h"
#include "sparse/sparse-conv-i8.h"
#include "sparse/sparse-conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cd_op_state {
    cd_bop op;
    kernel_kind kind;
    cd_bop_desc d;          // the planning description (w/bias pointers cleared)
    float *w, *bias;        // reference conv/gemm: owned copies
    float *qscale;          // FAKEQUANT: the u.fq.channels scales, then as many zero points (owned)
    cd_conv_quant q;        // int8 conv: the quantization (q.w_scale points at wscale)
    float *wscale;          // int8 conv: K weight scales (owned)
    int8_t *wq;             // int8 conv on the reference: the weights (owned)
    cd_dnnl_op *dop;        // oneDNN
    cd_sparse_conv *sp;     // sparse kernels
    cd_sparse_conv_i8 *sp8; // sparse int8 kernels
    cd_resize_tables *rt;   // RESIZE off the reference (kernels/cpu/resize-tables.h)
    int swap;               // binary on oneDNN: operands swapped (b is the big one)
    int int8;               // an int8 conv (on oneDNN: run with cd_dnnl_op_run_any)
    int64_t *gidx;          // GATHER: the indices (owned; st->d.u.gather.idx points here)
    float *border;          // conv with a border map: its copy (owned; st->d.u.conv.border points here)
    char kernel[64];
};

struct cd_backend_ctx {
    cd_dnnl_ctx *dnnl;
    void *ws; // sparse kernels' workspace (64-byte aligned), grown on demand
    size_t ws_size;
};

// The conv description a sparse GEMM runs as: n outputs of a 1x1 conv on a
// 1x1 input of k channels (the batch is the pixel axis).
static cd_conv_desc gemm_as_conv(const cd_bop_desc *d) {
    cd_conv_desc c = cd_conv_square(d->u.gemm.k, 1, 1, d->u.gemm.n, 1, 1, 0);
    c.act = d->u.gemm.act;
    return c;
}

// The switches a CPU backend was created with (backend-opts.h), in its context.
static const cd_backend_opts *sw_of(cd_backend_t be) { return be->context; }

static bool cpu_supports_op(cd_backend_t be, const cd_bop_desc *d) {
    int swap;
    return cd_cpu_choose(sw_of(be), d, &swap) != K_NONE;
}

// ---- init ---------------------------------------------------------------------

// Copies the indices of a GATHER into st (the description's are the
// caller's, valid only during init). 0, CD_EPARAMS, CD_ENOMEM.
static int gather_init(cd_op_state *st, const cd_bop_desc *d) {
    const cd_gather_desc *g = &d->u.gather;
    if (!g->idx || g->nidx < 1) return CD_EPARAMS;
    const int64_t len = d->src[0].shape[g->axis];
    for (int64_t j = 0; j < g->nidx; j++)
        if (g->idx[j] < 0 || g->idx[j] >= len) return CD_EPARAMS;
    if (!(st->gidx = malloc((size_t)g->nidx * sizeof(int64_t)))) return CD_ENOMEM;
    memcpy(st->gidx, g->idx, (size_t)g->nidx * sizeof(int64_t));
    st->d.u.gather.idx = st->gidx;
    return 0;
}

// *out = a copy of n floats of src (nothing when src is NULL). 0 or CD_ENOMEM.
static int copy_floats(float **out, const float *src, size_t n) {
    if (!src) return 0;
    if (!(*out = malloc(n * sizeof(float)))) return CD_ENOMEM;
    memcpy(*out, src, n * sizeof(float));
    return 0;
}

// Copies the scales and zero points of a FAKEQUANT into st. 0, CD_EPARAMS, CD_ENOMEM.
static int fakequant_init(const cd_backend_opts *sw, cd_op_state *st, const cd_bop_desc *d) {
    if (d->u.fq.dynamic) { // parameters per request, from the data
        if (d->u.fq.channels != 1) return CD_EPARAMS;
        if (!sw->kernels_ref) snprintf(st->kernel, sizeof st->kernel, "fakequant-dynamic");
        return 0;
    }
    size_t ch = d->u.fq.channels > 0 ? (size_t)d->u.fq.channels : 0;
    if (!ch || !d->scale || !d->zero_point) return CD_EPARAMS;
    if (!(st->qscale = malloc(2 * ch * sizeof(float)))) return CD_ENOMEM;
    memcpy(st->qscale, d->scale, ch * sizeof(float));
    memcpy(st->qscale + ch, d->zero_point, ch * sizeof(float));
    if (ch == 1 && !sw->kernels_ref) snprintf(st->kernel, sizeof st->kernel, "fakequant"); // fakequant.h
    return 0;
}

// Prepares a LayerNorm on oneDNN, or copies gamma and beta (u.ln.len
// values each; beta may be NULL) into st for the reference.
static int layernorm_init(cd_op_state *st, const cd_bop_desc *d, int dnnl, int max_batch) {
    if (dnnl)
        return cd_dnnl_layernorm_create(d->u.ln.outer, d->u.ln.len, d->u.ln.eps, d->w, d->bias, max_batch, &st->dop);
    size_t n = d->u.ln.len > 0 ? (size_t)d->u.ln.len : 0;
    if (!n || !d->w) return CD_EPARAMS;
    const int rc = copy_floats(&st->w, d->w, n);
    return rc ? rc : copy_floats(&st->bias, d->bias, n);
}

// A resize: its index and weight tables (the reference under kernels_ref).
static int resize_init(const cd_backend_opts *sw, cd_op_state *st, const cd_bop_desc *d) {
    if (sw->kernels_ref) return 0;
    int rc = cd_resize_tables_create(&d->u.resize, &st->rt);
    if (!rc) snprintf(st->kernel, sizeof st->kernel, "resize-tables");
    return rc;
}

// A transposed conv: oneDNN's deconvolution, or copies of the weights and
// bias for the reference. 0, CD_EPARAMS, CD_ENOMEM or oneDNN's error.
static int deconv_init(cd_op_state *st, const cd_bop_desc *d, int dnnl, int max_batch) {
    const cd_deconv_desc *c = &d->u.deconv;
    if (!d->w || c->groups < 1) return CD_EPARAMS;
    if (dnnl) return cd_dnnl_deconv_create(c, max_batch, d->w, d->bias, &st->dop);
    const int rc = copy_floats(&st->w, d->w, (size_t)c->c * (c->k / c->groups) * c->r * c->s);
    return rc ? rc : copy_floats(&st->bias, d->bias, (size_t)c->k);
}

// Copies what an int8 conv keeps: its quantization, the weight scales and,
// on the reference, the s8 weights and the bias. 0, CD_EPARAMS, CD_ENOMEM.
static int int8_init(cd_op_state *st, const cd_bop_desc *d) {
    const cd_conv_desc *c = &d->u.conv;
    size_t nw = (size_t)c->k * (c->c / c->groups) * c->r * c->s;
    if (!d->wq || !d->quant->w_scale) return CD_EPARAMS;
    st->q = *d->quant;
    st->wscale = malloc((size_t)c->k * sizeof(float));
    st->bias = calloc((size_t)c->k, sizeof(float));
    st->wq = malloc(nw ? nw : 1);
    if (!st->wscale || !st->bias || !st->wq) return CD_ENOMEM;
    memcpy(st->wscale, d->quant->w_scale, (size_t)c->k * sizeof(float));
    st->q.w_scale = st->wscale;
    if (d->bias) memcpy(st->bias, d->bias, (size_t)c->k * sizeof(float));
    memcpy(st->wq, d->wq, nw);
    snprintf(st->kernel, sizeof st->kernel, "ref:i8");
    return 0;
}

// A conv's state on kernel k. 0 or a negative code.
static int conv_init(const cd_backend_opts *sw, cd_op_state *st, const cd_bop_desc *d, kernel_kind k) {
    const cd_conv_desc *c = &d->u.conv;
    if (k == K_I8REF) return int8_init(st, d);
    if (k == K_I8SP) {
        // BSR8 is a float32 format only: the int8 kernels choose for themselves.
        cd_sparse_format f = (cd_sparse_format)d->sparse_format;
        cd_sparse_conv_options o = {.format = f == CD_SPARSE_FMT_BSR8 ? CD_SPARSE_FMT_AUTO : f};
        return cd_sparse_conv_i8_create(c, d->wq, d->bias, d->quant, &o, &st->sp8);
    }
    if (k == K_SPARSE) {
        cd_sparse_conv_options o = {.format = (cd_sparse_format)d->sparse_format};
        return cd_sparse_conv_create(c, d->w, d->bias, &o, &st->sp);
    }
    if (k == K_DNNL && d->quant) {
        int rc = cd_dnnl_conv_i8_create_res(c, d->quant, d->src[0].layout, d->dst.layout, cd_cpu_res_layout(d),
                                            d->max_batch, d->wq, d->bias, &st->dop);
        // oneDNN declines some weights only at create (16-bit sums without
        // VNNI): the reference then, where it is asked for.
        if (rc == CD_EUNSUPPORTED && cd_cpu_all_nchw(d) && (sw->kernels_ref || sw->int8_ref)) {
            st->kind = K_I8REF;
            return int8_init(st, d);
        }
        return rc;
    }
    const cd_layout sl = d->src[0].layout, dl = d->dst.layout;
    const float fq[4] = {d->fq_scale, d->fq_zp, d->fq_qmin, d->fq_qmax};
    if (k == K_DNNL && fq[0] > 0.0f)
        return cd_dnnl_conv_create_fq(c, sl, dl, d->max_batch, d->w, d->bias, sw, fq, &st->dop);
    if (k == K_DNNL) return cd_dnnl_conv_create_sw(c, sl, dl, d->max_batch, d->w, d->bias, sw, &st->dop);
    size_t nw = (size_t)c->k * (c->c / c->groups) * c->r * c->s;
    st->w = malloc(nw * sizeof(float));
    st->bias = calloc((size_t)c->k, sizeof(float));
    if (!st->w || !st->bias) return CD_ENOMEM;
    memcpy(st->w, d->w, nw * sizeof(float));
    if (d->bias) memcpy(st->bias, d->bias, (size_t)c->k * sizeof(float));
    return 0;
}

static int cpu_op_init(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out) {
    int swap;
    kernel_kind k = cd_cpu_choose(sw_of(be), d, &swap);
    if (k == K_NONE) return CD_EUNSUPPORTED;
    cd_op_state *st = calloc(1, sizeof *st);
    if (!st) return CD_ENOMEM;
    st->op = d->op;
    st->kind = k;
    st->d = *d;
    st->d.w = st->d.bias = st->d.scale = st->d.zero_point = NULL;
    st->d.quant = NULL;
    st->d.wq = NULL;
    st->int8 = d->op == CD_BOP_CONV2D && d->quant;
    st->swap = swap;
    snprintf(st->kernel, sizeof st->kernel, "%s", k == K_DNNL ? "dnnl" : k == K_COPY ? "copy" : "ref");
    int rc = 0, mb = d->max_batch;
    cd_dnnl_tdesc a, b;
    switch (d->op) {
    case CD_BOP_CONV2D:
        rc = conv_init(sw_of(be), st, d, k);
        // A border map: the references read it from st->d (oneDNN's op and the sparse int8 conv keep their own).
        if (!rc && d->u.conv.border && (st->kind == K_REF || st->kind == K_I8REF))
            rc = copy_floats(&st->border, d->u.conv.border, (size_t)d->u.conv.k * d->u.conv.oh * d->u.conv.ow);
        st->d.u.conv.border = st->border;
        break;
    case CD_BOP_GEMM: {
        size_t nw = (size_t)d->u.gemm.n * d->u.gemm.k;
        if (k == K_SPARSE) {
            cd_conv_desc c = gemm_as_conv(d);
            cd_sparse_conv_options o = {.format = (cd_sparse_format)d->sparse_format};
            rc = cd_sparse_conv_create(&c, d->w, d->bias, &o, &st->sp);
        } else if (k == K_DNNL) {
            cd_dnnl_tdesc t = {d->u.gemm.k, 1, 1, CD_LAYOUT_NCHW, 0};
            rc = cd_dnnl_ip_create(t, d->u.gemm.n, d->w, d->bias, d->u.gemm.act, mb * d->u.gemm.rows, &st->dop);
        } else if (!(rc = copy_floats(&st->w, d->w, nw))) {
            rc = copy_floats(&st->bias, d->bias, (size_t)d->u.gemm.n);
        }
        break;
    }
    case CD_BOP_POOL: { // float32, or the 1-byte integers of a quantized activation
        const cd_dnnl_elem elem = cd_dnnl_elem_of(d->dst.int8, d->dst.int8_signed);
        if (k == K_DNNL) rc = cd_dnnl_pool_create(&d->u.pool, d->dst.layout, elem, mb, &st->dop);
        break;
    }
    case CD_BOP_BINARY:
        if (k == K_DNNL) {
            const cd_tdesc *x = &d->src[swap], *y = &d->src[1 - swap];
            cd_cpu_to_dnnl(x, 0, &a);
            cd_cpu_to_dnnl(y, y->is_const, &b);
            rc = cd_dnnl_binary_create(cd_cpu_dnnl_bin(d->u.binary.kind), a, b, d->u.binary.act, mb, &st->dop);
        }
        break;
    case CD_BOP_ACTIVATION:
        if (k == K_DNNL) {
            cd_cpu_to_dnnl(&d->src[0], 0, &a);
            rc = cd_dnnl_eltwise_create(a, d->u.act, mb, &st->dop);
        }
        break;
    case CD_BOP_SOFTMAX:
        if (k == K_DNNL) {
            cd_dnnl_tdesc t = {(int)d->u.softmax.len, (int)d->u.softmax.inner, 1, CD_LAYOUT_NCHW, 0};
            rc = cd_dnnl_softmax_create(t, 1, mb, &st->dop);
        }
        break;
    case CD_BOP_CONCAT:
        if (k == K_DNNL) {
            cd_dnnl_tdesc t[CD_OP_MAX_IN];
            for (int i = 0; i < d->nsrc; i++) cd_cpu_to_dnnl(&d->src[i], 0, &t[i]);
            rc = cd_dnnl_concat_create(d->nsrc, t, d->u.axis, d->dst.layout, mb, &st->dop);
        }
        break;
    case CD_BOP_TRANSPOSE: break;
    case CD_BOP_FAKEQUANT: rc = fakequant_init(sw_of(be), st, d); break;
    case CD_BOP_REORDER:
        if (k == K_DNNL) {
            const cd_tdesc *s = &d->src[0];
            rc = cd_dnnl_reorder_create(s->layout, d->dst.layout, (int)s->shape[1], (int)s->shape[2], (int)s->shape[3],
                                        mb, &st->dop);
        }
        break;
    case CD_BOP_PAD:
    case CD_BOP_SLICE:
    case CD_BOP_REDUCE: break;
    case CD_BOP_LAYERNORM: rc = layernorm_init(st, d, k == K_DNNL, mb); break;
    case CD_BOP_RESIZE: rc = resize_init(sw_of(be), st, d); break;
    case CD_BOP_DECONV: rc = deconv_init(st, d, k == K_DNNL, mb); break;
    case CD_BOP_GATHER: rc = gather_init(st, d); break;
    case CD_BOP_TILE: break;
    case CD_BOP_COUNT: rc = CD_EUNSUPPORTED; break;
    }
    if (!rc && st->dop) rc = cd_dnnl_op_prepare(st->dop, 1, NULL);
    // oneDNN 2.6 picks its int8 kernel, and the weights' layout with it, per
    // batch size and thread count, and cannot reorder into some of them
    // (zero-point compensation): every batch is built now, so a layer it
    // cannot run is declined at load (the planner then takes float32), never
    // failed in a request.
    for (int b = 2; !rc && st->dop && st->int8 && b <= mb; b++) rc = cd_dnnl_op_prepare(st->dop, b, NULL);
    if (!rc && (st->sp || st->sp8)) {
        cd_sparse_conv_info si;
        if (st->sp)
            cd_sparse_conv_get_info(st->sp, &si);
        else
            cd_sparse_conv_i8_get_info(st->sp8, &si);
        snprintf(st->kernel, sizeof st->kernel, "sparse%s:%s:%s:%s", st->sp8 ? "-i8" : "",
                 cd_sparse_format_name(si.format), cd_sparse_isa_name(si.isa), si.mode);
    }
    if (!rc && st->dop) {
        const char *impl = cd_dnnl_op_impl(st->dop, 1);
        if (impl && strcmp(impl, "?") != 0) snprintf(st->kernel, sizeof st->kernel, "dnnl:%s", impl);
    }
    if (rc) {
        be->iface->op_state_free(be, st);
        return rc;
    }
    *out = st;
    return 0;
}

// ---- run ------------------------------------------------------------------------

static int run_dnnl(cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs, cd_btensor *dst) {
    if (st->int8) { // bytes or float grid values, as its quantization says
        const void *s[2] = {srcs[0]->data, st->d.nsrc > 1 ? srcs[1]->data : NULL};
        return cd_dnnl_op_run_any(st->dop, ctx->dnnl, batch, st->d.nsrc, s, dst->data);
    }
    const float *p[CD_OP_MAX_IN];
    int n = st->d.nsrc;
    for (int i = 0; i < n; i++) p[i] = srcs[i]->data;
    if (st->swap) {
        p[0] = srcs[1]->data;
        p[1] = srcs[0]->data;
    }
    int b = st->op == CD_BOP_GEMM ? batch * st->d.u.gemm.rows : batch;
    return cd_dnnl_op_run(st->dop, ctx->dnnl, b, n, p, dst->data);
}

static int64_t numel(const cd_btensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    return n;
}

// Runs a sparse conv/FC (float32 or int8) with the context's workspace
// (grown when too small).
static int run_sparse(cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs, cd_btensor *dst) {
    int n = st->op == CD_BOP_GEMM ? batch * st->d.u.gemm.rows : batch;
    size_t need = st->sp8 ? cd_sparse_conv_i8_workspace_size(st->sp8, n) : cd_sparse_conv_workspace_size(st->sp, n);
    if (need > ctx->ws_size) {
        size_t sz = (need + 63) & ~(size_t)63;
        void *p = aligned_alloc(64, sz);
        if (!p) return CD_ENOMEM;
        free(ctx->ws);
        ctx->ws = p;
        ctx->ws_size = sz;
    }
    const float *res = st->op == CD_BOP_CONV2D && st->d.u.conv.has_residual ? srcs[1]->data : NULL;
    if (st->sp8) return cd_sparse_conv_i8_run_ws(st->sp8, srcs[0]->data, res, dst->data, n, need ? ctx->ws : NULL);
    return cd_sparse_conv_run_ws(st->sp, srcs[0]->data, res, dst->data, n, need ? ctx->ws : NULL);
}

// The context's workspace grown to at least bytes (64-byte aligned); NULL
// when it cannot grow.
static void *ctx_ws(cd_backend_ctx *ctx, size_t need) {
    if (need > ctx->ws_size) {
        size_t sz = (need + 63) & ~(size_t)63;
        void *p = aligned_alloc(64, sz);
        if (!p) return NULL;
        free(ctx->ws);
        ctx->ws = p;
        ctx->ws_size = sz;
    }
    return ctx->ws;
}

static int run_resize_tables(cd_backend_ctx *ctx, cd_op_state *st, int batch, const float *src, float *dst) {
    size_t need = cd_resize_tables_scratch_floats(st->rt) * sizeof(float);
    float *ws = need ? ctx_ws(ctx, need) : NULL;
    if (need && !ws) return CD_ENOMEM;
    cd_resize_tables_run(st->rt, batch, src, dst, ws);
    return 0;
}

static int cpu_op_run(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                      cd_btensor *dst) {
    if (st->kind == K_DNNL) return run_dnnl(ctx, st, batch, srcs, dst);
    if (st->kind == K_SPARSE || st->kind == K_I8SP) return run_sparse(ctx, st, batch, srcs, dst);
    const cd_bop_desc *d = &st->d;
    switch (st->op) {
    case CD_BOP_CONV2D: {
        cd_conv_desc c = d->u.conv;
        c.n = batch;
        if (st->kind == K_I8REF) {
            cd_ref_conv2d_i8(&c, &st->q, srcs[0]->data, st->wq, st->bias, c.has_residual ? srcs[1]->data : NULL,
                             dst->data);
            return 0;
        }
        cd_ref_conv2d(&c, srcs[0]->data, st->w, st->bias, c.has_residual ? srcs[1]->data : NULL, dst->data);
        return 0;
    }
    case CD_BOP_GEMM:
        cd_ref_gemm(batch * d->u.gemm.rows, d->u.gemm.n, d->u.gemm.k, srcs[0]->data, st->w, st->bias, d->u.gemm.act,
                    dst->data);
        return 0;
    case CD_BOP_POOL: {
        cd_pool_desc p = d->u.pool;
        p.n = batch;
        cd_ref_pool2d(&p, srcs[0]->data, dst->data);
        return 0;
    }
    case CD_BOP_BINARY:
        cd_ref_binary(d->u.binary.kind, dst->rank, srcs[0]->shape, srcs[0]->data, srcs[1]->shape, srcs[1]->data,
                      dst->shape, d->u.binary.act, dst->data);
        return 0;
    case CD_BOP_ACTIVATION: cd_ref_activation(d->u.act, (size_t)numel(dst), srcs[0]->data, dst->data); return 0;
    case CD_BOP_SOFTMAX:
        cd_ref_softmax((size_t)(batch * d->u.softmax.outer), (size_t)d->u.softmax.len, (size_t)d->u.softmax.inner,
                       srcs[0]->data, dst->data);
        return 0;
    case CD_BOP_CONCAT: {
        const int64_t *shapes[CD_OP_MAX_IN];
        int64_t items[CD_OP_MAX_IN][2]; // blocked: each input as [batch, its elements per item]
        const float *ptrs[CD_OP_MAX_IN];
        const int blocked = dst->layout != CD_LAYOUT_NCHW;
        for (int i = 0; i < d->nsrc; i++) {
            items[i][0] = batch;
            items[i][1] = (int64_t)(cd_tdesc_item_bytes(&d->src[i]) / sizeof(float));
            shapes[i] = blocked ? items[i] : srcs[i]->shape;
            ptrs[i] = srcs[i]->data;
        }
        cd_ref_concat(blocked ? 2 : dst->rank, blocked ? 1 : d->u.axis, d->nsrc, shapes, ptrs, dst->data);
        return 0;
    }
    case CD_BOP_TRANSPOSE:
        if (st->kind == K_COPY) {
            int split = 0, keep = 0;
            cd_cpu_transpose_rotation(srcs[0]->rank, d->u.perm, &split, &keep);
            cd_cpu_transpose_2d(srcs[0]->rank, srcs[0]->shape, split, keep, srcs[0]->data, dst->data);
        } else {
            cd_ref_transpose(srcs[0]->rank, srcs[0]->shape, d->u.perm, srcs[0]->data, dst->data);
        }
        return 0;
    case CD_BOP_FAKEQUANT: {
        // Every stored element (a blocked layout's padding too).
        size_t per = cd_tdesc_item_bytes(&d->dst) / sizeof(float), inner = 1;
        for (int i = d->u.fq.axis + 1; i < dst->rank; i++) inner *= (size_t)dst->shape[i];
        const float *sc = st->qscale, *zp = st->qscale ? st->qscale + d->u.fq.channels : NULL;
        cd_cpu_fakequant_op(&d->u.fq, batch, per, inner, sc, zp, sw_of(be)->kernels_ref, srcs[0]->data, dst->data);
        return 0;
    }
    case CD_BOP_REORDER: {
        const cd_btensor *s = srcs[0];
        if (st->kind == K_COPY) {
            cd_tdesc t = {s->rank, {0}, s->layout, 0};
            memcpy(t.shape, s->shape, sizeof t.shape);
            memmove(dst->data, s->data, cd_tdesc_item_bytes(&t) * (size_t)batch);
            return 0;
        }
        cd_ref_reorder(s->layout, dst->layout, batch, (int)s->shape[1], (int)s->shape[2], (int)s->shape[3], s->data,
                       dst->data);
        return 0;
    }
    case CD_BOP_PAD: cd_ref_pad(&d->u.pad, dst->rank, srcs[0]->shape, srcs[0]->data, dst->shape, dst->data); return 0;
    case CD_BOP_SLICE:
        if (st->kind == K_COPY)
            cd_cpu_slice_runs(&d->u.slice, dst->rank, srcs[0]->shape, srcs[0]->data, dst->shape, dst->data);
        else
            cd_ref_slice(&d->u.slice, dst->rank, srcs[0]->shape, srcs[0]->data, dst->shape, dst->data, sizeof(float));
        return 0;
    case CD_BOP_REDUCE: cd_ref_reduce(&d->u.reduce, srcs[0]->rank, srcs[0]->shape, srcs[0]->data, dst->data); return 0;
    case CD_BOP_LAYERNORM:
        cd_ref_layernorm(&d->u.ln, batch * d->u.ln.outer, srcs[0]->data, st->w, st->bias, dst->data);
        return 0;
    case CD_BOP_RESIZE:
        if (st->rt) return run_resize_tables(ctx, st, batch, srcs[0]->data, dst->data);
        cd_ref_resize(&d->u.resize, batch, srcs[0]->data, dst->data);
        return 0;
    case CD_BOP_DECONV: cd_ref_deconv(&d->u.deconv, batch, srcs[0]->data, st->w, st->bias, dst->data); return 0;
    case CD_BOP_GATHER:
        if (sw_of(be)->kernels_ref)
            cd_ref_gather(&d->u.gather, srcs[0]->rank, srcs[0]->shape, srcs[0]->data, dst->data);
        else
            cd_cpu_gather_runs(&d->u.gather, srcs[0]->rank, srcs[0]->shape, srcs[0]->data, dst->data);
        return 0;
    case CD_BOP_TILE: cd_ref_tile(dst->rank, srcs[0]->shape, srcs[0]->data, dst->shape, dst->data); return 0;
    case CD_BOP_COUNT: break;
    }
    return CD_EINTERNAL;
}

// ---- the rest of the vtable ---------------------------------------------------------

// The host's caps (be is NULL for cd_backend_cpu_get_caps), NCHW under its kernels_ref.
static void cpu_get_caps(cd_backend_t be, cd_backend_caps *out) {
    cd_layout native = cd_dnnl_blocked_layout();
    *out = (cd_backend_caps){
        .name = "cpu",
        .description = "cpu",
        .async = false,         // every run is synchronous
        .device_memory = false, // host memory, host kernels
        // NCHW under kernels_ref (CONVD_CPU_KERNELS=ref), whose kernels are NCHW only.
        .blocked_layout = be && sw_of(be)->kernels_ref ? CD_LAYOUT_NCHW : native,
        .native_layout = native,
        .residual_in_place = true, // dnnl.h, dw3x3.h, winograd.h, sparse-conv*.h, ref.h
        .isa = cd_dnnl_isa(),
    };
}

static void cpu_free(cd_backend_t be) { free(be); }

static int cpu_buffer_alloc(cd_backend_t be, size_t size, void **out) {
    size_t n = (size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p) return CD_ENOMEM;
    memset(p, 0, n ? n : 64); // blocked layouts' channel padding starts out zero
    *out = p;
    return 0;
}

static void cpu_buffer_free(cd_backend_t be, void *buf) { free(buf); }

static int cpu_copy(cd_backend_t be, void *dst, const void *src, size_t size) {
    memcpy(dst, src, size);
    return 0;
}

static int cpu_ctx_create(cd_backend_t be, cd_backend_ctx **out) {
    cd_backend_ctx *c = calloc(1, sizeof *c);
    if (!c) return CD_ENOMEM;
    int rc = cd_dnnl_ctx_create(&c->dnnl);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void cpu_ctx_free(cd_backend_t be, cd_backend_ctx *ctx) {
    cd_dnnl_ctx_free(ctx->dnnl);
    free(ctx->ws);
    free(ctx);
}

static const char *cpu_op_kernel(cd_backend_t be, cd_op_state *st) { return st->kernel; }

static const char *cpu_op_compute_dtype(cd_backend_t be, cd_op_state *st) {
    (void)be;
    return st->kind == K_DNNL && st->dop && cd_dnnl_op_is_bf16(st->dop) ? "bf16" : NULL;
}

static size_t cpu_op_weight_bytes(cd_backend_t be, cd_op_state *st) {
    if (st->dop) return cd_dnnl_op_weight_bytes(st->dop);
    if (st->sp || st->sp8) {
        cd_sparse_conv_info si;
        if (st->sp)
            cd_sparse_conv_get_info(st->sp, &si);
        else
            cd_sparse_conv_i8_get_info(st->sp8, &si);
        return si.packed_bytes;
    }
    const cd_conv_desc *c = &st->d.u.conv;
    const size_t map = st->border ? (size_t)c->k * c->oh * c->ow * sizeof(float) : 0; // a border map
    if (st->op == CD_BOP_CONV2D && st->wq)                                            // int8: the weights are bytes
        return (size_t)c->k * (c->c / c->groups) * c->r * c->s + (size_t)c->k * 2 * sizeof(float) + map;
    if (st->op == CD_BOP_CONV2D && st->w)
        return ((size_t)c->k * (c->c / c->groups) * c->r * c->s + (size_t)c->k) * sizeof(float) + map;
    if (st->op == CD_BOP_GEMM && st->w)
        return ((size_t)st->d.u.gemm.n * st->d.u.gemm.k + (st->bias ? (size_t)st->d.u.gemm.n : 0)) * sizeof(float);
    return 0;
}

static void cpu_op_state_free(cd_backend_t be, cd_op_state *st) {
    cd_dnnl_op_free(st->dop);
    cd_sparse_conv_free(st->sp);
    cd_sparse_conv_i8_free(st->sp8);
    cd_resize_tables_free(st->rt);
    free(st->w);
    free(st->bias);
    free(st->qscale);
    free(st->wscale);
    free(st->wq);
    free(st->gidx);
    free(st->border);
    free(st);
}

static const struct cd_backend_i g_cpu_iface = {
    .get_caps = cpu_get_caps,
    .free = cpu_free,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .ctx_create = cpu_ctx_create,
    .ctx_free = cpu_ctx_free,
    .supports_op = cpu_supports_op,
    .op_init = cpu_op_init,
    .op_run = cpu_op_run,
    .op_kernel = cpu_op_kernel,
    .op_compute_dtype = cpu_op_compute_dtype,
    .op_weight_bytes = cpu_op_weight_bytes,
    .op_state_free = cpu_op_state_free,
    .synchronize = NULL, // every CPU run is synchronous
};

int cd_backend_cpu_create(const cd_backend_opts *opts, cd_backend_t *out) {
    cd_backend_t be = calloc(1, sizeof *be + sizeof(cd_backend_opts)); // the switches follow it (sw_of)
    if (!be) return CD_ENOMEM;
    be->iface = &g_cpu_iface;
    cd_backend_opts *sw = be->context = be + 1;
    if (opts) *sw = *opts; // (hip_plugin: the hip backends' switch, unused here)
    *out = be;
    return 0;
}

void cd_backend_cpu_get_caps(cd_backend_caps *out) { cpu_get_caps(NULL, out); }

int cd_backend_cpu_set_threads(int n) {
    int rc = cd_dnnl_init();
    return rc ? rc : cd_dnnl_set_threads(n);
}
