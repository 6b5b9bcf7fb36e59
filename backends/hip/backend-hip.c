// The HIP backend: every slot of backends/backend.h on the kernels of
// backends/hip/. One source, two builds (backends/hip/backend-hip.h):
// "hip-emu" over the CPU emulator in the default build, "hip" over the real
// HIP runtime and rocSPARSE inside the GPU=hip plugin. Only the choice of the
// sparse route differs between them (cd_hipb_sparse_kind).
//
// Memory:
//   - weights are uploaded once, at op init, into device buffers the op state
//     owns (resident until the model is freed);
//   - the activation arena is planned at load by the runtime and allocated
//     with buffer_alloc, i.e. in device memory (one per cd_exec);
//   - each cd_backend_ctx (one per executing thread: one per daemon worker)
//     owns a non-blocking stream, a device workspace (im2col) grown to the
//     largest layer on first use, and pinned host staging buffers: inputs are
//     copied into pinned memory and uploaded with hipMemcpyAsync on the
//     worker's stream (upload_async); outputs come back the same way
//     (download_async) and are copied out at synchronize;
//   - every device allocation is accounted (device_bytes: weights, constants,
//     arenas of live execs, workspaces).
// What overlaps: the layers of one run are queued on the worker's stream
// without host waits (except a layer on the host SpMM route); different
// workers' uploads, kernels and downloads overlap each other (separate
// non-blocking streams, pinned staging, so the copies are truly
// asynchronous). Within one worker, the daemon submits batch i+1 on a second
// exec (cd_model_submit) before waiting for batch i (cd_model_wait), so its
// upload overlaps batch i's compute (docs/GPU.md says where that is lost).
//
// Sparse layers (cd_bop_desc.sparse = 1) take the routes of
// backend-hip-sparse.c; memory, contexts and staging are backend-hip-mem.c;
// this file has supports_op, op init, the dense runs and the vtable.
//
// Layouts: every op runs in NCHW; REORDER also converts NCHW <-> NCHW16C.

#include "backends/hip/backend-hip-impl.h"

#include "backends/hip/bias-act.h"
#include "backends/hip/binary.h"
#include "backends/hip/concat.h"
#include "backends/hip/conv2d.h"
#include "backends/hip/fakequant.h"
#include "backends/hip/global-pool.h"
#include "backends/hip/gather.h"
#include "backends/hip/pad-slice.h"
#include "backends/hip/plugin.h"
#include "backends/hip/pool2d.h"
#include "backends/hip/reduce-norm.h"
#include "backends/hip/reorder.h"
#include "backends/hip/resize-deconv.h"
#include "backends/hip/sgemm.h"
#include "backends/hip/softmax.h"
#include "backends/hip/transpose.h"
#include "sparse/sparse-conv.h"

#define HIP_MAX_BINARY_RANK 8

// ---- descriptions -----------------------------------------------------------------

static int is_global_pool(const cd_pool_desc *p) {
    return p->kh == p->h && p->kw == p->w && p->oh == 1 && p->ow == 1 && p->pad_t == 0 && p->pad_l == 0 &&
           p->pad_b == 0 && p->pad_r == 0 && p->dil_h == 1 && p->dil_w == 1;
}

// Bytes of one batch item of t (cd_tdesc_item_bytes, which lives in the
// runtime the plugin does not link).
static size_t item_bytes(const cd_tdesc *t) {
    size_t n = 1;
    for (int i = t->is_const ? 0 : 1; i < t->rank; i++) {
        int64_t d = t->shape[i];
        if (i == 1) d = cd_layout_padded_c(t->layout, d);
        n *= (size_t)d;
    }
    return n * sizeof(float);
}

