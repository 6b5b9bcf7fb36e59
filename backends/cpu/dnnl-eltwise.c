// Stand-alone activations on oneDNN's eltwise primitive (one or two steps).

#include "backends/cpu/dnnl-impl.h"

#include <stdlib.h>

typedef struct {
    cd_dnnl_tdesc t;   // shape and layout of src and dst
    cd_activation act; // the activation
} eltwise_priv;

// Fills one eltwise op descriptor per step (an identity for CD_ACT_NONE).
// Returns the number of steps or a negative error.
static int eltwise_descs(const eltwise_priv *ep, int batch, dnnl_eltwise_desc_t desc[2]) {
    const cd_dnnl_tdesc *t = &ep->t;
    if (t->c < 1 || t->h < 1 || t->w < 1 || !cd_layout_valid(t->layout)) return CD_EPARAMS;
    cd_dnnl_elt_step st[2];
    int n = cd_dnnl_act_steps(ep->act, st), rc;
    if (n < 0) return n;
    if (n == 0) {
        st[0] = (cd_dnnl_elt_step){dnnl_eltwise_linear, 1.0f, 0.0f};
        n = 1;
    }
    dnnl_memory_desc_t md;
    if ((rc = cd_dnnl_md_act(&md, batch, t->c, t->h, t->w, t->layout))) return rc;
    for (int i = 0; i < n; i++)
        if ((rc = CD_DNNL(dnnl_eltwise_forward_desc_init(&desc[i], dnnl_forward_inference, st[i].alg, &md, st[i].alpha,
                                                         st[i].beta))))
            return rc;
    return n;
}

int cd_dnnl_eltwise_supports(cd_dnnl_tdesc t, cd_activation act) {
    eltwise_priv ep = {t, act};
    dnnl_eltwise_desc_t desc[2];
    if (cd_dnnl_init()) return 0;
    int n = eltwise_descs(&ep, 1, desc);
    if (n < 1) return 0;
    int ok = 1;
    for (int i = 0; i < n; i++) ok = ok && cd_dnnl_plain_try(&desc[i]);
    return ok;
}

static int eltwise_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    dnnl_eltwise_desc_t desc[2];
    int n = eltwise_descs(op->priv, batch, desc), rc = 0;
    if (n < 0) return n;
    for (int i = 0; i < n && !rc; i++) rc = cd_dnnl_plain_build(p, i, &desc[i]);
    return rc;
}

static int eltwise_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                        float *dst) {
    cd_dnnl_arg args[2] = {{DNNL_ARG_SRC, src[0]}, {DNNL_ARG_DST, dst}};
    int rc = cd_dnnl_exec(ctx, p, 0, 2, args);
    if (!rc && p->nprim == 2) {
        cd_dnnl_arg in_place[2] = {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}};
        rc = cd_dnnl_exec(ctx, p, 1, 2, in_place);
    }
    return rc;
}

int cd_dnnl_eltwise_create(cd_dnnl_tdesc t, cd_activation act, int max_batch, cd_dnnl_op **out) {
    *out = NULL;
    eltwise_priv ep = {t, act};
    dnnl_eltwise_desc_t desc[2];
    int rc = cd_dnnl_init();
    if (rc) return rc;
    if ((rc = eltwise_descs(&ep, 1, desc)) < 0) return rc;
    static const cd_dnnl_kind k_kind = {eltwise_build, eltwise_exec, NULL};
    cd_dnnl_op *op;
    if ((rc = cd_dnnl_op_new(&k_kind, max_batch, 1, &ep, sizeof ep, &op))) return rc;
    return cd_dnnl_op_ready(op, out);
}
