// Planning, int8: a compacted conv's border map (runtime/compact.c) done by
// the int8 conv itself (plan-int8.c takes the convs int8 and calls these).

#include "runtime/plan-internal.h"

#include "runtime/options.h"

#include <stdio.h>
#include <string.h>

// The block: after conv c (float out, no activation), Add(c's output, map)
// [+ act] -> FakeQuant f2 per tensor, the map the constant [1, K, OH, OW]
// that compaction left for the channels it took out. The int8 conv adds the
// map itself (cd_conv_desc.border), applies the activation and quantizes
// with f2: one layer instead of a float conv output, the Add and f2
// (ResNet-50 u90 at batch 16: 9.9 + 3.1 + 2.4 ms against 3.5 for the conv
// alone).

// 1 when the ops after conv c form a border block (*bb filled).
int cd_plan_i8_match_border(const pctx *p, const char *live, const int *reader, int c, cd_plan_i8_border *bb) {
    const cd_graph *g = p->g;
    const cd_op *cv = &g->ops[c];
    if (cv->kind != CD_OP_CONV || cv->nin != 1 || cv->u.conv.d.has_residual || cv->u.conv.d.border ||
        cv->u.conv.d.act.kind != CD_ACT_NONE || g->values[cv->out].is_output)
        return 0;
    const int a = reader[cv->out];
    if (a < 0 || !live[a]) return 0;
    const cd_op *add = &g->ops[a];
    if (add->kind != CD_OP_BINARY || add->u.binary.kind != CD_BINARY_ADD || add->nin != 2 || add->in[0] != cv->out)
        return 0;
    const cd_value *mv = &g->values[add->in[1]], *cvv = &g->values[cv->out], *ov = &g->values[add->out];
    if (mv->kind != CD_VAL_CONST_F32 || !mv->f || mv->rank != 4 || cvv->rank != 4 || mv->shape[0] != 1 ||
        memcmp(mv->shape + 1, cvv->shape + 1, 3 * sizeof mv->shape[0]))
        return 0;
    const cd_activation act = add->u.binary.act;
    if (act.kind != CD_ACT_NONE && act.kind != CD_ACT_RELU && act.kind != CD_ACT_CLIP) return 0;
    const int f2 = reader[add->out];
    if (f2 < 0 || !live[f2] || ov->is_output || g->ops[f2].kind != CD_OP_FAKEQUANT || g->ops[f2].u.fq.d.channels != 1 ||
        g->ops[f2].u.fq.d.dynamic || cd_plan_i8_type_signed(&g->ops[f2].u.fq) < 0)
        return 0;
    *bb = (cd_plan_i8_border){a, f2, add->in[1], act};
    return 1;
}

// The int8 conv c doing border block bb (input quantization q0) as the
// backend would run it, on the sparse kernels or the dense ones: *q, *d (NCHW,
// as cd_plan_i8_timing_desc leaves it). 0 when the backend does not run it.
static int border_desc(pctx *p, int c, const cd_plan_i8_border *bb, const cd_conv_quant *q0, int sparse,
                       cd_conv_quant *q, cd_bop_desc *d) {
    const cd_graph *g = p->g;
    const cd_quant *yq = &g->ops[bb->f2].u.fq;
    *q = *q0;
    q->out_scale = yq->scale[0];
    q->out_zp = (int)yq->zero_point[0];
    q->out_signed = cd_plan_i8_type_signed(yq);
    cd_plan_i8_timing_desc(p, &g->ops[c], d);
    d->u.conv.border = g->values[bb->map].f;
    d->u.conv.act = bb->act;
    d->sparse = sparse;
    d->sparse_format = sparse ? p->ch[c].format : 0;
    d->quant = q;
    return cd_backend_supports_op(p->m->be, d);
}

// The ms of int8 conv c doing border block bb itself, as it runs between
// int8 neighbours (cd_plan_i8_nhwc_candidate), and *tail what the float32 choice
// runs after it. Where the backend does not fuse it, *ms and *tail are left
// alone (the plain int8 conv against the float32 one, both followed by the
// Add and the FakeQuant). 0 or a negative code.
int cd_plan_i8_time_border(pctx *p, const int *prod, int c, const cd_plan_i8_border *bb, const cd_conv_quant *q0,
                           const int8_t *wq, int sparse, double *ms, double *tail) {
    cd_conv_quant q, qn;
    cd_bop_desc d;
    if (!border_desc(p, c, bb, q0, sparse, &q, &d)) return 0;
    d.wq = wq;
    const cd_graph *g = p->g;
    if (cd_plan_i8_nhwc_candidate(p, cd_plan_i8_value_from_conv(g, prod, g->ops[c].in[0]), NULL, &q, &qn, &d)) {
        q = qn;
        d.quant = &q;
    }
    char key[768];
    cd_planner_op_key(&d, cd_plan_i8_weights_nnz(&g->ops[c]), 1, key, sizeof key);
    size_t l = strlen(key);
    snprintf(key + l, sizeof key - l, "|border sp%d in%d out%d act%d int%d,%d lay%d", d.sparse, q.in_signed,
             q.out_signed, (int)bb->act.kind, q.src_int, q.dst_int, (int)d.dst.layout);
    if (cd_planner_cache_get(&p->m->popts, "int8-border-v1.txt", key, ms, tail)) return 0;
    int rc = cd_planner_time_op(p->m->be, &d, 1, 5, ms);
    if (!rc) rc = cd_plan_i8_time_add_fq(p, bb->add, bb->map, bb->f2, tail);
    if (!rc) cd_planner_cache_put(&p->m->popts, "int8-border-v1.txt", key, *ms, *tail > 0 ? *tail : 1e-9);
    return rc;
}

// Border block bb done by int8 conv c (cd_plan_i8_match_border, where the backend runs
// it on the kernels chosen): the conv writes the Add's output, quantized;
// the Add stops being live and f2 becomes an alias. prod follows. 1 when
// fused, 0 when not.
int cd_plan_i8_fuse_border(pctx *p, char *live, const int *reader, int *prod, int c) {
    cd_graph *g = p->g;
    cd_plan_i8_border bb;
    cd_conv_quant q;
    cd_bop_desc d;
    if (!cd_plan_i8_match_border(p, live, reader, c, &bb) ||
        !border_desc(p, c, &bb, &p->in8[c], p->ch[c].sparse && !p->ch[c].i8_dense, &q, &d))
        return 0;
    cd_op *cv = &g->ops[c];
    cv->u.conv.d.border = g->values[bb.map].f;
    cv->u.conv.d.act = bb.act;
    cv->out = g->ops[bb.add].out;
    prod[cv->out] = c;
    live[bb.add] = 0;
    snprintf(cv->label, sizeof cv->label, "Conv+BorderMap%s", bb.act.kind != CD_ACT_NONE ? "+Act" : "");
    q.w_scale = cv->u.conv.wscale;
    p->in8[c] = q;
    p->fq_fused[bb.f2] = 1;
    return 1;
}
