// The HIP backend's sparse routes (backends/hip/backend-hip-impl.h): the
// planner asks for them with cd_bop_desc.sparse = 1. Pointwise (1x1, stride
// 1, unpadded, ungrouped) convs and Gemm run as a CSR SpMM: on the real
// device through rocSPARSE (backends/hip/sparse/rocsparse-calls.c; convs with
// >= 16 output pixels only, Gemm not: supports_op says no and the planner
// keeps them dense), under the emulator through a CPU reference loop on host
// copies (rocSPARSE cannot run without a GPU). Layers the planner packs as
// BSR4 / BSR8 (sparse_format) take the general-BSR route instead (4x1 / 8x1
// blocks, backends/hip/sparse/gebsr-pack.h): rocsparse_sgebsrmm on the real
// device, a CPU loop over the packed blocks under the emulator.

#include "backends/hip/backend-hip-impl.h"

#include "backends/hip/bias-act.h"
#include "backends/hip/im2col.h"
#include "backends/hip/transpose.h"
#include "sparse/sparse-conv.h"

#if CD_HIP_REAL
#include "backends/hip/sparse/rocsparse-calls.h"
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

// The GEBSR row block of a sparse_format, or 0 (CSR, AUTO: the CSR route).
int cd_hipb_gebsr_rows(const cd_bop_desc *d) {
    if (d->sparse_format == CD_SPARSE_FMT_BSR4) return 4;
    if (d->sparse_format == CD_SPARSE_FMT_BSR8) return 8;
    return 0;
}

// The sparse route of a sparse = 1 conv/gemm on this build, or K_DENSE when
// it has none for that geometry. BSR4/BSR8 take the GEBSR route (4x1 / 8x1
// blocks), every other format the CSR route.
// 1 when the conv is ungrouped: pointwise convs multiply the image itself,
// k x k ones its im2col columns ((C*R*S) x OH*OW per image, im2col.hip).
static int conv_has_sparse_route(const cd_conv_desc *c) {
    return c->groups == 1 && (size_t)c->k * c->c * c->r * c->s <= (size_t)1 << 30;
}

kernel_kind cd_hipb_sparse_kind(const cd_bop_desc *d) {
    if (!all_nchw(d)) return K_DENSE;
    if (cd_hipb_gebsr_rows(d)) {
        if (d->op == CD_BOP_CONV2D) {
            if (!conv_has_sparse_route(&d->u.conv)) return K_DENSE;
        } else if (d->op != CD_BOP_GEMM || (size_t)d->u.gemm.n * d->u.gemm.k > (size_t)1 << 30) {
            return K_DENSE;
        }
        return CD_HIP_REAL ? K_GEBSR_ROCSPARSE : K_GEBSR_HOST;
    }
    if (d->op == CD_BOP_CONV2D) {
        const cd_conv_desc *c = &d->u.conv;
        if (!conv_has_sparse_route(c)) return K_DENSE;
#if CD_HIP_REAL
        // rocSPARSE: one image's activations (or their im2col columns) are
        // the dense B (C x OH*OW, row-major); narrower than CD_ROCSPARSE_MIN_COLS would need padding.
        if ((int64_t)c->oh * c->ow < CD_ROCSPARSE_MIN_COLS) return K_DENSE;
        return K_SPMM_ROCSPARSE;
#else
        return K_SPMM_HOST;
#endif
    }
    if (d->op == CD_BOP_GEMM && (size_t)d->u.gemm.n * d->u.gemm.k <= (size_t)1 << 30)
        return CD_HIP_REAL ? K_DENSE : K_SPMM_HOST; // rocSPARSE Gemm would need a transpose
    return K_DENSE;
}

// ---- the sparse route ---------------------------------------------------------------

