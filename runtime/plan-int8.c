// Planning, the int8 choice: which convs of a quantized model run on the
// int8 kernels (kernels/op-desc.h cd_conv_quant). A conv can when its
// weights are symmetric int8 integers (cd_op conv.wscale, from the file's
// DequantizeLinear) and its input is a quantized activation per tensor (the
// output of a FakeQuant, through aliases); when its output's only reader is
// a FakeQuant per tensor, the conv quantizes its output itself and that
// FakeQuant becomes an alias. Activations are float32 grid values between
// layers here (src_int = dst_int = 0: the kernels quantize their input
// exactly); after the layers, plan-int8-storage.c stores those between
// int8 convs as integers, in NHWC where oneDNN runs them.
// cd_runtime_options.int8 decides: off, on (wherever the backend runs it),
// or auto: both candidates are timed at batch 1 on the backend and the int8
// one is taken when it is faster (the int8 one as it runs between int8
// neighbours: NHWC integers in and out where the backend takes them) (the f32 candidate is the planner's
// float32 choice, dense or sparse, plus the FakeQuant pass after it that the
// int8 conv does itself).

#include "runtime/plan-internal.h"

#include "core/errors.h"
#include "runtime/options.h"
#include "onnx.pb-c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Signed or not from the quantized type's range; -1 when it is not u8/s8.
int cd_plan_i8_type_signed(const cd_quant *q) {
    if (q->d.qmin == 0.0f && q->d.qmax == 255.0f) return 0;
    if (q->d.qmin == -128.0f && q->d.qmax == 127.0f) return 1;
    return -1;
}

// The quantization of value v's numbers: its own, or through aliases (the
// DequantizeLinear after a FakeQuant, reshapes) that of their source. prod:
// value -> the live op writing it (cd_value.producer_op is the lowering's,
// stale once compaction has inserted ops).
static const cd_quant *value_quant(const cd_graph *g, const int *prod, int v) {
    for (int depth = 0; depth < 64 && v >= 0; depth++) {
        const cd_value *x = &g->values[v];
        if (x->kind != CD_VAL_ACT) return NULL;
        if (x->q) return x->q;
        int o = prod[v];
        if (o < 0 || g->ops[o].kind != CD_OP_ALIAS) return NULL;
        v = g->ops[o].in[0];
    }
    return NULL;
}

typedef struct cd_wq_entry {
    const float *w; // the op's float weights
    int8_t *wq;
} cd_wq_entry;

const int8_t *cd_plan_int8_weights(pctx *p, const cd_op *op) {
    for (int i = 0; i < p->nwq; i++)
        if (p->wq[i].w == op->u.conv.w) return p->wq[i].wq;
    if (p->nwq == p->wq_cap) {
        int cap = p->wq_cap ? 2 * p->wq_cap : 64;
        cd_wq_entry *e = realloc(p->wq, sizeof *e * (size_t)cap);
        if (!e) return NULL;
        p->wq = e;
        p->wq_cap = cap;
    }
    const cd_conv_desc *d = &op->u.conv.d;
    size_t per_k = (size_t)(d->c / d->groups) * d->r * d->s, n = per_k * d->k;
    int8_t *wq = malloc(n ? n : 1);
    if (!wq) return NULL;
    for (size_t i = 0; i < n; i++) {
        float s = op->u.conv.wscale[i / per_k], q = rintf(op->u.conv.w[i] / s);
        q = q > 127.0f ? 127.0f : q;
        wq[i] = (int8_t)(q >= -128.0f ? q : -128.0f); // NaN too, as the clamp of fmaxf/fminf did
    }
    p->wq[p->nwq++] = (cd_wq_entry){op->u.conv.w, wq};
    return wq;
}

