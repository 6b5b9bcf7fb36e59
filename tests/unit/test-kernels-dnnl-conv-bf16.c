// oneDNN's bf16 conv (cd_dnnl_conv_bf16_create, backends/cpu/dnnl-conv-bf16.c)
// against cd_ref_conv2d on the same source and weights rounded to bf16: the
// products of two bf16 values are exact in float32 and both sum in float32,
// so the two agree to float32 rounding (1e-4), which checks the wiring (the
// reorders, the nhwc scratch, the residual, bias and act) bit for bit nearly,
// where a comparison with the unrounded conv could only check ~1e-2.

#include "backends/backend-opts.h"
#include "tests/unit/test-kernels-util.h"

#include <stdint.h>

// float32 to bf16 and back, rounded to nearest even (oneDNN's reorder).
static float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void skip_unless_native(void) {
    if (!cd_dnnl_bf16_native())
        CD_SKIP("bf16 not run: oneDNN has no native bf16 here (wants avx512_core_bf16 or AMX; ONEDNN_MAX_CPU_ISA "
                "may cap it)");
}

// A random conv: groups 1, 2 or depthwise (which both wirings decline),
// kernels 1-5, strides 1-2, pads.
static cd_conv_desc rand_conv(void) {
    cd_conv_desc d = {0};
    const int kind = cd_test_randi(0, 3);
    d.groups = kind == 0 ? 2 : 1;
    d.c = d.groups * cd_test_randi(1, 40);
    d.k = d.groups * cd_test_randi(1, 40);
    if (kind == 1) d.groups = d.c = d.k = cd_test_randi(1, 40); // depthwise
    const int ks[3] = {1, 3, 5};
    d.r = ks[cd_test_randi(0, 2)];
    d.s = cd_test_randi(0, 3) ? d.r : ks[cd_test_randi(0, 2)];
    d.stride_h = cd_test_randi(1, 2);
    d.stride_w = cd_test_randi(1, 2);
    d.dil_h = d.dil_w = 1;
    d.pad_t = cd_test_randi(0, d.r / 2);
    d.pad_b = cd_test_randi(0, d.r / 2);
    d.pad_l = cd_test_randi(0, d.s / 2);
    d.pad_r = cd_test_randi(0, d.s / 2);
    d.h = cd_test_randi(d.r, d.r + 14);
    d.w = cd_test_randi(d.s, d.s + 14);
    d.act = tk_rand_act_fixed();
    d.has_residual = cd_test_randi(0, 1);
    cd_conv_out_dims(&d);
    return d;
}

// Runs op (d, layouts sl -> dl) at batch on random data against the reference
// on bf16-rounded operands; the residual passed in dst when in_place.
static void check_op(cd_dnnl_op *op, const cd_conv_desc *d0, cd_layout sl, cd_layout dl, int batch, const float *w,
                     const float *bias, int in_place) {
    cd_conv_desc d = *d0;
    d.n = batch;
    const size_t wn = (size_t)d.k * (d.c / d.groups) * d.r * d.s;
    const size_t sn = (size_t)batch * d.c * d.h * d.w, dn = (size_t)batch * d.k * d.oh * d.ow;
    float *src = tk_rand_buf(sn, -1.0f, 1.0f), *res = d.has_residual ? tk_rand_buf(dn, -1.0f, 1.0f) : NULL;
    float *src_r = tk_alloc(sn), *w_r = tk_alloc(wn), *ref = tk_alloc(dn);
    for (size_t i = 0; i < sn; i++) src_r[i] = bf16_round(src[i]);
    for (size_t i = 0; i < wn; i++) w_r[i] = bf16_round(w[i]);
    cd_ref_conv2d(&d, src_r, w_r, bias, res, ref);

    const size_t dl_n = cd_dnnl_tensor_floats(dl, batch, d.k, d.oh, d.ow);
    float *s_l = tk_to_layout(sl, batch, d.c, d.h, d.w, src);
    float *r_l = res ? tk_to_layout(dl, batch, d.k, d.oh, d.ow, res) : NULL;
    float *dst = tk_alloc(dl_n);
    for (size_t i = 0; i < dl_n; i++) dst[i] = 7.0f; // garbage must not leak into the result
    if (res && in_place) memcpy(dst, r_l, dl_n * sizeof(float));
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *srcs[2] = {s_l, in_place ? dst : r_l};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, res ? 2 : 1, srcs, dst), 0);
    tk_check_padding_zero(dl, batch, d.k, d.oh, d.ow, dst);
    float *out = tk_from_layout(dl, batch, d.k, d.oh, d.ow, dst);
    CHECK_CLOSE_F32(out, ref, dn, 1e-4);
    cd_dnnl_ctx_free(ctx);
    free(src);
    free(res);
    free(src_r);
    free(w_r);
    free(ref);
    free(s_l);
    free(r_l);
    free(dst);
    free(out);
}

