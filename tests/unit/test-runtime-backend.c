// Backend vs reference: every operator family of the CPU backend (whatever
// kernel it picks: oneDNN, own depthwise, reference) against the reference
// kernels, on fresh random shapes, in every layout the backend accepts.

#include "runtime/options.h"
#include "kernels/cpu/dnnl.h"
#include "kernels/cpu/ref.h"
#include "proto/errors.h"
#include "runtime/backend.h"
#include "tests/unit/check.h"

#include <stdlib.h>

static float *rbuf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) abort();
    for (size_t i = 0; i < n; i++) p[i] = cd_test_randf(-1.0f, 1.0f);
    return p;
}

static size_t numel(const cd_tdesc *t, int batch) {
    size_t n = t->is_const ? (size_t)t->shape[0] : (size_t)batch;
    for (int i = 1; i < t->rank; i++) n *= (size_t)t->shape[i];
    return n;
}

static cd_tdesc td(int rank, const int64_t *shape, cd_layout l) {
    cd_tdesc t;
    memset(&t, 0, sizeof t);
    t.rank = rank;
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    t.layout = l;
    return t;
}

// Prepares d on be, runs it on batch items of the NCHW host data srcs, and
// returns dst in NCHW. Converts to/from a blocked layout where d asks for it.
static void run_op(cd_backend_t be, const cd_bop_desc *d, int batch, float *const *srcs, float *dst) {
    cd_op_state *st = NULL;
    int rc = cd_backend_op_init(be, d, &st);
    if (rc) CD_CHECK_FAIL_("op_init(%s) failed: %s", cd_bop_name(d->op), cd_strerror(rc));
    cd_backend_ctx *ctx = NULL;
    CHECK_EQ(cd_backend_ctx_create(be, &ctx), 0);
    cd_btensor bt[64], out;
    const cd_btensor *bp[64];
    void *bufs[64];
    for (int i = 0; i < d->nsrc; i++) {
        const cd_tdesc *t = &d->src[i];
        bt[i].layout = t->layout;
        bt[i].rank = t->rank;
        memcpy(bt[i].shape, t->shape, sizeof bt[i].shape);
        if (!t->is_const) bt[i].shape[0] = batch;
        size_t bytes = cd_tdesc_item_bytes(t) * (t->is_const ? 1 : (size_t)batch);
        CHECK_EQ(cd_backend_buffer_alloc(be, bytes, &bufs[i]), 0);
        if (t->layout != CD_LAYOUT_NCHW)
            cd_ref_reorder(CD_LAYOUT_NCHW, t->layout, batch, (int)t->shape[1], (int)t->shape[2], (int)t->shape[3],
                           srcs[i], bufs[i]);
        else
            memcpy(bufs[i], srcs[i], numel(t, batch) * sizeof(float));
        bt[i].data = bufs[i];
        bp[i] = &bt[i];
    }
    void *obuf;
    CHECK_EQ(cd_backend_buffer_alloc(be, cd_tdesc_item_bytes(&d->dst) * (size_t)batch, &obuf), 0);
    out = (cd_btensor){obuf, d->dst.layout, d->dst.rank, {0}};
    memcpy(out.shape, d->dst.shape, sizeof out.shape);
    out.shape[0] = batch;
    rc = cd_backend_op_run(be, d->op, ctx, st, batch, bp, &out);
    if (rc) CD_CHECK_FAIL_("run(%s, kernel %s) failed: %s", cd_bop_name(d->op), cd_backend_op_kernel(be, st), cd_strerror(rc));
    CHECK_EQ(cd_backend_synchronize(be, ctx), 0);
    if (d->dst.layout != CD_LAYOUT_NCHW)
        cd_ref_reorder(d->dst.layout, CD_LAYOUT_NCHW, batch, (int)d->dst.shape[1], (int)d->dst.shape[2],
                       (int)d->dst.shape[3], obuf, dst);
    else
        memcpy(dst, obuf, numel(&d->dst, batch) * sizeof(float));
    for (int i = 0; i < d->nsrc; i++) cd_backend_buffer_free(be, bufs[i]);
    cd_backend_buffer_free(be, obuf);
    cd_backend_ctx_free(be, ctx);
    cd_backend_op_state_free(be, st);
}

