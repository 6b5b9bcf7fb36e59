// oneDNN reorder, inner product, concat and softmax (backends/cpu/dnnl-*.c)
// against the reference kernels.

#include "tests/unit/test-kernels-util.h"
#include "sparse/spmm-ukernel.h"

#include <string.h>

CD_TEST(dnnl_reorder_round_trip_16c_8c_c_not_multiple_of_block_odd_width) {
    for (int i = 0; i < 6; i++) {
        int c = cd_test_randi(1, 50), h = cd_test_randi(1, 9), w = 2 * cd_test_randi(0, 6) + 1;
        int batch = cd_test_randi(1, 9);
        const cd_layout bl = i % 2 ? CD_LAYOUT_NCHW16C : CD_LAYOUT_NCHW8C;
        cd_dnnl_op *to16, *back;
        CHECK(cd_dnnl_reorder_supports(CD_LAYOUT_NCHW, bl, c, h, w));
        CHECK_EQ(cd_dnnl_reorder_create(CD_LAYOUT_NCHW, bl, c, h, w, 9, &to16), 0);
        CHECK_EQ(cd_dnnl_reorder_create(bl, CD_LAYOUT_NCHW, c, h, w, 9, &back), 0);
        size_t n = (size_t)batch * c * h * w, n16 = cd_dnnl_tensor_floats(bl, batch, c, h, w);
        CHECK_EQ(n16, cd_layout_numel(bl, batch, c, h, w));
        CHECK_EQ(n16,
                 (size_t)batch * ((c + cd_layout_block(bl) - 1) / cd_layout_block(bl) * cd_layout_block(bl)) * h * w);
        float *src = tk_rand_buf(n, -1, 1), *mid = tk_rand_buf(n16, 5, 6), *out = tk_alloc(n);
        float *ref16 = tk_to_layout(bl, batch, c, h, w, src);
        cd_dnnl_ctx *ctx;
        CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
        const float *s1[1] = {src}, *s2[1] = {mid};
        CHECK_EQ(cd_dnnl_op_run(to16, ctx, batch, 1, s1, mid), 0);
        CHECK_CLOSE_F32(mid, ref16, n16, 0); // exact, padding included
        CHECK_EQ(cd_dnnl_op_run(back, ctx, batch, 1, s2, out), 0);
        CHECK_CLOSE_F32(out, src, n, 0);
        cd_dnnl_ctx_free(ctx);
        cd_dnnl_op_free(to16);
        cd_dnnl_op_free(back);
        free(src);
        free(mid);
        free(out);
        free(ref16);
    }
}

static void ip_case(cd_dnnl_tdesc s, int k, int with_bias, cd_activation act, int batch) {
    CHECK(cd_dnnl_ip_supports(s, k));
    int in = s.c * s.h * s.w;
    float sc = 1.0f / sqrtf((float)in);
    float *w = tk_rand_buf((size_t)k * in, -sc, sc), *bias = with_bias ? tk_rand_buf(k, -1, 1) : NULL;
    float *src = tk_rand_buf((size_t)batch * in, -1, 1), *ref = tk_alloc((size_t)batch * k);
    cd_ref_gemm(batch, k, in, src, w, bias, act, ref);
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_ip_create(s, k, w, bias, act, 9, &op), 0);
    for (size_t i = 0; i < (size_t)k * in; i++) w[i] = 0; // the op keeps its own copy
    float *sl = tk_to_layout(s.layout, batch, s.c, s.h, s.w, src), *dst = tk_alloc((size_t)batch * k);
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *srcs[1] = {sl};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, 1, srcs, dst), 0);
    CHECK_CLOSE_F32(dst, ref, (size_t)batch * k, 1e-4);
    CHECK(cd_dnnl_op_weight_bytes(op) >= (size_t)k * in * sizeof(float));
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(w);
    free(bias);
    free(src);
    free(ref);
    free(sl);
    free(dst);
}

