// oneDNN's float32 conv with the output's FakeQuant in its epilogue
// (cd_dnnl_conv_create_fq, backends/cpu/dnnl-conv.c) against the same conv
// without it followed by cd_fakequant_apply, element by element: the pass it
// replaces in a QDQ model.

#include "backends/backend-opts.h"
#include "tests/unit/test-kernels-util.h"

// oneDNN's direct convs (Winograd declines the FakeQuant), and our
// depthwise kernel, which quantizes in its own epilogue.
static const cd_backend_opts k_direct = {.winograd = 1, .dw3x3 = 1};
static const cd_backend_opts k_dw3x3 = {.winograd = 1, .dw3x3 = 2};

typedef struct {
    float scale, zp, qmin, qmax;
} fq_params;

// u8 or s8, a scale that puts the outputs (|y| up to ~max_abs) over a few
// dozen steps, a zero point anywhere in the range, so some clamp.
static fq_params rand_fq(float max_abs) {
    fq_params f;
    const int s8 = cd_test_randi(0, 1);
    f.qmin = s8 ? -128.0f : 0.0f;
    f.qmax = s8 ? 127.0f : 255.0f;
    f.zp = (float)cd_test_randi((int)f.qmin, (int)f.qmax);
    f.scale = max_abs / (float)cd_test_randi(8, 120);
    return f;
}

// The conv's output through oneDNN, in NCHW: fq NULL without the FakeQuant.
static float *run_conv_opts(const cd_conv_desc *d, cd_layout sl, cd_layout dl, int batch, const float *w,
                            const float *bias, const float *src, const float *res, const fq_params *fq,
                            const cd_backend_opts *opts, const char **impl, int *rc_out) {
    cd_dnnl_op *op = NULL;
    const float p[4] = {fq ? fq->scale : 0, fq ? fq->zp : 0, fq ? fq->qmin : 0, fq ? fq->qmax : 0};
    int rc = fq ? cd_dnnl_conv_create_fq(d, sl, dl, batch, w, bias, opts, p, &op)
                : cd_dnnl_conv_create_sw(d, sl, dl, batch, w, bias, opts, &op);
    *rc_out = rc;
    if (rc) return NULL;
    if (impl) *impl = cd_dnnl_op_impl(op, batch);
    const size_t dn = cd_dnnl_tensor_floats(dl, batch, d->k, d->oh, d->ow);
    float *s_l = tk_to_layout(sl, batch, d->c, d->h, d->w, src);
    float *r_l = res ? tk_to_layout(dl, batch, d->k, d->oh, d->ow, res) : NULL;
    float *dst = tk_alloc(dn);
    for (size_t i = 0; i < dn; i++) dst[i] = 7.0f;
    cd_dnnl_ctx *ctx;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *srcs[2] = {s_l, r_l};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, res ? 2 : 1, srcs, dst), 0);
    tk_check_padding_zero(dl, batch, d->k, d->oh, d->ow, dst);
    float *out = tk_from_layout(dl, batch, d->k, d->oh, d->ow, dst);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(s_l);
    free(r_l);
    free(dst);
    return out;
}

static float *run_conv(const cd_conv_desc *d, cd_layout sl, cd_layout dl, int batch, const float *w, const float *bias,
                       const float *src, const float *res, const fq_params *fq, int *rc_out) {
    return run_conv_opts(d, sl, dl, batch, w, bias, src, res, fq, &k_direct, NULL, rc_out);
}

// Fused against plain + cd_fakequant_apply: equal, except where the plain
// conv's y / scale lies within float noise of a half step (the two primitives
// may sum in another order), and then one step apart. Returns the count of
// such elements.
static size_t check_fq(const float *fused, const float *plain, size_t n, const fq_params *f) {
    size_t near_tie = 0;
    for (size_t i = 0; i < n; i++) {
        const float want = cd_fakequant_apply(plain[i], f->scale, f->zp, f->qmin, f->qmax);
        if (fused[i] == want) continue;
        const float q = plain[i] / f->scale, frac = q - floorf(q);
        if (fabsf(frac - 0.5f) < 1e-3f && fabsf(fused[i] - want) <= f->scale * 1.0001f) {
            near_tie++;
            continue;
        }
        CD_CHECK_FAIL_("element %zu: fused %.9g, conv %.9g then FakeQuant %.9g (scale %g zp %g [%g, %g])", i, fused[i],
                       plain[i], want, f->scale, f->zp, f->qmin, f->qmax);
        return near_tie;
    }
    return near_tie;
}