// Picks a blocked layout (NCHW16C or NCHW8C) for every 4-D activation when
// the backend supports that (two times in three), NCHW otherwise.
static void pick_layout(cd_backend_t be, cd_bop_desc *d) {
    const cd_layout l = (cd_layout)cd_test_randi(0, CD_LAYOUT_COUNT - 1);
    if (l != CD_LAYOUT_NCHW && d->dst.rank == 4) {
        cd_bop_desc t = *d;
        t.dst.layout = l;
        for (int i = 0; i < t.nsrc; i++)
            if (!t.src[i].is_const && t.src[i].rank == 4) t.src[i].layout = l;
        if (cd_backend_supports_op(be, &t)) {
            *d = t;
            return;
        }
    }
    CHECK(cd_backend_supports_op(be, d));
}

static cd_backend_t cpu(void) {
    cd_backend_t be;
    CHECK_EQ(cd_backend_create("cpu", &be, NULL, 0), 0);
    CHECK_STREQ(cd_backend_name(be), "cpu");
    return be;
}

static cd_activation rand_act(void) {
    cd_activation a = {(cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_LEAKYRELU), 0, 0};
    if (a.kind == CD_ACT_CLIP) a.alpha = 0.0f, a.beta = 6.0f;
    if (a.kind == CD_ACT_HARDSIGMOID) a.alpha = 0.2f, a.beta = 0.5f;
    if (a.kind == CD_ACT_LEAKYRELU) a.alpha = 0.1f;
    return a;
}

CD_TEST(backend_conv2d_vs_ref) {
    cd_backend_t be = cpu();
    for (int iter = 0; iter < 12; iter++) {
        static const int ks[] = {1, 3, 5, 7};
        cd_conv_desc c = {0};
        c.groups = cd_test_randi(0, 3) == 0 ? 0 : 1;
        c.c = cd_test_randi(1, 24);
        if (c.groups == 0) c.groups = c.c; // depthwise
        c.k = c.groups * cd_test_randi(1, 3);
        if (c.groups == 1) c.k = cd_test_randi(1, 40);
        c.r = ks[cd_test_randi(0, 3)];
        c.s = cd_test_randi(0, 1) ? c.r : ks[cd_test_randi(0, 3)];
        c.h = cd_test_randi(c.r, c.r + 9);
        c.w = cd_test_randi(c.s, c.s + 9);
        c.stride_h = cd_test_randi(1, 2);
        c.stride_w = cd_test_randi(1, 2);
        c.dil_h = c.dil_w = cd_test_randi(0, 3) == 0 ? 2 : 1;
        if (c.dil_h == 2 && (c.h < 2 * c.r || c.w < 2 * c.s)) c.dil_h = c.dil_w = 1;
        c.pad_t = cd_test_randi(0, c.r / 2);
        c.pad_b = cd_test_randi(0, c.r / 2);
        c.pad_l = cd_test_randi(0, c.s / 2);
        c.pad_r = cd_test_randi(0, c.s / 2);
        c.act = rand_act();
        c.has_residual = cd_test_randi(0, 1);
        c.n = 1;
        cd_conv_out_dims(&c);
        int batch = cd_test_randi(1, 4);
        int64_t is[4] = {1, c.c, c.h, c.w}, os[4] = {1, c.k, c.oh, c.ow};
        cd_bop_desc d;
        memset(&d, 0, sizeof d);
        d.op = CD_BOP_CONV2D;
        d.max_batch = batch;
        d.nsrc = c.has_residual ? 2 : 1;
        d.src[0] = td(4, is, CD_LAYOUT_NCHW);
        d.src[1] = td(4, os, CD_LAYOUT_NCHW);
        d.dst = td(4, os, CD_LAYOUT_NCHW);
        d.u.conv = c;
        size_t nw = (size_t)c.k * (c.c / c.groups) * c.r * c.s;
        float *w = rbuf(nw), *bias = rbuf((size_t)c.k);
        d.w = w;
        d.bias = bias;
        pick_layout(be, &d);
        size_t ni = (size_t)batch * c.c * c.h * c.w, no = (size_t)batch * c.k * c.oh * c.ow;
        float *x = rbuf(ni), *res = rbuf(no), *got = calloc(no, 4), *want = calloc(no, 4);
        float *srcs[2] = {x, res};
        run_op(be, &d, batch, srcs, got);
        cd_conv_desc r = c;
        r.n = batch;
        cd_ref_conv2d(&r, x, w, bias, c.has_residual ? res : NULL, want);
        CHECK_CLOSE_F32(got, want, no, 1e-4);
        free(w), free(bias), free(x), free(res), free(got), free(want);
    }
    cd_backend_free(be);
}

