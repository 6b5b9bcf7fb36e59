// Our depthwise 3x3 kernel (backends/cpu/dw3x3.h) against cd_ref_conv2d on
// random shapes: channels not a multiple of the block, maps of 1, 2, odd and
// 112 pixels, stride 1 and 2, pads 0..2, with and without bias, every
// activation it takes, residual (also in place), batch 1..3. nChw16c runs the
// AVX-512 kernel, nChw8c the AVX2 one: both ISA levels on one machine.

#include "backends/cpu/dw3x3-choose.h"
#include "sparse/spmm-ukernel.h"
#include "tests/unit/test-kernels-util.h"

#include <omp.h>
#include <string.h>

// A random depthwise 3x3 the kernel covers; big: one side 112.
static cd_conv_desc rand_dw(int big) {
    static const int sides[] = {1, 2, 3, 5, 7, 9, 14, 17};
    cd_conv_desc d = {0};
    d.c = d.k = d.groups = cd_test_randi(1, 40);
    d.r = d.s = 3;
    d.stride_h = d.stride_w = cd_test_randi(1, 2);
    d.dil_h = d.dil_w = 1;
    d.pad_t = cd_test_randi(0, 2), d.pad_b = cd_test_randi(0, 2);
    d.pad_l = cd_test_randi(0, 2), d.pad_r = cd_test_randi(0, 2);
    d.h = cd_test_randi(0, 2) ? sides[cd_test_randi(0, 7)] : cd_test_randi(1, 30);
    d.w = cd_test_randi(0, 2) ? sides[cd_test_randi(0, 7)] : cd_test_randi(1, 30);
    if (big) d.h = d.w = 112, d.c = d.k = d.groups = cd_test_randi(1, 3) * 8 + cd_test_randi(0, 1) * 3;
    // A 1- or 2-pixel map needs pads for a 3-pixel window.
    while (d.h + d.pad_t + d.pad_b < 3) d.pad_b++;
    while (d.w + d.pad_l + d.pad_r < 3) d.pad_r++;
    static const cd_act kinds[] = {CD_ACT_NONE,        CD_ACT_RELU,      CD_ACT_CLIP,
                                   CD_ACT_HARDSIGMOID, CD_ACT_HARDSWISH, CD_ACT_LEAKYRELU};
    d.act = tk_act(kinds[cd_test_randi(0, 5)]);
    d.has_residual = cd_test_randi(0, 1);
    cd_conv_out_dims(&d);
    return d;
}

// Runs d at batch in layout l through the kernel directly (via_op 0) or
// through the oneDNN conv op with the kernel forced on (via_op 1), and
// compares with the reference. Skips nothing: a layout whose ISA the CPU
// lacks is checked to have no kernel.
static void dw_case(cd_conv_desc d, cd_layout l, int batch, int via_op) {
    d.n = batch;
    const char *name = NULL;
    if (!cd_cpu_dw3x3_kernel(&d, l, l, &name)) {
        CHECK(!cd_sparse_isa_supported(cd_layout_block(l) == 16 ? CD_SPARSE_ISA_AVX512F : CD_SPARSE_ISA_AVX2));
        return;
    }
    const size_t wn = (size_t)d.c * 9, sn = (size_t)batch * d.c * d.h * d.w;
    const size_t dn = (size_t)batch * d.k * d.oh * d.ow, ln = cd_dnnl_tensor_floats(l, batch, d.k, d.oh, d.ow);
    float *w = tk_rand_buf(wn, -0.5f, 0.5f);
    float *bias = cd_test_randi(0, 3) ? tk_rand_buf(d.k, -0.5f, 0.5f) : NULL;
    float *src = tk_rbuf(sn), *res = d.has_residual ? tk_rbuf(dn) : NULL, *ref = tk_alloc(dn);
    cd_ref_conv2d(&d, src, w, bias, res, ref);
    float *s_l = tk_to_layout(l, batch, d.c, d.h, d.w, src), *dst = tk_alloc(ln);
    for (size_t i = 0; i < ln; i++) dst[i] = 7.0f; // garbage must not leak into dst or its padding
    float *r_l = res ? tk_to_layout(l, batch, d.k, d.oh, d.ow, res) : NULL;
    const int in_place = res && cd_test_randi(0, 1);
    if (in_place) memcpy(dst, r_l, ln * sizeof(float));
    if (!via_op) {
        cd_cpu_dw3x3 *k = NULL;
        CHECK_EQ(cd_cpu_dw3x3_create(&d, l, l, w, bias, &k), 0);
        CHECK(strcmp(cd_cpu_dw3x3_name(k), name) == 0);
        const int team = omp_get_max_threads(); // the whole team, or one thread without a region
        omp_set_num_threads(cd_test_randi(1, team));
        cd_cpu_dw3x3_run(k, batch, s_l, in_place ? dst : r_l, dst);
        omp_set_num_threads(team);
        cd_cpu_dw3x3_free(k);
    } else {
        cd_dnnl_op *op = NULL;
        CHECK_EQ(cd_dnnl_conv_create_sw(&d, l, l, batch, w, bias, &(cd_backend_opts){.dw3x3 = CD_DW3X3_ON}, &op), 0);
        CHECK(strcmp(cd_dnnl_op_impl(op, 1), name) == 0);
        cd_dnnl_ctx *ctx;
        CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
        const float *srcs[2] = {s_l, in_place ? dst : r_l};
        CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, res ? 2 : 1, srcs, dst), 0);
        cd_dnnl_ctx_free(ctx);
        cd_dnnl_op_free(op);
    }
    tk_check_padding_zero(l, batch, d.k, d.oh, d.ow, dst);
    float *out = tk_from_layout(l, batch, d.k, d.oh, d.ow, dst);
    CHECK_CLOSE_F32(out, ref, dn, 1e-4);
    free(w), free(bias), free(src), free(res), free(ref), free(s_l), free(dst), free(r_l), free(out);
}

