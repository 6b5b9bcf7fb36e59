// Max / average / global average pooling on oneDNN (pooling_v2: dilation).

#include "backends/cpu/dnnl-impl.h"
#include "kernels/cpu/ref.h"

#include <stdlib.h>

typedef struct {
    cd_pool_desc d; // the pooling (d.n unused)
    cd_layout l;    // layout of src and dst
    cd_dnnl_elem e; // their element type
} pool_priv;

static dnnl_data_type_t elem_dt(cd_dnnl_elem e) {
    return e == CD_DNNL_U8 ? dnnl_u8 : e == CD_DNNL_S8 ? dnnl_s8 : dnnl_f32;
}

// Checks ranges, the derived output size, and the one ceil-mode case oneDNN
// cannot express. 0 or CD_EPARAMS / CD_EUNSUPPORTED.
static int pool_check(const cd_pool_desc *d, cd_layout l, cd_dnnl_elem e) {
    if (d->c < 1 || d->h < 1 || d->w < 1 || d->kh < 1 || d->kw < 1) return CD_EPARAMS;
    if (d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1) return CD_EPARAMS;
    if (d->pad_t < 0 || d->pad_l < 0 || d->pad_b < 0 || d->pad_r < 0) return CD_EPARAMS;
    if (!cd_layout_valid(l) || (d->kind != CD_POOL_MAX && d->kind != CD_POOL_AVG)) return CD_EPARAMS;
    if (e != CD_DNNL_F32 && e != CD_DNNL_U8 && e != CD_DNNL_S8) return CD_EPARAMS;
    // Integers: the max of grid values is on the grid; an average is not.
    if (e != CD_DNNL_F32 && d->kind != CD_POOL_MAX) return CD_EUNSUPPORTED;
    cd_pool_desc o = *d;
    cd_pool_out_dims(&o);
    if (o.oh < 1 || o.ow < 1 || o.oh != d->oh || o.ow != d->ow) return CD_EPARAMS;
    return 0;
}

// End padding oneDNN needs so that its floor rule yields d->oh/d->ow (ceil mode
// adds cells past the ONNX end padding).
static void pool_pad_end(const cd_pool_desc *d, int *pb, int *pr) {
    int span_h = d->dil_h * (d->kh - 1) + 1, span_w = d->dil_w * (d->kw - 1) + 1;
    *pb = (d->oh - 1) * d->stride_h + span_h - d->h - d->pad_t;
    *pr = (d->ow - 1) * d->stride_w + span_w - d->w - d->pad_l;
    if (*pb < d->pad_b) *pb = d->pad_b;
    if (*pr < d->pad_r) *pr = d->pad_r;
}

static int pool_desc(const pool_priv *pp, int batch, dnnl_pooling_v2_desc_t *pd_out) {
    const cd_pool_desc *d = &pp->d;
    int pb, pr, rc;
    pool_pad_end(d, &pb, &pr);
    // AVG counting padding: cells beyond the ONNX end padding would be
    // counted by oneDNN but not by ONNX.
    if (d->kind == CD_POOL_AVG && d->count_include_pad && (pb != d->pad_b || pr != d->pad_r)) return CD_EUNSUPPORTED;
    dnnl_memory_desc_t smd, dmd;
    if ((rc = cd_dnnl_md_act_dt(&smd, batch, d->c, d->h, d->w, pp->l, elem_dt(pp->e)))) return rc;
    if ((rc = cd_dnnl_md_act_dt(&dmd, batch, d->c, d->oh, d->ow, pp->l, elem_dt(pp->e)))) return rc;
    dnnl_alg_kind_t alg = d->kind == CD_POOL_MAX ? dnnl_pooling_max
                          : d->count_include_pad ? dnnl_pooling_avg_include_padding
                                                 : dnnl_pooling_avg_exclude_padding;
    dnnl_dims_t strides = {d->stride_h, d->stride_w}, kernel = {d->kh, d->kw};
    dnnl_dims_t dil = {d->dil_h - 1, d->dil_w - 1};
    dnnl_dims_t pl = {d->pad_t, d->pad_l}, pe = {pb, pr};
    return CD_DNNL(dnnl_pooling_v2_forward_desc_init(pd_out, dnnl_forward_inference, alg, &smd, &dmd, strides, kernel,
                                                     dil, pl, pe));
}

int cd_dnnl_pool_supports(const cd_pool_desc *d, cd_layout layout, cd_dnnl_elem e) {
    if (!d || pool_check(d, layout, e) || cd_dnnl_init()) return 0;
    pool_priv pp = {*d, layout, e};
    int pb, pr;
    pool_pad_end(d, &pb, &pr);
    if (d->kind == CD_POOL_AVG && d->count_include_pad && (pb != d->pad_b || pr != d->pad_r)) return 0;
    dnnl_pooling_v2_desc_t desc;
    if (pool_desc(&pp, 1, &desc)) return 0;
    // Integers only on a jit kernel: the float32 pool it replaces has one.
    return e == CD_DNNL_F32 ? cd_dnnl_plain_try(&desc) : cd_dnnl_plain_fast(&desc);
}

static int pool_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    dnnl_pooling_v2_desc_t desc;
    int rc = pool_desc(op->priv, batch, &desc);
    return rc ? rc : cd_dnnl_plain_build(p, 0, &desc);
}

static int pool_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                     float *dst) {
    cd_dnnl_arg args[2] = {{DNNL_ARG_SRC, src[0]}, {DNNL_ARG_DST, dst}};
    return cd_dnnl_exec(ctx, p, 0, 2, args);
}

int cd_dnnl_pool_create(const cd_pool_desc *d, cd_layout layout, cd_dnnl_elem e, int max_batch, cd_dnnl_op **out) {
    *out = NULL;
    int rc;
    if (!d) return CD_EPARAMS;
    if ((rc = pool_check(d, layout, e))) return rc;
    static const cd_dnnl_kind k_kind = {pool_build, pool_exec, NULL};
    const pool_priv pp = {*d, layout, e};
    cd_dnnl_op *op;
    if ((rc = cd_dnnl_op_new(&k_kind, max_batch, 1, &pp, sizeof pp, &op))) return rc;
    return cd_dnnl_op_ready(op, out);
}
