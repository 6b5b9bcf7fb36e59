// Concatenation along channels, H or W on oneDNN's concat primitive.

#include "backends/cpu/dnnl-impl.h"

#include <stdlib.h>
#include <string.h>

// Inputs beyond this are refused (execution arguments are on the stack).
#define CONCAT_MAX_SRC 32

typedef struct {
    int n;               // number of inputs
    int axis;            // 1 = C, 2 = H, 3 = W
    cd_layout dst_l;     // output layout
    cd_dnnl_tdesc *srcs; // n input descriptions (owned)
} concat_priv;

static int concat_check(int n, const cd_dnnl_tdesc *s, int axis, cd_layout dst_l) {
    if (n < 1 || n > CONCAT_MAX_SRC || !s || axis < 1 || axis > 3 || !cd_layout_valid(dst_l)) return CD_EPARAMS;
    for (int i = 0; i < n; i++) {
        if (s[i].c < 1 || s[i].h < 1 || s[i].w < 1 || !cd_layout_valid(s[i].layout)) return CD_EPARAMS;
        if ((axis != 1 && s[i].c != s[0].c) || (axis != 2 && s[i].h != s[0].h) || (axis != 3 && s[i].w != s[0].w))
            return CD_EPARAMS;
    }
    return 0;
}

static int concat_pd(const concat_priv *cp, int batch, dnnl_primitive_desc_t *pd, int quiet) {
    dnnl_memory_desc_t smd[CONCAT_MAX_SRC], dmd;
    dnnl_primitive_attr_t attr = NULL;
    int dims[4] = {batch, cp->srcs[0].c, cp->srcs[0].h, cp->srcs[0].w};
    int rc;
    dims[cp->axis] = 0;
    for (int i = 0; i < cp->n; i++) {
        const cd_dnnl_tdesc *s = &cp->srcs[i];
        if ((rc = cd_dnnl_md_act(&smd[i], batch, s->c, s->h, s->w, s->layout))) return rc;
        dims[cp->axis] += cp->axis == 1 ? s->c : cp->axis == 2 ? s->h : s->w;
    }
    if ((rc = cd_dnnl_md_act(&dmd, batch, dims[1], dims[2], dims[3], cp->dst_l))) return rc;
    if ((rc = cd_dnnl_attr(&attr, 0, (cd_activation){CD_ACT_NONE, 0, 0}))) return rc;
    dnnl_status_t st = dnnl_concat_primitive_desc_create(pd, &dmd, cp->n, cp->axis, smd, attr, cd_dnnl_engine());
    dnnl_primitive_attr_destroy(attr);
    if (quiet) return st == dnnl_success ? 0 : CD_EUNSUPPORTED;
    return CD_DNNL(st);
}

int cd_dnnl_concat_supports(int n, const cd_dnnl_tdesc *srcs, int axis, cd_layout dst_layout) {
    if (concat_check(n, srcs, axis, dst_layout) || cd_dnnl_init()) return 0;
    concat_priv cp = {n, axis, dst_layout, (cd_dnnl_tdesc *)srcs};
    dnnl_primitive_desc_t pd = NULL;
    if (concat_pd(&cp, 1, &pd, 1)) return 0;
    dnnl_primitive_desc_destroy(pd);
    return 1;
}

static int concat_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    int rc = concat_pd(op->priv, batch, &p->pd[0], 0);
    if (rc) return rc;
    p->nprim = 1;
    return 0;
}

static int concat_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                       float *dst) {
    concat_priv *cp = op->priv;
    cd_dnnl_arg args[CONCAT_MAX_SRC + 1];
    for (int i = 0; i < cp->n; i++) args[i] = (cd_dnnl_arg){DNNL_ARG_MULTIPLE_SRC + i, src[i]};
    args[cp->n] = (cd_dnnl_arg){DNNL_ARG_DST, dst};
    return cd_dnnl_exec(ctx, p, 0, cp->n + 1, args);
}

static void concat_fini(cd_dnnl_op *op) {
    concat_priv *cp = op->priv;
    if (cp) free(cp->srcs);
}

int cd_dnnl_concat_create(int n, const cd_dnnl_tdesc *srcs, int axis, cd_layout dst_layout, int max_batch,
                          cd_dnnl_op **out) {
    *out = NULL;
    int rc = concat_check(n, srcs, axis, dst_layout);
    if (rc) return rc;
    static const cd_dnnl_kind k_kind = {concat_build, concat_exec, concat_fini};
    cd_dnnl_tdesc *copy = malloc((size_t)n * sizeof *srcs);
    if (!copy) return CD_ENOMEM;
    memcpy(copy, srcs, (size_t)n * sizeof *srcs);
    const concat_priv cp = {.n = n, .axis = axis, .dst_l = dst_layout, .srcs = copy};
    cd_dnnl_op *op;
    if ((rc = cd_dnnl_op_new(&k_kind, max_batch, n, &cp, sizeof cp, &op))) {
        free(copy);
        return rc;
    }
    return cd_dnnl_op_ready(op, out);
}
