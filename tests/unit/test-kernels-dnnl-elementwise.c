// oneDNN binary add/mul with broadcast and stand-alone activations
// (backends/cpu/dnnl-binary.c, dnnl-eltwise.c) against cd_ref_binary and
// cd_ref_activation.

#include "tests/unit/test-kernels-util.h"

static void binary_case(cd_dnnl_binary_kind kind, cd_dnnl_tdesc a, cd_dnnl_tdesc b, cd_activation act, int batch,
                        int in_place) {
    CHECK(cd_dnnl_binary_supports(kind, a, b, act));
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_binary_create(kind, a, b, act, batch, &op), 0);
    int bn = b.batch_bcast ? 1 : batch;
    size_t an = (size_t)batch * a.c * a.h * a.w, bnn = (size_t)bn * b.c * b.h * b.w;
    float *av = tk_rand_buf(an, -2, 2), *bv = tk_rand_buf(bnn, -2, 2), *ref = tk_alloc(an);
    int64_t ash[4] = {batch, a.c, a.h, a.w}, bsh[4] = {bn, b.c, b.h, b.w};
    cd_ref_binary(kind == CD_DNNL_ADD ? CD_BINARY_ADD : CD_BINARY_MUL, 4, ash, av, bsh, bv, ash, act, ref);
    float *al = tk_to_layout(a.layout, batch, a.c, a.h, a.w, av);
    float *bl = tk_to_layout(b.layout, bn, b.c, b.h, b.w, bv);
    float *dst = in_place ? al : tk_alloc(cd_dnnl_tensor_floats(a.layout, batch, a.c, a.h, a.w));
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *srcs[2] = {al, bl};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, 2, srcs, dst), 0);
    tk_check_padding_zero(a.layout, batch, a.c, a.h, a.w, dst);
    float *out = tk_from_layout(a.layout, batch, a.c, a.h, a.w, dst);
    CHECK_CLOSE_F32(out, ref, an, 1e-5);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    if (!in_place) free(dst);
    free(av);
    free(bv);
    free(ref);
    free(al);
    free(bl);
    free(out);
}

// Binary ops take NCHW or the CPU's own blocked layout (dnnl.h).
static cd_layout binary_layout(void) { return cd_test_randi(0, 1) ? cd_dnnl_blocked_layout() : CD_LAYOUT_NCHW; }

static cd_dnnl_tdesc rand_t(void) {
    return (cd_dnnl_tdesc){cd_test_randi(1, 40), cd_test_randi(1, 9), cd_test_randi(1, 9), binary_layout(), 0};
}

CD_TEST(dnnl_binary_add_same_shape_residual_relu) {
    for (int i = 0; i < 8; i++) {
        cd_dnnl_tdesc a = rand_t(), b = a;
        binary_case(CD_DNNL_ADD, a, b, tk_act(CD_ACT_RELU), cd_test_randi(1, 9), i % 2);
    }
}

// Squeeze-excitation: x[N,C,H,W] * s[N,C,1,1], s plain NCHW while x may be
// blocked.
CD_TEST(dnnl_binary_mul_broadcast_se_scale) {
    for (int i = 0; i < 8; i++) {
        cd_dnnl_tdesc a = rand_t(), b = {a.c, 1, 1, binary_layout(), 0};
        binary_case(CD_DNNL_MUL, a, b, tk_act(CD_ACT_NONE), cd_test_randi(1, 9), 0);
    }
}

CD_TEST(dnnl_binary_broadcast_any_dims_and_batch) {
    for (int i = 0; i < 10; i++) {
        cd_dnnl_tdesc a = rand_t();
        a.layout = CD_LAYOUT_NCHW;
        cd_dnnl_tdesc b = {cd_test_randi(0, 1) ? a.c : 1, cd_test_randi(0, 1) ? a.h : 1, cd_test_randi(0, 1) ? a.w : 1,
                           CD_LAYOUT_NCHW, cd_test_randi(0, 1)};
        binary_case((cd_dnnl_binary_kind)(i % 2), a, b, tk_rand_act(), cd_test_randi(1, 9), 0);
    }
}