// Builds the host CSR of the rows x cols matrix w (row-major). Returns 0 or
// CD_ENOMEM; sets st->rows/cols and the arrays.
static int csr_build(cd_op_state *st, const float *w, int rows, int cols, size_t nnz) {
    st->rows = rows;
    st->cols = cols;
    st->row_ptr = malloc(((size_t)rows + 1) * sizeof(int));
    st->col_ind = malloc((nnz ? nnz : 1) * sizeof(int));
    st->val = malloc((nnz ? nnz : 1) * sizeof(float));
    if (!st->row_ptr || !st->col_ind || !st->val) return CD_ENOMEM;
    size_t j = 0;
    for (int r = 0; r < rows; r++) {
        st->row_ptr[r] = (int)j;
        for (int c = 0; c < cols; c++) {
            float v = w[(size_t)r * cols + c];
            if (v == 0.0f) continue;
            st->col_ind[j] = c;
            st->val[j] = v;
            j++;
        }
    }
    st->row_ptr[rows] = (int)j;
    return 0;
}

#if CD_HIP_REAL
// The backend's load-time rocSPARSE handle (made on the first CSR plan, then
// kept: one per backend, counted and accounted like a context's), with the
// backend's lock held; the caller unlocks. 0 or a code.
static int load_handle_locked(cd_backend_t be, cd_rocsparse_ctx **out) {
    hip_be *b = HB(be);
    cd_hipb_lock(be);
    if (!b->load_rs) {
        int rc = cd_rocsparse_ctx_create(&b->load_rs);
        if (rc) return rc;
        __atomic_fetch_add(&b->counters.sparse_handles, 1, __ATOMIC_RELAXED);
        b->bytes += CD_HIP_SPARSE_HANDLE_BYTES;
    }
    *out = b->load_rs;
    return 0;
}

// Creates the resident rocSPARSE plan of a pointwise conv (C = W x X per
// image, X: C x OH*OW) with the load handle (its calls are serialised by the
// backend's lock: load time only). Sample operands are allocated for the
// preprocess stage and freed. Returns 0 or a code.
static int csr_plan_create(cd_backend_t be, cd_op_state *st) {
    const cd_conv_desc *c = &st->d.u.conv;
    int hw = c->oh * c->ow;
    if (st->row_ptr[st->rows] == 0) return 0; // all-zero weights: no plan, the run writes zeros
    void *b = NULL, *o = NULL;
    int rc = cd_hipb_dev_alloc(be, (size_t)st->cols * hw * sizeof(float), &b);
    if (!rc) rc = cd_hipb_dev_alloc(be, (size_t)c->k * hw * sizeof(float), &o);
    if (!rc) {
        cd_rocsparse_ctx *rs = NULL;
        rc = load_handle_locked(be, &rs);
        if (!rc)
            rc = cd_rocsparse_csr_init(&st->csr, rs, st->rows, st->cols, st->row_ptr[st->rows], st->row_ptr,
                                       st->col_ind, st->val, hw, b, o);
        cd_hipb_unlock(be);
    }
    cd_hipb_dev_free(be, b);
    cd_hipb_dev_free(be, o);
    return rc;
}

// Uploads the host GEBSR as the op's resident rocSPARSE plan (none for
// all-zero weights: the run writes zeros). Returns 0 or a code.
static int gebsr_plan_create(cd_op_state *st) {
    const cd_gebsr *g = &st->gebsr;
    st->gb_mb = g->mb;
    if (g->nnzb == 0) return 0;
    return cd_rocsparse_gebsr_init(&st->gb, g->mb, g->kb, g->nnzb, g->row_block_dim, g->col_block_dim, g->row_ptr,
                                   g->col_ind, g->val);
}
#endif
// Makes the pinned scratch *p hold bytes (contents dropped). 0 or a code.
static int host_scratch(float **p, size_t *have, size_t bytes) {
    char *b = (char *)*p;
    int rc = cd_hipb_pinned_reserve(&b, have, bytes);
    *p = (float *)b;
    return rc;
}

