// Every HIP kernel (backends/hip/*.hip), executed under the CPU emulator,
// against the CPU reference kernels (kernels/cpu/ref.h: conv, pool, gemm,
// binary, softmax, activation) or plain loops (strided SGEMM, im2col,
// global pooling), on
// fresh random shapes that include sizes which are not multiples of the
// tile or block. Relative error <= 1e-4 (scaled by max(1, |ref|)).

#include "backends/hip/bias-act.h"
#include "backends/hip/binary.h"
#include "backends/hip/conv2d.h"
#include "backends/hip/dwconv.h"
#include "backends/hip/global-pool.h"
#include "backends/hip/im2col.h"
#include "backends/hip/pool2d.h"
#include "backends/hip/sgemm.h"
#include "backends/hip/softmax.h"
#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "tests/unit/act-oracle.h"
#include "tests/unit/check.h"

#include <float.h>
#include <time.h>

#define TOL 1e-4

static float *rand_host(size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    CHECK(p != NULL);
    for (size_t i = 0; i < n; i++) p[i] = cd_test_randf(lo, hi);
    return p;
}

static float *to_dev(const float *h, size_t n) {
    float *d = NULL;
    CHECK_EQ(hipMalloc(&d, (n ? n : 1) * sizeof(float)), hipSuccess);
    if (n) CHECK_EQ(hipMemcpy(d, h, n * sizeof(float), hipMemcpyHostToDevice), hipSuccess);
    return d;
}

static float *dev_empty(size_t n) {
    float *d = NULL;
    CHECK_EQ(hipMalloc(&d, (n ? n : 1) * sizeof(float)), hipSuccess);
    return d;
}

static float *from_dev(const float *d, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    CHECK(h != NULL);
    CHECK_EQ(hipStreamSynchronize(NULL), hipSuccess);
    if (n) CHECK_EQ(hipMemcpy(h, d, n * sizeof(float), hipMemcpyDeviceToHost), hipSuccess);
    return h;
}

static cd_activation rand_act(void) {
    cd_activation a = {(cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_LEAKYRELU), 0.0f, 0.0f};
    if (a.kind == CD_ACT_CLIP) {
        a.alpha = cd_test_randf(-1.0f, 0.0f);
        a.beta = cd_test_randf(0.5f, 6.0f);
    } else if (a.kind == CD_ACT_HARDSIGMOID) {
        a.alpha = 0.2f;
        a.beta = 0.5f;
    } else if (a.kind == CD_ACT_LEAKYRELU) {
        a.alpha = cd_test_randf(0.01f, 0.3f);
    }
    return a;
}

// A random convolution; depthwise when dw, else groups 1..3.
static cd_conv_desc rand_conv(int dw) {
    cd_conv_desc d;
    memset(&d, 0, sizeof d);
    d.n = cd_test_randi(1, 3);
    d.groups = dw ? cd_test_randi(1, 12) : cd_test_randi(1, 3);
    d.c = dw ? d.groups : d.groups * cd_test_randi(1, 9);
    d.k = dw ? d.c * cd_test_randi(1, 2) : d.groups * cd_test_randi(1, 21);
    d.h = cd_test_randi(1, 19);
    d.w = cd_test_randi(1, 19);
    d.r = cd_test_randi(1, 5);
    d.s = cd_test_randi(1, 5);
    d.stride_h = cd_test_randi(1, 3);
    d.stride_w = cd_test_randi(1, 3);
    d.dil_h = cd_test_randi(1, 2);
    d.dil_w = cd_test_randi(1, 2);
    d.pad_t = cd_test_randi(0, d.r - 1);
    d.pad_b = cd_test_randi(0, d.r - 1);
    d.pad_l = cd_test_randi(0, d.s - 1);
    d.pad_r = cd_test_randi(0, d.s - 1);
    // The dilated kernel must fit in the padded input.
    while (d.dil_h * (d.r - 1) + 1 > d.h + d.pad_t + d.pad_b) d.h++;
    while (d.dil_w * (d.s - 1) + 1 > d.w + d.pad_l + d.pad_r) d.w++;
    d.act = rand_act();
    d.has_residual = cd_test_randi(0, 1);
    cd_conv_out_dims(&d);
    return d;
}

