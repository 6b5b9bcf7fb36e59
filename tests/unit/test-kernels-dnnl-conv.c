// oneDNN convolution (backends/cpu/dnnl-conv.c) against cd_ref_conv2d on random
// shapes, both layouts, every activation, with and without residual.

#include "tests/unit/test-kernels-util.h"

#include <pthread.h>

// A random conv within the given bounds; groups divides c and k.
static cd_conv_desc rand_conv(int kmax_rs, int groups) {
    cd_conv_desc d = {0};
    d.groups = groups;
    d.c = groups * cd_test_randi(1, groups > 1 ? 3 : 24);
    d.k = groups * cd_test_randi(1, groups > 1 ? 3 : 24);
    int ks[4] = {1, 3, 5, 7};
    do d.r = ks[cd_test_randi(0, 3)];
    while (d.r > kmax_rs);
    d.s = cd_test_randi(0, 1) ? d.r : ks[cd_test_randi(0, 3)];
    if (d.s > kmax_rs) d.s = 1;
    d.stride_h = cd_test_randi(1, 2);
    d.stride_w = cd_test_randi(1, 2);
    d.dil_h = d.dil_w = 1;
    d.pad_t = cd_test_randi(0, d.r / 2 + 1);
    d.pad_b = cd_test_randi(0, d.r / 2 + 1);
    d.pad_l = cd_test_randi(0, d.s / 2 + 1);
    d.pad_r = cd_test_randi(0, d.s / 2 + 1);
    d.h = cd_test_randi(d.r, d.r + 12);
    d.w = cd_test_randi(d.s, d.s + 12);
    d.act = tk_rand_act();
    d.has_residual = cd_test_randi(0, 1);
    cd_conv_out_dims(&d);
    return d;
}

// Runs one conv through oneDNN in the given layouts at the given batch and
// compares with the reference. resid_in_place: pass the residual in dst.
static void conv_case(cd_conv_desc d, cd_layout sl, cd_layout dl, int batch, int resid_in_place) {
    d.n = batch;
    cd_conv_out_dims(&d);
    size_t cpg = (size_t)d.c / d.groups;
    size_t wn = (size_t)d.k * cpg * d.r * d.s;
    float scale = 1.0f / sqrtf((float)(cpg * d.r * d.s));
    float *w = tk_rand_buf(wn, -scale, scale);
    float *bias = cd_test_randi(0, 3) ? tk_rand_buf(d.k, -0.5f, 0.5f) : NULL;
    size_t sn = (size_t)batch * d.c * d.h * d.w, dn = (size_t)batch * d.k * d.oh * d.ow;
    float *src = tk_rand_buf(sn, -1.0f, 1.0f);
    float *res = d.has_residual ? tk_rand_buf(dn, -1.0f, 1.0f) : NULL;
    float *ref = tk_alloc(dn);
    cd_ref_conv2d(&d, src, w, bias, res, ref);

    cd_dnnl_op *op = NULL;
    int max_batch = batch + cd_test_randi(0, 2);
    int rc = cd_dnnl_conv_create(&d, sl, dl, max_batch, w, bias, &op);
    if (rc)
        CD_CHECK_FAIL_("create failed %d: c%d k%d %dx%d g%d s%d,%d %s->%s", rc, d.c, d.k, d.r, d.s, d.groups,
                       d.stride_h, d.stride_w, tk_layout_name(sl), tk_layout_name(dl));
    // The op owns its weights: scribble over the caller's copy.
    for (size_t i = 0; i < wn; i++) w[i] = 1e9f;
    if (bias)
        for (int i = 0; i < d.k; i++) bias[i] = 1e9f;

    float *s_l = tk_to_layout(sl, batch, d.c, d.h, d.w, src);
    float *dst = tk_alloc(cd_dnnl_tensor_floats(dl, batch, d.k, d.oh, d.ow));
    // Garbage in dst (and its padding) must not leak into the result.
    for (size_t i = 0; i < cd_dnnl_tensor_floats(dl, batch, d.k, d.oh, d.ow); i++) dst[i] = 7.0f;
    float *r_l = NULL;
    if (res) {
        r_l = tk_to_layout(dl, batch, d.k, d.oh, d.ow, res);
        if (resid_in_place) memcpy(dst, r_l, cd_dnnl_tensor_floats(dl, batch, d.k, d.oh, d.ow) * sizeof(float));
    }
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *srcs[2] = {s_l, resid_in_place ? dst : r_l};
    rc = cd_dnnl_op_run(op, ctx, batch, res ? 2 : 1, srcs, dst);
    CHECK_EQ(rc, 0);
    tk_check_padding_zero(dl, batch, d.k, d.oh, d.ow, dst);
    float *out = tk_from_layout(dl, batch, d.k, d.oh, d.ow, dst);
    CHECK_CLOSE_F32(out, ref, dn, 1e-4);
    CHECK(cd_dnnl_op_weight_bytes(op) >= wn * sizeof(float));

    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(w);
    free(bias);
    free(src);
    free(res);
    free(ref);
    free(s_l);
    free(dst);
    free(r_l);
    free(out);
}