static int binary_shapes_ok(const cd_bop_desc *d) {
    if (d->nsrc != 2 || d->dst.rank > HIP_MAX_BINARY_RANK) return 0;
    for (int i = 0; i < 2; i++) {
        const cd_tdesc *s = &d->src[i];
        if (s->rank != d->dst.rank) return 0;
        for (int k = 1; k < s->rank; k++)
            if (s->shape[k] != d->dst.shape[k] && s->shape[k] != 1) return 0;
        if (s->is_const && s->shape[0] != 1) return 0;
    }
    return 1;
}

static bool hip_supports_op(cd_backend_t be, const cd_bop_desc *d) {
    // No int8 kernels here: a quantized model's convs run in float32 over
    // the dequantized weights (docs/QUANTIZATION.md).
    if (d->quant) return false;
    if (d->fq_scale > 0.0f) return false;                         // its FakeQuant stays a layer of its own here
    if (d->op == CD_BOP_CONV2D && d->u.conv.border) return false; // made only for the CPU's int8 convs
    if (d->sparse) {
        if (d->op == CD_BOP_CONV2D && d->u.conv.has_residual != (d->nsrc == 2)) return false;
        return cd_hipb_sparse_kind(d) != K_DENSE;
    }
    switch (d->op) {
    case CD_BOP_REORDER:
        if (d->nsrc != 1) return false;
        if (d->src[0].layout == d->dst.layout) return true;
        // The reorder kernel (reorder.hip) knows NCHW and NCHW16C.
        for (int i = 0; i < 2; i++) {
            cd_layout l = i ? d->dst.layout : d->src[0].layout;
            if (l != CD_LAYOUT_NCHW && l != CD_LAYOUT_NCHW16C) return false;
        }
        return d->src[0].rank == 4;
    case CD_BOP_CONV2D: {
        const cd_conv_desc *c = &d->u.conv;
        if (!all_nchw(d) || d->src[0].rank != 4) return false;
        if (c->has_residual != (d->nsrc == 2)) return false;
        return c->groups >= 1 && c->c % c->groups == 0 && c->k % c->groups == 0 && c->r >= 1 && c->s >= 1;
    }
    case CD_BOP_GEMM: return all_nchw(d) && d->u.gemm.n >= 1 && d->u.gemm.k >= 1 && d->u.gemm.rows >= 1;
    case CD_BOP_POOL: return all_nchw(d) && d->src[0].rank == 4 && !d->src[0].int8 && !d->dst.int8;
    case CD_BOP_BINARY: return all_nchw(d) && d->u.binary.kind <= CD_BINARY_MAX && binary_shapes_ok(d);
    case CD_BOP_ACTIVATION: return all_nchw(d);
    case CD_BOP_SOFTMAX: return all_nchw(d) && d->u.softmax.len >= 1 && d->u.softmax.inner >= 1;
    case CD_BOP_CONCAT:
        return all_nchw(d) && d->nsrc >= 1 && d->nsrc <= 64 && d->u.axis >= 1 && d->u.axis < d->dst.rank;
    case CD_BOP_TRANSPOSE: return all_nchw(d) && d->src[0].rank >= 1 && d->src[0].rank <= 8;
    case CD_BOP_FAKEQUANT:
        return all_nchw(d) && d->u.fq.channels >= 1 &&
               (d->u.fq.channels == 1 || (d->u.fq.axis >= 1 && d->u.fq.axis < d->dst.rank));
    case CD_BOP_PAD:
    case CD_BOP_SLICE:
    case CD_BOP_REDUCE: return all_nchw(d) && d->src[0].rank >= 1 && d->src[0].rank <= CD_MAX_RANK;
    case CD_BOP_LAYERNORM: return all_nchw(d) && d->u.ln.len >= 1 && d->u.ln.outer >= 1;
    case CD_BOP_RESIZE: return all_nchw(d) && d->src[0].rank == 4;
    case CD_BOP_DECONV: {
        const cd_deconv_desc *c = &d->u.deconv;
        return all_nchw(d) && d->src[0].rank == 4 && c->groups >= 1 && c->c % c->groups == 0 && c->k % c->groups == 0 &&
               c->stride_h >= 1 && c->stride_w >= 1;
    }
    case CD_BOP_GATHER:
        return all_nchw(d) && d->u.gather.axis >= 1 && d->u.gather.axis < d->src[0].rank && d->u.gather.nidx >= 1;
    case CD_BOP_TILE: return all_nchw(d) && d->src[0].rank >= 1 && d->src[0].rank == d->dst.rank;
    case CD_BOP_COUNT: break;
    }
    return false;
} // ---- op init ------------------------------------------------------------------------

