// Dense 2-D convolution on oneDNN with fused bias, residual (sum post-op) and
// activation (eltwise post-ops). Weights are packed at create time into the
// layout the chosen implementation asks for (format "any").

#include "backends/cpu/dnnl-impl.h"
#include "backends/cpu/winograd-hook.h"
#include "backends/cpu/dw3x3-choose.h"
#include "kernels/cpu/ref.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    cd_conv_desc d;         // the conv (d.n unused)
    cd_layout src_l, dst_l; // activation layouts
    cd_dnnl_weights wts;    // user layout OIHW (groups == 1) or GOIHW
    float *bias;            // K floats or NULL (owned)
    cd_wino *wino;          // our Winograd conv when it timed faster (winograd.h), else NULL
    cd_cpu_dw3x3 *dw;       // our depthwise kernel when it timed faster at load, else NULL (owned)
    dnnl_alg_kind_t alg;    // dnnl_convolution_direct, or _winograd (oneDNN's, cd_dnnl_conv_create_wino)
    float *w_oihw;          // oneDNN's Winograd: the weights kept, its formats do not reorder into each other
    float fq[4];            // the output's FakeQuant (scale, zero point, qmin, qmax); fq[0] 0: none
    int fq_post;            // its binary division's index among the post-ops
} conv_priv;

int cd_dnnl_conv_check(const cd_conv_desc *d, cd_layout src, cd_layout dst) {
    if (d->c < 1 || d->h < 1 || d->w < 1 || d->k < 1 || d->r < 1 || d->s < 1) return CD_EPARAMS;
    if (d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1) return CD_EPARAMS;
    if (d->pad_t < 0 || d->pad_l < 0 || d->pad_b < 0 || d->pad_r < 0) return CD_EPARAMS;
    if (d->groups < 1 || d->c % d->groups || d->k % d->groups) return CD_EPARAMS;
    if (!cd_layout_valid(src) || !cd_layout_valid(dst)) return CD_EPARAMS;
    cd_conv_desc e = *d;
    cd_conv_out_dims(&e);
    if (e.oh < 1 || e.ow < 1 || e.oh != d->oh || e.ow != d->ow) return CD_EPARAMS;
    cd_dnnl_elt_step st[2];
    if (cd_dnnl_act_steps(d->act, st) < 0) return CD_EPARAMS;
    return 0;
}

int cd_dnnl_conv_weights_md(dnnl_memory_desc_t *md, const cd_conv_desc *d, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    if (d->groups == 1) {
        dnnl_dims_t dims = {d->k, d->c, d->r, d->s};
        return CD_DNNL(dnnl_memory_desc_init_by_tag(md, 4, dims, dt, tag == dnnl_format_tag_any ? tag : dnnl_oihw));
    }
    dnnl_dims_t dims = {d->groups, d->k / d->groups, d->c / d->groups, d->r, d->s};
    return CD_DNNL(dnnl_memory_desc_init_by_tag(md, 5, dims, dt, tag == dnnl_format_tag_any ? tag : dnnl_goihw));
}

static int weights_md(dnnl_memory_desc_t *md, const cd_conv_desc *d, dnnl_format_tag_t tag) {
    return cd_dnnl_conv_weights_md(md, d, dnnl_f32, tag);
}

