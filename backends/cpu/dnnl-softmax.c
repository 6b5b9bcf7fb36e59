// Softmax along one axis on oneDNN's softmax_v2 primitive (accurate).

#include "backends/cpu/dnnl-impl.h"

#include <stdlib.h>

typedef struct {
    cd_dnnl_tdesc t; // shape and layout of src and dst
    int axis;        // 1 = C, 2 = H, 3 = W
} softmax_priv;

static int softmax_desc(const softmax_priv *sp, int batch, dnnl_softmax_v2_desc_t *desc) {
    const cd_dnnl_tdesc *t = &sp->t;
    if (sp->axis < 1 || sp->axis > 3 || !cd_layout_valid(t->layout)) return CD_EPARAMS;
    dnnl_memory_desc_t md;
    int rc = cd_dnnl_md_act(&md, batch, t->c, t->h, t->w, t->layout);
    if (rc) return rc;
    return CD_DNNL(
        dnnl_softmax_v2_forward_desc_init(desc, dnnl_forward_inference, dnnl_softmax_accurate, &md, &md, sp->axis));
}

int cd_dnnl_softmax_supports(cd_dnnl_tdesc t, int axis) {
    softmax_priv sp = {t, axis};
    dnnl_softmax_v2_desc_t desc;
    if (t.c < 1 || t.h < 1 || t.w < 1 || cd_dnnl_init() || softmax_desc(&sp, 1, &desc)) return 0;
    return cd_dnnl_plain_try(&desc);
}

static int softmax_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    dnnl_softmax_v2_desc_t desc;
    int rc = softmax_desc(op->priv, batch, &desc);
    return rc ? rc : cd_dnnl_plain_build(p, 0, &desc);
}

static int softmax_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                        float *dst) {
    cd_dnnl_arg args[2] = {{DNNL_ARG_SRC, src[0]}, {DNNL_ARG_DST, dst}};
    return cd_dnnl_exec(ctx, p, 0, 2, args);
}

int cd_dnnl_softmax_create(cd_dnnl_tdesc t, int axis, int max_batch, cd_dnnl_op **out) {
    *out = NULL;
    if (t.c < 1 || t.h < 1 || t.w < 1 || axis < 1 || axis > 3 || !cd_layout_valid(t.layout)) return CD_EPARAMS;
    static const cd_dnnl_kind k_kind = {softmax_build, softmax_exec, NULL};
    const softmax_priv sp = {t, axis};
    cd_dnnl_op *op;
    int rc = cd_dnnl_op_new(&k_kind, max_batch, 1, &sp, sizeof sp, &op);
    if (rc) return rc;
    return cd_dnnl_op_ready(op, out);
}