static void hip_op_state_free(cd_backend_t be, cd_op_state *st) {
    if (!st) return;
    cd_hipb_dev_free(be, st->w);
    cd_hipb_dev_free(be, st->bias);
    cd_hipb_dev_free(be, st->gidx);
    cd_hipb_sparse_free(st);
    free(st);
}

static const char *kind_name(const cd_op_state *st) {
    int kxk = st->op == CD_BOP_CONV2D && !is_pointwise(&st->d.u.conv);
    int bsr8 = st->d.sparse_format == CD_SPARSE_FMT_BSR8;
    switch (st->kind) {
    case K_GLOBAL_POOL: return "global-pool";
    case K_COPY: return "copy";
    // k x k convs on a sparse route: "im2col-" before the SpMM's name.
    case K_SPMM_HOST: return kxk ? "im2col-csr-spmm-cpu-ref" : "csr-spmm-cpu-ref";
    case K_SPMM_ROCSPARSE: return kxk ? "im2col-rocsparse-csr-spmm" : "rocsparse-csr-spmm";
    case K_GEBSR_HOST:
        if (kxk) return bsr8 ? "im2col-gebsr8x1-cpu-ref" : "im2col-gebsr4x1-cpu-ref";
        return bsr8 ? "gebsr8x1-cpu-ref" : "gebsr4x1-cpu-ref";
    case K_GEBSR_ROCSPARSE:
        if (kxk) return bsr8 ? "im2col-rocsparse-gebsr8x1-mm" : "im2col-rocsparse-gebsr4x1-mm";
        return bsr8 ? "rocsparse-gebsr8x1-mm" : "rocsparse-gebsr4x1-mm";
    case K_DENSE: break;
    }
    switch (st->op) {
    case CD_BOP_CONV2D: {
        const cd_conv_desc *c = &st->d.u.conv;
        if (c->groups > 1 && c->groups == c->c && c->k % c->c == 0) return "dwconv";
        if (c->r == 1 && c->s == 1 && c->stride_h == 1 && c->stride_w == 1 && !c->pad_t && !c->pad_l && !c->pad_b &&
            !c->pad_r)
            return "conv1x1-sgemm";
        return "im2col-sgemm";
    }
    case CD_BOP_GEMM: return "sgemm";
    case CD_BOP_POOL: return "pool2d";
    case CD_BOP_BINARY: return "binary";
    case CD_BOP_ACTIVATION: return "bias-act";
    case CD_BOP_SOFTMAX: return "softmax";
    case CD_BOP_CONCAT: return "concat";
    case CD_BOP_TRANSPOSE: return "transpose";
    case CD_BOP_REORDER: return "reorder";
    case CD_BOP_FAKEQUANT: return "fakequant";
    case CD_BOP_PAD: return "pad";
    case CD_BOP_SLICE: return "slice";
    case CD_BOP_REDUCE: return "reduce";
    case CD_BOP_LAYERNORM: return "layernorm";
    case CD_BOP_RESIZE: return "resize";
    case CD_BOP_DECONV: return "deconv";
    case CD_BOP_GATHER: return "gather";
    case CD_BOP_TILE: return "tile";
    case CD_BOP_COUNT: break;
    }
    return "?";
}