// The conv's attributes: sum (residual) and act post-ops as cd_dnnl_attr
// makes them, then with fq (scale, zp, qmin, qmax; fq[0] > 0)
// cd_fakequant_apply: y / scale (a binary division by a one-element tensor,
// as exact as the FakeQuant pass's; 1 / scale as a linear step would round
// differently), rounded half to even, clamped to [qmin - zp, qmax - zp] (the
// same as adding the zero point, clamping and taking it off: all integers),
// times scale. oneDNN 2.6 runs a second eltwise step of an algorithm with
// the first one's parameters (two linear steps: dnnl-conv-int8.c; the clamp
// after a Clip or Relu, both clip steps here, came out clamped to the act's
// bounds): so the clamp is clip_v2 (the same forward) and the act may not
// have a linear step (cd_dnnl_conv_create_fq).
static int conv_attr(int with_sum, cd_activation act, const float *fq, dnnl_primitive_attr_t *attr) {
    if (!fq || !(fq[0] > 0.0f)) return cd_dnnl_attr(attr, with_sum, act);
    dnnl_post_ops_t po = NULL;
    dnnl_memory_desc_t one;
    dnnl_dims_t dims = {1, 1, 1, 1};
    int rc = CD_DNNL(dnnl_primitive_attr_create(attr));
    if (rc) return rc;
    if (!rc) rc = CD_DNNL(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user));
    if (!rc) rc = CD_DNNL(dnnl_post_ops_create(&po));
    if (!rc && with_sum) rc = CD_DNNL(dnnl_post_ops_append_sum(po, 1.0f));
    if (!rc) rc = cd_dnnl_post_ops_act(po, act);
    if (!rc) rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&one, 4, dims, dnnl_f32, dnnl_abcd));
    if (!rc) rc = CD_DNNL(dnnl_post_ops_append_binary(po, dnnl_binary_div, &one));
    if (!rc) rc = CD_DNNL(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_round, 0.0f, 0.0f));
    if (!rc) rc = CD_DNNL(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip_v2, fq[2] - fq[1], fq[3] - fq[1]));
    if (!rc) rc = CD_DNNL(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, fq[0], 0.0f));
    if (!rc) rc = CD_DNNL(dnnl_primitive_attr_set_post_ops(*attr, po));
    if (po) dnnl_post_ops_destroy(po);
    if (rc) {
        dnnl_primitive_attr_destroy(*attr);
        *attr = NULL;
    }
    return rc;
}

// Fills the convolution op descriptor and attributes for one batch size.
static int conv_desc_alg(const cd_conv_desc *d, cd_layout src_l, cd_layout dst_l, int batch, int with_bias,
                         dnnl_alg_kind_t alg, const float *fq, dnnl_convolution_desc_t *cd,
                         dnnl_primitive_attr_t *attr) {
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    int rc;
    if ((rc = cd_dnnl_md_act(&smd, batch, d->c, d->h, d->w, src_l))) return rc;
    if ((rc = cd_dnnl_md_act(&dmd, batch, d->k, d->oh, d->ow, dst_l))) return rc;
    if ((rc = weights_md(&wmd, d, dnnl_format_tag_any))) return rc;
    if (with_bias) {
        dnnl_dims_t bd = {d->k};
        if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x)))) return rc;
    }
    dnnl_dims_t strides = {d->stride_h, d->stride_w};
    dnnl_dims_t dil = {d->dil_h - 1, d->dil_w - 1}; // oneDNN counts extra gaps
    dnnl_dims_t pl = {d->pad_t, d->pad_l}, pr = {d->pad_b, d->pad_r};
    if ((rc = CD_DNNL(dnnl_dilated_convolution_forward_desc_init(cd, dnnl_forward_inference, alg, &smd, &wmd,
                                                                 with_bias ? &bmd : NULL, &dmd, strides, dil, pl, pr))))
        return rc;
    cd_activation act = d->act;
    // oneDNN's Winograd takes ReLU only as its relu eltwise (alpha 0), not as
    // the clip cd_dnnl_act_steps maps it to for Relu(-inf) = 0: an infinite
    // input is NaN after any Winograd transform anyway (inf - inf).
    if (alg == dnnl_convolution_winograd && act.kind == CD_ACT_RELU) act = (cd_activation){CD_ACT_LEAKYRELU, 0, 0};
    return conv_attr(d->has_residual, act, fq, attr);
}

static int conv_desc(const cd_conv_desc *d, cd_layout src_l, cd_layout dst_l, int batch, int with_bias,
                     dnnl_convolution_desc_t *cd, dnnl_primitive_attr_t *attr) {
    return conv_desc_alg(d, src_l, dst_l, batch, with_bias, dnnl_convolution_direct, NULL, cd, attr);
}

