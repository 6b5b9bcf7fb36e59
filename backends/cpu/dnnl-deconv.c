// ConvTranspose on oneDNN's deconvolution primitive, with fused bias and
// activation (eltwise post-ops). Weights arrive in ONNX's [C][K/g][kh][kw]
// layout, which is oneDNN's iohw (giohw with groups), and are packed at
// create time into the layout the chosen implementation asks for. The right
// and bottom padding oneDNN takes follow from the output size: negative
// where output_padding reaches past the full output.

#include "backends/cpu/dnnl-impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    cd_deconv_desc d;
    cd_dnnl_weights wts; // user layout iohw / giohw
    float *bias;         // k floats or NULL (owned)
} deconv_priv;

static int deconv_check(const cd_deconv_desc *d) {
    if (d->c < 1 || d->h < 1 || d->w < 1 || d->k < 1 || d->r < 1 || d->s < 1 || d->oh < 1 || d->ow < 1) return 1;
    if (d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1) return 1;
    if (d->groups < 1 || d->c % d->groups || d->k % d->groups) return 1;
    cd_dnnl_elt_step st[2];
    return cd_dnnl_act_steps(d->act, st) < 0;
}

static int weights_md(dnnl_memory_desc_t *md, const cd_deconv_desc *d, int any) {
    if (d->groups == 1) {
        dnnl_dims_t dims = {d->k, d->c, d->r, d->s};
        return CD_DNNL(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, any ? dnnl_format_tag_any : dnnl_iohw));
    }
    dnnl_dims_t dims = {d->groups, d->k / d->groups, d->c / d->groups, d->r, d->s};
    return CD_DNNL(dnnl_memory_desc_init_by_tag(md, 5, dims, dnnl_f32, any ? dnnl_format_tag_any : dnnl_giohw));
}

// quiet: a refused descriptor (supports()) is not logged.
static int deconv_desc(const cd_deconv_desc *d, int batch, int with_bias, int quiet, dnnl_deconvolution_desc_t *dd,
                       dnnl_primitive_attr_t *attr) {
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    int rc;
    if ((rc = cd_dnnl_md_act(&smd, batch, d->c, d->h, d->w, CD_LAYOUT_NCHW))) return rc;
    if ((rc = cd_dnnl_md_act(&dmd, batch, d->k, d->oh, d->ow, CD_LAYOUT_NCHW))) return rc;
    if ((rc = weights_md(&wmd, d, 1))) return rc;
    if (with_bias) {
        dnnl_dims_t bd = {d->k};
        if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x)))) return rc;
    }
    // The full output is (h - 1) * stride + (kh - 1) * dil + 1; what oh
    // leaves of it past the top padding is the bottom padding.
    const dnnl_dim_t full_h = (dnnl_dim_t)(d->h - 1) * d->stride_h + (dnnl_dim_t)(d->r - 1) * d->dil_h + 1;
    const dnnl_dim_t full_w = (dnnl_dim_t)(d->w - 1) * d->stride_w + (dnnl_dim_t)(d->s - 1) * d->dil_w + 1;
    dnnl_dims_t strides = {d->stride_h, d->stride_w};
    dnnl_dims_t dil = {d->dil_h - 1, d->dil_w - 1}; // oneDNN counts extra gaps
    dnnl_dims_t pl = {d->pad_t, d->pad_l}, pr = {full_h - d->pad_t - d->oh, full_w - d->pad_l - d->ow};
    dnnl_status_t st =
        dnnl_dilated_deconvolution_forward_desc_init(dd, dnnl_forward_inference, dnnl_deconvolution_direct, &smd, &wmd,
                                                     with_bias ? &bmd : NULL, &dmd, strides, dil, pl, pr);
    if (st != dnnl_success)
        return quiet ? CD_EUNSUPPORTED
                     : cd_dnnl_status(st, "dnnl_dilated_deconvolution_forward_desc_init", __FILE__, __LINE__);
    return cd_dnnl_attr(attr, 0, d->act);
}

int cd_dnnl_deconv_supports(const cd_deconv_desc *d) {
    if (!d || deconv_check(d) || cd_dnnl_init()) return 0;
    dnnl_deconvolution_desc_t dd;
    dnnl_primitive_attr_t attr = NULL;
    int rc = deconv_desc(d, 1, 1, 1, &dd, &attr);
    if (rc) {
        dnnl_primitive_attr_destroy(attr);
        return 0;
    }
    int ok = cd_dnnl_pd_try(&dd, attr, NULL);
    dnnl_primitive_attr_destroy(attr);
    return ok;
}

static int deconv_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    deconv_priv *dp = op->priv;
    dnnl_deconvolution_desc_t dd;
    dnnl_primitive_attr_t attr = NULL;
    int rc = deconv_desc(&dp->d, batch, dp->bias != NULL, 0, &dd, &attr);
    if (rc) {
        dnnl_primitive_attr_destroy(attr);
        return rc;
    }
    rc = CD_DNNL(dnnl_primitive_desc_create(&p->pd[0], &dd, attr, cd_dnnl_engine(), NULL));
    dnnl_primitive_attr_destroy(attr);
    if (rc) return rc;
    p->nprim = 1;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(p->pd[0], dnnl_query_weights_md, 0);
    if (!wmd) return CD_EINTERNAL;
    if ((rc = cd_dnnl_weights_for(&dp->wts, wmd, &p->wset))) return rc;
    op->weight_bytes = (dp->bias ? (size_t)dp->d.k * sizeof(float) : 0) + cd_dnnl_weights_bytes(&dp->wts);
    return 0;
}

static int deconv_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                       float *dst) {
    deconv_priv *dp = op->priv;
    cd_dnnl_arg args[4] = {
        {DNNL_ARG_SRC, src[0]},
        {DNNL_ARG_WEIGHTS, dp->wts.data[p->wset]},
        {DNNL_ARG_DST, dst},
        {DNNL_ARG_BIAS, dp->bias},
    };
    return cd_dnnl_exec(ctx, p, 0, dp->bias ? 4 : 3, args);
}

static void deconv_fini(cd_dnnl_op *op) {
    deconv_priv *dp = op->priv;
    if (!dp) return;
    cd_dnnl_weights_fini(&dp->wts);
    free(dp->bias);
}

int cd_dnnl_deconv_create(const cd_deconv_desc *d, int max_batch, const float *w, const float *bias, cd_dnnl_op **out) {
    *out = NULL;
    if (!d || !w || deconv_check(d)) return CD_EPARAMS;
    static const cd_dnnl_kind k_kind = {deconv_build, deconv_exec, deconv_fini};
    const deconv_priv init = {.d = *d};
    cd_dnnl_op *op;
    int rc = cd_dnnl_op_new(&k_kind, max_batch, 1, &init, sizeof init, &op);
    if (rc) return rc;
    deconv_priv *dp = op->priv;
    if ((rc = weights_md(&dp->wts.user_md, d, 0))) goto fail;
    if (bias) {
        if (!(dp->bias = cd_dnnl_alloc((size_t)d->k * sizeof(float)))) {
            rc = CD_ENOMEM;
            goto fail;
        }
        memcpy(dp->bias, bias, (size_t)d->k * sizeof(float));
    }
    dp->wts.user = w; // batch 1 now: packs the weights while the caller's copy is alive
    rc = cd_dnnl_op_prepare(op, 1, NULL);
    dp->wts.user = NULL;
    if (rc) goto fail;
    *out = op;
    return 0;
fail:
    cd_dnnl_op_free(op);
    return rc;
}