CD_TEST(backend_gemm_vs_ref) {
    cd_backend_t be = cpu();
    int rows = cd_test_randi(1, 3), n = cd_test_randi(1, 50), k = cd_test_randi(1, 90), batch = cd_test_randi(1, 5);
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_GEMM;
    d.max_batch = batch;
    d.nsrc = 1;
    int64_t is[3] = {1, rows, k}, os[3] = {1, rows, n};
    d.src[0] = td(3, is, CD_LAYOUT_NCHW);
    d.dst = td(3, os, CD_LAYOUT_NCHW);
    d.u.gemm.rows = rows;
    d.u.gemm.n = n;
    d.u.gemm.k = k;
    d.u.gemm.act = rand_act();
    float *w = rbuf((size_t)n * k), *b = cd_test_randi(0, 1) ? rbuf((size_t)n) : NULL;
    d.w = w;
    d.bias = b;
    CHECK(cd_backend_supports_op(be, &d));
    float *x = rbuf((size_t)batch * rows * k), *got = calloc((size_t)batch * rows * n, 4), *want = calloc((size_t)batch * rows * n, 4);
    run_op(be, &d, batch, &x, got);
    cd_ref_gemm(batch * rows, n, k, x, w, b, d.u.gemm.act, want);
    CHECK_CLOSE_F32(got, want, (size_t)batch * rows * n, 1e-4);
    free(w), free(b), free(x), free(got), free(want);
    cd_backend_free(be);
}

CD_TEST(backend_pool_vs_ref) {
    cd_backend_t be = cpu();
    for (int iter = 0; iter < 10; iter++) {
        cd_pool_desc p = {0};
        p.kind = cd_test_randi(0, 1) ? CD_POOL_MAX : CD_POOL_AVG;
        p.n = 1;
        p.c = cd_test_randi(1, 33);
        p.kh = cd_test_randi(1, 4);
        p.kw = cd_test_randi(1, 4);
        p.h = cd_test_randi(p.kh, p.kh + 9);
        p.w = cd_test_randi(p.kw, p.kw + 9);
        p.stride_h = cd_test_randi(1, 3);
        p.stride_w = cd_test_randi(1, 3);
        p.dil_h = p.dil_w = 1;
        p.pad_t = cd_test_randi(0, p.kh - 1);
        p.pad_b = cd_test_randi(0, p.kh - 1);
        p.pad_l = cd_test_randi(0, p.kw - 1);
        p.pad_r = cd_test_randi(0, p.kw - 1);
        p.ceil_mode = cd_test_randi(0, 1);
        p.count_include_pad = cd_test_randi(0, 1);
        if (cd_test_randi(0, 4) == 0) { // global
            p.kh = p.h, p.kw = p.w, p.stride_h = p.stride_w = 1;
            p.pad_t = p.pad_b = p.pad_l = p.pad_r = 0;
            p.ceil_mode = 0;
        }
        cd_pool_out_dims(&p);
        int batch = cd_test_randi(1, 3);
        int64_t is[4] = {1, p.c, p.h, p.w}, os[4] = {1, p.c, p.oh, p.ow};
        cd_bop_desc d;
        memset(&d, 0, sizeof d);
        d.op = CD_BOP_POOL;
        d.max_batch = batch;
        d.nsrc = 1;
        d.src[0] = td(4, is, CD_LAYOUT_NCHW);
        d.dst = td(4, os, CD_LAYOUT_NCHW);
        d.u.pool = p;
        pick_layout(be, &d);
        size_t ni = (size_t)batch * p.c * p.h * p.w, no = (size_t)batch * p.c * p.oh * p.ow;
        float *x = rbuf(ni), *got = calloc(no, 4), *want = calloc(no, 4);
        run_op(be, &d, batch, &x, got);
        cd_pool_desc r = p;
        r.n = batch;
        cd_ref_pool2d(&r, x, want);
        CHECK_CLOSE_F32(got, want, no, 1e-5);
        free(x), free(got), free(want);
    }
    cd_backend_free(be);
}