// The GEBSR part of the host route (K_GEBSR_HOST): y = act(A x + bias
// [+ residual]) from the packed blocks, y already holding the residual when
// the conv has one. Padding rows of the last block row are never written.
static void gebsr_host(const cd_op_state *st, int batch, const float *x, float *y) {
    const cd_bop_desc *d = &st->d;
    if (d->op == CD_BOP_CONV2D) {
        const cd_conv_desc *c = &d->u.conv;
        size_t hw = (size_t)c->oh * c->ow;
        for (int n = 0; n < batch; n++) {
            float *yn = y + (size_t)n * st->rows * hw;
            for (int k = 0; k < st->rows; k++) {
                float b0 = st->hbias ? st->hbias[k] : 0.0f;
                float *yr = yn + (size_t)k * hw;
                for (size_t p = 0; p < hw; p++) yr[p] = c->has_residual ? yr[p] + b0 : b0;
            }
            // X: C x hw row-major, Y: K x hw row-major (one NCHW image each).
            cd_gebsr_mm_host(&st->gebsr, hw, x + (size_t)n * st->cols * hw, hw, 1, yn, hw, 1);
            for (size_t i = 0; i < (size_t)st->rows * hw; i++) yn[i] = cd_act_apply(c->act, yn[i]);
        }
    } else { // GEMM: X(col, i) = x[i*cols + col], Y(r, i) = y[i*rows + r]
        size_t m = (size_t)batch * d->u.gemm.rows;
        for (size_t i = 0; i < m; i++)
            for (int r = 0; r < st->rows; r++) y[i * st->rows + r] = st->hbias ? st->hbias[r] : 0.0f;
        cd_gebsr_mm_host(&st->gebsr, m, x, 1, (size_t)st->cols, y, 1, (size_t)st->rows);
        for (size_t i = 0; i < m * st->rows; i++) y[i] = cd_act_apply(d->u.gemm.act, y[i]);
    }
}

// The host SpMM route: waits for the stream, copies the input (and the
// residual) to pinned host memory, multiplies by the CSR (or GEBSR) weights
// with the bias, residual and activation applied, and uploads the result.
static int run_spmm_host(cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                         cd_btensor *dst) {
    const cd_bop_desc *d = &st->d;
    size_t nx = numel(srcs[0]), ny = numel(dst);
    // The input is ready, and the previous host layer's upload out of hy is done.
    CD_HIP_CHECK(hipStreamSynchronize(ctx->stream));
    int rc = host_scratch(&ctx->hx, &ctx->hx_bytes, nx * sizeof(float));
    if (!rc) rc = host_scratch(&ctx->hy, &ctx->hy_bytes, ny * sizeof(float));
    if (rc) return rc;
    CD_HIP_CHECK(hipMemcpy(ctx->hx, srcs[0]->data, nx * sizeof(float), hipMemcpyDeviceToHost));
    float *x = ctx->hx, *y = ctx->hy;
    const int *rp = st->row_ptr, *ci = st->col_ind;
    const float *v = st->val;
    if (d->op == CD_BOP_CONV2D && d->u.conv.has_residual)
        CD_HIP_CHECK(hipMemcpy(y, srcs[1]->data, ny * sizeof(float), hipMemcpyDeviceToHost));
    if (st->kind == K_GEBSR_HOST) {
        gebsr_host(st, batch, x, y);
    } else if (d->op == CD_BOP_CONV2D) {
        const cd_conv_desc *c = &d->u.conv;
        size_t hw = (size_t)c->oh * c->ow;
        for (int n = 0; n < batch; n++)
            for (int k = 0; k < st->rows; k++) {
                float *yr = y + ((size_t)n * st->rows + k) * hw;
                float b0 = st->hbias ? st->hbias[k] : 0.0f;
                for (size_t p = 0; p < hw; p++) yr[p] = c->has_residual ? yr[p] + b0 : b0;
                for (size_t p = 0; p < hw; p++) {
                    float s = 0.0f;
                    for (int j = rp[k]; j < rp[k + 1]; j++) s += v[j] * x[((size_t)n * st->cols + ci[j]) * hw + p];
                    yr[p] = cd_act_apply(c->act, s + yr[p]);
                }
            }
    } else { // GEMM: y[m, r] = act(sum_j val * x[m, col] + bias[r])
        size_t m = (size_t)batch * d->u.gemm.rows;
        for (size_t i = 0; i < m; i++)
            for (int r = 0; r < st->rows; r++) {
                float s = 0.0f;
                for (int j = rp[r]; j < rp[r + 1]; j++) s += v[j] * x[i * st->cols + ci[j]];
                y[i * st->rows + r] = cd_act_apply(d->u.gemm.act, s + (st->hbias ? st->hbias[r] : 0.0f));
            }
    }
    CD_HIP_CHECK(hipMemcpyAsync(dst->data, y, ny * sizeof(float), hipMemcpyHostToDevice, ctx->stream));
    return 0;
}