static cd_layout rand_layout(void) { return tk_rand_layout(); }

CD_TEST(dnnl_conv_random_shapes_both_layouts) {
    for (int i = 0; i < 12; i++) conv_case(rand_conv(7, 1), rand_layout(), rand_layout(), cd_test_randi(1, 9), 0);
}

CD_TEST(dnnl_conv_kernel_1_3_5_7_stride_1_2) {
    int ks[4] = {1, 3, 5, 7};
    for (int i = 0; i < 4; i++)
        for (int st = 1; st <= 2; st++) {
            cd_conv_desc d = rand_conv(7, 1);
            d.r = d.s = ks[i];
            d.stride_h = d.stride_w = st;
            d.h = cd_test_randi(ks[i], ks[i] + 9);
            d.w = cd_test_randi(ks[i], ks[i] + 9);
            d.pad_t = d.pad_b = d.pad_l = d.pad_r = ks[i] / 2;
            cd_layout l = tk_rand_blocked();
            conv_case(d, l, l, cd_test_randi(1, 3), 0);
        }
}

CD_TEST(dnnl_conv_asymmetric_pads) {
    for (int i = 0; i < 6; i++) {
        cd_conv_desc d = rand_conv(5, 1);
        d.r = d.s = 3;
        d.h = cd_test_randi(3, 15);
        d.w = cd_test_randi(3, 15);
        d.pad_t = cd_test_randi(0, 2);
        d.pad_b = cd_test_randi(0, 2);
        d.pad_l = cd_test_randi(0, 2);
        d.pad_r = cd_test_randi(0, 2);
        if (d.pad_t == d.pad_b) d.pad_b = (d.pad_t + 1) % 3;
        conv_case(d, rand_layout(), rand_layout(), cd_test_randi(1, 4), 0);
    }
}

CD_TEST(dnnl_conv_dilations) {
    for (int i = 0; i < 6; i++) {
        cd_conv_desc d = rand_conv(5, cd_test_randi(0, 1) ? 1 : 2);
        d.dil_h = cd_test_randi(1, 3);
        d.dil_w = cd_test_randi(1, 3);
        d.h = d.dil_h * (d.r - 1) + 1 + cd_test_randi(0, 8);
        d.w = d.dil_w * (d.s - 1) + 1 + cd_test_randi(0, 8);
        conv_case(d, rand_layout(), rand_layout(), cd_test_randi(1, 4), 0);
    }
}

CD_TEST(dnnl_conv_groups) {
    for (int i = 0; i < 6; i++) {
        int g = cd_test_randi(2, 6);
        conv_case(rand_conv(5, g), rand_layout(), rand_layout(), cd_test_randi(1, 5), 0);
    }
}

