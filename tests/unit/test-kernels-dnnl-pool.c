// oneDNN pooling (backends/cpu/dnnl-pool.c) against cd_ref_pool2d.

#include "tests/unit/test-kernels-util.h"

static cd_pool_desc rand_pool(cd_pool_kind kind) {
    cd_pool_desc d = {0};
    d.kind = kind;
    d.c = cd_test_randi(1, 40);
    d.kh = cd_test_randi(1, 4);
    d.kw = cd_test_randi(1, 4);
    d.stride_h = cd_test_randi(1, 3);
    d.stride_w = cd_test_randi(1, 3);
    d.dil_h = d.dil_w = 1;
    d.pad_t = cd_test_randi(0, d.kh - 1);
    d.pad_b = cd_test_randi(0, d.kh - 1);
    d.pad_l = cd_test_randi(0, d.kw - 1);
    d.pad_r = cd_test_randi(0, d.kw - 1);
    d.h = cd_test_randi(d.kh, d.kh + 13);
    d.w = cd_test_randi(d.kw, d.kw + 13);
    d.count_include_pad = cd_test_randi(0, 1);
    cd_pool_out_dims(&d);
    return d;
}

// Runs one pooling at a batch in a layout and compares with the reference.
// Returns 0 when oneDNN does not support the case (and supports() said so).
static int pool_case(cd_pool_desc d, cd_layout l, int batch) {
    d.n = batch;
    cd_pool_out_dims(&d);
    int sup = cd_dnnl_pool_supports(&d, l, CD_DNNL_F32);
    cd_dnnl_op *op;
    int rc = cd_dnnl_pool_create(&d, l, CD_DNNL_F32, batch, &op);
    if (!sup) {
        CHECK_NE(rc, 0);
        return 0;
    }
    CHECK_EQ(rc, 0);
    size_t sn = (size_t)batch * d.c * d.h * d.w, dn = (size_t)batch * d.c * d.oh * d.ow;
    float *src = tk_rand_buf(sn, -2, 2), *ref = tk_alloc(dn);
    cd_ref_pool2d(&d, src, ref);
    float *s_l = tk_to_layout(l, batch, d.c, d.h, d.w, src);
    float *dst = tk_alloc(cd_dnnl_tensor_floats(l, batch, d.c, d.oh, d.ow));
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *srcs[1] = {s_l};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, 1, srcs, dst), 0);
    tk_check_padding_zero(l, batch, d.c, d.oh, d.ow, dst);
    float *out = tk_from_layout(l, batch, d.c, d.oh, d.ow, dst);
    CHECK_CLOSE_F32(out, ref, dn, 1e-5);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(src);
    free(ref);
    free(s_l);
    free(dst);
    free(out);
    return 1;
}

CD_TEST(dnnl_pool_max_random_both_layouts) {
    for (int i = 0; i < 10; i++)
        CHECK(pool_case(rand_pool(CD_POOL_MAX), (cd_layout)(i % CD_LAYOUT_COUNT), cd_test_randi(1, 9)));
}

CD_TEST(dnnl_pool_avg_asymmetric_pads_include_and_exclude) {
    for (int i = 0; i < 10; i++) {
        cd_pool_desc d = rand_pool(CD_POOL_AVG);
        d.count_include_pad = i % 2;
        CHECK(pool_case(d, (cd_layout)(i / 2 % CD_LAYOUT_COUNT), cd_test_randi(1, 9)));
    }
}

CD_TEST(dnnl_pool_max_dilation) {
    for (int i = 0; i < 6; i++) {
        cd_pool_desc d = rand_pool(CD_POOL_MAX);
        d.dil_h = cd_test_randi(1, 3);
        d.dil_w = cd_test_randi(1, 3);
        d.h += 2 * d.dil_h * d.kh;
        d.w += 2 * d.dil_w * d.kw;
        CHECK(pool_case(d, (cd_layout)(i % CD_LAYOUT_COUNT), cd_test_randi(1, 4)));
    }
}

// ceil_mode: the last window may run past the end padding. Max and AVG
// exclude-pad are supported; AVG include-pad with such a window is refused.
CD_TEST(dnnl_pool_ceil_mode) {
    int built = 0;
    for (int i = 0; i < 16; i++) {
        cd_pool_desc d = rand_pool(i % 2 ? CD_POOL_AVG : CD_POOL_MAX);
        d.ceil_mode = 1;
        d.stride_h = d.stride_w = 2;
        d.kh = d.kw = 3;
        d.pad_t = d.pad_b = d.pad_l = d.pad_r = 0;
        d.h = 2 * cd_test_randi(2, 8); // even: the ceil window overhangs
        d.w = 2 * cd_test_randi(2, 8);
        built += pool_case(d, (cd_layout)(i / 2 % CD_LAYOUT_COUNT), cd_test_randi(1, 3));
    }
    CHECK(built >= 8); // every MAX and every exclude-pad AVG case
}

CD_TEST(dnnl_pool_global_avg_c_not_multiple_of_16) {
    for (int i = 0; i < 4; i++) {
        cd_pool_desc d = {0};
        d.kind = CD_POOL_AVG;
        d.c = 16 * cd_test_randi(0, 3) + cd_test_randi(1, 15);
        d.h = d.kh = cd_test_randi(1, 9);
        d.w = d.kw = cd_test_randi(1, 9);
        d.stride_h = d.stride_w = d.dil_h = d.dil_w = 1;
        CHECK(pool_case(d, (cd_layout)(i % CD_LAYOUT_COUNT), cd_test_randi(1, 9)));
    }
}