#if CD_HIP_REAL
// The rocSPARSE route of a pointwise conv, everything queued on the worker's
// stream with the context's handle (no lock, no host wait): one compute
// stage per image, then the bias/residual/activation epilogue.
static int run_spmm_rocsparse(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                              const cd_btensor *const *srcs, cd_btensor *dst) {
    const cd_conv_desc *c = &st->d.u.conv;
    size_t hw = (size_t)c->oh * c->ow;
    int rc;
    if (!st->csr) { // all-zero weights
        CD_HIP_CHECK(hipMemsetAsync(dst->data, 0, (size_t)batch * c->k * hw * sizeof(float), ctx->stream));
    } else {
        if ((rc = cd_hipb_ctx_sparse(be, ctx))) return rc;
        for (int n = 0; n < batch; n++)
            if ((rc = cd_rocsparse_csr_spmm(st->csr, ctx->rs, ctx->stream,
                                            (const float *)srcs[0]->data + (size_t)n * st->cols * hw,
                                            (float *)dst->data + (size_t)n * c->k * hw)))
                return rc;
    }
    const float *res = c->has_residual ? srcs[1]->data : NULL;
    if (!st->bias && !res && c->act.kind == CD_ACT_NONE) return 0;
    return cd_hip_bias_act(batch, c->k, (int64_t)hw, dst->data, st->bias, res, c->act, dst->data, ctx->stream);
}

// The rocsparse_sgebsrmm calls of one run, queued on the worker's stream
// with its context's handle. C is column-major with mb*rbd (>= rows) rows,
// ldc = mb*rbd: a padded output (padding rows land in the workspace, never
// in dst).
static int gebsr_mm(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int nmm, int b_trans, int n, const float *b,
                    size_t b_step, int ldb, float *c, size_t c_step, int ldc) {
    int rc = cd_hipb_ctx_sparse(be, ctx);
    for (int i = 0; i < nmm && !rc; i++)
        rc = cd_rocsparse_gebsr_mm(st->gb, ctx->rs, ctx->stream, b_trans, n, b + i * b_step, ldb, c + i * c_step, ldc);
    return rc;
}