CD_TEST(dnnl_ip_fc_head_every_activation) {
    for (int a = CD_ACT_NONE; a <= CD_ACT_LEAKYRELU; a++) {
        cd_dnnl_tdesc s = {cd_test_randi(1, 300), 1, 1, CD_LAYOUT_NCHW, 0};
        ip_case(s, cd_test_randi(1, 100), a % 2, tk_act((cd_act)a), cd_test_randi(1, 9));
    }
}

// Batch 1 of a 1x1 input runs our own loop over oneDNN's packed weights
// (backends/cpu/gemv.h) where the CPU has AVX-512 and oneDNN packed them as
// OIhw16i64o: outputs and inputs across and inside the 64 x 16 blocks, every
// activation, with and without bias, the same op then at batch 2..9 on
// oneDNN itself.
CD_TEST(dnnl_ip_batch_1_gemv_matches_reference) {
    int gemv = 0;
    for (int i = 0; i < 8; i++) {
        cd_dnnl_tdesc s = {i < 2 ? cd_test_randi(1, 20) : cd_test_randi(17, 700), 1, 1, CD_LAYOUT_NCHW, 0};
        const int k = i < 2 ? cd_test_randi(1, 70) : cd_test_randi(60, 400);
        cd_activation act = tk_act((cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_LEAKYRELU));
        ip_case(s, k, i % 2, act, 1);
        ip_case(s, k, i % 2, act, cd_test_randi(2, 9));
        float *w = tk_rand_buf((size_t)k * s.c, -1, 1);
        cd_dnnl_op *op;
        CHECK_EQ(cd_dnnl_ip_create(s, k, w, NULL, act, 1, &op), 0);
        gemv += strcmp(cd_dnnl_op_impl(op, 1), "gemv:avx512f") == 0;
        cd_dnnl_op_free(op);
        free(w);
    }
    if (!cd_sparse_isa_supported(CD_SPARSE_ISA_AVX512F) || cd_dnnl_blocked_layout() != CD_LAYOUT_NCHW16C)
        CD_SKIP("no AVX-512 for us or for oneDNN (CONVD_MAX_ISA / ONEDNN_MAX_CPU_ISA): oneDNN runs batch 1 too");
    CHECK(gemv > 0); // the loop ran (oneDNN packs OIhw16i64o for these at AVX-512)
}

// Flatten of a blocked [N, C, H, W] tensor: no reorder needed before the FC.
CD_TEST(dnnl_ip_flatten_from_nchw16c_c_not_multiple_of_16) {
    for (int i = 0; i < 4; i++) {
        cd_dnnl_tdesc s = {16 * cd_test_randi(0, 2) + cd_test_randi(1, 15), cd_test_randi(1, 4), cd_test_randi(1, 4),
                           tk_rand_blocked(), 0};
        ip_case(s, cd_test_randi(1, 40), 1, tk_act(CD_ACT_NONE), cd_test_randi(1, 9));
    }
}