// Runs cd_hip_conv2d (or cd_hip_dwconv) on d and compares with cd_ref_conv2d.
static void check_conv(const cd_conv_desc *d, int direct_dw) {
    size_t ns = (size_t)d->n * d->c * d->h * d->w;
    size_t nw = (size_t)d->k * (d->c / d->groups) * d->r * d->s;
    size_t no = (size_t)d->n * d->k * d->oh * d->ow;
    int with_bias = cd_test_randi(0, 3) != 0;
    float *src = rand_host(ns, -1, 1), *w = rand_host(nw, -1, 1), *bias = rand_host(d->k, -1, 1);
    float *res = rand_host(no, -1, 1), *want = malloc(no * sizeof(float));
    cd_ref_conv2d(d, src, w, with_bias ? bias : NULL, res, want);
    float *dsrc = to_dev(src, ns), *dw = to_dev(w, nw), *dbias = to_dev(bias, d->k);
    float *dres = to_dev(res, no), *ddst = dev_empty(no);
    int rc;
    if (direct_dw) {
        rc = cd_hip_dwconv(d, dsrc, dw, with_bias ? dbias : NULL, dres, ddst, NULL);
    } else {
        size_t ws = cd_hip_conv2d_workspace(d);
        void *dws = NULL;
        if (ws) CHECK_EQ(hipMalloc(&dws, ws), hipSuccess);
        rc = cd_hip_conv2d(d, dsrc, dw, with_bias ? dbias : NULL, dres, ddst, dws, ws, NULL);
        CHECK_EQ(hipFree(dws), hipSuccess);
    }
    if (rc != 0)
        CD_CHECK_FAIL_("conv n%d c%d h%d w%d k%d r%d s%d g%d: rc %d", d->n, d->c, d->h, d->w, d->k, d->r, d->s,
                       d->groups, rc);
    float *got = from_dev(ddst, no);
    CHECK_CLOSE_F32(got, want, no, TOL);
    hipFree(dsrc);
    hipFree(dw);
    hipFree(dbias);
    hipFree(dres);
    hipFree(ddst);
    free(src);
    free(w);
    free(bias);
    free(res);
    free(want);
    free(got);
}

// Plain-loop GEMM on the host in double, with the descriptor's strides.
static void ref_gemm(const cd_hip_gemm_desc *g, const float *a, const float *b, float *c) {
    for (int z = 0; z < g->batch; z++)
        for (int i = 0; i < g->m; i++)
            for (int j = 0; j < g->n; j++) {
                double acc = 0.0;
                for (int p = 0; p < g->k; p++)
                    acc +=
                        (double)a[z * g->a_bs + i * g->a_rs + p * g->a_cs] * b[z * g->b_bs + p * g->b_rs + j * g->b_cs];
                float *out = &c[z * g->c_bs + i * g->ldc + j];
                *out = (float)(g->alpha * acc + (g->beta != 0.0f ? g->beta * *out : 0.0));
            }
}

