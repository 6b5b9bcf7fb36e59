// Dense int8 convolution on oneDNN (the contract in backends/cpu/dnnl.h):
// oneDNN's int8 kernel in the layout it chooses, with reorders at the op's
// boundary that quantize, shift or relayout the plan's tensors.

#include "backends/cpu/dnnl-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// The tensors a step reads or writes: the caller's three and the temporaries
// in the ctx scratchpad.
typedef enum { BUF_SRC = 0, BUF_DST, BUF_RES, BUF_TPRE, BUF_TIN, BUF_TMID, BUF_TOUT, BUF_TQ, BUF_COUNT } buf_id;

// One primitive run: index into cd_dnnl_prim, what it reads and writes.
typedef enum { STEP_CONV, STEP_REORDER, STEP_ELTWISE, STEP_BINARY } step_kind;
typedef struct {
    int prim;
    step_kind kind;
    buf_id from, to;
} i8_step;

// How one batch size runs: the steps in order and where the temporaries sit
// in the scratchpad (after the primitives' own scratchpad).
typedef struct {
    int nsteps;
    i8_step step[CD_DNNL_MAX_PRIMS];
    size_t off[BUF_COUNT];   // byte offsets of BUF_TPRE.. in the scratchpad
    size_t src_img, dst_img; // bytes of one image of src and dst (border: the steps run per image)
} i8_wiring;

typedef struct {
    cd_conv_desc d;         // the conv (d.n unused)
    cd_conv_quant q;        // q.w_scale cleared (oscale and bias hold what it gave)
    cd_layout src_l, dst_l; // the plan's layouts
    cd_layout res_l;        // the residual's (it is reordered into y in any case)
    int acc_only;           // test hook: s32 accumulators out
    int fused_q;            // the conv writes the quantized output itself
    int mid;                // q.mid_scale > 0: the conv writes y0 on the mid grid, reorders do the rest
    int shift;              // 128 when s8 inputs run as u8 (x + 128, zero point + 128)
    int zp_in_bias;         // the conv's dst zero point is in bias (no post-ops to apply before it)
    int border;             // d.border: a binary post-op, the conv run image by image (border_ok)
    float *map;             // border: d.border in NHWC (owned; d.border cleared)
    cd_dnnl_weights wts;    // user OIHW / GOIHW s8
    float *bias;            // K: bias / mult (oneDNN 2.6 scales after adding it), or NULL
    float *oscale;          // K: the conv's output scales
    i8_wiring *wire;        // [max_batch + 1], written under the op's mu by build
} conv_i8_priv;

static dnnl_data_type_t int_dt(int is_signed) { return is_signed ? dnnl_s8 : dnnl_u8; }

