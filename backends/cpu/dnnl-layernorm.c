// Layer normalization over the last len elements of rows on oneDNN's
// layer_normalization primitive (forward inference: the statistics are
// computed per row, never stored), with gamma and, when given, beta.

#include "backends/cpu/dnnl-impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t rows, len; // per batch item: rows of len
    float eps;
    float *gamma, *beta; // len values each (beta NULL: none), owned
} ln_priv;

static int ln_desc(const ln_priv *lp, int batch, dnnl_layer_normalization_desc_t *desc) {
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {(dnnl_dim_t)batch * lp->rows, (dnnl_dim_t)lp->len};
    int rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab));
    if (rc) return rc;
    unsigned flags = dnnl_use_scale | (lp->beta ? dnnl_use_shift : 0u);
    return CD_DNNL(dnnl_layer_normalization_forward_desc_init(desc, dnnl_forward_inference, &md, NULL, lp->eps, flags));
}

int cd_dnnl_layernorm_supports(int64_t rows, int64_t len, int with_beta) {
    static float any; // (only whether beta is there matters here)
    ln_priv lp = {rows, len, 1e-5f, NULL, with_beta ? &any : NULL};
    dnnl_layer_normalization_desc_t desc;
    if (rows < 1 || len < 1 || rows > (1 << 30) || len > (1 << 30) || cd_dnnl_init() || ln_desc(&lp, 1, &desc))
        return 0;
    return cd_dnnl_plain_try(&desc);
}

static int ln_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    dnnl_layer_normalization_desc_t desc;
    int rc = ln_desc(op->priv, batch, &desc);
    return rc ? rc : cd_dnnl_plain_build(p, 0, &desc);
}

static int ln_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                   float *dst) {
    const ln_priv *lp = op->priv;
    cd_dnnl_arg args[4] = {
        {DNNL_ARG_SRC, src[0]}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, lp->gamma}, {DNNL_ARG_SHIFT, lp->beta}};
    return cd_dnnl_exec(ctx, p, 0, lp->beta ? 4 : 3, args);
}

static void ln_fini(cd_dnnl_op *op) {
    ln_priv *lp = op->priv;
    free(lp->gamma);
    free(lp->beta);
}

int cd_dnnl_layernorm_create(int64_t rows, int64_t len, float eps, const float *gamma, const float *beta, int max_batch,
                             cd_dnnl_op **out) {
    *out = NULL;
    if (rows < 1 || len < 1 || !gamma) return CD_EPARAMS;
    ln_priv lp = {rows, len, eps, cd_dnnl_alloc((size_t)len * sizeof(float)), NULL};
    if (beta) lp.beta = cd_dnnl_alloc((size_t)len * sizeof(float));
    if (!lp.gamma || (beta && !lp.beta)) {
        free(lp.gamma);
        free(lp.beta);
        return CD_ENOMEM;
    }
    memcpy(lp.gamma, gamma, (size_t)len * sizeof(float));
    if (beta) memcpy(lp.beta, beta, (size_t)len * sizeof(float));
    static const cd_dnnl_kind k_kind = {ln_build, ln_exec, ln_fini};
    cd_dnnl_op *op;
    int rc = cd_dnnl_op_new(&k_kind, max_batch, 1, &lp, sizeof lp, &op);
    if (rc) {
        free(lp.gamma);
        free(lp.beta);
        return rc;
    }
    op->weight_bytes = (size_t)len * sizeof(float) * (beta ? 2 : 1);
    return cd_dnnl_op_ready(op, out);
}