CD_TEST(backend_binary_broadcast_vs_ref) {
    cd_backend_t be = cpu();
    for (int iter = 0; iter < 12; iter++) {
        int rank = cd_test_randi(2, 4), batch = cd_test_randi(1, 3);
        int64_t ds[4] = {1}, bs[4] = {1};
        for (int i = 1; i < rank; i++) {
            ds[i] = cd_test_randi(1, 20);
            bs[i] = cd_test_randi(0, 1) ? ds[i] : 1;
        }
        int b_const = cd_test_randi(0, 1);
        cd_bop_desc d;
        memset(&d, 0, sizeof d);
        d.op = CD_BOP_BINARY;
        d.max_batch = batch;
        d.nsrc = 2;
        int swap = cd_test_randi(0, 1); // the broadcast operand first or second
        d.src[swap] = td(rank, ds, CD_LAYOUT_NCHW);
        d.src[1 - swap] = td(rank, bs, CD_LAYOUT_NCHW);
        d.src[1 - swap].is_const = b_const;
        d.dst = td(rank, ds, CD_LAYOUT_NCHW);
        d.u.binary.kind = (cd_binary_kind)cd_test_randi(0, 3);
        d.u.binary.act = rand_act();
        pick_layout(be, &d);
        size_t na = numel(&d.src[swap], batch), nb = numel(&d.src[1 - swap], batch);
        float *a = rbuf(na), *b = rbuf(nb), *got = calloc(na, 4), *want = calloc(na, 4);
        if (d.u.binary.kind == CD_BINARY_DIV)
            for (size_t i = 0; i < nb; i++) b[i] = b[i] >= 0 ? b[i] + 0.5f : b[i] - 0.5f;
        float *srcs[2];
        srcs[swap] = a;
        srcs[1 - swap] = b;
        run_op(be, &d, batch, srcs, got);
        int64_t sa[4], sb[4], so[4];
        memcpy(sa, ds, sizeof sa);
        memcpy(sb, bs, sizeof sb);
        sa[0] = so[0] = batch;
        sb[0] = b_const ? 1 : batch;
        memcpy(so + 1, ds + 1, sizeof(int64_t) * 3);
        if (swap) cd_ref_binary(d.u.binary.kind, rank, sb, b, sa, a, so, d.u.binary.act, want);
        else cd_ref_binary(d.u.binary.kind, rank, sa, a, sb, b, so, d.u.binary.act, want);
        CHECK_CLOSE_F32(got, want, na, 1e-5);
        free(a), free(b), free(got), free(want);
    }
    cd_backend_free(be);
}

CD_TEST(backend_activation_every_kind_vs_ref) {
    cd_backend_t be = cpu();
    for (int kind = CD_ACT_NONE; kind <= CD_ACT_LEAKYRELU; kind++) {
        int batch = cd_test_randi(1, 3);
        int64_t s[4] = {1, cd_test_randi(1, 40), cd_test_randi(1, 9), cd_test_randi(1, 9)};
        cd_bop_desc d;
        memset(&d, 0, sizeof d);
        d.op = CD_BOP_ACTIVATION;
        d.max_batch = batch;
        d.nsrc = 1;
        d.src[0] = d.dst = td(4, s, CD_LAYOUT_NCHW);
        d.u.act = rand_act();
        d.u.act.kind = (cd_act)kind;
        if (kind == CD_ACT_CLIP) d.u.act.alpha = 0, d.u.act.beta = 6;
        if (kind == CD_ACT_HARDSIGMOID) d.u.act.alpha = 0.2f, d.u.act.beta = 0.5f;
        if (kind == CD_ACT_LEAKYRELU) d.u.act.alpha = 0.1f;
        pick_layout(be, &d);
        size_t n = numel(&d.dst, batch);
        float *x = rbuf(n), *got = calloc(n, 4), *want = calloc(n, 4);
        for (size_t i = 0; i < n; i++) x[i] *= 8.0f;
        run_op(be, &d, batch, &x, got);
        cd_ref_activation(d.u.act, n, x, want);
        CHECK_CLOSE_F32(got, want, n, 1e-5);
        free(x), free(got), free(want);
    }
    cd_backend_free(be);
}