// The rocSPARSE GEBSR route, everything on the worker's stream:
//  - conv, per image: C (Kp x HW, column-major = HW x Kp row-major) = A x X
//    with X the image, or for k x k its im2col columns (C x HW row-major =
//    B^T), into the workspace past ws_off (the columns live before it); one transpose to Kp x HW per image; rows K..Kp-1 trimmed by a
//    2D copy to dst (the transpose writes dst directly when Kp = K);
//  - Gemm: the activations [M, k] row-major are column-major B (k x M), so
//    C (Kp x M column-major = M x Kp row-major) is dst itself when Kp = n,
//    else the workspace, trimmed by a 2D copy;
// then the bias/residual/activation epilogue. Kp = mb * rbd.
static int run_gebsr_rocsparse(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                               const cd_btensor *const *srcs, cd_btensor *dst, size_t ws_off) {
    const cd_bop_desc *d = &st->d;
    int kp = st->gb_mb * cd_hipb_gebsr_rows(d);
    int rc;
    const float *x = srcs[0]->data;
    float *y = dst->data;
    if (d->op == CD_BOP_CONV2D) {
        const cd_conv_desc *c = &d->u.conv;
        size_t hw = (size_t)c->oh * c->ow, img = (size_t)kp * hw;
        if (!st->gb) {
            CD_HIP_CHECK(hipMemsetAsync(y, 0, (size_t)batch * c->k * hw * sizeof(float), ctx->stream));
        } else {
            int trim = kp != c->k;
            size_t need = ws_off + (trim ? 2 : 1) * (size_t)batch * img * sizeof(float);
            if ((rc = cd_hipb_ctx_workspace(be, ctx, need))) return rc; // no-op after im2col_input
            float *t = (float *)((char *)ctx->ws + ws_off), *u = trim ? t + (size_t)batch * img : y;
            rc = gebsr_mm(be, ctx, st, batch, 1, (int)hw, x, (size_t)st->cols * hw, (int)hw, t, img, kp);
            if (rc) return rc;
            const int64_t shape[3] = {batch, (int64_t)hw, kp};
            const int perm[3] = {0, 2, 1};
            if ((rc = cd_hip_transpose(3, shape, perm, t, u, ctx->stream))) return rc;
            if (trim)
                CD_HIP_CHECK(hipMemcpy2DAsync(y, (size_t)c->k * hw * sizeof(float), u, img * sizeof(float),
                                              (size_t)c->k * hw * sizeof(float), (size_t)batch, hipMemcpyDeviceToDevice,
                                              ctx->stream));
        }
        const float *res = c->has_residual ? srcs[1]->data : NULL;
        if (!st->bias && !res && c->act.kind == CD_ACT_NONE) return 0;
        return cd_hip_bias_act(batch, c->k, (int64_t)hw, y, st->bias, res, c->act, y, ctx->stream);
    }
    size_t m = (size_t)batch * d->u.gemm.rows;
    int n = d->u.gemm.n, k = d->u.gemm.k;
    if (!st->gb) {
        CD_HIP_CHECK(hipMemsetAsync(y, 0, m * n * sizeof(float), ctx->stream));
    } else {
        int trim = kp != n;
        float *t = y;
        if (trim) {
            if ((rc = cd_hipb_ctx_workspace(be, ctx, m * kp * sizeof(float)))) return rc;
            t = ctx->ws;
        }
        if ((rc = gebsr_mm(be, ctx, st, 1, 0, (int)m, x, 0, k, t, 0, kp))) return rc;
        if (trim)
            CD_HIP_CHECK(hipMemcpy2DAsync(y, (size_t)n * sizeof(float), t, (size_t)kp * sizeof(float),
                                          (size_t)n * sizeof(float), m, hipMemcpyDeviceToDevice, ctx->stream));
    }
    if (!st->bias && d->u.gemm.act.kind == CD_ACT_NONE) return 0;
    return cd_hip_bias_act((int64_t)m, n, 1, y, st->bias, NULL, d->u.gemm.act, y, ctx->stream);
}
#endif

// ---- init, free, run ----------------------------------------------------------------

// A host copy of the rows biases (NULL bias: none). 0 or CD_ENOMEM.
static int host_bias(cd_op_state *st, const float *bias, int rows) {
    if (!bias) return 0;
    st->hbias = malloc((size_t)rows * sizeof(float));
    if (!st->hbias) return CD_ENOMEM;
    memcpy(st->hbias, bias, (size_t)rows * sizeof(float));
    return 0;
}

int cd_hipb_sparse_init(cd_backend_t be, cd_op_state *st, const float *w, const float *bias, int rows, int cols) {
    const cd_bop_desc *d = &st->d;
    int gebsr = st->kind == K_GEBSR_HOST || st->kind == K_GEBSR_ROCSPARSE;
    int host = st->kind == K_SPMM_HOST || st->kind == K_GEBSR_HOST;
    size_t bias_bytes = bias ? (size_t)rows * sizeof(float) : 0;
    int rc;
    st->rows = rows;
    st->cols = cols;
    if (gebsr) {
        rc = cd_gebsr_pack(w, rows, cols, cd_hipb_gebsr_rows(d), 1, &st->gebsr);
        const cd_gebsr *g = &st->gebsr;
        st->weight_bytes = ((size_t)g->mb + 1 + (size_t)g->nnzb) * sizeof(int) +
                           (size_t)g->nnzb * g->row_block_dim * g->col_block_dim * sizeof(float) + bias_bytes;
    } else {
        size_t nnz = 0, nw = (size_t)rows * cols;
        for (size_t i = 0; i < nw; i++) nnz += w[i] != 0.0f;
        rc = csr_build(st, w, rows, cols, nnz);
        st->weight_bytes = ((size_t)rows + 1) * sizeof(int) + nnz * (sizeof(int) + sizeof(float)) + bias_bytes;
    }
    // The rocSPARSE routes keep the bias on the device (their epilogue runs
    // there), the host route on the host (hbias).
    if (!rc) rc = host ? host_bias(st, bias, rows) : cd_hipb_dev_upload(be, bias, (size_t)rows, &st->bias);
#if CD_HIP_REAL
    if (!rc && st->kind == K_SPMM_ROCSPARSE) {
        // The plan holds its own device copy: the host CSR is not needed after.
        rc = csr_plan_create(be, st);
        free(st->row_ptr);
        free(st->col_ind);
        free(st->val);
        st->row_ptr = st->col_ind = NULL;
        st->val = NULL;
    }
    if (!rc && st->kind == K_GEBSR_ROCSPARSE) {
        rc = gebsr_plan_create(st); // the plan holds its own device copy
        cd_gebsr_free(&st->gebsr);
    }
#endif
    return rc;
}