CD_TEST(dnnl_conv_bf16_matches_the_reference_on_rounded_operands) {
    skip_unless_native();
    // Odd i: nhwc. Even: blocked, every fourth with whole blocks of 16
    // channels (oneDNN's jit_bf16 declines most other shapes).
    int ran[3] = {0, 0, 0}, want_nhwc = 0;
    for (int i = 0; i < 24; i++) {
        cd_conv_desc d = rand_conv();
        const int nhwc = i % 2, whole = i % 4 == 0, batch = cd_test_randi(1, 5);
        if (whole) {
            d.groups = 1;
            d.c = 16 * cd_test_randi(1, 3);
            d.k = 16 * cd_test_randi(1, 3);
        }
        cd_layout sl = cd_test_randi(0, 3) ? tk_rand_blocked() : CD_LAYOUT_NCHW, dl = tk_rand_blocked();
        if (whole) sl = dl = CD_LAYOUT_NCHW16C; // jit_bf16 is an AVX-512 kernel: 16 channels a block
        const size_t wn = (size_t)d.k * (d.c / d.groups) * d.r * d.s;
        const float scale = 1.0f / sqrtf((float)((d.c / d.groups) * d.r * d.s));
        float *w = tk_rand_buf(wn, -scale, scale);
        float *bias = cd_test_randi(0, 3) ? tk_rand_buf(d.k, -0.5f, 0.5f) : NULL;
        cd_dnnl_op *op = NULL;
        // Grouped convs are declined, and strided non-square kernels in nhwc (oneDNN 2.6's AMX faults).
        const int grouped = d.groups > 1;
        want_nhwc += nhwc && !grouped && (d.r == d.s || (d.stride_h == 1 && d.stride_w == 1));
        const int rc = cd_dnnl_conv_bf16_create(&d, sl, dl, batch + cd_test_randi(0, 2), nhwc, w, bias, &op);
        // oneDNN may have only its reference loop for an odd shape: declined, never wrong.
        if (rc != CD_EUNSUPPORTED) CHECK_EQ(rc, 0);
        if (grouped) CHECK_EQ(rc, CD_EUNSUPPORTED);
        if (!rc) {
            CHECK(strncmp(cd_dnnl_op_impl(op, 1), "bf16:", 5) == 0);
            CHECK(cd_dnnl_op_weight_bytes(op) >= wn * 2);
            // The op keeps its own copy: scribble over the caller's.
            float *keep = tk_alloc(wn);
            memcpy(keep, w, wn * sizeof(float));
            for (size_t j = 0; j < wn; j++) w[j] = 1e9f;
            check_op(op, &d, sl, dl, batch, keep, bias, cd_test_randi(0, 1));
            cd_dnnl_op_free(op);
            free(keep);
            ran[nhwc ? 1 : whole ? 2 : 0]++;
        }
        free(w);
        free(bias);
    }
    // nhwc takes every plain and depthwise shape, blocked whole ones: a test
    // that declined them proves nothing.
    if (ran[1] < want_nhwc || ran[2] < 6)
        CD_CHECK_FAIL_("bf16 ran %d of %d nhwc, %d of 6 blocked with whole blocks (%d of 6 others)", ran[1], want_nhwc,
                       ran[2], ran[0]);
}