CD_TEST(dnnl_conv_depthwise_3x3_stride_1_2) {
    for (int i = 0; i < 6; i++) {
        cd_conv_desc d = rand_conv(3, 1);
        d.c = d.k = d.groups = cd_test_randi(1, 70);
        d.r = d.s = 3;
        d.pad_t = d.pad_l = d.pad_b = d.pad_r = 1;
        d.stride_h = d.stride_w = 1 + i % 2;
        conv_case(d, rand_layout(), rand_layout(), cd_test_randi(1, 9), 0);
    }
}

CD_TEST(dnnl_conv_c_not_multiple_of_16) {
    for (int i = 0; i < 4; i++) {
        cd_conv_desc d = rand_conv(3, 1);
        d.c = 16 * cd_test_randi(0, 2) + cd_test_randi(1, 15);
        d.k = 16 * cd_test_randi(0, 2) + cd_test_randi(1, 15);
        cd_layout l = tk_rand_blocked();
        conv_case(d, l, l, cd_test_randi(1, 4), 0);
    }
}

CD_TEST(dnnl_conv_odd_width) {
    for (int i = 0; i < 4; i++) {
        cd_conv_desc d = rand_conv(5, 1);
        d.w = 2 * cd_test_randi(d.s / 2 + 1, 12) + 1;
        d.h = 2 * cd_test_randi(d.r / 2 + 1, 6) + 1;
        conv_case(d, rand_layout(), rand_layout(), cd_test_randi(1, 3), 0);
    }
}

CD_TEST(dnnl_conv_every_activation_16c_padding_stays_zero) {
    for (int a = CD_ACT_NONE; a <= CD_ACT_LEAKYRELU; a++) {
        cd_conv_desc d = rand_conv(3, 1);
        d.k = 16 * cd_test_randi(0, 1) + cd_test_randi(1, 15); // padded output channels
        d.act = tk_act((cd_act)a);
        d.has_residual = 0;
        conv_case(d, rand_layout(), tk_rand_blocked(), cd_test_randi(1, 3), 0);
        d.act = tk_act((cd_act)a);
        conv_case(d, rand_layout(), CD_LAYOUT_NCHW, cd_test_randi(1, 3), 0);
    }
}

CD_TEST(dnnl_conv_residual_relu) {
    for (int i = 0; i < 6; i++) {
        cd_conv_desc d = rand_conv(3, 1);
        d.has_residual = 1;
        d.act = tk_act(CD_ACT_RELU);
        conv_case(d, rand_layout(), rand_layout(), cd_test_randi(1, 5), i % 2);
    }
}

CD_TEST(dnnl_conv_residual_every_activation_in_place) {
    for (int a = CD_ACT_NONE; a <= CD_ACT_LEAKYRELU; a++) {
        cd_conv_desc d = rand_conv(3, 1);
        d.has_residual = 1;
        d.act = tk_act((cd_act)a);
        conv_case(d, rand_layout(), rand_layout(), cd_test_randi(1, 3), 1);
    }
}

CD_TEST(dnnl_conv_first_layer_nchw_to_16c) {
    cd_conv_desc d = {0};
    d.c = 3;
    d.k = cd_test_randi(8, 40);
    d.r = d.s = 7;
    d.stride_h = d.stride_w = 2;
    d.dil_h = d.dil_w = 1;
    d.groups = 1;
    d.pad_t = d.pad_l = d.pad_b = d.pad_r = 3;
    d.h = cd_test_randi(20, 40);
    d.w = cd_test_randi(20, 40);
    d.act = tk_act(CD_ACT_RELU);
    conv_case(d, CD_LAYOUT_NCHW, tk_rand_blocked(), cd_test_randi(1, 2), 0);
}