CD_TEST(dnnl_pool_bad_desc_eparams) {
    cd_pool_desc d = rand_pool(CD_POOL_MAX);
    cd_dnnl_op *op;
    cd_pool_desc bad = d;
    bad.ow += 1;
    CHECK_EQ(cd_dnnl_pool_create(&bad, CD_LAYOUT_NCHW, CD_DNNL_F32, 1, &op), CD_EPARAMS);
    bad = d;
    bad.kh = 0;
    CHECK_EQ(cd_dnnl_pool_supports(&bad, CD_LAYOUT_NCHW, CD_DNNL_F32), 0);
}

// A max pool on the bytes of a quantized activation (u8 or s8) in layout l,
// against the reference's float pool of their values: equal, for max pools
// only. Returns 1 when oneDNN has a jit kernel for the case (else supports
// said 0 and create may still build its reference loop: not checked).
static int pool_int8_case(cd_pool_desc d, cd_layout l, cd_dnnl_elem e, int batch) {
    d.n = batch;
    cd_pool_out_dims(&d);
    if (!cd_dnnl_pool_supports(&d, l, e)) return 0;
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_pool_create(&d, l, e, batch, &op), 0);
    const size_t sn = (size_t)batch * d.c * d.h * d.w, dn = (size_t)batch * d.c * d.oh * d.ow;
    float *vals = tk_alloc(sn), *ref = tk_alloc(dn);
    for (size_t i = 0; i < sn; i++) // the byte values as floats, extremes included
        vals[i] = (float)(e == CD_DNNL_S8 ? cd_test_randi(-128, 127) : cd_test_randi(0, 255));
    cd_ref_pool2d(&d, vals, ref);
    float *v_l = tk_to_layout(l, batch, d.c, d.h, d.w, vals);
    const size_t sl = cd_layout_numel(l, batch, d.c, d.h, d.w), dl = cd_layout_numel(l, batch, d.c, d.oh, d.ow);
    unsigned char *src = malloc(sl), *dst = malloc(dl + 64);
    CHECK(src && dst);
    for (size_t i = 0; i < sl; i++) src[i] = (unsigned char)(int)v_l[i];
    memset(dst, 0x5a, dl + 64);
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *srcs[1] = {(const float *)src};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, 1, srcs, (float *)dst), 0);
    for (size_t i = dl; i < dl + 64; i++) CHECK_EQ(dst[i], 0x5a); // nothing written past the tensor
    float *got_l = tk_alloc(dl);
    for (size_t i = 0; i < dl; i++) got_l[i] = e == CD_DNNL_S8 ? (float)(signed char)dst[i] : (float)dst[i];
    float *got = tk_from_layout(l, batch, d.c, d.oh, d.ow, got_l);
    for (size_t i = 0; i < dn; i++)
        if (got[i] != ref[i])
            CD_CHECK_FAIL_("out[%zu] = %g, reference %g (%s, %s, c%d %dx%d k%dx%d s%d,%d)", i, got[i], ref[i],
                           tk_layout_name(l), e == CD_DNNL_S8 ? "s8" : "u8", d.c, d.h, d.w, d.kh, d.kw, d.stride_h,
                           d.stride_w);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(vals), free(ref), free(v_l), free(src), free(dst), free(got_l), free(got);
    return 1;
}

// What the planner's int8 storage runs a max pool on (runtime/plan-int8-storage.c):
// random pools in every layout, checked wherever supports says oneDNN has a jit
// kernel (its AVX2 int8 pooling declines some shapes); ResNet's stem pool (3x3,
// stride 2, pad 1, u8) in NHWC at every ISA level we build for. An average pool
// of integers never.
CD_TEST(dnnl_pool_max_int8_bytes_equal_the_float_pool) {
    for (int i = 0; i < 24; i++) {
        const cd_layout l = (cd_layout)(i % CD_LAYOUT_COUNT);
        const cd_dnnl_elem e = i / CD_LAYOUT_COUNT % 2 ? CD_DNNL_S8 : CD_DNNL_U8;
        pool_int8_case(rand_pool(CD_POOL_MAX), l, e, cd_test_randi(1, 5));
    }
    cd_pool_desc stem = {0};
    stem.kind = CD_POOL_MAX;
    stem.c = 64;
    stem.h = stem.w = 2 * cd_test_randi(8, 28);
    stem.kh = stem.kw = 3;
    stem.stride_h = stem.stride_w = 2;
    stem.dil_h = stem.dil_w = 1;
    stem.pad_t = stem.pad_l = stem.pad_b = stem.pad_r = 1;
    cd_pool_out_dims(&stem);
    CHECK(pool_int8_case(stem, CD_LAYOUT_NHWC, CD_DNNL_U8, cd_test_randi(1, 3)));
    cd_pool_desc a = rand_pool(CD_POOL_AVG);
    CHECK_EQ(cd_dnnl_pool_supports(&a, CD_LAYOUT_NHWC, CD_DNNL_U8), 0);
    cd_dnnl_op *op;
    CHECK_EQ(cd_dnnl_pool_create(&a, CD_LAYOUT_NHWC, CD_DNNL_U8, 1, &op), CD_EUNSUPPORTED);
}