CD_TEST(dnnl_concat_channels_mixed_layouts) {
    for (int it = 0; it < 6; it++) {
        int n = cd_test_randi(2, 4), h = cd_test_randi(1, 7), w = cd_test_randi(1, 7);
        int batch = cd_test_randi(1, 9), axis = it % 3 == 2 ? cd_test_randi(2, 3) : 1;
        cd_layout dl = tk_rand_layout();
        cd_dnnl_tdesc t[4];
        int64_t shp[4][4];
        const int64_t *shapes[4];
        float *srcs[4], *sl[4];
        int tot = 0, c0 = cd_test_randi(1, 20);
        for (int i = 0; i < n; i++) {
            t[i] = (cd_dnnl_tdesc){axis == 1 ? cd_test_randi(1, 20) : c0, axis == 2 ? cd_test_randi(1, 5) : h,
                                   axis == 3 ? cd_test_randi(1, 5) : w, axis == 1 ? tk_rand_layout() : dl, 0};
            tot += axis == 1 ? t[i].c : axis == 2 ? t[i].h : t[i].w;
            int64_t sh[4] = {batch, t[i].c, t[i].h, t[i].w};
            memcpy(shp[i], sh, sizeof sh);
            shapes[i] = shp[i];
            srcs[i] = tk_rand_buf((size_t)batch * t[i].c * t[i].h * t[i].w, -1, 1);
            sl[i] = tk_to_layout(t[i].layout, batch, t[i].c, t[i].h, t[i].w, srcs[i]);
        }
        int dc = axis == 1 ? tot : c0, dh = axis == 2 ? tot : h, dw = axis == 3 ? tot : w;
        if (!cd_dnnl_concat_supports(n, t, axis, dl))
            CD_CHECK_FAIL_("concat axis %d of %d inputs into %s unsupported", axis, n, tk_layout_name(dl));
        cd_dnnl_op *op;
        CHECK_EQ(cd_dnnl_concat_create(n, t, axis, dl, 9, &op), 0);
        size_t dn = (size_t)batch * dc * dh * dw;
        float *ref = tk_alloc(dn), *dst = tk_alloc(cd_dnnl_tensor_floats(dl, batch, dc, dh, dw));
        cd_ref_concat(4, axis, n, shapes, (const float *const *)srcs, ref);
        cd_dnnl_ctx *ctx;
        CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
        CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, n, (const float *const *)sl, dst), 0);
        tk_check_padding_zero(dl, batch, dc, dh, dw, dst);
        float *out = tk_from_layout(dl, batch, dc, dh, dw, dst);
        CHECK_CLOSE_F32(out, ref, dn, 0);
        cd_dnnl_ctx_free(ctx);
        cd_dnnl_op_free(op);
        for (int i = 0; i < n; i++) {
            free(srcs[i]);
            free(sl[i]);
        }
        free(ref);
        free(dst);
        free(out);
    }
}

CD_TEST(dnnl_softmax_classifier_head_and_spatial_axes) {
    for (int it = 0; it < 6; it++) {
        int axis = it < 3 ? 1 : cd_test_randi(1, 3);
        cd_dnnl_tdesc t = {cd_test_randi(1, 1000), it < 3 ? 1 : cd_test_randi(1, 6), it < 3 ? 1 : cd_test_randi(1, 6),
                           CD_LAYOUT_NCHW, 0};
        if (it >= 3) t.c = cd_test_randi(1, 40);
        int batch = cd_test_randi(1, 9);
        CHECK(cd_dnnl_softmax_supports(t, axis));
        cd_dnnl_op *op;
        CHECK_EQ(cd_dnnl_softmax_create(t, axis, 9, &op), 0);
        size_t n = (size_t)batch * t.c * t.h * t.w;
        float *src = tk_rand_buf(n, -10, 10), *ref = tk_alloc(n), *dst = tk_alloc(n);
        int dims[4] = {batch, t.c, t.h, t.w};
        size_t outer = 1, inner = 1;
        for (int i = 0; i < axis; i++) outer *= dims[i];
        for (int i = axis + 1; i < 4; i++) inner *= dims[i];
        cd_ref_softmax(outer, dims[axis], inner, src, ref);
        cd_dnnl_ctx *ctx;
        CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
        const float *srcs[1] = {src};
        CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, 1, srcs, dst), 0);
        CHECK_CLOSE_F32(dst, ref, n, 1e-5);
        cd_dnnl_ctx_free(ctx);
        cd_dnnl_op_free(op);
        free(src);
        free(ref);
        free(dst);
    }
}

// The scratchpad reserve is honoured and runs never shrink it.
CD_TEST(dnnl_ctx_reserve_grows_only) {
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    CHECK_EQ(cd_dnnl_ctx_scratch_bytes(ctx), 0);
    CHECK_EQ(cd_dnnl_ctx_reserve(ctx, 1000), 0);
    CHECK_EQ(cd_dnnl_ctx_scratch_bytes(ctx), 1000);
    CHECK_EQ(cd_dnnl_ctx_reserve(ctx, 10), 0);
    CHECK_EQ(cd_dnnl_ctx_scratch_bytes(ctx), 1000);
    cd_dnnl_ctx_free(ctx);
}