CD_TEST(hip_emu_sgemm_random_shapes_transposes_batches) {
    for (int iter = 0; iter < 12; iter++) {
        cd_hip_gemm_desc g;
        memset(&g, 0, sizeof g);
        // Mostly sizes that are not multiples of the 16-wide tile, sometimes
        // smaller than one tile, sometimes exact multiples.
        g.m = iter % 4 == 0 ? 16 * cd_test_randi(1, 3) : cd_test_randi(1, 70);
        g.n = iter % 4 == 1 ? 16 * cd_test_randi(1, 3) : cd_test_randi(1, 70);
        g.k = iter % 4 == 2 ? 16 * cd_test_randi(1, 3) : cd_test_randi(1, 90);
        g.batch = cd_test_randi(1, 3);
        int ta = cd_test_randi(0, 1), tb = cd_test_randi(0, 1);
        g.a_rs = ta ? 1 : g.k;
        g.a_cs = ta ? g.m : 1;
        g.b_rs = tb ? 1 : g.n;
        g.b_cs = tb ? g.k : 1;
        g.a_bs = cd_test_randi(0, 1) ? (ptrdiff_t)g.m * g.k : 0; // shared A or per batch
        g.b_bs = (ptrdiff_t)g.k * g.n;
        g.ldc = g.n + cd_test_randi(0, 3);
        g.c_bs = g.ldc * g.m;
        g.alpha = cd_test_randf(0.5f, 2.0f);
        g.beta = cd_test_randi(0, 1) ? cd_test_randf(-1.0f, 1.0f) : 0.0f;
        size_t na = (size_t)g.m * g.k * (g.a_bs ? g.batch : 1);
        size_t nb = (size_t)g.k * g.n * g.batch, nc = (size_t)g.c_bs * g.batch;
        float *a = rand_host(na, -1, 1), *b = rand_host(nb, -1, 1), *c = rand_host(nc, -1, 1);
        float *da = to_dev(a, na), *db = to_dev(b, nb), *dc = to_dev(c, nc);
        CHECK_EQ(cd_hip_sgemm(&g, da, db, dc, NULL), 0);
        ref_gemm(&g, a, b, c);
        float *got = from_dev(dc, nc);
        CHECK_CLOSE_F32(got, c, nc, TOL);
        hipFree(da);
        hipFree(db);
        hipFree(dc);
        free(a);
        free(b);
        free(c);
        free(got);
    }
}

// A fully-connected layer as the runtime composes it: Y = X W^T, then bias + act.
CD_TEST(hip_emu_sgemm_fully_connected_with_bias_act) {
    int n = cd_test_randi(1, 9), in = cd_test_randi(1, 300), out = cd_test_randi(1, 130);
    cd_activation act = rand_act();
    float *x = rand_host((size_t)n * in, -1, 1), *w = rand_host((size_t)out * in, -1, 1);
    float *bias = rand_host(out, -1, 1), *want = malloc((size_t)n * out * sizeof(float));
    cd_ref_gemm(n, out, in, x, w, bias, act, want);
    cd_hip_gemm_desc g = {.m = n,
                          .n = out,
                          .k = in,
                          .batch = 1,
                          .a_rs = in,
                          .a_cs = 1,
                          .b_rs = 1,
                          .b_cs = in,
                          .ldc = out,
                          .alpha = 1.0f,
                          .beta = 0.0f};
    float *dx = to_dev(x, (size_t)n * in), *dw = to_dev(w, (size_t)out * in);
    float *db = to_dev(bias, out), *dy = dev_empty((size_t)n * out);
    CHECK_EQ(cd_hip_sgemm(&g, dx, dw, dy, NULL), 0);
    CHECK_EQ(cd_hip_bias_act(n, out, 1, dy, db, NULL, act, dy, NULL), 0);
    float *got = from_dev(dy, (size_t)n * out);
    CHECK_CLOSE_F32(got, want, (size_t)n * out, TOL);
    hipFree(dx);
    hipFree(dw);
    hipFree(db);
    hipFree(dy);
    free(x);
    free(w);
    free(bias);
    free(want);
    free(got);
}

CD_TEST(hip_emu_sgemm_empty_and_bad_descriptors) {
    cd_hip_gemm_desc g = {.m = 0, .n = 5, .k = 3, .batch = 1, .alpha = 1.0f};
    CHECK_EQ(cd_hip_sgemm(&g, NULL, NULL, NULL, NULL), 0); // nothing to compute
    g.m = 4;
    g.batch = 0;
    CHECK_EQ(cd_hip_sgemm(&g, NULL, NULL, NULL, NULL), CD_EPARAMS);
    CHECK_EQ(cd_hip_sgemm(NULL, NULL, NULL, NULL, NULL), CD_EPARAMS);
}