int cd_dnnl_has_vnni(void) {
    if (cd_dnnl_init()) return 0;
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni ||
           (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
}

static int zp_ok(int zp, int is_signed) { return zp >= cd_quant_qmin(is_signed) && zp <= cd_quant_qmax(is_signed); }

// q's ranges (w_scale may be NULL in a supports() query). 0 or CD_EPARAMS.
static int quant_check(const cd_conv_quant *q, int k) {
    if (!q || !(q->in_scale > 0.0f) || !isfinite(q->in_scale)) return CD_EPARAMS;
    if (!zp_ok(q->in_zp, q->in_signed) || !(q->out_scale >= 0.0f) || !isfinite(q->out_scale)) return CD_EPARAMS;
    if (q->out_scale > 0.0f && !zp_ok(q->out_zp, q->out_signed)) return CD_EPARAMS;
    if (q->dst_int && !(q->out_scale > 0.0f)) return CD_EPARAMS;
    for (int i = 0; q->w_scale && i < k; i++)
        if (!(q->w_scale[i] > 0.0f) || !isfinite(q->w_scale[i])) return CD_EPARAMS;
    return 0;
}

// A border map (d->border: a compacted conv's, added before the activation
// and the quantization) is a binary post-op in float over an NHWC copy:
// y = act(acc * mult + bias + map), then one linear step y / out_scale +
// out_zp, rounded and saturated by the conversion to the output's
// integers. oneDNN 2.6 has no broadcast over the batch alone for it (its
// reference loop), so the steps run image by image with a batch-1
// primitive. With AMX the post-op moves the conv from brgconv to the direct
// jit kernel (the conv alone 1.2-1.35x slower), and the fused layer still
// takes 3.2 ms where the float conv out, the map's Add and a FakeQuant pass
// took 8.7 (ResNet-50 u90 at batch 16, 1 thread; a tie at batch 1). Only
// with a quantized output, no residual, no mid rounding.
// Declined for depthwise convs: oneDNN 2.6's AVX2 depthwise int8 kernel
// (jit_uni_int8:avx2) adds a full-tensor binary post-op wrongly (outputs
// off by many steps, in every layout); a border map follows a compacted
// dense conv.
static int border_ok(const cd_conv_desc *d, const cd_conv_quant *q) {
    if (d->groups > 1 && d->groups == d->c) return 0;
    return d->border && !d->has_residual && !q->res_int && !(q->mid_scale > 0.0f) && q->out_scale > 0.0f &&
           (d->act.kind == CD_ACT_NONE || d->act.kind == CD_ACT_RELU || d->act.kind == CD_ACT_CLIP);
}

// What this op does not implement of the contract: an activation of two
// oneDNN steps (HARDSIGMOID) after a mid rounding, and an integer residual
// that is not well formed. It declines them, as kernels/op-desc.h allows.
static int quant_unsupported(const cd_conv_desc *d, const cd_conv_quant *q) {
    if (d->border && !border_ok(d, q)) return 1;
    if (q->res_int &&
        (!d->has_residual || !(q->res_scale > 0.0f) || !isfinite(q->res_scale) || !zp_ok(q->res_zp, q->res_signed)))
        return 1;
    if (!(q->mid_scale > 0.0f)) return 0;
    cd_dnnl_elt_step st[2];
    return !isfinite(q->mid_scale) || !zp_ok(q->mid_zp, q->mid_signed) || cd_dnnl_act_steps(d->act, st) > 1;
}

// The conv writes q itself when the activation commutes with the output
// scale (NONE, RELU, CLIP) and there is no float residual to add.
static int can_fuse_q(const cd_conv_desc *d, const cd_conv_quant *q) {
    if (!(q->out_scale > 0.0f) || d->has_residual || q->mid_scale > 0.0f) return 0;
    return d->act.kind == CD_ACT_NONE || d->act.kind == CD_ACT_RELU || d->act.kind == CD_ACT_CLIP;
}

// The zero point of the integers the conv writes (0 for float or s32 out).
// (border: the zero point is in the last linear step).
static int32_t dst_zp(const conv_i8_priv *cp) {
    return cp->mid ? cp->q.mid_zp : cp->fused_q && !cp->border ? cp->q.out_zp : 0;
}

// 1 when the conv writes NHWC, the map's layout (a kernel in another
// would read the map in the wrong order).
static int border_layout_ok(const dnnl_memory_desc_t *cdst) {
    dnnl_memory_desc_t nhwc;
    if (cd_dnnl_md_act_dt(&nhwc, (int)cdst->dims[0], (int)cdst->dims[1], (int)cdst->dims[2], (int)cdst->dims[3],
                          CD_LAYOUT_NHWC, cdst->data_type))
        return 0;
    return dnnl_memory_desc_equal(&nhwc, cdst);
}

// The bytes of a border conv's map (0 for the others): held like a weight.
static size_t map_bytes(const conv_i8_priv *cp) {
    return cp->map ? (size_t)cp->d.k * cp->d.oh * cp->d.ow * sizeof(float) : 0;
}

// The post-ops of a border conv (border_ok): the map's add, the activation,
// then y / out_scale + out_zp.
static int border_post_ops(const conv_i8_priv *cp, dnnl_primitive_attr_t attr) {
    const cd_conv_desc *d = &cp->d;
    dnnl_memory_desc_t map;
    dnnl_post_ops_t po = NULL;
    int rc = cd_dnnl_md_act_dt(&map, 1, d->k, d->oh, d->ow, CD_LAYOUT_NHWC, dnnl_f32);
    if (!rc) rc = CD_DNNL(dnnl_post_ops_create(&po));
    if (!rc) rc = CD_DNNL(dnnl_post_ops_append_binary(po, dnnl_binary_add, &map));
    // y / out_scale + out_zp, then the activation's bounds moved with it.
    const float s = 1.0f / cp->q.out_scale, z = (float)cp->q.out_zp;
    if (!rc) rc = CD_DNNL(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, s, z));
    if (!rc && d->act.kind == CD_ACT_RELU)
        rc = CD_DNNL(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, z, INFINITY));
    if (!rc && d->act.kind == CD_ACT_CLIP)
        rc = CD_DNNL(
            dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, d->act.alpha * s + z, d->act.beta * s + z));
    if (!rc) rc = CD_DNNL(dnnl_primitive_attr_set_post_ops(attr, po));
    if (po) dnnl_post_ops_destroy(po);
    return rc;
}

// The conv's attributes: user scratchpad, output scales (NULL: 1), zero points,
// and the post-ops (sum for the residual, then the activation, whose clip
// bounds are divided by out_scale when the conv writes q).
static int conv_attr(const conv_i8_priv *cp, const float *oscale, dnnl_primitive_attr_t *attr) {
    // The scratchpad and post-ops as every conv has them (cd_dnnl_attr);
    // with mid the residual and activation come after the rounding, and the
    // accumulator hook has neither.
    const int post = !cp->acc_only && !cp->mid && !cp->border;
    cd_activation act = post ? cp->d.act : (cd_activation){CD_ACT_NONE, 0.0f, 0.0f};
    if (cp->fused_q && act.kind == CD_ACT_CLIP) act.alpha /= cp->q.out_scale, act.beta /= cp->q.out_scale;
    int rc = cd_dnnl_attr(attr, post && cp->d.has_residual, act);
    if (rc) return rc;
    if (cp->border && (rc = border_post_ops(cp, *attr))) goto fail;
    if (oscale && (rc = CD_DNNL(dnnl_primitive_attr_set_output_scales(*attr, cp->d.k, 1 << 1, oscale)))) goto fail;
    int32_t zin = cp->q.in_zp + cp->shift, zout = dst_zp(cp);
    if (zin && (rc = CD_DNNL(dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_SRC, 1, 0, &zin)))) goto fail;
    if (zout && !cp->zp_in_bias &&
        (rc = CD_DNNL(dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_DST, 1, 0, &zout))))
        goto fail;
    return 0;
fail:
    dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
    return rc;
}

// The conv's element type out: s32 accumulators, q's type, or y in f32.
static dnnl_data_type_t conv_dst_dt(const conv_i8_priv *cp) {
    if (cp->mid) return int_dt(cp->q.mid_signed);
    return cp->acc_only ? dnnl_s32 : cp->fused_q ? int_dt(cp->q.out_signed) : dnnl_f32;
}