CD_TEST(backend_softmax_vs_ref) {
    cd_backend_t be = cpu();
    int batch = cd_test_randi(1, 4);
    int64_t outer = cd_test_randi(0, 1) ? 1 : cd_test_randi(1, 4), len = cd_test_randi(1, 100), inner = cd_test_randi(1, 5);
    int64_t s[4] = {1, outer, len, inner};
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_SOFTMAX;
    d.max_batch = batch;
    d.nsrc = 1;
    d.src[0] = d.dst = td(outer == 1 ? 4 : 4, s, CD_LAYOUT_NCHW);
    d.u.softmax.outer = outer;
    d.u.softmax.len = len;
    d.u.softmax.inner = inner;
    CHECK(cd_backend_supports_op(be, &d));
    size_t n = (size_t)batch * outer * len * inner;
    float *x = rbuf(n), *got = calloc(n, 4), *want = calloc(n, 4);
    run_op(be, &d, batch, &x, got);
    cd_ref_softmax((size_t)(batch * outer), (size_t)len, (size_t)inner, x, want);
    CHECK_CLOSE_F32(got, want, n, 1e-5);
    free(x), free(got), free(want);
    cd_backend_free(be);
}

CD_TEST(backend_concat_vs_ref) {
    cd_backend_t be = cpu();
    int n = cd_test_randi(1, 4), axis = cd_test_randi(1, 3), batch = cd_test_randi(1, 3);
    int64_t base[4] = {1, cd_test_randi(1, 20), cd_test_randi(1, 7), cd_test_randi(1, 7)}, ds[4];
    memcpy(ds, base, sizeof ds);
    ds[axis] = 0;
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_CONCAT;
    d.max_batch = batch;
    d.nsrc = n;
    d.u.axis = axis;
    float *srcs[4];
    int64_t shp[4][4];
    for (int j = 0; j < n; j++) {
        memcpy(shp[j], base, sizeof base);
        shp[j][axis] = cd_test_randi(1, 17);
        ds[axis] += shp[j][axis];
        d.src[j] = td(4, shp[j], CD_LAYOUT_NCHW);
        srcs[j] = rbuf(numel(&d.src[j], batch));
    }
    d.dst = td(4, ds, CD_LAYOUT_NCHW);
    pick_layout(be, &d);
    size_t no = numel(&d.dst, batch);
    float *got = calloc(no, 4), *want = calloc(no, 4);
    run_op(be, &d, batch, srcs, got);
    const int64_t *sp[4];
    const float *cp[4];
    for (int j = 0; j < n; j++) {
        shp[j][0] = batch;
        sp[j] = shp[j];
        cp[j] = srcs[j];
    }
    cd_ref_concat(4, axis, n, sp, cp, want);
    CHECK_CLOSE_F32(got, want, no, 0);
    for (int j = 0; j < n; j++) free(srcs[j]);
    free(got), free(want);
    cd_backend_free(be);
}

CD_TEST(backend_transpose_vs_ref) {
    cd_backend_t be = cpu();
    int64_t s[5] = {1, cd_test_randi(1, 4), cd_test_randi(1, 6), cd_test_randi(1, 5), cd_test_randi(1, 5)}, o[5];
    int perm[5] = {0, 2, 1, 3, 4}, batch = cd_test_randi(1, 3);
    for (int i = 0; i < 5; i++) o[i] = s[perm[i]];
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_TRANSPOSE;
    d.max_batch = batch;
    d.nsrc = 1;
    d.src[0] = td(5, s, CD_LAYOUT_NCHW);
    d.dst = td(5, o, CD_LAYOUT_NCHW);
    memcpy(d.u.perm, perm, sizeof perm);
    CHECK(cd_backend_supports_op(be, &d));
    size_t n = numel(&d.dst, batch);
    float *x = rbuf(n), *got = calloc(n, 4), *want = calloc(n, 4);
    run_op(be, &d, batch, &x, got);
    s[0] = batch;
    cd_ref_transpose(5, s, perm, x, want);
    CHECK_CLOSE_F32(got, want, n, 0);
    free(x), free(got), free(want);
    cd_backend_free(be);
}

