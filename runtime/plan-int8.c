// Planning, the int8 choice: which convs of a quantized model run on the
// int8 kernels (kernels/op-desc.h cd_conv_quant). A conv can when its
// weights are symmetric int8 integers (cd_op conv.wscale, from the file's
// DequantizeLinear) and its input is a quantized activation per tensor (the
// output of a FakeQuant, through aliases); when its output's only reader is
// a FakeQuant per tensor, the conv quantizes its output itself and that
// FakeQuant becomes an alias. Activations stay float32 grid values between
// layers (src_int = dst_int = 0): the kernels quantize their input exactly.
// cd_runtime_options.int8 decides: off, on (wherever the backend runs it),
// or auto: both candidates are timed at batch 1 on the backend and the int8
// one is taken when it is faster (the f32 candidate is the planner's
// float32 choice: dense or sparse).

#include "runtime/plan-internal.h"

#include "core/errors.h"
#include "core/options.h"
#include "onnx.pb-c.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Signed or not from the quantized type's range; -1 when it is not u8/s8.
static int type_signed(const cd_quant *q) {
    if (q->d.qmin == 0.0f && q->d.qmax == 255.0f) return 0;
    if (q->d.qmin == -128.0f && q->d.qmax == 127.0f) return 1;
    return -1;
}

// The quantization of value v's numbers: its own, or through aliases (the
// DequantizeLinear after a FakeQuant, reshapes) that of their source.
static const cd_quant *value_quant(const cd_graph *g, int v) {
    for (int depth = 0; depth < 64 && v >= 0; depth++) {
        const cd_value *x = &g->values[v];
        if (x->kind != CD_VAL_ACT) return NULL;
        if (x->q) return x->q;
        int o = x->producer_op;
        if (o < 0 || g->ops[o].kind != CD_OP_ALIAS) return NULL;
        v = g->ops[o].in[0];
    }
    return NULL;
}

int8_t *cd_plan_int8_weights(const cd_op *op) {
    const cd_conv_desc *d = &op->u.conv.d;
    size_t per_k = (size_t)(d->c / d->groups) * d->r * d->s, n = per_k * d->k;
    int8_t *wq = malloc(n ? n : 1);
    if (!wq) return NULL;
    for (size_t i = 0; i < n; i++) {
        float s = op->u.conv.wscale[i / per_k], q = rintf(op->u.conv.w[i] / s);
        wq[i] = (int8_t)fminf(fmaxf(q, -128.0f), 127.0f);
    }
    return wq;
}

// 1 when every weight of op is its integer times its channel's scale (to
// float rounding): the scales survived folding and compaction intact.
static int weights_are_integers(const cd_op *op) {
    const cd_conv_desc *d = &op->u.conv.d;
    size_t per_k = (size_t)(d->c / d->groups) * d->r * d->s, n = per_k * d->k;
    for (size_t i = 0; i < n; i++) {
        float s = op->u.conv.wscale[i / per_k], w = op->u.conv.w[i], q = rintf(w / s);
        if (!(s > 0.0f || s < 0.0f) || fabsf(q) > 128.0f || fabsf(q * s - w) > 1e-5f * fabsf(w) + 1e-30f) return 0;
    }
    return 1;
}

// Fills *q for conv o when it can run int8; *fq gets the FakeQuant op it
// absorbs (-1 none). 0 when it cannot.
static int int8_params(const cd_graph *g, const char *live, const int *reader, int o, cd_conv_quant *q, int *fq) {
    const cd_op *op = &g->ops[o];
    *fq = -1;
    if (op->kind != CD_OP_CONV || !op->u.conv.wscale) return 0;
    const cd_quant *xq = value_quant(g, op->in[0]);
    if (!xq || xq->d.channels != 1 || type_signed(xq) < 0 || !weights_are_integers(op)) return 0;
    memset(q, 0, sizeof *q);
    q->in_scale = xq->scale[0];
    q->in_zp = (int)xq->zero_point[0];
    q->in_signed = type_signed(xq);
    q->w_scale = op->u.conv.wscale;
    const cd_value *ov = &g->values[op->out];
    int r = reader[op->out];
    if (r >= 0 && live[r] && !ov->is_output && g->ops[r].kind == CD_OP_FAKEQUANT && g->ops[r].u.fq.d.channels == 1 &&
        type_signed(&g->ops[r].u.fq) >= 0) {
        const cd_quant *yq = &g->ops[r].u.fq;
        q->out_scale = yq->scale[0];
        q->out_zp = (int)yq->zero_point[0];
        q->out_signed = type_signed(yq);
        *fq = r;
    }
    return 1;
}