CD_TEST(hip_emu_im2col_random_shapes) {
    for (int iter = 0; iter < 6; iter++) {
        cd_conv_desc d = rand_conv(0);
        int grp = cd_test_randi(0, d.groups - 1), cpg = d.c / d.groups;
        size_t ns = (size_t)d.n * d.c * d.h * d.w;
        size_t rows = (size_t)cpg * d.r * d.s, ohw = (size_t)d.oh * d.ow;
        size_t nc = (size_t)d.n * rows * ohw;
        float *src = rand_host(ns, -1, 1), *want = malloc(nc * sizeof(float));
        for (int n = 0; n < d.n; n++)
            for (size_t row = 0; row < rows; row++)
                for (size_t p = 0; p < ohw; p++) {
                    int c = (int)(row / (d.r * d.s)), r = (int)(row / d.s % d.r), s = (int)(row % d.s);
                    int ih = (int)(p / d.ow) * d.stride_h - d.pad_t + r * d.dil_h;
                    int iw = (int)(p % d.ow) * d.stride_w - d.pad_l + s * d.dil_w;
                    float v = 0.0f;
                    if (ih >= 0 && ih < d.h && iw >= 0 && iw < d.w)
                        v = src[(((size_t)n * d.c + grp * cpg + c) * d.h + ih) * d.w + iw];
                    want[((size_t)n * rows + row) * ohw + p] = v;
                }
        float *dsrc = to_dev(src, ns), *dcol = dev_empty(nc);
        CHECK_EQ(cd_hip_im2col(&d, grp, dsrc, dcol, NULL), 0);
        float *got = from_dev(dcol, nc);
        CHECK_CLOSE_F32(got, want, nc, 0.0); // a copy: exact
        CHECK_EQ(cd_hip_im2col(&d, d.groups, dsrc, dcol, NULL), CD_EPARAMS);
        hipFree(dsrc);
        hipFree(dcol);
        free(src);
        free(want);
        free(got);
    }
}

CD_TEST(hip_emu_conv2d_random_groups_strides_pads_dilations) {
    for (int iter = 0; iter < 10; iter++) {
        cd_conv_desc d = rand_conv(0);
        check_conv(&d, 0);
    }
}

CD_TEST(hip_emu_conv2d_pointwise_skips_im2col) {
    cd_conv_desc d = rand_conv(0);
    d.r = d.s = 1;
    d.stride_h = d.stride_w = 1;
    d.pad_t = d.pad_l = d.pad_b = d.pad_r = 0;
    d.h = cd_test_randi(1, 23);
    d.w = cd_test_randi(1, 23);
    cd_conv_out_dims(&d);
    CHECK_EQ(cd_hip_conv2d_workspace(&d), 0);
    check_conv(&d, 0);
}

CD_TEST(hip_emu_conv2d_short_workspace) {
    cd_conv_desc d = rand_conv(0);
    d.r = 3;
    d.pad_t = d.pad_b = 1;
    d.groups = 1;
    d.c = 2;
    while (d.dil_h * 2 + 1 > d.h + 2) d.h++;
    cd_conv_out_dims(&d);
    size_t ws = cd_hip_conv2d_workspace(&d);
    CHECK(ws > 0);
    CHECK_EQ(cd_hip_conv2d(&d, NULL, NULL, NULL, NULL, NULL, NULL, ws - 1, NULL), CD_EPARAMS);
}

CD_TEST(hip_emu_dwconv_random_with_multiplier) {
    for (int iter = 0; iter < 8; iter++) {
        cd_conv_desc d = rand_conv(1);
        check_conv(&d, 1);
        if (d.groups > 1) check_conv(&d, 0); // cd_hip_conv2d routes it to dwconv
    }
}