CD_TEST(backend_reorder_both_directions_c_not_multiple_of_block) {
    cd_backend_t be = cpu();
    for (int rep = 0; rep < 2; rep++) {
    const cd_layout bl = rep ? CD_LAYOUT_NCHW8C : CD_LAYOUT_NCHW16C;
    int c = cd_test_randi(1, 50), h = cd_test_randi(1, 7), w = cd_test_randi(1, 7), batch = cd_test_randi(1, 3);
    int64_t s[4] = {1, c, h, w};
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_REORDER;
    d.max_batch = batch;
    d.nsrc = 1;
    d.src[0] = td(4, s, CD_LAYOUT_NCHW);
    d.dst = td(4, s, bl);
    CHECK(cd_backend_supports_op(be, &d));
    size_t n = (size_t)batch * c * h * w;
    float *x = rbuf(n), *got = calloc(n, 4);
    run_op(be, &d, batch, &x, got); // NCHW -> blocked on the backend, back by the reference
    CHECK_CLOSE_F32(got, x, n, 0);
    d.src[0].layout = bl;
    d.dst.layout = CD_LAYOUT_NCHW;
    memset(got, 0, n * 4);
    run_op(be, &d, batch, &x, got); // to blocked by the reference, back on the backend
    CHECK_CLOSE_F32(got, x, n, 0);
    free(x), free(got);
    }
    cd_backend_free(be);
}

CD_TEST(backend_ref_only_mode_keeps_nchw) {
    cd_runtime_options o = *cd_runtime_opts();
    o.cpu_kernels_ref = 1;
    cd_runtime_configure(&o);
    cd_backend_t be = cpu();
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_CONV2D;
    d.max_batch = 1;
    d.nsrc = 1;
    cd_conv_desc c = {.n = 1, .c = 16, .h = 8, .w = 8, .k = 16, .r = 3, .s = 3, .stride_h = 1, .stride_w = 1,
                      .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1, .dil_h = 1, .dil_w = 1, .groups = 1};
    cd_conv_out_dims(&c);
    d.u.conv = c;
    int64_t s[4] = {1, 16, 8, 8};
    d.src[0] = d.dst = td(4, s, CD_LAYOUT_NCHW16C);
    CHECK(!cd_backend_supports_op(be, &d));
    CHECK_EQ(cd_backend_blocked_layout(be), CD_LAYOUT_NCHW);
    d.src[0].layout = d.dst.layout = CD_LAYOUT_NCHW;
    CHECK(cd_backend_supports_op(be, &d));
    float w[16 * 16 * 9] = {0};
    d.w = w;
    cd_op_state *st;
    CHECK_EQ(cd_backend_op_init(be, &d, &st), 0);
    CHECK_STREQ(cd_backend_op_kernel(be, st), "ref");
    cd_backend_op_state_free(be, st);
    cd_backend_t other;
    char err[128];
    CHECK_EQ(cd_backend_create("tpu", &other, err, sizeof err), CD_EUNSUPPORTED);
    CHECK(strstr(err, "tpu") != NULL);
    cd_backend_free(be);
}

// The CPU backend's blocked layout is oneDNN's choice for this CPU, and the
// names of reference kernels are recognised.
CD_TEST(backend_cpu_blocked_layout_is_the_cpu_choice) {
    cd_backend_t be = cpu();
    CHECK_EQ(cd_backend_blocked_layout(be), cd_dnnl_blocked_layout());
    CHECK(cd_backend_blocked_layout(be) != CD_LAYOUT_NCHW);
    CHECK(cd_backend_kernel_is_reference("ref"));
    CHECK(cd_backend_kernel_is_reference("dnnl:ref:any"));
    CHECK(!cd_backend_kernel_is_reference("dnnl:jit:avx2"));
    CHECK(!cd_backend_kernel_is_reference("sparse:csr:avx2:plane"));
    CHECK(!cd_backend_kernel_is_reference(NULL));
    cd_backend_free(be);
}