// NHWC holds int8 activations only (kernels/op-desc.h): a float32 conv in it
// is never planned, and oneDNN 2.6's f32 nhwc jit crashed on a dilated one
// (CD_TEST_SEED=1795662518, dnnl_conv_dilations).
static int f32_layouts(cd_layout src, cd_layout dst) { return src != CD_LAYOUT_NHWC && dst != CD_LAYOUT_NHWC; }

int cd_dnnl_conv_supports(const cd_conv_desc *d, cd_layout src, cd_layout dst) {
    if (!d || cd_dnnl_conv_check(d, src, dst) || !f32_layouts(src, dst) || cd_dnnl_init()) return 0;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    if (conv_desc(d, src, dst, 1, 1, &cd, &attr)) return 0;
    int ok = cd_dnnl_pd_try(&cd, attr, NULL);
    dnnl_primitive_attr_destroy(attr);
    return ok;
}

static int conv_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    conv_priv *cp = op->priv;
    if (cp->wino) return cd_wino_build(cp->wino, batch, p);
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    int rc = conv_desc_alg(&cp->d, cp->src_l, cp->dst_l, batch, cp->bias != NULL, cp->alg, cp->fq, &cd, &attr);
    if (rc) return rc;
    rc = CD_DNNL(dnnl_primitive_desc_create(&p->pd[0], &cd, attr, cd_dnnl_engine(), NULL));
    dnnl_primitive_attr_destroy(attr);
    if (rc) return rc;
    p->nprim = 1;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(p->pd[0], dnnl_query_weights_md, 0);
    if (!wmd) return CD_EINTERNAL;
    if ((rc = cd_dnnl_weights_for(&cp->wts, wmd, &p->wset))) return rc;
    op->weight_bytes = (cp->bias ? (size_t)cp->d.k * sizeof(float) : 0);
    op->weight_bytes += cd_dnnl_weights_bytes(&cp->wts) + (cp->dw ? cd_cpu_dw3x3_bytes(cp->dw) : 0);
    if (cp->w_oihw) op->weight_bytes += (size_t)cp->d.k * cp->d.c / cp->d.groups * cp->d.r * cp->d.s * sizeof(float);
    return 0;
}

// oneDNN 2.6 left the padded channels of a blocked dst non-zero with the
// FakeQuant's post-ops (seen at nChw8c, CD_TEST_SEED=35 of
// dnnl_conv_fq_matches_conv_then_fakequant): the invariant of dnnl.h wants
// them zero. Only the last block of each image has any.
static void zero_padded_channels(const cd_conv_desc *d, cd_layout l, int batch, float *dst) {
    const int b = cd_layout_block(l);
    if (b <= 1 || d->k % b == 0) return;
    const size_t hw = (size_t)d->oh * d->ow, nb = (size_t)(d->k + b - 1) / b;
    for (int n = 0; n < batch; n++) {
        float *last = dst + ((size_t)n * nb + nb - 1) * hw * b;
        for (size_t p = 0; p < hw; p++)
            for (int c = d->k % b; c < b; c++) last[p * b + c] = 0.0f;
    }
}

static int conv_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                     float *dst) {
    conv_priv *cp = op->priv;
    if (cp->dw) return cd_cpu_dw3x3_run(cp->dw, batch, src[0], cp->d.has_residual ? src[1] : NULL, dst), 0;
    if (cp->wino) return cd_wino_exec(cp->wino, ctx, batch, src, dst);
    if (cp->d.has_residual && src[1] != dst)
        memcpy(dst, src[1], cd_dnnl_tensor_floats(cp->dst_l, batch, cp->d.k, cp->d.oh, cp->d.ow) * sizeof(float));
    cd_dnnl_arg args[5] = {
        {DNNL_ARG_SRC, src[0]},    {DNNL_ARG_WEIGHTS, cp->wts.data[p->wset]},
        {DNNL_ARG_DST, dst},       {DNNL_ARG_ATTR_MULTIPLE_POST_OP(cp->fq_post) | DNNL_ARG_SRC_1, cp->fq},
        {DNNL_ARG_BIAS, cp->bias},
    };
    if (!(cp->fq[0] > 0.0f)) args[3] = args[4];
    int rc = cd_dnnl_exec(ctx, p, 0, 3 + (cp->fq[0] > 0.0f) + (cp->bias != NULL), args);
    if (!rc && cp->fq[0] > 0.0f) zero_padded_channels(&cp->d, cp->dst_l, batch, dst);
    return rc;
}

