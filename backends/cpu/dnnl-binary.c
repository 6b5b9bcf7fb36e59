// Element-wise add / mul with numpy broadcasting of the second operand and a
// fused activation, on oneDNN's binary primitive.

#include "backends/cpu/dnnl-impl.h"

#include <stdlib.h>

typedef struct {
    cd_dnnl_binary_kind kind;
    cd_dnnl_tdesc a, b; // a: full shape (= dst); b: broadcast operand
    cd_activation act;  // fused after the operation
    int split_act;      // run act as separate in-place eltwise steps (below)
} binary_priv;

// oneDNN 2.6's jit binary with an eltwise post-op, run in place on a blocked
// tensor whose channels are not a multiple of the block, leaves dst unwritten
// (measured; out of place and without post-op it is right). Such ops run the
// activation as separate in-place eltwise primitives instead.
static int needs_split_act(const binary_priv *bp) {
    return bp->act.kind != CD_ACT_NONE && bp->a.layout != CD_LAYOUT_NCHW && bp->a.c % cd_layout_block(bp->a.layout);
}

static int bcast_ok(int full, int x) { return x == full || x == 1; }

static int binary_check(const binary_priv *bp) {
    const cd_dnnl_tdesc *a = &bp->a, *b = &bp->b;
    if (bp->kind < CD_DNNL_ADD || bp->kind > CD_DNNL_MAX) return CD_EPARAMS;
    if (a->c < 1 || a->h < 1 || a->w < 1 || b->c < 1 || b->h < 1 || b->w < 1) return CD_EPARAMS;
    if (!bcast_ok(a->c, b->c) || !bcast_ok(a->h, b->h) || !bcast_ok(a->w, b->w)) return CD_EPARAMS;
    if (!cd_layout_valid(a->layout) || !cd_layout_valid(b->layout)) return CD_EPARAMS;
    // oneDNN 2.6's jit binary on a blocked layout other than the one its ISA
    // runs natively (nChw8c on AVX-512) writes past dst (measured: a
    // 7x8x3x7 aBcd8b add + relu overwrote the next heap block).
    if ((a->layout != CD_LAYOUT_NCHW && a->layout != cd_dnnl_blocked_layout()) ||
        (b->layout != CD_LAYOUT_NCHW && b->layout != cd_dnnl_blocked_layout()))
        return CD_EUNSUPPORTED;
    cd_dnnl_elt_step st[2];
    if (cd_dnnl_act_steps(bp->act, st) < 0) return CD_EPARAMS;
    return 0;
}

static int binary_desc(const binary_priv *bp, int batch, dnnl_binary_desc_t *desc, dnnl_primitive_attr_t *attr) {
    dnnl_memory_desc_t amd, bmd, dmd;
    int rc;
    if ((rc = cd_dnnl_md_act(&amd, batch, bp->a.c, bp->a.h, bp->a.w, bp->a.layout))) return rc;
    if ((rc = cd_dnnl_md_act(&bmd, bp->b.batch_bcast ? 1 : batch, bp->b.c, bp->b.h, bp->b.w, bp->b.layout))) return rc;
    dmd = amd;
    static const dnnl_alg_kind_t alg[] = {dnnl_binary_add, dnnl_binary_mul, dnnl_binary_min, dnnl_binary_max};
    if ((rc = CD_DNNL(dnnl_binary_desc_init(desc, alg[bp->kind], &amd, &bmd, &dmd)))) return rc;
    return cd_dnnl_attr(attr, 0, bp->split_act ? (cd_activation){CD_ACT_NONE, 0, 0} : bp->act);
}

int cd_dnnl_binary_supports(cd_dnnl_binary_kind kind, cd_dnnl_tdesc a, cd_dnnl_tdesc b, cd_activation act) {
    binary_priv bp = {kind, a, b, act, 0};
    if (binary_check(&bp) || cd_dnnl_init()) return 0;
    bp.split_act = needs_split_act(&bp);
    dnnl_binary_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    if (binary_desc(&bp, 1, &desc, &attr)) return 0;
    int ok = cd_dnnl_pd_try(&desc, attr, NULL);
    dnnl_primitive_attr_destroy(attr);
    return ok;
}

static int binary_build(cd_dnnl_op *op, int batch, cd_dnnl_prim *p) {
    binary_priv *bp = op->priv;
    dnnl_binary_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    int rc = binary_desc(bp, batch, &desc, &attr);
    if (rc) return rc;
    rc = CD_DNNL(dnnl_primitive_desc_create(&p->pd[0], &desc, attr, cd_dnnl_engine(), NULL));
    if (rc) goto out;
    p->nprim = 1;
    if (bp->split_act) {
        cd_dnnl_elt_step st[2];
        int n = cd_dnnl_act_steps(bp->act, st);
        dnnl_memory_desc_t md;
        if ((rc = cd_dnnl_md_act(&md, batch, bp->a.c, bp->a.h, bp->a.w, bp->a.layout))) goto out;
        for (int i = 0; i < n; i++) {
            dnnl_eltwise_desc_t ed;
            if ((rc = CD_DNNL(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, st[i].alg, &md, st[i].alpha,
                                                             st[i].beta))))
                goto out;
            if ((rc = CD_DNNL(dnnl_primitive_desc_create(&p->pd[1 + i], &ed, attr, cd_dnnl_engine(), NULL)))) goto out;
            p->nprim = 2 + i;
        }
    }
out:
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

static int binary_exec(cd_dnnl_op *op, cd_dnnl_ctx *ctx, const cd_dnnl_prim *p, int batch, const float *const *src,
                       float *dst) {
    cd_dnnl_arg args[3] = {{DNNL_ARG_SRC_0, src[0]}, {DNNL_ARG_SRC_1, src[1]}, {DNNL_ARG_DST, dst}};
    int rc = cd_dnnl_exec(ctx, p, 0, 3, args);
    for (int i = 1; i < p->nprim && !rc; i++) {
        cd_dnnl_arg in_place[2] = {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}};
        rc = cd_dnnl_exec(ctx, p, i, 2, in_place);
    }
    return rc;
}

int cd_dnnl_binary_create(cd_dnnl_binary_kind kind, cd_dnnl_tdesc a, cd_dnnl_tdesc b, cd_activation act, int max_batch,
                          cd_dnnl_op **out) {
    *out = NULL;
    binary_priv bp = {kind, a, b, act, 0};
    int rc = binary_check(&bp);
    bp.split_act = needs_split_act(&bp);
    if (rc) return rc;
    static const cd_dnnl_kind k_kind = {binary_build, binary_exec, NULL};
    cd_dnnl_op *op;
    if ((rc = cd_dnnl_op_new(&k_kind, max_batch, 2, &bp, sizeof bp, &op))) return rc;
    return cd_dnnl_op_ready(op, out);
}