CD_TEST(hip_emu_dwconv_rejects_dense_conv) {
    cd_conv_desc d = rand_conv(0);
    d.groups = 1;
    d.c = 3;
    CHECK_EQ(cd_hip_dwconv(&d, NULL, NULL, NULL, NULL, NULL, NULL), CD_EUNSUPPORTED);
}

CD_TEST(hip_emu_bias_act_every_activation) {
    for (int kind = CD_ACT_NONE; kind <= CD_ACT_ORACLE_LAST; kind++) {
        cd_activation act = rand_act();
        act.kind = (cd_act)kind;
        if (kind == CD_ACT_CLIP) act.alpha = -0.5f, act.beta = 0.7f;
        if (kind == CD_ACT_HARDSIGMOID) act.alpha = 0.2f, act.beta = 0.5f;
        if (kind == CD_ACT_LEAKYRELU) act.alpha = 0.1f;
        if (kind == CD_ACT_POW) act.alpha = (float)cd_test_randi(2, 3);
        int n = cd_test_randi(1, 3), c = cd_test_randi(1, 40), hw = cd_test_randi(1, 300);
        size_t total = (size_t)n * c * hw;
        // Sqrt: no bias or residual, so that every input is >= 0 (NaN never compares equal).
        int use_bias = kind != CD_ACT_SQRT && cd_test_randi(0, 1), use_res = kind != CD_ACT_SQRT && cd_test_randi(0, 1);
        float *x = rand_host(total, kind == CD_ACT_SQRT ? 0 : -8, 8), *bias = rand_host(c, -1, 1);
        float *res = rand_host(total, -1, 1), *want = malloc(total * sizeof(float));
        for (size_t i = 0; i < total; i++)
            want[i] = act_oracle(act, x[i] + (use_bias ? bias[i / hw % c] : 0.0f) + (use_res ? res[i] : 0.0f));
        float *dx = to_dev(x, total), *db = to_dev(bias, c), *dr = to_dev(res, total);
        CHECK_EQ(cd_hip_bias_act(n, c, hw, dx, use_bias ? db : NULL, use_res ? dr : NULL, act, dx, NULL),
                 0); // in place
        float *got = from_dev(dx, total);
        CHECK_CLOSE_F32(got, want, total, TOL);
        hipFree(dx);
        hipFree(db);
        hipFree(dr);
        free(x);
        free(bias);
        free(res);
        free(want);
        free(got);
    }
}

CD_TEST(hip_emu_pool2d_random_max_avg_ceil_pads) {
    for (int iter = 0; iter < 12; iter++) {
        cd_pool_desc d;
        memset(&d, 0, sizeof d);
        d.kind = iter % 2 ? CD_POOL_AVG : CD_POOL_MAX;
        d.n = cd_test_randi(1, 2);
        d.c = cd_test_randi(1, 7);
        d.kh = cd_test_randi(1, 4);
        d.kw = cd_test_randi(1, 4);
        d.h = cd_test_randi(d.kh, 20);
        d.w = cd_test_randi(d.kw, 20);
        d.stride_h = cd_test_randi(1, 3);
        d.stride_w = cd_test_randi(1, 3);
        d.dil_h = d.dil_w = 1;
        d.pad_t = cd_test_randi(0, d.kh / 2);
        d.pad_b = cd_test_randi(0, d.kh / 2);
        d.pad_l = cd_test_randi(0, d.kw / 2);
        d.pad_r = cd_test_randi(0, d.kw / 2);
        d.ceil_mode = cd_test_randi(0, 1);
        d.count_include_pad = cd_test_randi(0, 1);
        cd_pool_out_dims(&d);
        size_t ns = (size_t)d.n * d.c * d.h * d.w, no = (size_t)d.n * d.c * d.oh * d.ow;
        float *src = rand_host(ns, -5, 5), *want = malloc(no * sizeof(float));
        cd_ref_pool2d(&d, src, want);
        float *dsrc = to_dev(src, ns), *ddst = dev_empty(no);
        CHECK_EQ(cd_hip_pool2d(&d, dsrc, ddst, NULL), 0);
        float *got = from_dev(ddst, no);
        CHECK_CLOSE_F32(got, want, no, TOL);
        hipFree(dsrc);
        hipFree(ddst);
        free(src);
        free(want);
        free(got);
    }
}

