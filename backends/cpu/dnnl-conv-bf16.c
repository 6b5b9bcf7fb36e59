// Dense 2-D convolution on oneDNN in bf16: the opt-in precision of the f32
// convs (CONVD_BF16, --bf16; backends/cpu/dnnl.h). The f32 source is rounded
// to bf16 by a reorder into the ctx scratch, the weights are packed in bf16
// at create, products accumulate in f32, and bias, residual (sum) and
// activation are the f32 conv's; the output stays f32 in the plan's layout.
//
// Two wirings, both timed at create (cd_dnnl_conv_bf16_offer):
// - blocked: bf16 source in the plan's blocked layout, oneDNN's
//   jit_bf16 (vdpbf16ps) writing the f32 output in place;
// - nhwc: bf16 source in nhwc, the output f32 nhwc in the scratch and
//   reordered into the plan's layout (the residual reordered in first):
//   oneDNN 2.6 runs AMX tiles (brgconv:avx512_core_amx_bf16) on nhwc only.

#include "backends/cpu/dnnl-impl.h"
#include "backends/cpu/winograd-impl.h"
#include "core/clock.h"

#include <omp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_CONV, P_SRC, P_RES, P_OUT, P_COUNT }; // primitive indexes (the conv first: cd_dnnl_op_impl names it)

typedef struct {
    size_t tin, tout; // scratch offsets of the bf16 source and (nhwc) the f32 output
    char name[80];    // "bf16:<oneDNN's implementation>"
} bf16_wire;

typedef struct {
    cd_conv_desc d;
    cd_layout src_l, dst_l; // the plan's activation layouts (f32)
    int nhwc;               // the nhwc wiring, else blocked
    cd_dnnl_weights wts;    // user layout OIHW / GOIHW f32, packed bf16
    float *bias;            // K floats or NULL (owned)
    bf16_wire *wire;        // [max_batch + 1], written by build under the op's mutex
} bf16_priv;

int cd_dnnl_bf16_native(void) {
    if (cd_dnnl_init()) return 0;
    // Both are bit sets of the extensions: AMX's includes avx512_core_bf16's.
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), bf16 = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    return (isa & bf16) == bf16;
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

static int conv_pd(const bf16_priv *cp, int batch, dnnl_primitive_desc_t *pd) {
    const cd_conv_desc *d = &cp->d;
    const cd_layout in_l = cp->nhwc ? CD_LAYOUT_NHWC : cp->src_l, out_l = cp->nhwc ? CD_LAYOUT_NHWC : cp->dst_l;
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    int rc;
    if ((rc = cd_dnnl_md_act_dt(&smd, batch, d->c, d->h, d->w, in_l, dnnl_bf16))) return rc;
    if ((rc = cd_dnnl_md_act_dt(&dmd, batch, d->k, d->oh, d->ow, out_l, dnnl_f32))) return rc;
    if ((rc = cd_dnnl_conv_weights_md(&wmd, d, dnnl_bf16, dnnl_format_tag_any))) return rc;
    dnnl_dims_t bd = {d->k};
    if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x)))) return rc;
    dnnl_dims_t strides = {d->stride_h, d->stride_w};
    dnnl_dims_t dil = {d->dil_h - 1, d->dil_w - 1}; // oneDNN counts extra gaps
    dnnl_dims_t pl = {d->pad_t, d->pad_l}, pr = {d->pad_b, d->pad_r};
    dnnl_convolution_desc_t cd;
    if ((rc = CD_DNNL(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                                 &smd, &wmd, cp->bias ? &bmd : NULL, &dmd, strides, dil,
                                                                 pl, pr))))
        return rc;
    dnnl_primitive_attr_t attr = NULL;
    if ((rc = cd_dnnl_attr(&attr, d->has_residual, d->act))) return rc;
    // Quietly: a CPU without the kernel is asked at offer time and declines.
    rc = cd_dnnl_pd_try(&cd, attr, pd) ? 0 : CD_EUNSUPPORTED;
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