static void dw_cases(int n, int big, int via_op) {
    for (int i = 0; i < n; i++) {
        const cd_conv_desc d = rand_dw(big);
        const int batch = cd_test_randi(1, 3);
        dw_case(d, CD_LAYOUT_NCHW16C, batch, via_op);
        dw_case(d, CD_LAYOUT_NCHW8C, batch, via_op);
    }
}

CD_TEST(cpu_dw3x3_random_shapes_both_isas) { dw_cases(30, 0, 0); }

CD_TEST(cpu_dw3x3_map_112) { dw_cases(3, 1, 0); }

CD_TEST(cpu_dw3x3_map_1x1_and_2x2) {
    for (int i = 0; i < 10; i++) {
        cd_conv_desc d = rand_dw(0);
        d.h = d.w = 1 + i % 2;
        d.pad_t = d.pad_b = d.pad_l = d.pad_r = 1;
        cd_conv_out_dims(&d);
        dw_case(d, CD_LAYOUT_NCHW16C, cd_test_randi(1, 3), 0);
        dw_case(d, CD_LAYOUT_NCHW8C, cd_test_randi(1, 3), 0);
    }
}

CD_TEST(cpu_dw3x3_through_conv_op) { dw_cases(8, 0, 1); }

// One channel: the conv is also a plain 3x3 one, which Winograd could take;
// forced on, the depthwise kernel must be the one that runs and is named.
CD_TEST(cpu_dw3x3_one_channel_not_winograd) {
    for (int i = 0; i < 4; i++) {
        cd_conv_desc d = rand_dw(0);
        d.c = d.k = d.groups = 1;
        d.stride_h = d.stride_w = 1;
        d.h = d.w = cd_test_randi(6, 20);
        cd_conv_out_dims(&d);
        dw_case(d, CD_LAYOUT_NCHW16C, cd_test_randi(1, 2), 1);
        dw_case(d, CD_LAYOUT_NCHW8C, cd_test_randi(1, 2), 1);
    }
}

// What the kernel does not cover stays with oneDNN.
CD_TEST(cpu_dw3x3_declines_other_convs) {
    cd_conv_desc d = cd_conv_square(16, 8, 8, 16, 3, 1, 1);
    d.groups = 16;
    cd_conv_out_dims(&d);
    const int l = CD_LAYOUT_NCHW8C;
    CHECK(cd_cpu_dw3x3_kernel(&d, l, l, NULL) != NULL || !cd_sparse_isa_supported(CD_SPARSE_ISA_AVX2));
    CHECK(cd_cpu_dw3x3_kernel(&d, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW, NULL) == NULL);
    CHECK(cd_cpu_dw3x3_kernel(&d, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW8C, NULL) == NULL);
    cd_conv_desc e = d;
    e.act.kind = CD_ACT_SIGMOID;
    CHECK(cd_cpu_dw3x3_kernel(&e, l, l, NULL) == NULL);
    e = d, e.dil_h = e.dil_w = 2;
    CHECK(cd_cpu_dw3x3_kernel(&e, l, l, NULL) == NULL);
    e = d, e.groups = 8;
    CHECK(cd_cpu_dw3x3_kernel(&e, l, l, NULL) == NULL);
    e = d, e.stride_w = 1, e.stride_h = 2;
    CHECK(cd_cpu_dw3x3_kernel(&e, l, l, NULL) == NULL);
    e = d, e.k = 32;
    CHECK(cd_cpu_dw3x3_kernel(&e, l, l, NULL) == NULL);
}

// Leading pads of 2 on a 1- or 2-pixel map: the left padding is wider than
// the output row (a tile loop once spun forever here, CD_TEST_SEED=1795676180).
CD_TEST(cpu_dw3x3_pads_wider_than_map) {
    for (int i = 0; i < 8; i++) {
        cd_conv_desc d = rand_dw(0);
        d.h = 1 + i % 2, d.w = 1 + (i / 2) % 2;
        d.pad_t = d.pad_l = 2, d.pad_b = d.pad_r = i / 4;
        cd_conv_out_dims(&d);
        dw_case(d, CD_LAYOUT_NCHW16C, cd_test_randi(1, 3), 0);
        dw_case(d, CD_LAYOUT_NCHW8C, cd_test_randi(1, 3), 0);
    }
}
