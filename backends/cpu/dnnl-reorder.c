// Activation layout conversion (NCHW <-> NCHW16C) on oneDNN's reorder.

#include "backends/cpu/dnnl-impl.h"

#include <stdlib.h>

typedef struct {
    cd_layout from, to; // source and destination layouts
    int c, h, w;        // per-item dims
} reorder_priv;

static int reorder_pd(const reorder_priv *rp, int batch, dnnl_primitive_desc_t *pd, int quiet) {
    dnnl_memory_desc_t smd, dmd;
    dnnl_primitive_attr_t attr = NULL;
    int rc;
    if ((rc = cd_dnnl_md_act(&smd, batch, rp->c, rp->h, rp->w, rp->from))) return rc;
    if ((rc = cd_dnnl_md_act(&dmd, batch, rp->c, rp->h, rp->w, rp->to))) return rc;
    if ((rc = cd_dnnl_attr(&attr, 0, (cd_activation){CD_ACT_NONE, 0, 0}))) return rc;
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(pd, &smd, cd_dnnl_engine(), &dmd, cd_dnnl_engine(), attr);
    dnnl_primitive_attr_destroy(attr);
    if (quiet) return st == dnnl_success ? 0 : CD_EUNSUPPORTED;
    return CD_DNNL(st);
}

int cd_dnnl_reorder_supports(cd_layout from, cd_layout to, int c, int h, int w) {
    if (cd_dnnl_init()) return 0;
    reorder_priv rp = {from, to, c, h, w};
    dnnl_primitive_desc_t pd = NULL;
    if (reorder_pd(&rp, 1, &pd, 1)) return 0;
    dnnl_primitive_desc_destroy(pd);
    return 1;
}

static int reorder_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    int rc = reorder_pd(op->priv, batch, &p->pd[0], 0);
    if (rc) return rc;
    p->nprim = 1;
    return 0;
}

static int reorder_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                        float *dst) {
    cd_dnnl_arg args[2] = {{DNNL_ARG_FROM, src[0]}, {DNNL_ARG_TO, dst}};
    return cd_dnnl_exec(ctx, p, 0, 2, args);
}

int cd_dnnl_reorder_create(cd_layout from, cd_layout to, int c, int h, int w, int max_batch, cd_dnnl_op **out) {
    *out = NULL;
    if (c < 1 || h < 1 || w < 1 || !cd_layout_valid(from) || !cd_layout_valid(to)) return CD_EPARAMS;
    static const cd_dnnl_kind k_kind = {reorder_build, reorder_exec, NULL};
    const reorder_priv rp = {from, to, c, h, w};
    cd_dnnl_op *op;
    int rc = cd_dnnl_op_new(&k_kind, max_batch, 1, &rp, sizeof rp, &op);
    if (rc) return rc;
    return cd_dnnl_op_ready(op, out);
}