// Odd kinds run in place: oneDNN 2.6 gets in-place + post-op + padded
// channels wrong unless the op splits the activation off (dnnl-binary.c).
CD_TEST(dnnl_binary_every_activation_in_place_c_not_multiple_of_16) {
    for (int k = CD_ACT_NONE; k <= CD_ACT_LEAKYRELU; k++) {
        cd_dnnl_tdesc a = rand_t();
        a.c = 16 * cd_test_randi(0, 2) + cd_test_randi(1, 15);
        a.layout = cd_dnnl_blocked_layout();
        binary_case(CD_DNNL_ADD, a, a, tk_act((cd_act)k), cd_test_randi(1, 4), k % 2);
    }
}

// The blocked layout this CPU does not run natively is refused, not run
// (oneDNN 2.6 writes past dst for nChw8c on AVX-512).
CD_TEST(dnnl_binary_other_blocked_layout_unsupported) {
    const cd_layout other = cd_dnnl_blocked_layout() == CD_LAYOUT_NCHW16C ? CD_LAYOUT_NCHW8C : CD_LAYOUT_NCHW16C;
    cd_dnnl_tdesc a = {8, 3, 7, other, 0}, b = a;
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_binary_supports(CD_DNNL_ADD, a, b, tk_act(CD_ACT_RELU)), 0);
    CHECK_EQ(cd_dnnl_binary_create(CD_DNNL_ADD, a, b, tk_act(CD_ACT_RELU), 1, &op), CD_EUNSUPPORTED);
    a.layout = CD_LAYOUT_NCHW;
    CHECK_EQ(cd_dnnl_binary_supports(CD_DNNL_ADD, a, b, tk_act(CD_ACT_RELU)), 0);
}

CD_TEST(dnnl_binary_bad_broadcast_eparams) {
    cd_dnnl_tdesc a = {8, 4, 4, CD_LAYOUT_NCHW, 0}, b = {3, 4, 4, CD_LAYOUT_NCHW, 0};
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_binary_supports(CD_DNNL_ADD, a, b, tk_act(CD_ACT_NONE)), 0);
    CHECK_EQ(cd_dnnl_binary_create(CD_DNNL_ADD, a, b, tk_act(CD_ACT_NONE), 1, &op), CD_EPARAMS);
}

static void eltwise_case(cd_dnnl_tdesc t, cd_activation act, int batch, int in_place) {
    CHECK(cd_dnnl_eltwise_supports(t, act));
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_eltwise_create(t, act, batch + 1, &op), 0);
    size_t n = (size_t)batch * t.c * t.h * t.w;
    float *src = tk_rand_buf(n, -8, 8), *ref = tk_alloc(n);
    cd_ref_activation(act, n, src, ref);
    float *sl = tk_to_layout(t.layout, batch, t.c, t.h, t.w, src);
    float *dst = in_place ? sl : tk_alloc(cd_dnnl_tensor_floats(t.layout, batch, t.c, t.h, t.w));
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *srcs[1] = {sl};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, 1, srcs, dst), 0);
    tk_check_padding_zero(t.layout, batch, t.c, t.h, t.w, dst);
    float *out = tk_from_layout(t.layout, batch, t.c, t.h, t.w, dst);
    CHECK_CLOSE_F32(out, ref, n, 1e-5);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    if (!in_place) free(dst);
    free(src);
    free(ref);
    free(sl);
    free(out);
}

CD_TEST(dnnl_eltwise_every_activation_both_layouts) {
    for (int k = CD_ACT_NONE; k <= CD_ACT_LEAKYRELU; k++)
        for (int l = 0; l < CD_LAYOUT_COUNT; l++) {
            cd_dnnl_tdesc t = rand_t();
            t.layout = (cd_layout)l;
            eltwise_case(t, tk_act((cd_act)k), cd_test_randi(1, 9), 0);
        }
}

// HARDSIGMOID runs as two in-place steps; padded channels must stay 0 even
// though hardsigmoid(0) = beta.
CD_TEST(dnnl_eltwise_hardsigmoid_in_place_c_not_multiple_of_16) {
    for (int i = 0; i < 4; i++) {
        cd_dnnl_tdesc t = rand_t();
        t.c = 16 * cd_test_randi(0, 2) + cd_test_randi(1, 15);
        t.layout = tk_rand_blocked();
        eltwise_case(t, tk_act(CD_ACT_HARDSIGMOID), cd_test_randi(1, 9), 1);
    }
}