static void conv_fini(cd_dnnl_op *op) {
    conv_priv *cp = op->priv;
    if (!cp) return;
    cd_dnnl_weights_fini(&cp->wts);
    free(cp->bias);
    cd_wino_free(cp->wino);
    cd_cpu_dw3x3_free(cp->dw);
    free(cp->w_oihw);
}

static const char *conv_impl(cd_dnnl_op *op, const cd_dnnl_prim *p, int batch) {
    (void)p, (void)batch;
    const conv_priv *cp = op->priv;
    return cp->dw ? cd_cpu_dw3x3_name(cp->dw) : cp->wino ? cd_wino_name(cp->wino) : NULL;
}

int cd_dnnl_conv_create(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                        const float *bias, cd_dnnl_op **out) {
    return cd_dnnl_conv_create_sw(d, src, dst, max_batch, w, bias, NULL, out);
}

// oneDNN's direct conv of d (with the FakeQuant fq, NULL none), its
// weights packed for batch 1: the op, which the caller frees on failure.
static int conv_new(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                    const float *bias, const float *fq, cd_dnnl_op **out) {
    *out = NULL;
    if (!d || !w || cd_dnnl_conv_check(d, src, dst) || !f32_layouts(src, dst)) return CD_EPARAMS;
    static const cd_dnnl_kind k_kind = {conv_build, conv_exec, conv_fini, conv_impl};
    conv_priv init = {.d = *d, .src_l = src, .dst_l = dst, .alg = dnnl_convolution_direct};
    if (fq) {
        memcpy(init.fq, fq, sizeof init.fq);
        cd_dnnl_elt_step st[2];
        init.fq_post = (d->has_residual ? 1 : 0) + cd_dnnl_act_steps(d->act, st);
    }
    int rc = cd_dnnl_op_new(&k_kind, max_batch, d->has_residual ? 2 : 1, &init, sizeof init, out);
    if (rc) return rc;
    conv_priv *cp = (*out)->priv;
    if ((rc = weights_md(&cp->wts.user_md, d, dnnl_oihw))) return rc;
    if (bias) {
        if (!(cp->bias = cd_dnnl_alloc((size_t)d->k * sizeof(float)))) return CD_ENOMEM;
        memcpy(cp->bias, bias, (size_t)d->k * sizeof(float));
    }
    // Batch 1 now: packs the weights while the caller's copy is alive.
    cp->wts.user = w;
    rc = cd_dnnl_op_prepare(*out, 1, NULL);
    cp->wts.user = NULL;
    return rc;
}

// The f32 conv of d: oneDNN's direct one, or our depthwise or a Winograd
// conv where the switches offer them and they time faster.
static int create_f32(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                      const float *bias, const cd_backend_opts *sw, cd_dnnl_op **out) {
    *out = NULL;
    cd_dnnl_op *op;
    int rc = conv_new(d, src, dst, max_batch, w, bias, NULL, &op);
    if (rc) goto fail;
    conv_priv *cp = op->priv;
    // A 1-channel depthwise conv is also a plain 3x3 one: the depthwise kernel
    // is asked first, and Winograd only when it declined (never both).
    if (!rc && (cp->dw = cd_cpu_dw3x3_choose(op, d, src, dst, w, bias, sw ? (cd_dw3x3_mode)sw->dw3x3 : CD_DW3X3_AUTO)))
        op->weight_bytes += cd_cpu_dw3x3_bytes(cp->dw);
    cd_dnnl_op *alt = NULL; // oneDNN's Winograd, when it timed fastest
    if (!rc && !cp->dw) rc = cd_wino_offer(op, d, src, dst, max_batch, w, bias, sw ? sw->winograd : 0, &cp->wino, &alt);
    if (rc) goto fail;
    if (cp->wino) cd_wino_adopt(op, cp->wino, &cp->wts);
    if (alt) cd_dnnl_op_free(op), op = alt;
    *out = op;
    return 0;
fail:
    cd_dnnl_op_free(op);
    return rc;
}