// The conv's descriptor for timing, in NCHW (what the sparse kernels and
// the int8 reference take); the dense f32 candidate in the blocked layout
// when the backend runs it so.
static void timing_desc(pctx *p, const cd_op *op, cd_bop_desc *d) {
    const cd_graph *g = p->g;
    memset(d, 0, sizeof *d);
    d->op = CD_BOP_CONV2D;
    d->u.conv = op->u.conv.d;
    d->u.conv.n = 1;
    d->w = op->u.conv.w;
    d->bias = op->u.conv.bias;
    d->max_batch = 1;
    d->nsrc = op->nin;
    for (int i = 0; i < op->nin; i++) d->src[i] = cd_plan_value_desc(&g->values[op->in[i]], CD_LAYOUT_NCHW, 4);
    d->dst = cd_plan_value_desc(&g->values[op->out], CD_LAYOUT_NCHW, 4);
}

// Times the float32 choice and the int8 candidate of conv o (batch 1).
// 0 with both times, or a negative code (then no int8).
static int time_both(pctx *p, int o, const cd_conv_quant *q, const int8_t *wq, double *f32, double *i8) {
    const cd_op *op = &p->g->ops[o];
    const cd_plan_choice *c = &p->ch[o];
    cd_bop_desc df, di;
    timing_desc(p, op, &df);
    df.sparse = c->sparse;
    df.sparse_format = c->format;
    if (!c->sparse && p->blk != CD_LAYOUT_NCHW) {
        cd_bop_desc b = df;
        for (int i = 0; i < b.nsrc; i++) b.src[i].layout = p->blk;
        b.dst.layout = p->blk;
        if (b.u.conv.c < cd_layout_block(p->blk)) b.src[0].layout = CD_LAYOUT_NCHW;
        if (cd_backend_supports_op(p->m->be, &b)) df = b;
    }
    di = df;
    di.quant = q;
    di.wq = wq;
    if (!cd_backend_supports_op(p->m->be, &di)) {
        timing_desc(p, op, &di); // the int8 kernels' own layout: NCHW
        di.sparse = c->sparse;
        di.sparse_format = c->format;
        di.quant = q;
        di.wq = wq;
        if (!cd_backend_supports_op(p->m->be, &di)) return CD_EUNSUPPORTED;
    }
    int rc = cd_planner_time_op(p->m->be, &df, 1, 3, f32);
    if (!rc) rc = cd_planner_time_op(p->m->be, &di, 1, 3, i8);
    return rc;
}

int cd_plan_choose_int8(pctx *p, const char *live) {
    const cd_graph *g = p->g;
    int mode = cd_runtime_opts()->int8; // 0 auto, 1 off, 2 on
    int *reader = malloc(((size_t)g->nvalues + 1) * sizeof(int));
    p->in8 = calloc((size_t)g->nops + 1, sizeof *p->in8);
    p->fq_fused = calloc((size_t)g->nops + 1, 1);
    if (!reader || !p->in8 || !p->fq_fused) {
        free(reader);
        return CD_ENOMEM;
    }
    for (int v = 0; v < g->nvalues; v++) reader[v] = -1;
    for (int o = 0; o < g->nops; o++)
        for (int i = 0; live[o] && i < g->ops[o].nin; i++) {
            int v = g->ops[o].in[i];
            reader[v] = reader[v] == -1 ? o : -2;
        }
    int rc = 0;
    for (int o = 0; o < g->nops && mode != 1 && !rc; o++) {
        cd_conv_quant q;
        int fq;
        cd_plan_choice *c = &p->ch[o];
        c->i8_ms = c->f32_ms = -1;
        if (!live[o] || !int8_params(g, live, reader, o, &q, &fq)) continue;
        int take = mode == 2;
        if (mode == 0) {
            int8_t *wq = cd_plan_int8_weights(&g->ops[o]);
            if (!wq) {
                rc = CD_ENOMEM;
                break;
            }
            double f32 = 0, i8 = 0;
            if (!time_both(p, o, &q, wq, &f32, &i8)) {
                c->f32_ms = f32;
                c->i8_ms = i8;
                take = i8 < f32;
            }
            free(wq);
        }
        if (!take) continue;
        c->int8 = 1;
        p->in8[o] = q;
        if (fq >= 0 && q.out_scale > 0.0f) p->fq_fused[fq] = 1;
    }
    free(reader);
    return rc;
}