static void hip_get_caps(cd_backend_t be, cd_backend_caps *out) {
    *out = (cd_backend_caps){
        .name = CD_HIP_REAL ? "hip" : "hip-emu",
        .description = CD_HIP_REAL ? "hip (the HIP backend of the GPU=hip plugin)"
                                   : "hip-emu (the HIP kernels on the CPU emulator: for tests, slow)",
        // On a GPU, ops and copies only queue on the context's stream. The
        // emulator runs each launch to completion before it returns.
        .async = CD_HIP_REAL,
        .device_memory = true,
        .blocked_layout = CD_LAYOUT_NCHW, // our HIP kernels are NCHW
        .native_layout = CD_LAYOUT_NCHW,
        .isa = NULL,
    };
}

// Prepares d: uploads conv/gemm weights and bias (dense), or builds the CSR
// (sparse = 1: host copy for the CPU reference route, a resident rocSPARSE
// plan on the device), and picks the kernel. Returns 0, CD_EUNSUPPORTED (not
// supports_op), CD_EPARAMS (conv/gemm without weights), CD_ENOMEM or the
// HIP/rocSPARSE error.
static int hip_op_init(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out) {
    *out = NULL;
    if (!hip_supports_op(be, d)) return CD_EUNSUPPORTED;
    int rc = use_device(be);
    if (rc) return rc;
    cd_op_state *st = calloc(1, sizeof *st);
    if (!st) return CD_ENOMEM;
    st->op = d->op;
    st->d = *d;
    st->d.w = st->d.bias = st->d.scale = st->d.zero_point = NULL;
    st->kind = K_DENSE;
    if (d->op == CD_BOP_CONV2D || d->op == CD_BOP_GEMM) {
        int rows, cols;
        size_t nw;
        if (d->op == CD_BOP_CONV2D) {
            const cd_conv_desc *c = &d->u.conv;
            rows = c->k;
            cols = (c->c / c->groups) * c->r * c->s;
        } else {
            rows = d->u.gemm.n;
            cols = d->u.gemm.k;
        }
        nw = (size_t)rows * cols;
        if (!d->w) rc = CD_EPARAMS;
        if (!rc && d->sparse) st->kind = cd_hipb_sparse_kind(d);
        if (!rc && st->kind != K_DENSE) {
            rc = cd_hipb_sparse_init(be, st, d->w, d->bias, rows, cols);
        } else if (!rc) {
            rc = cd_hipb_dev_upload(be, d->bias, (size_t)rows, &st->bias);
            if (!rc) rc = cd_hipb_dev_upload(be, d->w, nw, &st->w);
            st->weight_bytes = (nw + (d->bias ? (size_t)rows : 0)) * sizeof(float);
        }
    } else if (d->op == CD_BOP_FAKEQUANT && d->u.fq.dynamic) {
        if (d->u.fq.channels != 1) rc = CD_EPARAMS; // parameters per request, from the data
    } else if (d->op == CD_BOP_FAKEQUANT) {
        // The scales in w, the zero points in bias (device arrays of channels).
        if (!d->scale || !d->zero_point) rc = CD_EPARAMS;
        if (!rc) rc = cd_hipb_dev_upload(be, d->scale, (size_t)d->u.fq.channels, &st->w);
        if (!rc) rc = cd_hipb_dev_upload(be, d->zero_point, (size_t)d->u.fq.channels, &st->bias);
    } else if (d->op == CD_BOP_LAYERNORM) {
        // gamma in w, beta (when given) in bias: device arrays of len.
        if (!d->w) rc = CD_EPARAMS;
        if (!rc) rc = cd_hipb_dev_upload(be, d->w, (size_t)d->u.ln.len, &st->w);
        if (!rc) rc = cd_hipb_dev_upload(be, d->bias, (size_t)d->u.ln.len, &st->bias);
    } else if (d->op == CD_BOP_DECONV) {
        const cd_deconv_desc *c = &d->u.deconv;
        size_t nw = (size_t)c->c * (c->k / c->groups) * c->r * c->s;
        if (!d->w) rc = CD_EPARAMS;
        if (!rc) rc = cd_hipb_dev_upload(be, d->bias, (size_t)c->k, &st->bias);
        if (!rc) rc = cd_hipb_dev_upload(be, d->w, nw, &st->w);
        st->weight_bytes = (nw + (d->bias ? (size_t)c->k : 0)) * sizeof(float);
    } else if (d->op == CD_BOP_GATHER) {
        // The indices, checked against the axis, in device memory.
        const cd_gather_desc *g = &d->u.gather;
        const int64_t len = d->src[0].shape[g->axis];
        if (!g->idx) rc = CD_EPARAMS;
        for (int64_t j = 0; !rc && j < g->nidx; j++)
            if (g->idx[j] < 0 || g->idx[j] >= len) rc = CD_EPARAMS;
        void *p = NULL;
        if (!rc) rc = cd_hipb_dev_upload_bytes(be, g->idx, (size_t)g->nidx * sizeof(int64_t), &p);
        st->gidx = p;
        st->d.u.gather.idx = NULL; // the caller's: gone after init
    } else if (d->op == CD_BOP_POOL && is_global_pool(&d->u.pool)) {
        st->kind = K_GLOBAL_POOL;
    } else if (d->op == CD_BOP_REORDER && d->src[0].layout == d->dst.layout) {
        st->kind = K_COPY;
    }
    if (rc) {
        hip_op_state_free(be, st);
        return rc;
    }
    snprintf(st->kernel, sizeof st->kernel, "%s:%s", CD_HIP_REAL ? "hip" : "hip-emu", kind_name(st));
    *out = st;
    return 0;
}