static void fq_case(cd_conv_desc d, cd_layout sl, cd_layout dl, int batch) {
    cd_conv_out_dims(&d);
    const size_t cpg = (size_t)d.c / d.groups, wn = (size_t)d.k * cpg * d.r * d.s;
    const float ws = 1.0f / sqrtf((float)(cpg * d.r * d.s));
    float *w = tk_rand_buf(wn, -ws, ws), *bias = cd_test_randi(0, 3) ? tk_rand_buf(d.k, -0.5f, 0.5f) : NULL;
    const size_t sn = (size_t)batch * d.c * d.h * d.w, dn = (size_t)batch * d.k * d.oh * d.ow;
    float *src = tk_rand_buf(sn, -1.0f, 1.0f), *res = d.has_residual ? tk_rand_buf(dn, -1.0f, 1.0f) : NULL;
    fq_params f = rand_fq(d.act.kind == CD_ACT_CLIP ? d.act.beta : 2.0f);
    int rc;
    float *plain = run_conv(&d, sl, dl, batch, w, bias, src, res, NULL, &rc);
    CHECK_EQ(rc, 0);
    float *fused = run_conv(&d, sl, dl, batch, w, bias, src, res, &f, &rc);
    if (rc)
        CD_CHECK_FAIL_("create with the FakeQuant failed %d: c%d k%d %dx%d g%d act %d %s->%s", rc, d.c, d.k, d.r, d.s,
                       d.groups, (int)d.act.kind, tk_layout_name(sl), tk_layout_name(dl));
    // Most outputs must not sit on a tie: a wrong formula shows everywhere.
    CHECK(check_fq(fused, plain, dn, &f) <= dn / 100 + 1);
    free(w);
    free(bias);
    free(src);
    free(res);
    free(plain);
    free(fused);
}

static cd_conv_desc rand_fq_conv(void) {
    cd_conv_desc d = {0};
    d.groups = cd_test_randi(0, 3) ? 1 : cd_test_randi(2, 4);
    d.c = d.groups * cd_test_randi(1, d.groups > 1 ? 4 : 40);
    d.k = d.groups * cd_test_randi(1, d.groups > 1 ? 4 : 40);
    d.r = d.s = cd_test_randi(0, 1) ? 1 : 3;
    d.stride_h = d.stride_w = cd_test_randi(1, 2);
    d.dil_h = d.dil_w = 1;
    d.pad_t = d.pad_b = d.pad_l = d.pad_r = cd_test_randi(0, d.r / 2);
    d.h = cd_test_randi(d.r, d.r + 14);
    d.w = cd_test_randi(d.s, d.s + 14);
    const cd_act kinds[3] = {CD_ACT_NONE, CD_ACT_RELU, CD_ACT_CLIP};
    d.act = tk_act(kinds[cd_test_randi(0, 2)]);
    if (d.act.kind == CD_ACT_CLIP) d.act.alpha = 0.0f, d.act.beta = 6.0f;
    d.has_residual = cd_test_randi(0, 1);
    return d;
}

CD_TEST(dnnl_conv_fq_matches_conv_then_fakequant) {
    for (int i = 0; i < 14; i++) {
        const cd_layout l = tk_rand_layout();
        fq_case(rand_fq_conv(), cd_test_randi(0, 2) ? l : CD_LAYOUT_NCHW, l, cd_test_randi(1, 4));
    }
}