int cd_dnnl_conv_create_sw(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                           const float *bias, const cd_backend_opts *sw, cd_dnnl_op **out) {
    int rc = create_f32(d, src, dst, max_batch, w, bias, sw, out);
    if (!rc && sw && sw->bf16 && (rc = cd_dnnl_conv_bf16_offer(out, d, src, dst, max_batch, w, bias, sw->bf16))) {
        cd_dnnl_op_free(*out);
        *out = NULL;
    }
    return rc;
}

int cd_dnnl_conv_create_fq(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                           const float *bias, const cd_backend_opts *sw, const float fq[4], cd_dnnl_op **out) {
    *out = NULL;
    if (!d || !(fq[0] > 0.0f) || !(fq[2] <= fq[3])) return CD_EPARAMS;
    const cd_act a = d->act.kind;
    if (a != CD_ACT_NONE && a != CD_ACT_RELU && a != CD_ACT_CLIP) return CD_EUNSUPPORTED;
    // Without the FakeQuant first: where a Winograd conv is faster, d keeps
    // it (its epilogue does not quantize); where our depthwise kernel is, it
    // quantizes in its own epilogue. Never in bf16: the rounding to the grid
    // would magnify its error.
    cd_dnnl_op *op;
    int rc = create_f32(d, src, dst, max_batch, w, bias, sw, &op);
    if (rc) return rc;
    conv_priv *cp = op->priv;
    if (cp->dw) {
        if ((rc = cd_cpu_dw3x3_set_fq(cp->dw, fq))) {
            cd_dnnl_op_free(op);
            return rc;
        }
        *out = op;
        return 0;
    }
    const int direct = !cp->wino && cp->alg == dnnl_convolution_direct;
    cd_dnnl_op_free(op);
    if (!direct) return CD_EUNSUPPORTED;
    if ((rc = conv_new(d, src, dst, max_batch, w, bias, fq, &op))) {
        cd_dnnl_op_free(op);
        return rc;
    }
    *out = op;
    return 0;
}

// ---- oneDNN's own Winograd (a candidate of cd_wino_offer) -------------------------

int cd_dnnl_conv_create_wino(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                             const float *bias, cd_dnnl_op **out) {
    *out = NULL;
    if (!d || !w || cd_dnnl_conv_check(d, src, dst) || !f32_layouts(src, dst) || cd_dnnl_init()) return CD_EPARAMS;
    for (int b = 1; b <= max_batch; b++) { // asked quietly: a batch it declines would fail at run
        dnnl_convolution_desc_t cd;
        dnnl_primitive_attr_t attr = NULL;
        int ok = !conv_desc_alg(d, src, dst, b, bias != NULL, dnnl_convolution_winograd, NULL, &cd, &attr) &&
                 cd_dnnl_pd_try(&cd, attr, NULL);
        dnnl_primitive_attr_destroy(attr);
        if (!ok) return CD_EUNSUPPORTED;
    }
    static const cd_dnnl_kind k_kind = {conv_build, conv_exec, conv_fini, conv_impl};
    const conv_priv init = {.d = *d, .src_l = src, .dst_l = dst, .alg = dnnl_convolution_winograd};
    cd_dnnl_op *op;
    int rc = cd_dnnl_op_new(&k_kind, max_batch, d->has_residual ? 2 : 1, &init, sizeof init, &op);
    if (rc) return rc;
    conv_priv *cp = op->priv;
    const size_t wn = (size_t)d->k * d->c / d->groups * d->r * d->s;
    cp->w_oihw = cd_dnnl_alloc(wn * sizeof(float));
    cp->bias = bias ? cd_dnnl_alloc((size_t)d->k * sizeof(float)) : NULL;
    if (!cp->w_oihw || (bias && !cp->bias)) {
        cd_dnnl_op_free(op);
        return CD_ENOMEM;
    }
    memcpy(cp->w_oihw, w, wn * sizeof(float));
    if (bias) memcpy(cp->bias, bias, (size_t)d->k * sizeof(float));
    cp->wts.user = cp->w_oihw; // every packed set is made from these (cd_dnnl_weights_for)
    if ((rc = weights_md(&cp->wts.user_md, d, dnnl_oihw)) || (rc = cd_dnnl_op_prepare(op, 1, NULL))) {
        cd_dnnl_op_free(op);
        return rc;
    }
    *out = op;
    return 0;
}