// oneDNN 2.6's AVX2 int8 1x1 kernel with a stride (its "reduce to unit
// stride" copy) races between threads when the batch is above 1: some
// items come out wrong, differently per run. Its direct kernel is right.
// Its direct AVX2 kernel (jit_uni_int8:avx2) with a stride and a batch
// above 1 came out wrong at 2 threads and right at 1 (3x3 stride 2x1, one
// input channel, batch 3: dnnl_conv_i8_random_shapes_every_layout_and_storage
// at seed 212): declined there too.
// Its AMX 1x1 kernel (jit_1x1:avx512_core_amx_int8) writes past the end of
// its dst: 16 whole pixels beyond a 1x1 64>44 conv's 16x3 output (found
// by ASan in dnnl_conv_i8_nhwc_integers_in_out_and_residual on an AMX
// Xeon; in a model it would overwrite the next tensor of the arena). The
// iterator's next kernel (brgconv) is right.
static int impl_broken(const cd_conv_desc *d, int batch, const char *impl) {
    const int strided = d->stride_h > 1 || d->stride_w > 1;
    if (strncmp(impl, "jit_1x1:avx512_core_amx", 23) == 0) return 1;
    if (strncmp(impl, "jit_uni_int8:", 13) == 0 && strided && batch > 1) return 1;
    return strncmp(impl, "jit_uni_int8_1x1:", 17) == 0 && strided;
}

// The conv primitive descriptor for one batch (src and dst layouts "any",
// oneDNN's choice). quiet: a query (supports), nothing logged. 0 or an error.
static int conv_pd(const conv_i8_priv *cp, int batch, const float *oscale, int quiet, dnnl_primitive_desc_t *pd) {
    const cd_conv_desc *d = &cp->d;
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    dnnl_dims_t sd = {batch, d->c, d->h, d->w}, dd = {batch, d->k, d->oh, d->ow}, bd = {d->k};
    int rc, with_bias = cp->bias != NULL && !cp->acc_only;
    if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_u8, dnnl_format_tag_any)))) return rc;
    if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&dmd, 4, dd, conv_dst_dt(cp), dnnl_format_tag_any)))) return rc;
    if ((rc = CD_DNNL(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x)))) return rc;
    if ((rc = cd_dnnl_conv_weights_md(&wmd, d, dnnl_s8, dnnl_format_tag_any))) return rc;
    dnnl_dims_t strides = {d->stride_h, d->stride_w};
    dnnl_dims_t dil = {d->dil_h - 1, d->dil_w - 1}; // oneDNN counts extra gaps
    dnnl_dims_t pl = {d->pad_t, d->pad_l}, pr = {d->pad_b, d->pad_r};
    dnnl_convolution_desc_t cd;
    if ((rc = CD_DNNL(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                                 &smd, &wmd, with_bias ? &bmd : NULL, &dmd, strides,
                                                                 dil, pl, pr))))
        return rc;
    dnnl_primitive_attr_t attr = NULL;
    if ((rc = conv_attr(cp, oscale, &attr))) return rc;
    // oneDNN's first choice, unless it is one we know computes wrongly here
    // or cannot make.
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_status_t st = dnnl_primitive_desc_iterator_create(&it, &cd, attr, cd_dnnl_engine(), NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return quiet ? CD_EUNSUPPORTED : CD_DNNL(st);
    rc = CD_EUNSUPPORTED;
    do {
        dnnl_primitive_desc_t cand = dnnl_primitive_desc_iterator_fetch(it);
        if (!cand) continue;
        const char *impl = NULL;
        dnnl_primitive_desc_query(cand, dnnl_query_impl_info_str, 0, &impl);
        if ((impl && impl_broken(d, batch, impl)) ||
            (cp->border && !border_layout_ok(dnnl_primitive_desc_query_md(cand, dnnl_query_dst_md, 0)))) {
            dnnl_primitive_desc_destroy(cand);
            continue;
        }
        // A kernel oneDNN offers may still fail to generate (2.6: jit_int8_1x1
        // with a sigmoid on s8 output, groups of 4 channels: runtime_error at
        // create); then the next one. oneDNN caches the primitive made here.
        dnnl_primitive_t probe = NULL;
        if (dnnl_primitive_create(&probe, cand) != dnnl_success) {
            dnnl_primitive_desc_destroy(cand);
            continue;
        }
        dnnl_primitive_destroy(probe);
        *pd = cand;
        rc = 0;
        break;
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    return rc;
}

// A reorder from smd to dmd with an output scale (1: none) and zero points
// (0: none) as primitive i of p. 0 or an error.
static int reorder_pd_sum(cd_dnnl_prim *p, int i, const dnnl_memory_desc_t *smd, const dnnl_memory_desc_t *dmd,
                          float scale, int32_t src_zp, int32_t dst_zp, int with_sum) {
    dnnl_primitive_attr_t attr = NULL;
    int rc = CD_DNNL(dnnl_primitive_attr_create(&attr));
    if (rc) return rc;
    if (!(rc = CD_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))) && scale != 1.0f)
        rc = CD_DNNL(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale));
    if (!rc && src_zp) rc = CD_DNNL(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &src_zp));
    if (!rc && dst_zp) rc = CD_DNNL(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &dst_zp));
    if (!rc && with_sum) { // dst += the reorder's result
        dnnl_post_ops_t po = NULL;
        rc = CD_DNNL(dnnl_post_ops_create(&po));
        if (!rc) rc = CD_DNNL(dnnl_post_ops_append_sum(po, 1.0f));
        if (!rc) rc = CD_DNNL(dnnl_primitive_attr_set_post_ops(attr, po));
        if (po) dnnl_post_ops_destroy(po);
    }
    if (!rc)
        rc = CD_DNNL(dnnl_reorder_primitive_desc_create(&p->pd[i], smd, cd_dnnl_engine(), dmd, cd_dnnl_engine(), attr));
    dnnl_primitive_attr_destroy(attr);
    if (!rc && i + 1 > p->nprim) p->nprim = i + 1;
    return rc;
}