// One op, every batch size 1..9 in random order: the lazily built primitives
// (and any extra packed weight layouts) are right for each.
CD_TEST(dnnl_conv_batch_1_to_9_one_op) {
    cd_conv_desc d = rand_conv(3, cd_test_randi(0, 1) ? 1 : 2);
    cd_layout sl = rand_layout(), dl = rand_layout();
    d.has_residual = 0;
    size_t cpg = (size_t)d.c / d.groups, wn = (size_t)d.k * cpg * d.r * d.s;
    float *w = tk_rand_buf(wn, -0.3f, 0.3f), *bias = tk_rand_buf(d.k, -1, 1);
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_conv_create(&d, sl, dl, 9, w, bias, &op), 0);
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    int order[9] = {9, 1, 5, 2, 8, 3, 7, 4, 6};
    for (int i = 0; i < 9; i++) {
        int b = order[i];
        d.n = b;
        size_t sn = (size_t)b * d.c * d.h * d.w, dn = (size_t)b * d.k * d.oh * d.ow;
        float *src = tk_rand_buf(sn, -1, 1), *ref = tk_alloc(dn);
        cd_ref_conv2d(&d, src, w, bias, NULL, ref);
        float *s_l = tk_to_layout(sl, b, d.c, d.h, d.w, src);
        float *dst = tk_alloc(cd_dnnl_tensor_floats(dl, b, d.k, d.oh, d.ow));
        const float *srcs[1] = {s_l};
        CHECK_EQ(cd_dnnl_op_run(op, ctx, b, 1, srcs, dst), 0);
        float *out = tk_from_layout(dl, b, d.k, d.oh, d.ow, dst);
        CHECK_CLOSE_F32(out, ref, dn, 1e-4);
        CHECK(strcmp(cd_dnnl_op_impl(op, b), "?") != 0);
        free(src);
        free(ref);
        free(s_l);
        free(dst);
        free(out);
    }
    const float *srcs[1] = {w};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, 10, 1, srcs, w), CD_EPARAMS);
    CHECK_EQ(cd_dnnl_op_run(op, ctx, 0, 1, srcs, w), CD_EPARAMS);
    CHECK_EQ(cd_dnnl_op_run(op, ctx, 1, 2, srcs, w), CD_EPARAMS);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(w);
    free(bias);
}

typedef struct {
    cd_dnnl_op *op;
    const cd_conv_desc *d;
    const float *w, *bias;
    int batch;
    int failures;
} worker_arg;

static void *conv_worker(void *p) {
    worker_arg *a = p;
    cd_conv_desc d = *a->d;
    d.n = a->batch;
    cd_dnnl_ctx *ctx;
    if (cd_dnnl_ctx_create(&ctx)) {
        a->failures++;
        return NULL;
    }
    size_t sn = (size_t)d.n * d.c * d.h * d.w, dn = (size_t)d.n * d.k * d.oh * d.ow;
    float *src = malloc(sn * sizeof *src), *ref = malloc(dn * sizeof *ref);
    float *dst = malloc(cd_dnnl_tensor_floats(CD_LAYOUT_NCHW, d.n, d.k, d.oh, d.ow) * sizeof *dst);
    for (size_t i = 0; i < sn; i++) src[i] = (float)((i * 7919 + a->batch) % 1000) / 500.0f - 1.0f;
    cd_ref_conv2d(&d, src, a->w, a->bias, NULL, ref);
    for (int it = 0; it < 20; it++) {
        const float *srcs[1] = {src};
        if (cd_dnnl_op_run(a->op, ctx, d.n, 1, srcs, dst)) {
            a->failures++;
            break;
        }
        for (size_t i = 0; i < dn; i++)
            if (fabsf(dst[i] - ref[i]) > 1e-4f * fmaxf(1.0f, fabsf(ref[i]))) {
                a->failures++;
                break;
            }
    }
    free(src);
    free(ref);
    free(dst);
    cd_dnnl_ctx_free(ctx);
    return NULL;
}

// Four threads share one op (racing to build the same and different batch
// primitives), each with its own ctx.
CD_TEST(dnnl_conv_concurrent_workers_share_op) {
    cd_dnnl_set_threads(1);
    cd_conv_desc d = rand_conv(3, 1);
    d.has_residual = 0;
    size_t wn = (size_t)d.k * d.c * d.r * d.s;
    float *w = tk_rand_buf(wn, -0.3f, 0.3f), *bias = tk_rand_buf(d.k, -1, 1);
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_conv_create(&d, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW, 4, w, bias, &op), 0);
    pthread_t th[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){op, &d, w, bias, 2 + i % 3, 0};
        CHECK_EQ(pthread_create(&th[i], NULL, conv_worker, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(args[i].failures, 0);
    }
    cd_dnnl_op_free(op);
    free(w);
    free(bias);
}