CD_TEST(hip_emu_global_pool_avg_max_odd_planes) {
    // hw of 1, below a warp, above the 256-thread block, and not a power of two.
    const int64_t hws[4] = {1, cd_test_randi(2, 63), cd_test_randi(257, 3000), 49};
    for (int t = 0; t < 8; t++) {
        cd_pool_kind kind = t % 2 ? CD_POOL_AVG : CD_POOL_MAX;
        int64_t planes = cd_test_randi(1, 40), hw = hws[t / 2];
        size_t ns = (size_t)(planes * hw);
        float *src = rand_host(ns, -3, 3), *want = malloc(planes * sizeof(float));
        for (int64_t p = 0; p < planes; p++) {
            double acc = 0.0;
            float mx = -FLT_MAX;
            for (int64_t j = 0; j < hw; j++) {
                acc += src[p * hw + j];
                if (src[p * hw + j] > mx) mx = src[p * hw + j];
            }
            want[p] = kind == CD_POOL_MAX ? mx : (float)(acc / hw);
        }
        float *dsrc = to_dev(src, ns), *ddst = dev_empty(planes);
        CHECK_EQ(cd_hip_global_pool(kind, planes, hw, dsrc, ddst, NULL), 0);
        float *got = from_dev(ddst, planes);
        CHECK_CLOSE_F32(got, want, planes, TOL);
        hipFree(dsrc);
        hipFree(ddst);
        free(src);
        free(want);
        free(got);
    }
    CHECK_EQ(cd_hip_global_pool(CD_POOL_AVG, 3, 0, NULL, NULL, NULL), CD_EPARAMS);
}

CD_TEST(hip_emu_binary_add_mul_sub_div_broadcast) {
    for (int iter = 0; iter < 16; iter++) {
        int rank = cd_test_randi(1, 5);
        int64_t out[8], as[8], bs[8];
        for (int d = 0; d < rank; d++) out[d] = cd_test_randi(1, 7);
        int ar = iter == 0 ? 0 : cd_test_randi(1, rank), br = rank;
        if (cd_test_randi(0, 1)) br = cd_test_randi(0, rank);
        if (ar < rank && br < rank) ar = rank; // one operand has the full rank
        for (int d = 0; d < ar; d++) as[d] = cd_test_randi(0, 2) ? out[d + rank - ar] : 1;
        for (int d = 0; d < br; d++) bs[d] = cd_test_randi(0, 2) ? out[d + rank - br] : 1;
        // Keep the broadcast shape equal to out.
        for (int d = 0; d < rank; d++) {
            int ad = d - (rank - ar), bd = d - (rank - br);
            if ((ad < 0 || as[ad] == 1) && (bd < 0 || bs[bd] == 1)) {
                if (bd >= 0)
                    bs[bd] = out[d];
                else
                    as[ad] = out[d];
            }
        }
        if (iter == 1) { // squeeze-excitation: [N,C,H,W] * [N,C,1,1]
            rank = ar = br = 4;
            out[0] = as[0] = bs[0] = 2;
            out[1] = as[1] = bs[1] = cd_test_randi(1, 40);
            out[2] = as[2] = cd_test_randi(1, 9);
            out[3] = as[3] = cd_test_randi(1, 9);
            bs[2] = bs[3] = 1;
        }
        size_t na = 1, nb = 1, no = 1;
        for (int d = 0; d < ar; d++) na *= (size_t)as[d];
        for (int d = 0; d < br; d++) nb *= (size_t)bs[d];
        for (int d = 0; d < rank; d++) no *= (size_t)out[d];
        cd_hip_binary_op op = (cd_hip_binary_op)(iter % 4);
        cd_activation act = rand_act();
        float *a = rand_host(na, -2, 2), *b = rand_host(nb, 0.5f, 2), *want = malloc(no * sizeof(float));
        int64_t apad[8], bpad[8]; // the reference takes every shape at the output's rank
        for (int d = 0; d < rank; d++) {
            apad[d] = d < rank - ar ? 1 : as[d - (rank - ar)];
            bpad[d] = d < rank - br ? 1 : bs[d - (rank - br)];
        }
        cd_ref_binary((cd_binary_kind)op, rank, apad, a, bpad, b, out, act, want);
        float *da = to_dev(a, na), *db = to_dev(b, nb), *dd = dev_empty(no);
        int rc = cd_hip_binary(op, ar, as, br, bs, da, db, act, dd, NULL);
        if (rc) CD_CHECK_FAIL_("binary rank %d/%d: rc %d", ar, br, rc);
        float *got = from_dev(dd, no);
        CHECK_CLOSE_F32(got, want, no, TOL);
        hipFree(da);
        hipFree(db);
        hipFree(dd);
        free(a);
        free(b);
        free(want);
        free(got);
    }
}