static int reorder_pd(cd_dnnl_prim *p, int i, const dnnl_memory_desc_t *smd, const dnnl_memory_desc_t *dmd, float scale,
                      int32_t src_zp, int32_t dst_zp) {
    return reorder_pd_sum(p, i, smd, dmd, scale, src_zp, dst_zp, 0);
}

// The activation in place on md as primitive i of p (one oneDNN step). 0 or an error.
static int eltwise_pd(cd_dnnl_prim *p, int i, const dnnl_memory_desc_t *md, cd_activation act) {
    cd_dnnl_elt_step st[2];
    if (cd_dnnl_act_steps(act, st) != 1) return CD_EUNSUPPORTED;
    dnnl_eltwise_desc_t ed;
    int rc =
        CD_DNNL(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, st[0].alg, md, st[0].alpha, st[0].beta));
    if (!rc) rc = cd_dnnl_plain_build(p, i, &ed);
    if (!rc && i + 1 > p->nprim) p->nprim = i + 1;
    return rc;
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// A QDQ residual block whose skip and output are integers in the conv's own
// layout (the plan's NHWC storage): the rest of the block after the conv's
// mid integers m is one binary add of integers, y = act(mid_scale * m +
// res_scale * r - (mid_scale * mid_zp + res_scale * res_zp)), quantized by a
// last linear step (y / out_scale + out_zp, rounded half to even and
// saturated by the conversion to u8/s8): one pass over bytes instead of four
// over float32. The float order differs from the reference's by the
// rounding of the sum, which moves an output only where y / out_scale sits
// at a half step (the one step dnnl.h allows). As primitive i of p; 0, or
// CD_EUNSUPPORTED when it does not apply (the four-step path then).
static int mid_binary_pd(const conv_i8_priv *cp, cd_dnnl_prim *p, int i, const dnnl_memory_desc_t *cdst,
                         const dnnl_memory_desc_t *ures, const dnnl_memory_desc_t *udst) {
    const cd_conv_quant *q = &cp->q;
    const cd_activation act = cp->d.act;
    if (!cp->mid || cp->acc_only || !cp->d.has_residual || !q->res_int || !q->dst_int) return CD_EUNSUPPORTED;
    if (act.kind != CD_ACT_NONE && act.kind != CD_ACT_RELU && act.kind != CD_ACT_CLIP) return CD_EUNSUPPORTED;
    dnnl_memory_desc_t r = *ures, o = *udst;
    r.data_type = o.data_type = cdst->data_type;
    if (!dnnl_memory_desc_equal(&r, cdst) || !dnnl_memory_desc_equal(&o, cdst)) return CD_EUNSUPPORTED;
    dnnl_binary_desc_t bd;
    int rc = CD_DNNL(dnnl_binary_desc_init(&bd, dnnl_binary_add, cdst, ures, udst));
    if (rc) return rc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if ((rc = CD_DNNL(dnnl_primitive_attr_create(&attr)))) return rc;
    const float ms = q->mid_scale, rs = q->res_scale, shift = -(ms * (float)q->mid_zp + rs * (float)q->res_zp);
    rc = CD_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (!rc) rc = CD_DNNL(dnnl_primitive_attr_set_scales(attr, DNNL_ARG_SRC_0, 1, 0, &ms));
    if (!rc) rc = CD_DNNL(dnnl_primitive_attr_set_scales(attr, DNNL_ARG_SRC_1, 1, 0, &rs));
    if (!rc) rc = CD_DNNL(dnnl_post_ops_create(&po));
    // act(x + shift) = clip(x, lo - shift, hi - shift) + shift, so that one
    // linear step is left: oneDNN 2.6's jit binary runs a second linear
    // post-op with the first one's parameters (measured: (40 - 3) * 2 + 1
    // came out 34).
    float lo = act.kind == CD_ACT_CLIP ? act.alpha : 0.0f, hi = act.kind == CD_ACT_CLIP ? act.beta : INFINITY;
    if (!rc && act.kind != CD_ACT_NONE)
        rc = CD_DNNL(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, lo - shift, hi - shift));
    if (!rc)
        rc = CD_DNNL(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, 1.0f / q->out_scale,
                                                  shift / q->out_scale + (float)q->out_zp));
    if (!rc) rc = CD_DNNL(dnnl_primitive_attr_set_post_ops(attr, po));
    if (po) dnnl_post_ops_destroy(po);
    if (!rc && !cd_dnnl_pd_try(&bd, attr, &p->pd[i])) rc = CD_EUNSUPPORTED;
    dnnl_primitive_attr_destroy(attr);
    if (rc) return rc;
    const char *impl = NULL;
    dnnl_primitive_desc_query(p->pd[i], dnnl_query_impl_info_str, 0, &impl);
    if (!impl || cd_dnnl_impl_is_reference(impl)) { // never slower than the float steps
        dnnl_primitive_desc_destroy(p->pd[i]);
        p->pd[i] = NULL;
        return CD_EUNSUPPORTED;
    }
    if (i + 1 > p->nprim) p->nprim = i + 1;
    return 0;
}