CD_TEST(dnnl_conv_bad_desc_eparams) {
    cd_conv_desc d = rand_conv(3, 1);
    float w[1] = {1};
    cd_dnnl_op *op = (cd_dnnl_op *)&d;
    cd_conv_desc bad = d;
    bad.groups = 0;
    CHECK_EQ(cd_dnnl_conv_create(&bad, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW, 1, w, NULL, &op), CD_EPARAMS);
    CHECK(op == NULL);
    CHECK_EQ(cd_dnnl_conv_supports(&bad, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW), 0);
    bad = d;
    bad.oh += 1; // inconsistent with the other fields
    CHECK_EQ(cd_dnnl_conv_create(&bad, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW, 1, w, NULL, &op), CD_EPARAMS);
    bad = d;
    bad.c = 3;
    bad.groups = 2;
    CHECK_EQ(cd_dnnl_conv_create(&bad, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW, 1, w, NULL, &op), CD_EPARAMS);
    CHECK_EQ(cd_dnnl_conv_create(&d, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW, 0, w, NULL, &op), CD_EPARAMS);
    CHECK_EQ(cd_dnnl_conv_supports(&d, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C), 1);
    CHECK_EQ(cd_dnnl_conv_supports(&d, CD_LAYOUT_NCHW8C, CD_LAYOUT_NCHW8C), 1);
    CHECK_EQ(cd_dnnl_conv_supports(&d, (cd_layout)CD_LAYOUT_COUNT, CD_LAYOUT_NCHW), 0);
    CHECK_EQ(cd_dnnl_set_threads(0), CD_EPARAMS);
    CHECK_EQ(cd_dnnl_set_threads(2), 0);
    CHECK_EQ(cd_dnnl_get_threads(), 2);
}

// The blocked layout chosen for this CPU is the one oneDNN runs with a jit
// kernel: nChw16c where its ISA is AVX-512, nChw8c on AVX2 (on an AVX-512
// machine under ONEDNN_MAX_CPU_ISA=AVX2 too), and a ResNet-shaped 3x3 and 1x1
// conv in it never lands on oneDNN's reference loop.
CD_TEST(dnnl_blocked_layout_follows_the_cpu) {
    const cd_layout l = cd_dnnl_blocked_layout();
    const char *isa = cd_dnnl_isa();
    printf("  oneDNN ISA %s -> %s\n", isa, cd_layout_name(l));
    if (strncmp(isa, "avx512", 6) == 0)
        CHECK_EQ(l, CD_LAYOUT_NCHW16C);
    else if (strncmp(isa, "avx2", 4) == 0 || strncmp(isa, "avx", 3) == 0 || strncmp(isa, "sse41", 5) == 0)
        CHECK_EQ(l, CD_LAYOUT_NCHW8C);
    CHECK(l != CD_LAYOUT_NCHW);
    for (int k = 1; k <= 3; k += 2) {
        cd_conv_desc d = cd_conv_square(96, 20, 20, 64, k, 1, k / 2);
        size_t wn = (size_t)d.k * d.c * k * k;
        float *w = tk_rand_buf(wn, -1, 1);
        cd_dnnl_op *op = NULL;
        CHECK_EQ(cd_dnnl_conv_create(&d, l, l, 1, w, NULL, &op), 0);
        const char *impl = cd_dnnl_op_impl(op, 1);
        printf("  %dx%d conv in %s: %s\n", k, k, cd_layout_name(l), impl);
        CHECK(!cd_dnnl_impl_is_reference(impl));
        cd_dnnl_op_free(op);
        free(w);
    }
    CHECK(cd_dnnl_impl_is_reference("ref:any"));
    CHECK(!cd_dnnl_impl_is_reference("jit:avx2"));
    CHECK(!cd_dnnl_impl_is_reference("jit_1x1:avx512_core"));
}