static int reorder_pd(cd_dnnl_prim *p, int i, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
    dnnl_primitive_attr_t attr = NULL;
    int rc = CD_DNNL(dnnl_primitive_attr_create(&attr));
    if (!rc) rc = CD_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (!rc)
        rc = CD_DNNL(dnnl_reorder_primitive_desc_create(&p->pd[i], from, cd_dnnl_engine(), to, cd_dnnl_engine(), attr));
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

static int bf16_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    bf16_priv *cp = op->priv;
    const cd_conv_desc *d = &cp->d;
    int rc;
    if ((rc = conv_pd(cp, batch, &p->pd[P_CONV]))) return rc;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(p->pd[P_CONV], dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *tin = dnnl_primitive_desc_query_md(p->pd[P_CONV], dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *tout = dnnl_primitive_desc_query_md(p->pd[P_CONV], dnnl_query_dst_md, 0);
    if (!wmd || !tin || !tout) return CD_EINTERNAL;
    if ((rc = cd_dnnl_weights_for(&cp->wts, wmd, &p->wset))) return rc;
    dnnl_memory_desc_t usrc, udst;
    if ((rc = cd_dnnl_md_act(&usrc, batch, d->c, d->h, d->w, cp->src_l))) return rc;
    if ((rc = cd_dnnl_md_act(&udst, batch, d->k, d->oh, d->ow, cp->dst_l))) return rc;
    if ((rc = reorder_pd(p, P_SRC, &usrc, tin))) return rc;
    p->nprim = P_SRC + 1;
    if (cp->nhwc) {
        if ((rc = reorder_pd(p, P_RES, &udst, tout)) || (rc = reorder_pd(p, P_OUT, tout, &udst))) return rc;
        p->nprim = P_COUNT;
    }
    // Scratch: [the primitives' own | the bf16 source | the nhwc f32 output].
    size_t own = 0;
    for (int i = 0; i < p->nprim; i++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(p->pd[i], dnnl_query_scratchpad_md, 0);
        const size_t sb = md ? dnnl_memory_desc_get_size(md) : 0;
        if (sb > own) own = sb;
    }
    bf16_wire *w = &cp->wire[batch];
    w->tin = align64(own);
    w->tout = w->tin + align64(dnnl_memory_desc_get_size(tin));
    p->scratch_bytes = w->tout + (cp->nhwc ? align64(dnnl_memory_desc_get_size(tout)) : 0);
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(p->pd[P_CONV], dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        impl = "?";
    snprintf(w->name, sizeof w->name, "bf16:%s", impl);
    op->weight_bytes = cd_dnnl_weights_bytes(&cp->wts) + (cp->bias ? (size_t)d->k * sizeof(float) : 0);
    return 0;
}

static int bf16_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                     float *dst) {
    bf16_priv *cp = op->priv;
    const bf16_wire *w = &cp->wire[batch];
    char *scratch = cd_dnnl_ctx_scratch(ctx, p->scratch_bytes);
    if (!scratch) return CD_ENOMEM;
    void *tin = scratch + w->tin, *tout = cp->nhwc ? (void *)(scratch + w->tout) : (void *)dst;
    const int res = cp->d.has_residual;
    cd_dnnl_arg in[2] = {{DNNL_ARG_FROM, src[0]}, {DNNL_ARG_TO, tin}};
    int rc = cd_dnnl_exec(ctx, p, P_SRC, 2, in);
    if (!rc && res && cp->nhwc) { // the residual into the conv's own output, which its sum adds to
        cd_dnnl_arg r[2] = {{DNNL_ARG_FROM, src[1]}, {DNNL_ARG_TO, tout}};
        rc = cd_dnnl_exec(ctx, p, P_RES, 2, r);
    } else if (!rc && res && src[1] != dst) {
        memcpy(dst, src[1], cd_dnnl_tensor_floats(cp->dst_l, batch, cp->d.k, cp->d.oh, cp->d.ow) * sizeof(float));
    }
    if (rc) return rc;
    cd_dnnl_arg args[4] = {{DNNL_ARG_SRC, tin},
                           {DNNL_ARG_WEIGHTS, cp->wts.data[p->wset]},
                           {DNNL_ARG_DST, tout},
                           {DNNL_ARG_BIAS, cp->bias}};
    if ((rc = cd_dnnl_exec(ctx, p, P_CONV, cp->bias ? 4 : 3, args)) || !cp->nhwc) return rc;
    cd_dnnl_arg out[2] = {{DNNL_ARG_FROM, tout}, {DNNL_ARG_TO, dst}};
    return cd_dnnl_exec(ctx, p, P_OUT, 2, out);
}

static void bf16_fini(cd_dnnl_op *op) {
    bf16_priv *cp = op->priv;
    if (!cp) return;
    cd_dnnl_weights_fini(&cp->wts);
    free(cp->bias);
    free(cp->wire);
}

static const char *bf16_impl(cd_dnnl_op *op, const cd_dnnl_prim *p, int batch) {
    (void)p;
    const bf16_priv *cp = op->priv;
    return cp->wire[batch].name;
}

static const cd_dnnl_kind k_kind = {bf16_build, bf16_exec, bf16_fini, bf16_impl};

int cd_dnnl_op_is_bf16(const cd_dnnl_op *op) { return op && op->kind == &k_kind; }

int cd_dnnl_conv_bf16_create(const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, int nhwc,
                             const float *w, const float *bias, cd_dnnl_op **out) {
    *out = NULL;
    if (!d || !w || max_batch < 1 || cd_dnnl_conv_check(d, src, dst)) return CD_EPARAMS;
    if (src == CD_LAYOUT_NHWC || dst == CD_LAYOUT_NHWC) return CD_EPARAMS; // f32 activations are never NHWC
    if (!cd_dnnl_bf16_native()) return CD_EUNSUPPORTED;
    // Grouped convs are not offered: oneDNN 2.6's bf16 depthwise kernel
    // (brdgmm_dw) runs MobileNetV2's depthwise layers 0.5-1.4x its f32 one
    // alone, 0.3-0.4x with the conversions (AMX Xeon; 0.5-0.7x on Zen 4:
    // bench/results/bf16-layers-*.md), and its AMX conv fails to build some
    // other grouped ones (c16 k8 5x5 g2: runtime_error).
    if (d->groups > 1) return CD_EUNSUPPORTED;
    // Its AMX conv's output changes from run to run on 2 threads for a 1xN
    // kernel with a stride (c32 k48 1x3/2: 70 of 99 runs differ; 3x1/2, 1x7/1,
    // square ones: none): non-square strided kernels are not offered there.
    if (nhwc && d->r != d->s && (d->stride_h > 1 || d->stride_w > 1)) return CD_EUNSUPPORTED;
    const bf16_priv init = {.d = *d, .src_l = src, .dst_l = dst, .nhwc = nhwc != 0};
    cd_dnnl_op *op;
    int rc = cd_dnnl_op_new(&k_kind, max_batch, d->has_residual ? 2 : 1, &init, sizeof init, &op);
    if (rc) return rc;
    bf16_priv *cp = op->priv;
    cp->wire = calloc((size_t)max_batch + 1, sizeof *cp->wire);
    if (!cp->wire) goto nomem;
    if (bias) {
        if (!(cp->bias = cd_dnnl_alloc((size_t)d->k * sizeof(float)))) goto nomem;
        memcpy(cp->bias, bias, (size_t)d->k * sizeof(float));
    }
    if ((rc = cd_dnnl_conv_weights_md(&cp->wts.user_md, d, dnnl_f32, dnnl_oihw))) goto fail;
    // Batch 1 now: packs the weights while the caller's copy is alive; and
    // the largest batch, so that a kernel oneDNN cannot make is found here
    // rather than at run time.
    cp->wts.user = w;
    rc = cd_dnnl_op_prepare(op, 1, NULL);
    cp->wts.user = NULL;
    if (!rc && max_batch > 1) rc = cd_dnnl_op_prepare(op, max_batch, NULL);
    if (rc == CD_EINTERNAL) rc = CD_EUNSUPPORTED; // declined: the f32 conv stays
    if (rc) goto fail;
    // oneDNN's reference loop is slower than f32 everywhere: not an offer.
    const char *impl = cd_dnnl_op_impl(op, 1);
    if (strncmp(impl, "bf16:", 5) != 0 || cd_dnnl_impl_is_reference(impl + 5)) {
        rc = CD_EUNSUPPORTED;
        goto fail;
    }
    *out = op;
    return 0;
nomem:
    rc = CD_ENOMEM;
fail:
    cd_dnnl_op_free(op);
    return rc;
}

// ---- the offer: timed against the f32 conv at create ------------------------------

// Best of 5 interleaved runs (after one to warm up) of each op at batch 1, in
// ns; the minimum, because load only ever adds time. 0 or an error.
static int time_ops(int n, cd_dnnl_op *const *ops, const cd_conv_desc *d, cd_layout src, cd_layout dst,
                    uint64_t *best) {
    const size_t sn = cd_dnnl_tensor_floats(src, 1, d->c, d->h, d->w);
    const size_t dn = cd_dnnl_tensor_floats(dst, 1, d->k, d->oh, d->ow);
    float *in = calloc(sn ? sn : 1, sizeof(float)), *res = calloc(dn ? dn : 1, sizeof(float));
    float *out = calloc(dn ? dn : 1, sizeof(float));
    cd_dnnl_ctx *ctx = NULL;
    int rc = !in || !res || !out ? CD_ENOMEM : cd_dnnl_ctx_create(&ctx);
    const float *srcs[2] = {in, res};
    for (int i = 0; i < n; i++) best[i] = UINT64_MAX;
    for (int round = 0; !rc && round < 6; round++) {
        for (int i = 0; !rc && i < n; i++) {
            const uint64_t t0 = cd_now_ns();
            rc = cd_dnnl_op_run(ops[i], ctx, 1, d->has_residual ? 2 : 1, srcs, out);
            const uint64_t t = cd_now_ns() - t0;
            if (round > 0 && t < best[i]) best[i] = t;
        }
    }
    if (ctx) cd_dnnl_ctx_free(ctx);
    free(in);
    free(res);
    free(out);
    return rc;
}

// The fastest of f32, bf16 blocked and bf16 nhwc for d: 0, 1 or 2, timed
// once and remembered on disk beside Winograd's timings (winograd-cache.c),
// so that every process that loads a model plans the same kernels.
static int fastest_cached(cd_dnnl_op *const *ops, int n, const cd_conv_desc *d, cd_layout src, cd_layout dst,
                          const char *f32_impl) {
    char geo[512], key[700];
    cd_dnnl_apply_threads();
    const cd_sparse_isa isa = cd_layout_block(src) >= 16 ? CD_SPARSE_ISA_AVX512F : CD_SPARSE_ISA_AVX2;
    cd_wino_cache_key(d, src, isa, omp_get_max_threads(), geo, sizeof geo);
    snprintf(key, sizeof key, "bf16 s%d,%d g%d dst%d %s|%s", d->stride_h, d->stride_w, d->groups, (int)dst, f32_impl,
             geo);
    uint64_t ns[3];
    if (!cd_wino_cache_get(key, ns, 3)) {
        if (time_ops(n, ops, d, src, dst, ns)) return 0;
        for (int i = n; i < 3; i++) ns[i] = UINT64_MAX;
        for (int i = 0; i < 3; i++)
            if (ns[i] == 0) ns[i] = 1; // the cache wants nonzero figures
        cd_wino_cache_put(key, ns, 3);
    }
    int best = 0;
    for (int i = 1; i < n; i++)
        if (ns[i] < ns[best]) best = i;
    return best;
}

int cd_dnnl_conv_bf16_offer(cd_dnnl_op **op, const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch,
                            const float *w, const float *bias, int mode) {
    if (mode == 0 || !cd_dnnl_bf16_native()) return 0;
    cd_dnnl_op *cand[3] = {*op, NULL, NULL};
    int n = 1;
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        int rc = cd_dnnl_conv_bf16_create(d, src, dst, max_batch, nhwc, w, bias, &cand[n]);
        if (rc == CD_ENOMEM) goto fail;
        if (!rc) n++;
    }
    int pick = 0;
    if (n == 2 && mode == 2) { // on: bf16 wherever it runs, the faster wiring
        pick = 1;
    } else if (n == 3 && mode == 2) {
        pick = 1 + fastest_cached(cand + 1, 2, d, src, dst, "-");
    } else if (n > 1) {
        pick = fastest_cached(cand, n, d, src, dst, cd_dnnl_op_impl(*op, 1));
    }
    for (int i = 1; i < n; i++)
        if (i != pick) cd_dnnl_op_free(cand[i]);
    if (pick) {
        cd_dnnl_op_free(*op);
        *op = cand[pick];
    }
    return 0;
fail:
    for (int i = 1; i < n; i++) cd_dnnl_op_free(cand[i]);
    return CD_ENOMEM;
}