// Queues a prepared op on the context's stream (the host SpMM route runs on
// the host and returns with its upload queued). Returns 0, CD_EPARAMS without
// a context, or the kernel's / HIP's error.
static int hip_op_run(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                      cd_btensor *dst) {
    if (!ctx) return CD_EPARAMS; // the executor always has one (ctx_create is set)
    int rc = use_device(be);
    if (rc) return rc;
    const cd_bop_desc *d = &st->d;
    hipStream_t s = ctx->stream;
    if (st->kind >= K_SPMM_HOST) return cd_hipb_sparse_run(be, ctx, st, batch, srcs, dst);
    switch (st->op) {
    case CD_BOP_CONV2D: {
        cd_conv_desc c = d->u.conv;
        c.n = batch;
        size_t ws = cd_hip_conv2d_workspace(&c);
        if ((rc = cd_hipb_ctx_workspace(be, ctx, ws))) return rc;
        return cd_hip_conv2d(&c, srcs[0]->data, st->w, st->bias, c.has_residual ? srcs[1]->data : NULL, dst->data,
                             ctx->ws, ctx->ws_bytes, s);
    }
    case CD_BOP_GEMM: {
        cd_hip_gemm_desc g;
        memset(&g, 0, sizeof g);
        g.m = batch * d->u.gemm.rows;
        g.n = d->u.gemm.n;
        g.k = d->u.gemm.k;
        g.batch = 1;
        g.a_rs = g.k; // A = src, m x k row-major
        g.a_cs = 1;
        g.b_rs = 1; // B(p, j) = w[j, p]: the n x k weights transposed
        g.b_cs = g.k;
        g.ldc = g.n;
        g.alpha = 1.0f;
        g.beta = 0.0f;
        if ((rc = cd_hip_sgemm(&g, srcs[0]->data, st->w, dst->data, s))) return rc;
        if (!st->bias && d->u.gemm.act.kind == CD_ACT_NONE) return 0;
        return cd_hip_bias_act(g.m, g.n, 1, dst->data, st->bias, NULL, d->u.gemm.act, dst->data, s);
    }
    case CD_BOP_POOL: {
        cd_pool_desc p = d->u.pool;
        p.n = batch;
        if (st->kind == K_GLOBAL_POOL)
            return cd_hip_global_pool(p.kind, (int64_t)batch * p.c, (int64_t)p.h * p.w, srcs[0]->data, dst->data, s);
        return cd_hip_pool2d(&p, srcs[0]->data, dst->data, s);
    }
    case CD_BOP_BINARY:
        return cd_hip_binary((cd_hip_binary_op)d->u.binary.kind, srcs[0]->rank, srcs[0]->shape, srcs[1]->rank,
                             srcs[1]->shape, srcs[0]->data, srcs[1]->data, d->u.binary.act, dst->data, s);
    case CD_BOP_ACTIVATION:
        return cd_hip_bias_act(1, 1, (int64_t)numel(dst), srcs[0]->data, NULL, NULL, d->u.act, dst->data, s);
    case CD_BOP_SOFTMAX:
        return cd_hip_softmax(batch * d->u.softmax.outer, d->u.softmax.len, d->u.softmax.inner, srcs[0]->data,
                              dst->data, s);
    case CD_BOP_CONCAT: {
        int64_t outer = 1, cols[CD_OP_MAX_IN];
        const float *ptrs[CD_OP_MAX_IN];
        for (int i = 0; i < d->u.axis; i++) outer *= dst->shape[i];
        for (int j = 0; j < d->nsrc; j++) {
            cols[j] = 1;
            for (int i = d->u.axis; i < srcs[j]->rank; i++) cols[j] *= srcs[j]->shape[i];
            ptrs[j] = srcs[j]->data;
        }
        return cd_hip_concat(d->nsrc, outer, cols, ptrs, dst->data, s);
    }
    case CD_BOP_TRANSPOSE:
        return cd_hip_transpose(srcs[0]->rank, srcs[0]->shape, d->u.perm, srcs[0]->data, dst->data, s);
    case CD_BOP_FAKEQUANT: {
        if (d->u.fq.dynamic)
            return cd_hip_fakequant_dynamic(batch, numel(dst) / (batch > 0 ? batch : 1), srcs[0]->data, d->u.fq.qmin,
                                            d->u.fq.qmax, dst->data, s);
        int64_t inner = 1;
        for (int i = d->u.fq.axis + 1; i < dst->rank; i++) inner *= dst->shape[i];
        return cd_hip_fakequant(numel(dst), d->u.fq.channels, inner, srcs[0]->data, st->w, st->bias, d->u.fq.qmin,
                                d->u.fq.qmax, dst->data, s);
    }
    case CD_BOP_REORDER: {
        const cd_btensor *x = srcs[0];
        if (st->kind == K_COPY) {
            size_t bytes = item_bytes(&d->src[0]) * (size_t)batch;
            if (bytes && x->data != dst->data)
                CD_HIP_CHECK(hipMemcpyAsync(dst->data, x->data, bytes, hipMemcpyDeviceToDevice, s));
            return 0;
        }
        return cd_hip_reorder(x->layout, dst->layout, batch, (int)x->shape[1], (int)x->shape[2], (int)x->shape[3],
                              x->data, dst->data, s);
    }
    case CD_BOP_PAD: return cd_hip_pad(&d->u.pad, dst->rank, srcs[0]->shape, srcs[0]->data, dst->shape, dst->data, s);
    case CD_BOP_SLICE:
        return cd_hip_slice(&d->u.slice, dst->rank, srcs[0]->shape, srcs[0]->data, dst->shape, dst->data, s);
    case CD_BOP_REDUCE: return cd_hip_reduce(&d->u.reduce, srcs[0]->rank, srcs[0]->shape, srcs[0]->data, dst->data, s);
    case CD_BOP_LAYERNORM:
        return cd_hip_layernorm(&d->u.ln, batch * d->u.ln.outer, srcs[0]->data, st->w, st->bias, dst->data, s);
    case CD_BOP_RESIZE: return cd_hip_resize(&d->u.resize, batch, srcs[0]->data, dst->data, s);
    case CD_BOP_DECONV: return cd_hip_deconv(&d->u.deconv, batch, srcs[0]->data, st->w, st->bias, dst->data, s);
    case CD_BOP_GATHER: {
        const cd_btensor *x = srcs[0];
        const int axis = d->u.gather.axis;
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < axis; i++) outer *= x->shape[i];
        for (int i = axis + 1; i < x->rank; i++) inner *= x->shape[i];
        return cd_hip_gather(outer, x->shape[axis], inner, d->u.gather.nidx, st->gidx, x->data, dst->data, s);
    }
    case CD_BOP_TILE: return cd_hip_tile(dst->rank, srcs[0]->shape, srcs[0]->data, dst->shape, dst->data, s);
    case CD_BOP_COUNT: break;
    }
    return CD_EINTERNAL;
}