CD_TEST(hip_emu_binary_incompatible_shapes) {
    int64_t a[2] = {3, 4}, b[2] = {2, 4};
    cd_activation none = {CD_ACT_NONE, 0, 0};
    CHECK_EQ(cd_hip_binary(CD_HIP_BINARY_ADD, 2, a, 2, b, NULL, NULL, none, NULL, NULL), CD_ESHAPE);
    CHECK_EQ(cd_hip_binary(CD_HIP_BINARY_ADD, 9, a, 2, b, NULL, NULL, none, NULL, NULL), CD_EPARAMS);
}

CD_TEST(hip_emu_softmax_random_axes_in_place) {
    for (int iter = 0; iter < 8; iter++) {
        int64_t outer = cd_test_randi(1, 6), len = cd_test_randi(1, 1200), inner = cd_test_randi(1, 5);
        if (iter == 0) inner = 1, len = 1000; // a classifier head
        size_t total = (size_t)(outer * len * inner);
        float *x = rand_host(total, -10, 10), *want = malloc(total * sizeof(float));
        cd_ref_softmax((size_t)outer, (size_t)len, (size_t)inner, x, want);
        float *dx = to_dev(x, total);
        CHECK_EQ(cd_hip_softmax(outer, len, inner, dx, dx, NULL), 0);
        float *got = from_dev(dx, total);
        CHECK_CLOSE_F32(got, want, total, TOL);
        hipFree(dx);
        free(x);
        free(want);
        free(got);
    }
    CHECK_EQ(cd_hip_softmax(1, 0, 1, NULL, NULL, NULL), CD_EPARAMS);
}

// A layer the size of ResNet-18's conv3_x (3x3, 128 -> 128 channels, 28x28,
// pad 1, bias, residual, ReLU) through im2col + tiled SGEMM + epilogue.
CD_TEST(hip_emu_conv2d_resnet_sized_layer) {
    cd_conv_desc d;
    memset(&d, 0, sizeof d);
    d.n = 1;
    d.c = d.k = 128;
    d.h = d.w = 28;
    d.r = d.s = 3;
    d.stride_h = d.stride_w = d.dil_h = d.dil_w = d.groups = 1;
    d.pad_t = d.pad_l = d.pad_b = d.pad_r = 1;
    d.act.kind = CD_ACT_RELU;
    d.has_residual = 1;
    cd_conv_out_dims(&d);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    check_conv(&d, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  128x28x28 3x3 conv (+ reference): %.2f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
}