void cd_plan_int8_free(pctx *p) {
    for (int i = 0; i < p->nwq; i++) free(p->wq[i].wq);
    free(p->wq);
    p->wq = NULL;
    p->nwq = p->wq_cap = 0;
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

// The nonzero weights of conv op (what the timing caches' keys count).
size_t cd_plan_i8_weights_nnz(const cd_op *op) {
    const cd_conv_desc *d = &op->u.conv.d;
    const size_t nw = (size_t)d->k * (size_t)(d->c / d->groups) * d->r * d->s;
    size_t nnz = 0;
    for (size_t i = 0; i < nw; i++) nnz += op->u.conv.w[i] != 0.0f;
    return nnz;
}

// The FakeQuant conv o's float32 epilogue can do (backend.h fq_scale): its
// output's one live reader, per tensor and static, the output not a model
// output; -1 none.
static int float_conv_fq(const cd_graph *g, const char *live, const int *reader, int o) {
    const cd_op *op = &g->ops[o];
    if (op->kind != CD_OP_CONV || g->values[op->out].is_output) return -1;
    const int r = reader[op->out];
    if (r < 0 || !live[r] || g->ops[r].kind != CD_OP_FAKEQUANT) return -1;
    const cd_quant *f = &g->ops[r].u.fq;
    return f->d.channels == 1 && !f->d.dynamic && f->scale[0] > 0.0f ? r : -1;
}

// The FakeQuant after a MaxPool that does nothing: the pool's input holds
// the values of a static per-tensor quantization q (through aliases), its
// output's one reader quantizes with q again. The max of values on q's
// grid is on it, and quantizing a grid value gives it back exactly (its
// quotient is within an ulp of its integer), so that FakeQuant is an alias
// (fq_fused). onnxruntime's quantize_static writes this pattern around
// every MaxPool (they share their input's parameters).
static void elide_pool_fakequants(pctx *p, const char *live, const int *reader, const int *prod) {
    const cd_graph *g = p->g;
    for (int o = 0; o < g->nops; o++) {
        const cd_op *op = &g->ops[o];
        if (!live[o] || op->kind != CD_OP_POOL || op->u.pool.kind != CD_POOL_MAX) continue;
        const int f = reader[op->out];
        if (f < 0 || !live[f] || g->ops[f].kind != CD_OP_FAKEQUANT || g->values[op->out].is_output) continue;
        const cd_quant *a = value_quant(g, prod, op->in[0]), *b = &g->ops[f].u.fq;
        if (a && a->d.channels == 1 && b->d.channels == 1 && !a->d.dynamic && !b->d.dynamic &&
            a->scale[0] == b->scale[0] && a->zero_point[0] == b->zero_point[0] && a->d.qmin == b->d.qmin &&
            a->d.qmax == b->d.qmax)
            p->fq_fused[f] = 1;
    }
}

// Fills *q for conv o when it can run int8; *fq gets the FakeQuant op it
// absorbs (-1 none). 0 when it cannot.
static int int8_params(const cd_graph *g, const char *live, const int *reader, const int *prod, int o, cd_conv_quant *q,
                       int *fq) {
    const cd_op *op = &g->ops[o];
    *fq = -1;
    if (op->kind != CD_OP_CONV || !op->u.conv.wscale) return 0;
    const cd_quant *xq = value_quant(g, prod, op->in[0]);
    if (!xq || xq->d.channels != 1 || cd_plan_i8_type_signed(xq) < 0 || !weights_are_integers(op)) return 0;
    memset(q, 0, sizeof *q);
    q->in_scale = xq->scale[0];
    q->in_zp = (int)xq->zero_point[0];
    q->in_signed = cd_plan_i8_type_signed(xq);
    q->w_scale = op->u.conv.wscale;
    const cd_value *ov = &g->values[op->out];
    int r = reader[op->out];
    if (r >= 0 && live[r] && !ov->is_output && g->ops[r].kind == CD_OP_FAKEQUANT && g->ops[r].u.fq.d.channels == 1 &&
        !g->ops[r].u.fq.d.dynamic && cd_plan_i8_type_signed(&g->ops[r].u.fq) >= 0) {
        const cd_quant *yq = &g->ops[r].u.fq;
        q->out_scale = yq->scale[0];
        q->out_zp = (int)yq->zero_point[0];
        q->out_signed = cd_plan_i8_type_signed(yq);
        *fq = r;
    }
    return 1;
}

// The conv's descriptor for timing, in NCHW (what the sparse kernels and
// the int8 reference take); the dense f32 candidate in the blocked layout
// when the backend runs it so.
void cd_plan_i8_timing_desc(pctx *p, const cd_op *op, cd_bop_desc *d) {
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

// The ms of FakeQuant op fq on the conv's output in layout l (what the
// float32 choice runs after the conv and the int8 conv does itself).
int cd_plan_i8_time_fakequant(pctx *p, int fq, cd_layout l, double *ms) {
    const cd_op *op = &p->g->ops[fq];
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_FAKEQUANT;
    d.max_batch = 1;
    d.nsrc = 1;
    d.src[0] = d.dst = cd_plan_value_desc(&p->g->values[op->out], l, p->g->values[op->out].rank);
    d.u.fq = op->u.fq.d;
    d.scale = op->u.fq.scale;
    d.zero_point = op->u.fq.zero_point;
    if (!cd_backend_supports_op(p->m->be, &d)) d.src[0].layout = d.dst.layout = CD_LAYOUT_NCHW;
    return cd_planner_time_op(p->m->be, &d, 1, 3, ms);
}

// 1 when value v is written by a conv (through aliases and FakeQuants): a
// candidate for integer storage between int8 layers (plan-int8-storage.c).
int cd_plan_i8_value_from_conv(const cd_graph *g, const int *prod, int v) {
    for (int depth = 0; depth < 64 && v >= 0; depth++) {
        int w = prod[v];
        if (w < 0) return 0;
        if (g->ops[w].kind == CD_OP_CONV) return 1;
        if (g->ops[w].kind != CD_OP_ALIAS && g->ops[w].kind != CD_OP_FAKEQUANT) return 0;
        v = g->ops[w].in[0];
    }
    return 0;
}

// The int8 candidate as it runs between int8 neighbours, where the backend
// takes it: integers in (when its input comes from a conv) and out (when it
// quantizes its output), in NHWC for a dense conv (no boundary reorders)
// and in NCHW for a sparse one (its kernels' own layout, as
// plan-int8-storage.c stores it: timed with float in and out, a sparse int8
// conv paid a quantization of its input and 4-byte outputs it does not pay
// in the plan). A residual block's skip (skip non-NULL: its quantization,
// per tensor, where a conv writes it) is read as integers too. *qn holds
// its quantization. 1 when *di was changed.
int cd_plan_i8_nhwc_candidate(pctx *p, int int_in, const cd_quant *skip, const cd_conv_quant *q, cd_conv_quant *qn,
                              cd_bop_desc *di) {
    cd_bop_desc dn = *di;
    const cd_layout lay = di->sparse ? CD_LAYOUT_NCHW : CD_LAYOUT_NHWC;
    *qn = *q;
    qn->src_int = int_in;
    qn->dst_int = q->out_scale > 0.0f;
    if (int_in) dn.src[0].layout = lay, dn.src[0].int8 = 1;
    if (qn->dst_int) dn.dst.layout = lay, dn.dst.int8 = 1;
    if (skip && skip->d.channels == 1 && cd_plan_i8_type_signed(skip) >= 0) {
        qn->res_int = 1;
        qn->res_scale = skip->scale[0];
        qn->res_zp = (int)skip->zero_point[0];
        qn->res_signed = cd_plan_i8_type_signed(skip);
        dn.src[1].layout = lay, dn.src[1].int8 = 1;
    }
    dn.quant = qn;
    if ((!int_in && !qn->dst_int) || !cd_backend_supports_op(p->m->be, &dn)) return 0;
    *di = dn;
    return 1;
}

// Conv op's descriptor for timing on the sparse kernels (format fmt, NCHW)
// or, sparse 0, the dense ones in the plan's blocked layout where the
// backend runs it so.
static void conv_timing_desc(pctx *p, const cd_op *op, int sparse, int fmt, cd_bop_desc *d) {
    cd_plan_i8_timing_desc(p, op, d);
    d->sparse = sparse;
    d->sparse_format = sparse ? fmt : 0;
    if (!sparse && p->blk != CD_LAYOUT_NCHW) {
        cd_bop_desc b = *d;
        for (int i = 0; i < b.nsrc; i++) b.src[i].layout = p->blk;
        b.dst.layout = p->blk;
        if (b.u.conv.c < cd_layout_block(p->blk)) b.src[0].layout = CD_LAYOUT_NCHW;
        if (cd_backend_supports_op(p->m->be, &b)) *d = b;
    }
}

// Times the float32 choice (with the FakeQuant fq after it, -1 none) and
// the int8 candidate of conv o (batch 1), on the sparse int8 kernels when
// i8_sparse, else the dense ones (also where the float32 choice is sparse:
// with AMX the dense int8 kernels beat the sparse ones over 90% sparse
// weights). 0 with both times, or a negative code (then no int8).
static int time_both(pctx *p, const int *prod, int o, int fq, const cd_conv_quant *q, const int8_t *wq, int i8_sparse,
                     double *f32, double *i8) {
    const cd_op *op = &p->g->ops[o];
    const cd_plan_choice *c = &p->ch[o];
    cd_bop_desc df, di;
    conv_timing_desc(p, op, c->sparse, c->format, &df);
    if (i8_sparse == df.sparse)
        di = df;
    else
        conv_timing_desc(p, op, i8_sparse, c->format, &di);
    di.quant = q;
    di.wq = wq;
    if (!cd_backend_supports_op(p->m->be, &di)) {
        cd_plan_i8_timing_desc(p, op, &di); // the int8 kernels' own layout: NCHW
        di.sparse = i8_sparse;
        di.sparse_format = i8_sparse ? c->format : 0;
        di.quant = q;
        di.wq = wq;
        if (!cd_backend_supports_op(p->m->be, &di)) return CD_EUNSUPPORTED;
    }
    cd_conv_quant qn;
    int nhwc =
        cd_plan_i8_nhwc_candidate(p, cd_plan_i8_value_from_conv(p->g, prod, p->g->ops[o].in[0]), NULL, q, &qn, &di);
    // The cache: what both candidates are, as timed here.
    char key[768];
    cd_planner_op_key(&df, cd_plan_i8_weights_nnz(op), 1, key, sizeof key);
    size_t l = strlen(key);
    snprintf(key + l, sizeof key - l, "|i8 sp%d,%d f%d lay%d,%d,%d int%d,%d in%d out%d,%d mid%d fq%d", df.sparse,
             di.sparse, df.sparse ? df.sparse_format : 0, (int)df.src[0].layout, (int)di.src[0].layout,
             (int)di.dst.layout, nhwc && qn.src_int, nhwc && qn.dst_int, q->in_signed, q->out_scale > 0.0f,
             q->out_signed, q->mid_scale > 0.0f, fq >= 0);
    if (cd_planner_cache_get(&p->m->popts, "int8-v5.txt", key, f32, i8)) return 0;
    double fq_ms = 0;
    const cd_bop_desc *both[2] = {&df, &di};
    double ms[2];
    int rc = cd_planner_time_ops(p->m->be, 2, both, 1, 5, ms);
    if (!rc && fq >= 0 && q->out_scale > 0.0f) rc = cd_plan_i8_time_fakequant(p, fq, df.dst.layout, &fq_ms);
    *f32 = ms[0] + fq_ms;
    *i8 = ms[1];
    if (!rc) cd_planner_cache_put(&p->m->popts, "int8-v5.txt", key, *f32, *i8);
    return rc;
}

// The one live reader of value v through aliases of the same shape (the
// DequantizeLinear after a FakeQuant): the op reading it, or -1.
static int reader_through_aliases(const cd_graph *g, const char *live, const int *reader, int v, int *via) {
    *via = -1;
    for (int depth = 0; depth < 8; depth++) {
        int r = reader[v];
        if (r < 0 || !live[r] || g->values[v].is_output) return -1;
        if (g->ops[r].kind != CD_OP_ALIAS) return r;
        const cd_value *a = &g->values[g->ops[r].in[0]], *b = &g->values[g->ops[r].out];
        if (a->numel != b->numel || a->rank != b->rank) return -1;
        *via = r;
        v = g->ops[r].out;
    }
    return -1;
}

// The ops of a QDQ residual block after int8 conv c (its FakeQuant f1):
// c -> f1 -> [alias] -> Add(., skip) [+ act] -> FakeQuant f2, every value
// read once, the Add's activation one the epilogue applies.
typedef struct {
    int add, f2, alias, skip;
    cd_activation act;
} residual_block;

// 1 when the ops after conv c and f1 form a residual block (*rb filled).
static int match_residual(const pctx *p, const char *live, const int *reader, int c, int f1, residual_block *rb) {
    const cd_graph *g = p->g;
    const cd_op *cv = &g->ops[c];
    if (cv->nin != 1 || cv->u.conv.d.has_residual || cv->u.conv.d.act.kind != CD_ACT_NONE) return 0;
    int alias, a = reader_through_aliases(g, live, reader, g->ops[f1].out, &alias);
    if (a < 0 || g->ops[a].kind != CD_OP_BINARY || g->ops[a].u.binary.kind != CD_BINARY_ADD || g->ops[a].nin != 2)
        return 0;
    const cd_op *add = &g->ops[a];
    int mine = add->in[0] == (alias >= 0 ? g->ops[alias].out : g->ops[f1].out) ? 0 : 1;
    int skip = add->in[1 - mine];
    const cd_value *sv = &g->values[skip], *ov = &g->values[add->out];
    if (sv->kind != CD_VAL_ACT || sv->numel != ov->numel || add->in[0] == add->in[1]) return 0;
    cd_activation act = add->u.binary.act;
    if (act.kind != CD_ACT_NONE && act.kind != CD_ACT_RELU && act.kind != CD_ACT_CLIP) return 0;
    int f2 = reader[add->out];
    if (f2 < 0 || !live[f2] || ov->is_output || g->ops[f2].kind != CD_OP_FAKEQUANT || g->ops[f2].u.fq.d.channels != 1 ||
        g->ops[f2].u.fq.d.dynamic || cd_plan_i8_type_signed(&g->ops[f2].u.fq) < 0)
        return 0;
    *rb = (residual_block){a, f2, alias, skip, act};
    return 1;
}

// The ms of Add op `add` and FakeQuant f2 after it in float32, NCHW (the
// sparse kernels' layout; a dense float32 choice in the blocked one costs
// about the same per element): the tail the float32 choice of a conv runs
// after it and its int8 form fuses. The Add's second operand: constant
// value map (a border map) when >= 0, else an activation of its shape.
int cd_plan_i8_time_add_fq(pctx *p, int add, int map, int f2, double *ms) {
    const cd_op *a = &p->g->ops[add];
    const cd_value *ov = &p->g->values[a->out];
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_BINARY;
    d.max_batch = 1;
    d.nsrc = 2;
    d.u.binary = a->u.binary;
    d.src[0] = d.src[1] = d.dst = cd_plan_value_desc(ov, CD_LAYOUT_NCHW, ov->rank);
    if (map >= 0) d.src[1] = cd_plan_value_desc(&p->g->values[map], CD_LAYOUT_NCHW, 4);
    double add_ms = 0, fq_ms = 0;
    int rc = cd_backend_supports_op(p->m->be, &d) ? cd_planner_time_op(p->m->be, &d, 1, 3, &add_ms) : 0;
    if (!rc) rc = cd_plan_i8_time_fakequant(p, f2, CD_LAYOUT_NCHW, &fq_ms);
    *ms = add_ms + fq_ms;
    return rc;
}

// The int8 conv c that does residual block rb (after its FakeQuant f1,
// quantization q0) as the backend would run it: *q its quantization, *d its
// descriptor (NCHW, weights and wq as cd_plan_i8_timing_desc leaves them). 0 when the
// backend runs it neither sparse (when `sparse`, in the choice's format) nor
// dense.
static int residual_desc(pctx *p, int c, int f1, const residual_block *rb, const cd_conv_quant *q0, int sparse,
                         cd_conv_quant *q, cd_bop_desc *d) {
    const cd_graph *g = p->g;
    const cd_value *ov = &g->values[g->ops[rb->add].out];
    const cd_quant *mq = &g->ops[f1].u.fq, *yq = &g->ops[rb->f2].u.fq;
    *q = *q0;
    q->mid_scale = mq->scale[0];
    q->mid_zp = (int)mq->zero_point[0];
    q->mid_signed = cd_plan_i8_type_signed(mq);
    q->out_scale = yq->scale[0];
    q->out_zp = (int)yq->zero_point[0];
    q->out_signed = cd_plan_i8_type_signed(yq);
    cd_plan_i8_timing_desc(p, &g->ops[c], d);
    d->u.conv.has_residual = 1;
    d->u.conv.act = rb->act;
    d->nsrc = 2;
    d->src[1] = cd_plan_value_desc(ov, CD_LAYOUT_NCHW, 4);
    d->sparse = sparse;
    d->sparse_format = sparse ? p->ch[c].format : 0;
    d->quant = q;
    if (cd_backend_supports_op(p->m->be, d)) return 1;
    d->sparse = d->sparse_format = 0;
    return cd_backend_supports_op(p->m->be, d);
}

// The ms of int8 conv c doing residual block rb itself (Conv+QAdd, its
// epilogue adds the skip and quantizes twice): what the int8 candidate costs
// where it fuses the block, against the float32 conv plus the block's Add
// and FakeQuant passes (*tail, cd_plan_i8_time_add_fq). Timed alone, the plain
// int8 conv looked as fast as float32 at AVX2, where in the model its
// Conv+QAdd ran up to 4x the plain conv (ResNet-50 b90: 1x1 64>256 @56 1.78
// ms against 0.41).
// It is timed as it runs between int8 neighbours (cd_plan_i8_nhwc_candidate):
// its integers out, and in and the skip as integers where a conv writes
// them, in NHWC dense and NCHW sparse. Timed with float tensors, the dense
// layer paid oneDNN's boundary reorders it never runs in the plan (1x1
// 64>256 @56 on AMX: 1.59 ms against 0.3), and the planner kept three of
// dense ResNet-50's blocks float32, which made the model 1.8x slower.
static int time_residual_i8(pctx *p, const int *prod, int c, int f1, const residual_block *rb, const cd_conv_quant *q0,
                            const int8_t *wq, int sparse, double *ms, double *tail) {
    cd_conv_quant q;
    cd_bop_desc d;
    if (!residual_desc(p, c, f1, rb, q0, sparse, &q, &d)) return CD_EUNSUPPORTED;
    d.wq = wq;
    const cd_graph *g = p->g;
    const cd_quant *sq = cd_plan_i8_value_from_conv(g, prod, rb->skip) ? value_quant(g, prod, rb->skip) : NULL;
    cd_conv_quant qn;
    if (cd_plan_i8_nhwc_candidate(p, cd_plan_i8_value_from_conv(g, prod, g->ops[c].in[0]), sq, &q, &qn, &d)) {
        q = qn;
        d.quant = &q;
    }
    char key[768];
    const cd_op *op = &p->g->ops[c];
    cd_planner_op_key(&d, cd_plan_i8_weights_nnz(op), 1, key, sizeof key);
    size_t l = strlen(key);
    snprintf(key + l, sizeof key - l, "|qadd sp%d f%d in%d mid%d out%d act%d int%d,%d,%d lay%d", d.sparse,
             d.sparse ? d.sparse_format : 0, q.in_signed, q.mid_signed, q.out_signed, (int)rb->act.kind, q.src_int,
             q.res_int, q.dst_int, (int)d.dst.layout);
    // Both figures cached, so that a second load makes the same choice.
    if (cd_planner_cache_get(&p->m->popts, "int8-qadd-v4.txt", key, ms, tail)) return 0;
    int rc = cd_planner_time_op(p->m->be, &d, 1, 5, ms);
    if (!rc) rc = cd_plan_i8_time_add_fq(p, rb->add, -1, rb->f2, tail);
    if (!rc) cd_planner_cache_put(&p->m->popts, "int8-qadd-v4.txt", key, *ms, *tail > 0 ? *tail : 1e-9);
    return rc;
}

// The float32 choice of conv o (with the FakeQuant fq after it) and its
// int8 candidate on the sparse (sparse 1) or dense int8 kernels: *f32,
// *i8, and *tail the Add and FakeQuant of the residual block rb or border
// block bb (NULL none) that the float32 choice runs after it and the int8
// conv fuses (then the fused layer is what *i8 times). 0 or a negative code.
static int time_i8(pctx *p, const int *prod, int o, int fq, const cd_conv_quant *q, const int8_t *wq, int sparse,
                   const residual_block *rb, const cd_plan_i8_border *bb, double *f32, double *i8, double *tail) {
    *tail = 0;
    int rc = time_both(p, prod, o, fq, q, wq, sparse, f32, i8);
    if (!rc && rb) rc = time_residual_i8(p, prod, o, fq, rb, q, wq, sparse, i8, tail);
    if (!rc && bb) rc = cd_plan_i8_time_border(p, prod, o, bb, q, wq, sparse, i8, tail);
    return rc;
}

// A QDQ residual block done by int8 conv c (match_residual): the conv then
// adds the skip after rounding to f1's grid (cd_conv_quant mid_scale) and
// quantizes with f2's parameters: the conv's op moves into the Add's slot
// (the skip is ready there), the rest stops being live. Only where the
// backend runs it. 1 when fused, 0 when not.
static int fuse_residual(pctx *p, char *live, const int *reader, int c, int f1) {
    cd_graph *g = p->g;
    cd_op *cv = &g->ops[c];
    residual_block rb;
    if (!match_residual(p, live, reader, c, f1, &rb)) return 0;
    const int a = rb.add, f2 = rb.f2, alias = rb.alias, skip = rb.skip;
    const cd_activation act = rb.act;
    cd_conv_quant q;
    cd_bop_desc d;
    // Would the backend run it (on the kernels the choice took)?
    if (!residual_desc(p, c, f1, &rb, &p->in8[c], p->ch[c].sparse && !p->ch[c].i8_dense, &q, &d)) return 0;
    // The conv moves into the Add's slot: the structs swap, the Add (now in
    // c's slot) and the quantization in between stop being live.
    cd_op tmp = g->ops[a];
    g->ops[a] = *cv;
    g->ops[c] = tmp;
    cd_op *fused = &g->ops[a];
    fused->nin = 2;
    fused->in[1] = skip;
    fused->out = tmp.out;
    fused->u.conv.d.has_residual = 1;
    fused->u.conv.d.act = act;
    snprintf(fused->label, sizeof fused->label, "Conv+QAdd%s",
             act.kind == CD_ACT_RELU ? "+Relu"
             : act.kind              ? "+Clip"
                                     : "");
    live[c] = live[f1] = 0;
    if (alias >= 0) live[alias] = 0;
    p->ch[a] = p->ch[c];
    memset(&p->ch[c], 0, sizeof p->ch[c]);
    q.w_scale = fused->u.conv.wscale;
    p->in8[a] = q;
    memset(&p->in8[c], 0, sizeof p->in8[c]);
    p->fq_fused[f1] = 0;
    p->fq_fused[f2] = 1;
    return 1;
}

// The int8 layers over sparse weights run on the sparse int8 kernels, or
// all of them on the dense ones (with AMX the faster over 90% sparse
// weights: ResNet-50 u90 9.6 ms against 16.5 on an Intel Xeon). All or
// none: a dense int8 layer (NHWC) between sparse ones (NCHW) pays
// relayouts and float32 boundaries; chosen per layer, ResNet-50 b90 ran 3x
// slower (37 reorders). Here the layers' timed sums decide; they miss what
// each choice costs between the layers (ResNet-50 u95: sparse by the sums,
// 14 against ~9 ms dense whole), so where the choice was open the model is
// planned the other way too and both are timed whole
// (runtime/model-int8-pick.c), which plans it again with the pick forced.
// 1 when it moved them.
static int dense_over_sparse(pctx *p) {
    double sparse = 0, dense = 0;
    for (int o = 0; o < p->g->nops; o++) {
        const cd_plan_choice *c = &p->ch[o];
        if (!c->int8 || !c->sparse) continue;
        if (!(c->i8d_ms >= 0)) return 0; // one not timed dense: keep them sparse
        sparse += c->i8_ms;
        dense += c->i8d_ms;
    }
    if (!(sparse > 0)) return 0; // none int8 over sparse weights: no choice
    const int pick = p->m->popts.i8_pick ? (int)p->m->popts.i8_pick : cd_runtime_opts()->int8_pick;
    const int go = pick == CD_I8_PICK_DENSE ? 1 : pick == CD_I8_PICK_SPARSE ? 0 : dense < sparse;
    cd_model_summary *s = &p->m->summary;
    s->int8_pick = go ? 1 : 2;
    s->int8_pick_by = pick >= CD_I8_PICK_DENSE ? "forced" : "layers";
    s->int8_pick_dense_ms = dense;
    s->int8_pick_sparse_ms = sparse;
    s->int8_pick_batch = 1;
    s->int8_pick_dense_batch_ms = s->int8_pick_sparse_batch_ms = -1;
    if (!go) return 0;
    for (int o = 0; o < p->g->nops; o++) {
        cd_plan_choice *c = &p->ch[o];
        if (!c->int8 || !c->sparse) continue;
        c->i8_dense = 1;
        c->i8_ms = c->i8d_ms;
    }
    return 1;
}

// Takes conv o int8 (with the quantization q and the FakeQuant fq it
// absorbs), fusing the residual block or border block after it where the
// backend runs it.
static void take_int8(pctx *p, char *live, const int *reader, int *prod, int o, const cd_conv_quant *q, int fq,
                      int dense) {
    cd_plan_choice *c = &p->ch[o];
    c->int8 = 1;
    c->i8_dense = dense;
    p->in8[o] = *q;
    if (fq >= 0 && q->out_scale > 0.0f) {
        p->fq_fused[fq] = 1;
        fuse_residual(p, live, reader, o, fq);
    } else if (fq < 0) {
        cd_plan_i8_fuse_border(p, live, reader, prod, o);
    }
}

int cd_plan_choose_int8(pctx *p, char *live) {
    const cd_graph *g = p->g;
    int mode = cd_runtime_opts()->int8; // 0 auto, 1 off, 2 on, 3 on the dense int8 kernels
    // A plan forced sparse (CONVD_PLAN=sparse) keeps the sparse int8 kernels.
    const int try_dense = cd_planner_mode(&p->m->popts) != CD_PLAN_SPARSE;
    int *reader = malloc(((size_t)g->nvalues + 1) * sizeof(int)),
        *prod = malloc(((size_t)g->nvalues + 1) * sizeof(int));
    p->in8 = calloc((size_t)g->nops + 1, sizeof *p->in8);
    p->fq_fused = calloc((size_t)g->nops + 1, 1);
    p->fq_f32 = malloc(((size_t)g->nops + 1) * sizeof(int));
    if (!reader || !prod || !p->in8 || !p->fq_fused || !p->fq_f32) {
        free(reader);
        free(prod);
        return CD_ENOMEM;
    }
    for (int v = 0; v < g->nvalues; v++) reader[v] = prod[v] = -1;
    for (int o = 0; o < g->nops; o++)
        if (live[o]) prod[g->ops[o].out] = o;
    for (int o = 0; o < g->nops; o++)
        for (int i = 0; live[o] && i < g->ops[o].nin; i++) {
            int v = g->ops[o].in[i];
            reader[v] = reader[v] == -1 ? o : -2;
        }
    for (int o = 0; o < g->nops; o++) p->fq_f32[o] = live[o] ? float_conv_fq(g, live, reader, o) : -1;
    elide_pool_fakequants(p, live, reader, prod);
    int rc = 0;
    for (int o = 0; o < g->nops && mode != 1 && !rc; o++) {
        cd_conv_quant q;
        int fq;
        cd_plan_choice *c = &p->ch[o];
        if (c->int8) continue; // a conv moved here by fuse_residual
        c->i8_ms = c->f32_ms = c->i8d_ms = -1;
        if (!live[o] || !int8_params(g, live, reader, prod, o, &q, &fq)) continue;
        int take = mode >= 2, dense = mode == 3 && c->sparse;
        if (mode == 0) {
            const int8_t *wq = cd_plan_int8_weights(p, &g->ops[o]);
            if (!wq) {
                rc = CD_ENOMEM;
                break;
            }
            double f32 = 0, i8 = 0, tail = 0, f32d, i8d, taild;
            residual_block rb;
            // The float32 choice also runs the Add and FakeQuant of a
            // residual block after it; the int8 conv fuses them. Where it
            // would, the fused layer is what is timed (with the block's
            // tail, both cached).
            const int fusable = fq >= 0 && q.out_scale > 0.0f && match_residual(p, live, reader, o, fq, &rb);
            cd_plan_i8_border bb;
            const int bordered = fq < 0 && cd_plan_i8_match_border(p, live, reader, o, &bb);
            if (!time_i8(p, prod, o, fq, &q, wq, c->sparse, fusable ? &rb : NULL, bordered ? &bb : NULL, &f32, &i8,
                         &tail)) {
                // Over sparse weights, the dense int8 kernels too (NHWC):
                // timed here, chosen for all such layers or none below.
                if (c->sparse && try_dense &&
                    !time_i8(p, prod, o, fq, &q, wq, 0, fusable ? &rb : NULL, bordered ? &bb : NULL, &f32d, &i8d,
                             &taild))
                    c->i8d_ms = i8d;
                c->f32_ms = f32 + tail;
                c->i8_ms = i8;
                take = i8 < f32 + tail;
            }
        }
        if (take) take_int8(p, live, reader, prod, o, &q, fq, dense);
    }
    // On the dense int8 kernels, the convs over sparse weights that stayed
    // float32 (their sparse float32 kernels beat the sparse int8 ones) go
    // int8 too where the dense int8 kernels beat float32: else each stays
    // a sparse float32 layer among dense int8 ones, with relayouts and
    // FakeQuant passes around it (ResNet-50 u90 and b90 at 2 threads: 5-6
    // such convs, 73-78 layers against 61).
    if (!rc && mode == 0 && dense_over_sparse(p))
        for (int o = 0; o < g->nops; o++) {
            cd_conv_quant q;
            int fq;
            cd_plan_choice *c = &p->ch[o];
            // Taken over sparse weights before they moved to the dense int8
            // kernels, which add a border map after them themselves.
            if (c->int8 && c->i8_dense && live[o] && !(p->in8[o].out_scale > 0.0f))
                cd_plan_i8_fuse_border(p, live, reader, prod, o);
            if (c->int8 || !c->sparse || !(c->i8d_ms >= 0) || !(c->f32_ms >= 0) || !(c->i8d_ms < c->f32_ms)) continue;
            if (!live[o] || !int8_params(g, live, reader, prod, o, &q, &fq)) continue;
            c->i8_ms = c->i8d_ms;
            take_int8(p, live, reader, prod, o, &q, fq, 1);
        }
    free(reader);
    free(prod);
    return rc;
}

// ---- the planned int8 layers, for the integer storage (plan-int8-storage.c) --------

int cd_plan_int8_record(pctx *p, int li, const cd_op *op, const cd_bop_desc *d) {
    if (p->ni8l == p->i8l_cap) {
        int cap = p->i8l_cap ? 2 * p->i8l_cap : 32;
        cd_i8layer *n = realloc(p->i8l, (size_t)cap * sizeof *n);
        if (!n) return CD_ENOMEM;
        p->i8l = n;
        p->i8l_cap = cap;
    }
    cd_i8layer *r = &p->i8l[p->ni8l++];
    r->layer = li;
    r->op = (int)(op - p->g->ops);
    r->d = *d;
    if (d->quant)
        r->q = *d->quant;
    else
        memset(&r->q, 0, sizeof r->q); // a max pool: no quantization of its own
    r->d.quant = NULL;                 // points at r->q when prepared again (convs)
    r->d.wq = NULL;
    return 0;
}

// ---- a float32 conv that does its output's FakeQuant (backend.h fq_scale) ----------

int cd_plan_fq_f32_desc(pctx *p, const cd_op *op, cd_bop_desc *d) {
    const int f = p->fq_f32 ? p->fq_f32[op - p->g->ops] : -1;
    if (f < 0 || d->sparse || d->quant || cd_runtime_opts()->fq_fuse) return -1;
    const cd_quant *q = &p->g->ops[f].u.fq;
    d->fq_scale = q->scale[0];
    d->fq_zp = q->zero_point[0];
    d->fq_qmin = q->d.qmin;
    d->fq_qmax = q->d.qmax;
    return f;
}

void cd_plan_fq_f32_done(pctx *p, const cd_op *op, int f, int fused, cd_bop_desc *d) {
    if (!fused) {
        d->fq_scale = d->fq_zp = d->fq_qmin = d->fq_qmax = 0.0f;
        return;
    }
    p->fq_fused[f] = 1; // planned as an alias of the conv's output
    cd_op *w = &p->g->ops[op - p->g->ops];
    if (strlen(w->label) + 4 < sizeof w->label) strcat(w->label, "+FQ");
}