// ---- the rest of the vtable -------------------------------------------------------------

static void hip_free(cd_backend_t be) {
    hip_be *b = HB(be);
    if (b) {
        // Everything the runtime made is freed by now; anything left is a leak
        // of ours, released here rather than kept on the device.
        for (size_t i = 0; i < b->nallocs; i++) CD_HIP_CHECK_LOG(hipFree(b->allocs[i].p));
#if CD_HIP_REAL
        cd_rocsparse_ctx_free(b->load_rs);
#endif
        free(b->allocs);
        pthread_mutex_destroy(&b->lock);
        free(b);
    }
    free(be);
}

static const char *hip_op_kernel(cd_backend_t be, cd_op_state *st) { return st->kernel; }

static size_t hip_op_weight_bytes(cd_backend_t be, cd_op_state *st) { return st->weight_bytes; }

static const struct cd_backend_i g_hip_iface = {
    .get_caps = hip_get_caps,
    .free = hip_free,
    .buffer_alloc = cd_hipb_buffer_alloc,
    .buffer_free = cd_hipb_buffer_free,
    .upload = cd_hipb_upload,
    .download = cd_hipb_download,
    .ctx_create = cd_hipb_ctx_create,
    .ctx_free = cd_hipb_ctx_free,
    .supports_op = hip_supports_op,
    .op_init = hip_op_init,
    .op_run = hip_op_run,
    .op_kernel = hip_op_kernel,
    .op_weight_bytes = hip_op_weight_bytes,
    .op_state_free = hip_op_state_free,
    .synchronize = cd_hipb_synchronize,
    .upload_async = cd_hipb_upload_async,
    .stage_inputs = cd_hipb_stage_inputs,
    .upload_staged = cd_hipb_upload_staged,
    .download_async = cd_hipb_download_async,
    .device_bytes = cd_hipb_device_bytes,
};

int cd_backend_hip_init(int device, cd_backend_t *out, char *err, size_t errlen) {
    *out = NULL;
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    if (e != hipSuccess || count < 1 || device < 0 || device >= count) {
        if (err && errlen)
            snprintf(err, errlen, "no HIP device %d (%s%s)", device,
                     e != hipSuccess ? "hipGetDeviceCount: " : "devices: ",
                     e != hipSuccess ? hipGetErrorName(e) : (count ? "fewer" : "none"));
        return CD_EDEVICE;
    }
    cd_backend_t be = calloc(1, sizeof *be);
    hip_be *b = calloc(1, sizeof *b);
    if (!be || !b) {
        free(be);
        free(b);
        return CD_ENOMEM;
    }
    b->device = device;
    pthread_mutex_init(&b->lock, NULL);
    be->iface = &g_hip_iface;
    be->context = b;
    *out = be;
    return 0;
}

// The plugin's entry point for the runtime (backends/hip/plugin.h).
__attribute__((visibility("default"))) int cd_hip_plugin_backend_create(int device, struct cd_backend **out, char *err,
                                                                        size_t errlen) {
    return cd_backend_hip_init(device, out, err, errlen);
}