// Our depthwise 3x3 kernel (forced on) with the FakeQuant in its epilogue
// against the same kernel without it and then the FakeQuant, bit for bit:
// the same sums, then the same division, rounding, clamp and multiply.
CD_TEST(dw3x3_fq_equals_dw3x3_then_fakequant) {
    int ran = 0;
    for (int i = 0; i < 10; i++) {
        cd_conv_desc d = {0};
        d.c = d.k = d.groups = cd_test_randi(1, 40);
        d.r = d.s = 3;
        d.stride_h = d.stride_w = cd_test_randi(1, 2);
        d.dil_h = d.dil_w = 1;
        d.pad_t = d.pad_b = d.pad_l = d.pad_r = cd_test_randi(0, 1);
        d.h = cd_test_randi(3, 20);
        d.w = cd_test_randi(3, 20);
        const cd_act kinds[3] = {CD_ACT_NONE, CD_ACT_RELU, CD_ACT_CLIP};
        d.act = tk_act(kinds[cd_test_randi(0, 2)]);
        if (d.act.kind == CD_ACT_CLIP) d.act.alpha = 0.0f, d.act.beta = 6.0f;
        d.has_residual = cd_test_randi(0, 1);
        cd_conv_out_dims(&d);
        const cd_layout l = tk_rand_blocked();
        const int batch = cd_test_randi(1, 3);
        float *w = tk_rand_buf((size_t)d.k * 9, -0.5f, 0.5f), *bias = tk_rand_buf(d.k, -0.5f, 0.5f);
        const size_t sn = (size_t)batch * d.c * d.h * d.w, dn = (size_t)batch * d.k * d.oh * d.ow;
        float *src = tk_rand_buf(sn, -1.0f, 1.0f), *res = d.has_residual ? tk_rand_buf(dn, -1.0f, 1.0f) : NULL;
        const fq_params f = rand_fq(d.act.kind == CD_ACT_CLIP ? d.act.beta : 2.0f);
        const char *impl_plain = NULL, *impl_fq = NULL;
        int rc;
        float *plain = run_conv_opts(&d, l, l, batch, w, bias, src, res, NULL, &k_dw3x3, &impl_plain, &rc);
        CHECK_EQ(rc, 0);
        if (!impl_plain || strncmp(impl_plain, "dw3x3:", 6) != 0) { // no kernel for this block at this cap
            free(plain);
            free(w), free(bias), free(src), free(res);
            continue;
        }
        float *fused = run_conv_opts(&d, l, l, batch, w, bias, src, res, &f, &k_dw3x3, &impl_fq, &rc);
        CHECK_EQ(rc, 0);
        CHECK(impl_fq && strcmp(impl_fq, impl_plain) == 0);
        ran++;
        for (size_t j = 0; j < dn; j++) {
            const float want = cd_fakequant_apply(plain[j], f.scale, f.zp, f.qmin, f.qmax);
            if (memcmp(&fused[j], &want, sizeof want) != 0)
                CD_CHECK_FAIL_("element %zu of %s: fused %.9g, kernel then FakeQuant %.9g", j, impl_fq, fused[j], want);
        }
        free(plain);
        free(fused);
        free(w), free(bias), free(src), free(res);
    }
    if (!ran) CD_SKIP("no depthwise 3x3 kernel under this ISA cap (AVX2 or AVX-512 needed)");
}

// An identity 1x1 conv on inputs that are exact half steps: the epilogue
// rounds them half to even (rintf), as the FakeQuant pass does, and clamps.
CD_TEST(dnnl_conv_fq_rounds_half_to_even_and_clamps) {
    cd_conv_desc d = {0};
    d.c = d.k = 16;
    d.r = d.s = d.stride_h = d.stride_w = d.dil_h = d.dil_w = d.groups = 1;
    d.h = 3;
    d.w = 5;
    cd_conv_out_dims(&d);
    float *w = tk_alloc((size_t)d.k * d.c);
    for (int k = 0; k < d.k; k++)
        for (int c = 0; c < d.c; c++) w[k * d.c + c] = k == c ? 1.0f : 0.0f;
    const size_t n = (size_t)d.c * d.h * d.w;
    const fq_params f = {0.125f, (float)cd_test_randi(0, 20), 0.0f, 255.0f};
    float *src = tk_alloc(n);
    for (size_t i = 0; i < n; i++) src[i] = ((float)cd_test_randi(-40, 300) + 0.5f) * f.scale; // all ties
    const cd_layout l = tk_rand_layout();
    int rc;
    float *out = run_conv(&d, l, l, 1, w, NULL, src, NULL, &f, &rc);
    CHECK_EQ(rc, 0);
    for (size_t i = 0; i < n; i++) {
        const float want = cd_fakequant_apply(src[i], f.scale, f.zp, f.qmin, f.qmax);
        if (out[i] != want) CD_CHECK_FAIL_("x %g: %g, want %g", src[i], out[i], want);
        const float q = out[i] / f.scale + f.zp;
        CHECK(q >= f.qmin && q <= f.qmax && q == rintf(q) && fmodf(fabsf(q - f.zp), 1.0f) == 0.0f);
    }
    free(w);
    free(src);
    free(out);
}

// Acts whose oneDNN steps include a linear one (HardSigmoid) or that have
// none (Erf) decline: the conv then runs without it, the FakeQuant as a pass.
CD_TEST(dnnl_conv_fq_declines_other_acts) {
    cd_conv_desc d = rand_fq_conv();
    d.act = tk_act(CD_ACT_HARDSIGMOID);
    d.has_residual = 0;
    cd_conv_out_dims(&d);
    const size_t wn = (size_t)d.k * (d.c / d.groups) * d.r * d.s;
    float *w = tk_rand_buf(wn, -1.0f, 1.0f);
    const float p[4] = {0.1f, 3.0f, 0.0f, 255.0f};
    cd_dnnl_op *op = NULL;
    CHECK_EQ(cd_dnnl_conv_create_fq(&d, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW, 1, w, NULL, &k_direct, p, &op),
             CD_EUNSUPPORTED);
    CHECK(op == NULL);
    free(w);
}