// ---- the blocked layout of this CPU ------------------------------------------------

// A ResNet-like 3x3 conv whose source layout oneDNN is asked to choose.
static cd_conv_desc probe_desc(void) { return cd_conv_square(64, 28, 28, 64, 3, 1, 1); }

// 1 when oneDNN builds the probe conv in layout l (src and dst) with a
// kernel other than its reference loop.
static int probe_fast(cd_layout l) {
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const cd_conv_desc probe = probe_desc();
    if (conv_desc(&probe, l, l, 1, 1, &cd, &attr)) return 0;
    const int ok = cd_dnnl_pd_try(&cd, attr, &pd);
    dnnl_primitive_attr_destroy(attr);
    return ok && cd_dnnl_pd_fast(pd);
}

// The source layout oneDNN picks for the probe conv when free to choose
// (format_tag::any), mapped onto ours; NCHW when it is none of them.
static cd_layout probe_any(void) {
    const cd_conv_desc probe = probe_desc();
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    dnnl_dims_t sd = {1, probe.c, probe.h, probe.w}, dd = {1, probe.k, probe.oh, probe.ow};
    dnnl_dims_t wd = {probe.k, probe.c, 3, 3}, bd = {probe.k};
    dnnl_dims_t strides = {1, 1}, pl = {1, 1}, pr = {1, 1};
    dnnl_convolution_desc_t cd;
    if (dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x) ||
        dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wmd, &bmd, &dmd,
                                           strides, pl, pr))
        return CD_LAYOUT_NCHW;
    dnnl_primitive_desc_t pd = NULL;
    if (!cd_dnnl_pd_try(&cd, NULL, &pd)) return CD_LAYOUT_NCHW;
    const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    cd_layout l = CD_LAYOUT_NCHW;
    for (int c = CD_LAYOUT_NCHW + 1; c < CD_LAYOUT_COUNT && got; c++) {
        dnnl_memory_desc_t want;
        if (cd_layout_block((cd_layout)c) < 2) continue; // blocked ones only (NHWC is int8 storage)
        if (cd_dnnl_md_act(&want, 1, probe.c, probe.h, probe.w, (cd_layout)c) == 0 &&
            dnnl_memory_desc_equal(got, &want))
            l = (cd_layout)c;
    }
    dnnl_primitive_desc_destroy(pd);
    return l;
}

static pthread_once_t g_blocked_once = PTHREAD_ONCE_INIT;
static cd_layout g_blocked = CD_LAYOUT_NCHW;

static void blocked_init(void) {
    if (cd_dnnl_init()) return;
    cd_layout l = probe_any();
    if (l != CD_LAYOUT_NCHW && probe_fast(l)) {
        g_blocked = l;
        return;
    }
    // oneDNN chose a layout we do not have: the first blocked one it runs fast.
    const cd_layout order[] = {CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW8C};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (probe_fast(order[i])) {
            g_blocked = order[i];
            return;
        }
}

cd_layout cd_dnnl_blocked_layout(void) {
    pthread_once(&g_blocked_once, blocked_init);
    return g_blocked;
}
