// Inner product (Gemm / fully connected) on oneDNN with fused bias and
// activation. Weights packed at create time. At batch 1, where the layer only
// streams its weights, our own loop reads oneDNN's packed copy
// (backends/cpu/gemv.h) when it is in the layout that loop knows.

#include "backends/cpu/dnnl-impl.h"
#include "backends/cpu/gemv.h"
#include "kernels/op-desc.h"
#include "sparse/spmm-ukernel.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    cd_dnnl_tdesc src;   // per-item input dims and layout
    int k;               // outputs per item
    cd_activation act;   // fused activation
    cd_dnnl_weights wts; // user layout oihw = K x (c*h*w), NCHW flatten order
    float *bias;         // K floats or NULL (owned)
    int gemv_set;        // the weight set of batch 1 when gemv.h's loop can read it, else -1
} ip_priv;

// Can cd_cpu_gemv_oi16i64o_avx512f read weight set md (batch 1)?
static int gemv_layout(const ip_priv *ip, const dnnl_memory_desc_t *md) {
    if (ip->src.h != 1 || ip->src.w != 1 || !cd_sparse_isa_supported(CD_SPARSE_ISA_AVX512F)) return 0;
    dnnl_memory_desc_t want;
    dnnl_dims_t wd = {ip->k, ip->src.c, 1, 1};
    if (dnnl_memory_desc_init_by_tag(&want, 4, wd, dnnl_f32, dnnl_ABcd16b64a) != dnnl_success) return 0;
    return dnnl_memory_desc_equal(&want, md);
}

static int ip_check(cd_dnnl_tdesc s, int k, cd_activation act) {
    if (s.c < 1 || s.h < 1 || s.w < 1 || k < 1 || !cd_layout_valid(s.layout)) return CD_EPARAMS;
    cd_dnnl_elt_step st[2];
    return cd_dnnl_act_steps(act, st) < 0 ? CD_EPARAMS : 0;
}

static int ip_desc(cd_dnnl_tdesc s, int k, cd_activation act, int with_bias, int batch, dnnl_inner_product_desc_t *desc,
                   dnnl_primitive_attr_t *attr) {
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    int rc;
    if ((rc = cd_dnnl_md_act(&smd, batch, s.c, s.h, s.w, s.layout))) return rc;
    dnnl_dims_t wd = {k, s.c, s.h, s.w}, bd = {k}, dd = {batch, k};
    if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any)))) return rc;
    if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x)))) return rc;
    if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&dmd, 2, dd, dnnl_f32, dnnl_nc)))) return rc;
    if ((rc = CD_DNNL(dnnl_inner_product_forward_desc_init(desc, dnnl_forward_inference, &smd, &wmd,
                                                           with_bias ? &bmd : NULL, &dmd))))
        return rc;
    return cd_dnnl_attr(attr, 0, act);
}

int cd_dnnl_ip_supports(cd_dnnl_tdesc src, int k) {
    cd_activation none = {CD_ACT_NONE, 0, 0};
    if (ip_check(src, k, none) || cd_dnnl_init()) return 0;
    dnnl_inner_product_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    if (ip_desc(src, k, none, 1, 1, &desc, &attr)) return 0;
    int ok = cd_dnnl_pd_try(&desc, attr, NULL);
    dnnl_primitive_attr_destroy(attr);
    return ok;
}

static int ip_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    ip_priv *ip = op->priv;
    dnnl_inner_product_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    int rc = ip_desc(ip->src, ip->k, ip->act, ip->bias != NULL, batch, &desc, &attr);
    if (rc) return rc;
    rc = CD_DNNL(dnnl_primitive_desc_create(&p->pd[0], &desc, attr, cd_dnnl_engine(), NULL));
    dnnl_primitive_attr_destroy(attr);
    if (rc) return rc;
    p->nprim = 1;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(p->pd[0], dnnl_query_weights_md, 0);
    if (!wmd) return CD_EINTERNAL;
    if ((rc = cd_dnnl_weights_for(&ip->wts, wmd, &p->wset))) return rc;
    if (batch == 1) ip->gemv_set = gemv_layout(ip, wmd) ? p->wset : -1;
    op->weight_bytes = cd_dnnl_weights_bytes(&ip->wts) + (ip->bias ? (size_t)ip->k * sizeof(float) : 0);
    return 0;
}

static int ip_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                   float *dst) {
    ip_priv *ip = op->priv;
    if (batch == 1 && ip->gemv_set >= 0 && p->wset == ip->gemv_set) {
        cd_cpu_gemv_oi16i64o_avx512f(ip->k, ip->src.c, ip->wts.data[p->wset], src[0], dst);
        for (int j = 0; j < ip->k; j++) dst[j] = cd_act_apply(ip->act, ip->bias ? dst[j] + ip->bias[j] : dst[j]);
        return 0;
    }
    cd_dnnl_arg args[4] = {
        {DNNL_ARG_SRC, src[0]},
        {DNNL_ARG_WEIGHTS, ip->wts.data[p->wset]},
        {DNNL_ARG_DST, dst},
        {DNNL_ARG_BIAS, ip->bias},
    };
    return cd_dnnl_exec(ctx, p, 0, ip->bias ? 4 : 3, args);
}

static const char *ip_impl(cd_dnnl_op *op, const cd_dnnl_prim *p, int batch) {
    const ip_priv *ip = op->priv;
    return batch == 1 && ip->gemv_set >= 0 && p->wset == ip->gemv_set ? "gemv:avx512f" : NULL;
}

static void ip_fini(cd_dnnl_op *op) {
    ip_priv *ip = op->priv;
    if (!ip) return;
    cd_dnnl_weights_fini(&ip->wts);
    free(ip->bias);
}

int cd_dnnl_ip_create(cd_dnnl_tdesc src, int k, const float *w, const float *bias, cd_activation act, int max_batch,
                      cd_dnnl_op **out) {
    *out = NULL;
    if (!w || ip_check(src, k, act)) return CD_EPARAMS;
    static const cd_dnnl_kind k_kind = {ip_build, ip_exec, ip_fini, ip_impl};
    const ip_priv init = {.src = src, .k = k, .act = act, .gemv_set = -1};
    cd_dnnl_op *op;
    int rc = cd_dnnl_op_new(&k_kind, max_batch, 1, &init, sizeof init, &op);
    if (rc) return rc;
    ip_priv *ip = op->priv;
    dnnl_dims_t wd = {k, src.c, src.h, src.w};
    if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&ip->wts.user_md, 4, wd, dnnl_f32, dnnl_oihw)))) goto fail;
    if (bias) {
        if (!(ip->bias = cd_dnnl_alloc((size_t)k * sizeof(float)))) {
            rc = CD_ENOMEM;
            goto fail;
        }
        memcpy(ip->bias, bias, (size_t)k * sizeof(float));
    }
    ip->wts.user = w;
    rc = cd_dnnl_op_prepare(op, 1, NULL);
    ip->wts.user = NULL;
    if (rc) goto fail;
    *out = op;
    return 0;
fail:
    cd_dnnl_op_free(op);
    return rc;
}
