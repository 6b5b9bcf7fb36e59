// Our depthwise 3x3 on NCHW16C (kernels/cpu/dwconv-3x3.c and both
// micro-kernels) against cd_ref_conv2d.

#include "kernels/cpu/dwconv.h"
#include "sparse/spmm-ukernel.h"
#include "tests/unit/test-kernels-util.h"

static void dw_case(cd_conv_desc d, int batch, int portable) {
    d.n = batch;
    cd_conv_out_dims(&d);
    CHECK(cd_dwconv3x3_supports(&d, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C));
    float *w = tk_rand_buf((size_t)d.c * 9, -0.5f, 0.5f), *bias = tk_rand_buf(d.c, -0.5f, 0.5f);
    size_t sn = (size_t)batch * d.c * d.h * d.w, dn = (size_t)batch * d.k * d.oh * d.ow;
    float *src = tk_rand_buf(sn, -1, 1), *ref = tk_alloc(dn);
    cd_ref_conv2d(&d, src, w, bias, NULL, ref);
    cd_dwconv3x3 *k;
    CHECK_EQ(cd_dwconv3x3_create(&d, w, bias, portable, &k), 0);
    // The kernel follows CONVD_MAX_ISA, like the sparse ones.
    if (!portable)
        CHECK_STREQ(cd_dwconv3x3_isa(k), cd_sparse_isa_supported(CD_SPARSE_ISA_AVX512F) ? "avx512f" : "scalar");
    if (portable) CHECK_STREQ(cd_dwconv3x3_isa(k), "scalar");
    float *sl = tk_to_layout(CD_LAYOUT_NCHW16C, batch, d.c, d.h, d.w, src);
    size_t n16 = cd_dnnl_tensor_floats(CD_LAYOUT_NCHW16C, batch, d.k, d.oh, d.ow);
    float *dst = tk_alloc(n16);
    for (size_t i = 0; i < n16; i++) dst[i] = 9.0f;
    CHECK_EQ(cd_dwconv3x3_run(k, batch, sl, dst), 0);
    tk_check_padding_zero(CD_LAYOUT_NCHW16C, batch, d.k, d.oh, d.ow, dst);
    float *out = tk_from_layout(CD_LAYOUT_NCHW16C, batch, d.k, d.oh, d.ow, dst);
    CHECK_CLOSE_F32(out, ref, dn, 1e-4);
    cd_dwconv3x3_free(k);
    free(w); free(bias); free(src); free(ref); free(sl); free(dst); free(out);
}

static cd_conv_desc rand_dw(void) {
    cd_conv_desc d = {0};
    d.c = d.k = d.groups = cd_test_randi(1, 70);
    d.r = d.s = 3;
    d.stride_h = cd_test_randi(1, 2);
    d.stride_w = cd_test_randi(1, 2);
    d.dil_h = d.dil_w = 1;
    d.pad_t = cd_test_randi(0, 2); d.pad_b = cd_test_randi(0, 2);
    d.pad_l = cd_test_randi(0, 2); d.pad_r = cd_test_randi(0, 2);
    d.h = cd_test_randi(3, 30);
    d.w = cd_test_randi(3, 40);
    int kinds[3] = {CD_ACT_NONE, CD_ACT_RELU, CD_ACT_CLIP};
    d.act = tk_act((cd_act)kinds[cd_test_randi(0, 2)]);
    cd_conv_out_dims(&d);
    return d;
}

CD_TEST(dwconv3x3_avx512f_random_shapes_strides_pads) {
    for (int i = 0; i < 12; i++) dw_case(rand_dw(), cd_test_randi(1, 9), 0);
}

CD_TEST(dwconv3x3_scalar_random_shapes_strides_pads) {
    for (int i = 0; i < 8; i++) dw_case(rand_dw(), cd_test_randi(1, 9), 1);
}

// Rows shorter than one 8-wide interior tile, 1-row planes, odd widths.
CD_TEST(dwconv3x3_narrow_and_odd_width) {
    for (int i = 0; i < 10; i++) {
        cd_conv_desc d = rand_dw();
        d.w = 2 * cd_test_randi(1, 6) + 1;
        d.h = cd_test_randi(1, 5);
        d.pad_t = d.pad_b = d.pad_l = d.pad_r = 1;
        dw_case(d, cd_test_randi(1, 3), i % 2);
    }
}

// ReLU6 as MobileNetV2 uses it, and a CLIP whose range excludes 0 (padded
// channels must still be 0).
CD_TEST(dwconv3x3_clip_c_not_multiple_of_16) {
    for (int i = 0; i < 4; i++) {
        cd_conv_desc d = rand_dw();
        d.c = d.k = d.groups = 16 * cd_test_randi(0, 2) + cd_test_randi(1, 15);
        d.act = (cd_activation){CD_ACT_CLIP, i % 2 ? 0.0f : 0.25f, 6.0f};
        dw_case(d, cd_test_randi(1, 4), i / 2);
    }
}

CD_TEST(dwconv3x3_unsupported_cases) {
    cd_conv_desc d = rand_dw();
    cd_dwconv3x3 *k;
    CHECK_EQ(cd_dwconv3x3_supports(&d, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW16C), 0);
    cd_conv_desc bad = d;
    bad.has_residual = 1;
    CHECK_EQ(cd_dwconv3x3_supports(&bad, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C), 0);
    bad = d;
    bad.act = tk_act(CD_ACT_SIGMOID);
    CHECK_EQ(cd_dwconv3x3_supports(&bad, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C), 0);
    bad = d;
    bad.dil_h = 2;
    cd_conv_out_dims(&bad);
    float w[9] = {1};
    CHECK_EQ(cd_dwconv3x3_create(&bad, w, NULL, 0, &k), CD_EPARAMS);
}