CD_TEST(dnnl_conv_bf16_resnet_shapes_both_wirings) {
    skip_unless_native();
    // A ResNet 3x3 and a 1x1 with a residual, channels in whole blocks.
    cd_conv_desc d[2] = {cd_conv_square(64, 14, 14, 64, 3, 1, 1), cd_conv_square(128, 7, 7, 256, 1, 1, 0)};
    d[0].act = tk_act(CD_ACT_RELU);
    d[1].has_residual = 1;
    d[1].act = tk_act(CD_ACT_RELU);
    for (int i = 0; i < 2; i++) {
        cd_conv_out_dims(&d[i]);
        for (int nhwc = 0; nhwc < 2; nhwc++) {
            const size_t wn = (size_t)d[i].k * d[i].c * d[i].r * d[i].s;
            float *w = tk_rand_buf(wn, -0.1f, 0.1f), *bias = tk_rand_buf(d[i].k, -0.5f, 0.5f);
            cd_dnnl_op *op = NULL;
            CHECK_EQ(cd_dnnl_conv_bf16_create(&d[i], CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C, 3, nhwc, w, bias, &op), 0);
            for (int b = 1; b <= 3; b++) check_op(op, &d[i], CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C, b, w, bias, b == 2);
            cd_dnnl_op_free(op);
            free(w);
            free(bias);
        }
    }
}

// The switch through the CPU backend's entry: off keeps float32, on takes
// bf16 where oneDNN runs it natively and float32 elsewhere; auto either.
CD_TEST(dnnl_conv_bf16_switch_off_on_auto) {
    cd_conv_desc d = cd_conv_square(32, 12, 12, 48, 3, 1, 1);
    cd_conv_out_dims(&d);
    const size_t wn = (size_t)d.k * d.c * 9;
    float *w = tk_rand_buf(wn, -0.2f, 0.2f);
    for (int mode = 0; mode <= 2; mode++) {
        const cd_backend_opts sw = {.winograd = 1, .dw3x3 = 1, .bf16 = mode};
        cd_dnnl_op *op = NULL;
        CHECK_EQ(cd_dnnl_conv_create_sw(&d, CD_LAYOUT_NCHW8C, CD_LAYOUT_NCHW8C, 2, w, NULL, &sw, &op), 0);
        const int bf16 = strncmp(cd_dnnl_op_impl(op, 1), "bf16:", 5) == 0;
        CHECK_EQ(cd_dnnl_op_is_bf16(op), bf16); // what the backend reports as the layer's dtype
        if (mode == 0 || !cd_dnnl_bf16_native()) CHECK_EQ(bf16, 0);
        if (mode == 2 && cd_dnnl_bf16_native()) CHECK_EQ(bf16, 1);
        if (bf16) check_op(op, &d, CD_LAYOUT_NCHW8C, CD_LAYOUT_NCHW8C, 2, w, NULL, 0);
        cd_dnnl_op_free(op);
    }
    free(w);
}

CD_TEST(dnnl_conv_bf16_bad_params) {
    cd_conv_desc d = cd_conv_square(8, 6, 6, 8, 3, 1, 1);
    cd_conv_out_dims(&d);
    float w[8 * 8 * 9] = {0};
    cd_dnnl_op *op = (cd_dnnl_op *)1;
    CHECK_EQ(cd_dnnl_conv_bf16_create(&d, CD_LAYOUT_NHWC, CD_LAYOUT_NCHW8C, 1, 0, w, NULL, &op), CD_EPARAMS);
    CHECK(op == NULL);
    CHECK_EQ(cd_dnnl_conv_bf16_create(&d, CD_LAYOUT_NCHW8C, CD_LAYOUT_NCHW8C, 1, 1, NULL, NULL, &op), CD_EPARAMS);
    CHECK_EQ(cd_dnnl_conv_bf16_create(&d, CD_LAYOUT_NCHW8C, CD_LAYOUT_NCHW8C, 0, 1, w, NULL, &op), CD_EPARAMS);
    cd_conv_desc bad = d;
    bad.oh = 99;
    CHECK_EQ(cd_dnnl_conv_bf16_create(&bad, CD_LAYOUT_NCHW8C, CD_LAYOUT_NCHW8C, 1, 1, w, NULL, &op), CD_EPARAMS);
}