void cd_hipb_sparse_free(cd_op_state *st) {
#if CD_HIP_REAL
    cd_rocsparse_csr_free(st->csr);
    cd_rocsparse_gebsr_free(st->gb);
#endif
    cd_gebsr_free(&st->gebsr);
    free(st->row_ptr);
    free(st->col_ind);
    free(st->val);
    free(st->hbias);
}

// Workspace bytes the GEBSR device route of a conv needs past ws_off.
static size_t gebsr_ws_bytes(const cd_op_state *st, int batch) {
#if CD_HIP_REAL
    if (st->kind == K_GEBSR_ROCSPARSE) {
        const cd_conv_desc *c = &st->d.u.conv;
        size_t kp = (size_t)st->gb_mb * cd_hipb_gebsr_rows(&st->d);
        return (kp != (size_t)c->k ? 2 : 1) * (size_t)batch * kp * c->oh * c->ow * sizeof(float);
    }
#endif
    (void)st, (void)batch;
    return 0;
}

// A k x k conv's input as the sparse routes see it: its im2col columns
// (batch x (C*R*S) x OH*OW, im2col.hip) at the start of the context's
// workspace, sized for the GEBSR route's own needs behind them (*ws_off).
// Queued on the worker's stream. 0 or a code.
static int im2col_input(cd_backend_t be, cd_backend_ctx *ctx, const cd_op_state *st, int batch, const cd_btensor *src,
                        cd_btensor *col, size_t *ws_off) {
    cd_conv_desc c = st->d.u.conv;
    c.n = batch;
    size_t hw = (size_t)c.oh * c.ow, bytes = (size_t)batch * st->cols * hw * sizeof(float);
    *ws_off = (bytes + 255) & ~(size_t)255;
    int rc = cd_hipb_ctx_workspace(be, ctx, *ws_off + gebsr_ws_bytes(st, batch));
    if (rc) return rc;
    if ((rc = cd_hip_im2col(&c, 0, src->data, ctx->ws, ctx->stream))) return rc;
    *col = (cd_btensor){ctx->ws, CD_LAYOUT_NCHW, 4, {batch, st->cols, c.oh, c.ow}};
    return 0;
}

int cd_hipb_sparse_run(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                       cd_btensor *dst) {
    cd_btensor col;
    const cd_btensor *in[2] = {srcs[0], st->d.nsrc > 1 ? srcs[1] : NULL};
    size_t ws_off = 0;
    if (st->op == CD_BOP_CONV2D && !is_pointwise(&st->d.u.conv)) {
        int rc = im2col_input(be, ctx, st, batch, srcs[0], &col, &ws_off);
        if (rc) return rc;
        in[0] = &col;
    }
    srcs = in;
    switch (st->kind) {
    case K_SPMM_HOST:
    case K_GEBSR_HOST: {
        // The stand-in for the real route's per-context handle (see
        // cd_hipb_ctx_sparse): the emulated bookkeeping matches the GPU's.
        int rc = cd_hipb_ctx_sparse(be, ctx);
        return rc ? rc : run_spmm_host(ctx, st, batch, srcs, dst);
    }
#if CD_HIP_REAL
    case K_SPMM_ROCSPARSE: return run_spmm_rocsparse(be, ctx, st, batch, srcs, dst);
    case K_GEBSR_ROCSPARSE: return run_gebsr_rocsparse(be, ctx, st, batch, srcs, dst, ws_off);
#endif
    default: break;
    }
    return CD_EINTERNAL;
}