// Places the temporaries of w (bytes per buffer, BUF_TPRE..) after the
// largest scratchpad p's primitives need; returns the total.
static size_t scratch_layout(const cd_dnnl_prim *p, const size_t bytes[BUF_COUNT], i8_wiring *w) {
    size_t prim_bytes = 0;
    for (int i = 0; i < p->nprim; i++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(p->pd[i], dnnl_query_scratchpad_md, 0);
        size_t sb = md ? dnnl_memory_desc_get_size(md) : 0;
        if (sb > prim_bytes) prim_bytes = sb;
    }
    size_t off = align64(prim_bytes);
    for (int b = BUF_TPRE; b < BUF_COUNT; b++) {
        w->off[b] = off;
        off += align64(bytes[b]);
    }
    return off;
}

// Builds one batch size: the conv (pd[0]), then the boundary reorders its
// chosen layouts need, and the wiring that runs them in order.
static int conv_i8_build(cd_dnnl_op *op, int nimg, cd_dnnl_prim *p) {
    conv_i8_priv *cp = op->priv;
    const cd_conv_desc *d = &cp->d;
    const cd_conv_quant *q = &cp->q;
    const int batch = cp->border ? 1 : nimg; // a border conv's steps run per image
    int rc;
    if ((rc = conv_pd(cp, batch, cp->acc_only ? NULL : cp->oscale, 0, &p->pd[0]))) return rc;
    p->nprim = 1;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(p->pd[0], dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *csrc = dnnl_primitive_desc_query_md(p->pd[0], dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *cdst = dnnl_primitive_desc_query_md(p->pd[0], dnnl_query_dst_md, 0);
    if (!wmd || !csrc || !cdst) return CD_EINTERNAL;
    if ((rc = cd_dnnl_weights_for(&cp->wts, wmd, &p->wset))) return rc;
    op->weight_bytes = cd_dnnl_weights_bytes(&cp->wts) + (cp->bias ? (size_t)d->k * sizeof(float) : 0) + map_bytes(cp);

    // The caller's tensors as oneDNN sees them.
    dnnl_memory_desc_t usrc, udst, ures, tq;
    dnnl_data_type_t out_dt = cp->acc_only ? dnnl_s32 : q->dst_int ? int_dt(q->out_signed) : dnnl_f32;
    if ((rc = cd_dnnl_md_act_dt(&usrc, batch, d->c, d->h, d->w, cp->src_l,
                                q->src_int ? int_dt(q->in_signed) : dnnl_f32)))
        return rc;
    if ((rc = cd_dnnl_md_act_dt(&udst, batch, d->k, d->oh, d->ow, cp->dst_l, out_dt))) return rc;
    if ((rc = cd_dnnl_md_act_dt(&ures, batch, d->k, d->oh, d->ow, cp->res_l,
                                q->res_int ? int_dt(q->res_signed) : dnnl_f32)))
        return rc;

    i8_wiring w = {0};
    int np = 1;
    // In: quantize the grid (x / in_scale + zp [+ 128]) or relayout (and shift) the integers.
    buf_id conv_in = BUF_SRC;
    int32_t in_zp = q->src_int ? cp->shift : q->in_zp + cp->shift;
    size_t pre_bytes = 0;
    if (!q->src_int || cp->shift || !dnnl_memory_desc_equal(&usrc, csrc)) {
        float scale = q->src_int ? 1.0f : 1.0f / q->in_scale;
        if (cp->src_l == CD_LAYOUT_NCHW && in_zp) {
            // oneDNN 2.6's reorder from plain nchw with a zero point drops it
            // for some shapes (H * W a multiple of 64, C > 16: its transposing
            // kernel): quantize in nchw first, then relayout the bytes.
            dnnl_memory_desc_t pre;
            if ((rc = cd_dnnl_md_act_dt(&pre, batch, d->c, d->h, d->w, CD_LAYOUT_NCHW, dnnl_u8))) return rc;
            pre_bytes = dnnl_memory_desc_get_size(&pre);
            if ((rc = reorder_pd(p, np, &usrc, &pre, scale, 0, in_zp))) return rc;
            w.step[w.nsteps++] = (i8_step){np++, STEP_REORDER, BUF_SRC, BUF_TPRE};
            if ((rc = reorder_pd(p, np, &pre, csrc, 1.0f, 0, 0))) return rc;
            w.step[w.nsteps++] = (i8_step){np++, STEP_REORDER, BUF_TPRE, BUF_TIN};
        } else {
            if ((rc = reorder_pd(p, np, &usrc, csrc, scale, 0, in_zp))) return rc;
            w.step[w.nsteps++] = (i8_step){np++, STEP_REORDER, BUF_SRC, BUF_TIN};
        }
        conv_in = BUF_TIN;
    }
    // Out: where the conv writes, and what follows it. ymd: y in f32 in the
    // conv's layout (TOUT), where the residual and the activation apply.
    dnnl_memory_desc_t ymd = *cdst;
    ymd.data_type = dnnl_f32;
    int direct =
        !cp->mid && dnnl_memory_desc_equal(&udst, cdst) && (cp->acc_only || cp->fused_q || !(q->out_scale > 0.0f));
    buf_id conv_out = direct ? BUF_DST : cp->mid ? BUF_TMID : BUF_TOUT;
    buf_id res_to = cp->mid ? BUF_TOUT : conv_out;
    const int bin = mid_binary_pd(cp, p, np, cdst, &ures, &udst) == 0;
    if (bin) {
        w.step[w.nsteps++] = (i8_step){0, STEP_CONV, conv_in, BUF_TMID};
        w.step[w.nsteps++] = (i8_step){np++, STEP_BINARY, BUF_TMID, BUF_DST};
    }
    if (d->has_residual && !cp->acc_only && !bin && !cp->border) {
        // The sum post-op adds what is in its dst: put the residual there
        // (skipped at run time when it already is), dequantized when it is
        // integers.
        float rs = q->res_int ? q->res_scale : 1.0f;
        if ((rc = reorder_pd(p, np, &ures, &ymd, rs, q->res_int ? q->res_zp : 0, 0))) return rc;
        w.step[w.nsteps++] = (i8_step){np++, STEP_REORDER, BUF_RES, res_to};
    }
    if (!bin) w.step[w.nsteps++] = (i8_step){0, STEP_CONV, conv_in, conv_out};
    if (cp->mid && !bin) {
        // y = act(y0 on the mid grid (+ residual)): a dequantizing reorder
        // that adds into TOUT, then the activation in place.
        if ((rc = reorder_pd_sum(p, np, cdst, &ymd, q->mid_scale, q->mid_zp, 0, d->has_residual))) return rc;
        w.step[w.nsteps++] = (i8_step){np++, STEP_REORDER, BUF_TMID, BUF_TOUT};
        if (d->act.kind != CD_ACT_NONE) {
            if ((rc = eltwise_pd(p, np, &ymd, d->act))) return rc;
            w.step[w.nsteps++] = (i8_step){np++, STEP_ELTWISE, BUF_TOUT, BUF_TOUT};
        }
    }
    size_t tq_bytes = 0;
    if (!direct && !cp->acc_only && q->out_scale > 0.0f && !cp->fused_q && !q->dst_int) {
        // y -> q in the conv's layout, then below q -> its grid value.
        tq = ymd;
        tq.data_type = int_dt(q->out_signed);
        tq_bytes = dnnl_memory_desc_get_size(&tq);
        if ((rc = reorder_pd(p, np, &ymd, &tq, 1.0f / q->out_scale, 0, q->out_zp))) return rc;
        w.step[w.nsteps++] = (i8_step){np++, STEP_REORDER, BUF_TOUT, BUF_TQ};
        if ((rc = reorder_pd(p, np, &tq, &udst, q->out_scale, q->out_zp, 0))) return rc;
        w.step[w.nsteps++] = (i8_step){np++, STEP_REORDER, BUF_TQ, BUF_DST};
    } else if (!direct && !bin) {
        if (cp->acc_only || (cp->fused_q && q->dst_int))
            rc = reorder_pd(p, np, cdst, &udst, 1.0f, 0, 0); // relayout only
        else if (!(q->out_scale > 0.0f))
            rc = reorder_pd(p, np, &ymd, &udst, 1.0f, 0, 0); // relayout only
        else if (cp->fused_q)
            rc = reorder_pd(p, np, cdst, &udst, q->out_scale, q->out_zp, 0); // q -> its grid value
        else
            rc = reorder_pd(p, np, &ymd, &udst, 1.0f / q->out_scale, 0, q->out_zp); // y -> q
        if (rc) return rc;
        w.step[w.nsteps++] = (i8_step){np++, STEP_REORDER, BUF_TOUT, BUF_DST};
    }
    // Scratchpad: [primitives' own | TPRE | TIN | TMID | TOUT | TQ].
    const size_t bytes[BUF_COUNT] = {
        [BUF_TPRE] = pre_bytes,
        [BUF_TIN] = conv_in == BUF_TIN ? dnnl_memory_desc_get_size(csrc) : 0,
        [BUF_TMID] = cp->mid ? dnnl_memory_desc_get_size(cdst) : 0,
        [BUF_TOUT] = (conv_out == BUF_TOUT || cp->mid) && !bin ? dnnl_memory_desc_get_size(&ymd) : 0,
        [BUF_TQ] = tq_bytes,
    };
    size_t off = scratch_layout(p, bytes, &w);
    p->scratch_bytes = off;
    w.src_img = dnnl_memory_desc_get_size(&usrc) / (size_t)batch;
    w.dst_img = dnnl_memory_desc_get_size(&udst) / (size_t)batch;
    cp->wire[nimg] = w;
    return 0;
}

// The steps of w over one image (border) or the whole batch.
static int run_steps(conv_i8_priv *cp, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, const i8_wiring *w, char *scratch,
                     const void *src, const void *res, void *dst) {
    const void *buf[BUF_COUNT] = {
        [BUF_SRC] = src,
        [BUF_DST] = dst,
        [BUF_RES] = res,
        [BUF_TPRE] = scratch + w->off[BUF_TPRE],
        [BUF_TIN] = scratch + w->off[BUF_TIN],
        [BUF_TMID] = scratch + w->off[BUF_TMID],
        [BUF_TOUT] = scratch + w->off[BUF_TOUT],
        [BUF_TQ] = scratch + w->off[BUF_TQ],
    };
    for (int i = 0; i < w->nsteps; i++) {
        const i8_step *s = &w->step[i];
        int rc;
        if (s->kind == STEP_REORDER && buf[s->from] == buf[s->to] && !cp->q.res_int)
            continue; // the residual already in dst
        if (s->kind == STEP_BINARY) {
            cd_dnnl_arg args[3] = {
                {DNNL_ARG_SRC_0, buf[s->from]}, {DNNL_ARG_SRC_1, buf[BUF_RES]}, {DNNL_ARG_DST, buf[s->to]}};
            rc = cd_dnnl_exec(ctx, p, s->prim, 3, args);
        } else if (s->kind == STEP_ELTWISE) {
            cd_dnnl_arg args[2] = {{DNNL_ARG_SRC, buf[s->from]}, {DNNL_ARG_DST, buf[s->to]}};
            rc = cd_dnnl_exec(ctx, p, s->prim, 2, args);
        } else if (s->kind == STEP_CONV) {
            cd_dnnl_arg args[5] = {
                {DNNL_ARG_SRC, buf[s->from]},
                {DNNL_ARG_WEIGHTS, cp->wts.data[p->wset]},
                {DNNL_ARG_DST, buf[s->to]},
            };
            int na = 3;
            if (cp->bias && !cp->acc_only) args[na++] = (cd_dnnl_arg){DNNL_ARG_BIAS, cp->bias};
            if (cp->border)
                args[na++] = (cd_dnnl_arg){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, buf[BUF_RES]};
            rc = cd_dnnl_exec(ctx, p, 0, na, args);
        } else {
            cd_dnnl_arg args[2] = {{DNNL_ARG_FROM, buf[s->from]}, {DNNL_ARG_TO, buf[s->to]}};
            rc = cd_dnnl_exec(ctx, p, s->prim, 2, args);
        }
        if (rc) return rc;
    }
    return 0;
}

static int conv_i8_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                        float *dst) {
    conv_i8_priv *cp = op->priv;
    const i8_wiring *w = &cp->wire[batch];
    char *scratch = cd_dnnl_ctx_scratch(ctx, p->scratch_bytes);
    if (!scratch) return CD_ENOMEM;
    const void *res = cp->border                           ? cp->map
                      : cp->d.has_residual && op->nsrc > 1 ? src[1]
                                                           : NULL; // the acc hook takes no residual
    if (!cp->border) return run_steps(cp, ctx, p, w, scratch, src[0], res, dst);
    for (int i = 0; i < batch; i++) {
        int rc = run_steps(cp, ctx, p, w, scratch, (const char *)src[0] + (size_t)i * w->src_img, res,
                           (char *)dst + (size_t)i * w->dst_img);
        if (rc) return rc;
    }
    return 0;
}

static void conv_i8_fini(cd_dnnl_op *op) {
    conv_i8_priv *cp = op->priv;
    if (!cp) return;
    cd_dnnl_weights_fini(&cp->wts);
    free(cp->bias);
    free(cp->oscale);
    free(cp->map);
    free(cp->wire);
}

// The priv of an op for d and q (no allocations): the paths it takes.
static conv_i8_priv priv_for(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst, cd_layout res,
                             int acc_only) {
    conv_i8_priv cp = {.d = *d, .q = *q, .src_l = src, .dst_l = dst, .res_l = res, .acc_only = acc_only};
    cp.q.w_scale = NULL;
    cp.border = !acc_only && border_ok(d, q);
    cp.d.border = NULL;                                        // read at create only (cp->map)
    cp.fused_q = !acc_only && (can_fuse_q(d, q) || cp.border); // a border conv writes q too
    cp.mid = !acc_only && q->mid_scale > 0.0f;
    cp.shift = q->in_signed ? 128 : 0; // s8 runs as u8: no 16-bit pair saturation, one kernel family
    // oneDNN 2.6 adds a dst zero point after the post-ops; with none, it is
    // the same added to the bias (in accumulator units: zp / oscale; the
    // float sum may move an output at a half step, the one step dnnl.h
    // allows). Without the zero point oneDNN runs faster kernels: with AMX
    // its brgconv_1x1 instead of the direct jit for the 1x1 convs that
    // write a residual block's mid grid or a projection shortcut (ResNet-50
    // int8 at 1 thread, per-layer minima of 6 runs: each Conv+QAdd 15-25%
    // faster, the whole model 10.96 -> 9.82 ms; the convs alone,
    // bench/dnnl-int8-dst-zp: 0.8-1.7x, most 1.0-1.2x).
    cp.zp_in_bias = (cp.mid || (cp.fused_q && d->act.kind == CD_ACT_NONE && !d->has_residual)) && dst_zp(&cp) != 0;
    return cp;
}

// oneDNN 2.6's reorder out of plain nchw may drop a source zero point (see
// conv_i8_build): an integer residual in NCHW with one is declined.
static int res_layout_ok(const cd_conv_quant *q, cd_layout res) {
    return cd_layout_valid(res) && !(q->res_int && q->res_zp && res == CD_LAYOUT_NCHW);
}

int cd_dnnl_conv_i8_supports_res(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst,
                                 cd_layout res) {
    if (!d || !q || cd_dnnl_conv_check(d, src, dst) || quant_check(q, d->k) || cd_dnnl_init()) return 0;
    if (quant_unsupported(d, q) || !res_layout_ok(q, res)) return 0;
    // Without VNNI create() takes only 7-bit weights, which supports() cannot
    // see, and real QDQ weights use the whole s8 range: say no up front.
    if (!cd_dnnl_has_vnni()) return 0;
    conv_i8_priv cp = priv_for(d, q, src, dst, res, 0);
    float *ones = malloc((size_t)d->k * sizeof(float)); // scale values do not change the choice
    if (!ones) return 0;
    for (int i = 0; i < d->k; i++) ones[i] = 1.0f;
    float b = 0.0f;
    cp.bias = &b; // any non-NULL: a bias never makes oneDNN refuse
    dnnl_primitive_desc_t pd = NULL;
    const int ok = conv_pd(&cp, 1, ones, 1, &pd) == 0;
    free(ones);
    return ok && cd_dnnl_pd_fast(pd);
}

// 1 when every weight fits what this CPU's int8 kernels multiply exactly.
static int weights_fit_isa(const int8_t *wq, size_t n) {
    if (cd_dnnl_has_vnni()) return 1;
    for (size_t i = 0; i < n; i++)
        if (wq[i] < -64 || wq[i] > 64) return 0;
    return 1;
}

int cd_dnnl_conv_i8_supports(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst) {
    return cd_dnnl_conv_i8_supports_res(d, q, src, dst, dst);
}

static int create(const cd_conv_desc *d, const cd_conv_quant *q, const cd_layout lay[3], int max_batch,
                  const int8_t *wq, const float *bias, int acc_only, cd_dnnl_op **out) {
    *out = NULL;
    if (!d || !q || !wq || cd_dnnl_conv_check(d, lay[0], lay[1]) || quant_check(q, d->k)) return CD_EPARAMS;
    if (!acc_only && !q->w_scale) return CD_EPARAMS;
    if (!acc_only && (quant_unsupported(d, q) || !res_layout_ok(q, lay[2]))) return CD_EUNSUPPORTED;
    size_t wn = (size_t)d->k * (d->c / d->groups) * d->r * d->s;
    if (!weights_fit_isa(wq, wn)) return CD_EUNSUPPORTED;
    static const cd_dnnl_kind k_kind = {conv_i8_build, conv_i8_exec, conv_i8_fini};
    const conv_i8_priv init = priv_for(d, q, lay[0], lay[1], lay[2], acc_only);
    cd_dnnl_op *op;
    int rc = cd_dnnl_op_new(&k_kind, max_batch, d->has_residual && !acc_only ? 2 : 1, &init, sizeof init, &op);
    if (rc) return rc;
    conv_i8_priv *cp = op->priv;
    cp->wire = calloc((size_t)max_batch + 1, sizeof *cp->wire);
    cp->oscale = cd_dnnl_alloc((size_t)d->k * sizeof(float));
    const int with_bias = bias || (cp->zp_in_bias && !acc_only);
    if (with_bias) cp->bias = cd_dnnl_alloc((size_t)d->k * sizeof(float));
    if (!cp->wire || !cp->oscale || (with_bias && !cp->bias)) {
        rc = CD_ENOMEM;
        goto fail;
    }
    for (int k = 0; k < d->k && !acc_only; k++) {
        float mult = q->in_scale * q->w_scale[k]; // the reference's per-channel multiplier
        if (!(mult > 0.0f) || !isfinite(1.0f / mult)) {
            rc = CD_EPARAMS; // bias / mult would not be finite
            goto fail;
        }
        cp->oscale[k] = cp->mid                      ? mult / q->mid_scale
                        : cp->fused_q && !cp->border ? mult / q->out_scale
                                                     : mult; // border: y / out_scale is its last post-op
        if (cp->bias)
            cp->bias[k] = (bias ? bias[k] / mult : 0.0f) + (cp->zp_in_bias ? (float)dst_zp(cp) / cp->oscale[k] : 0.0f);
    }
    if (cp->border) { // the map in NHWC, the int8 kernels' layout (border_layout_ok)
        const size_t plane = (size_t)d->oh * d->ow;
        if (!(cp->map = cd_dnnl_alloc(plane * (size_t)d->k * sizeof(float)))) {
            rc = CD_ENOMEM;
            goto fail;
        }
        for (int k = 0; k < d->k; k++)
            for (size_t i = 0; i < plane; i++) cp->map[i * (size_t)d->k + (size_t)k] = d->border[(size_t)k * plane + i];
    }
    if ((rc = cd_dnnl_conv_weights_md(&cp->wts.user_md, d, dnnl_s8, dnnl_oihw))) goto fail;
    // Batch 1 now: packs the weights while the caller's copy is alive.
    cp->wts.user = wq;
    rc = cd_dnnl_op_prepare(op, 1, NULL);
    cp->wts.user = NULL;
    if (rc) goto fail;
    *out = op;
    return 0;
fail:
    cd_dnnl_op_free(op);
    return rc;
}

int cd_dnnl_conv_i8_create(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst, int max_batch,
                           const int8_t *wq, const float *bias, cd_dnnl_op **out) {
    const cd_layout lay[3] = {src, dst, dst};
    return create(d, q, lay, max_batch, wq, bias, 0, out);
}

int cd_dnnl_conv_i8_create_res(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst,
                               cd_layout res, int max_batch, const int8_t *wq, const float *bias, cd_dnnl_op **out) {
    const cd_layout lay[3] = {src, dst, res};
    return create(d, q, lay, max_batch, wq, bias, 0, out);
}

int cd_dnnl_conv_i8_create_acc(const cd_conv_desc *d, const cd_conv_quant *q, cd_layout src, cd_layout dst,
                               int max_batch, const int8_t *wq, cd_dnnl_op **out) {
    const cd_layout lay[3] = {src, dst, dst};
    return create(d, q, lay, max_batch, wq, NULL, 1, out);
}
