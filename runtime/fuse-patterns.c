// Fusion of the multi-op patterns exporters write for one operation, after
// the lowering pass (the ops are in g->ops, their values in g->values):
//
//   LayerNorm before opset 17 (torch's layer_norm):
//     m = ReduceMean(x, trailing axes); s = x - m; v = ReduceMean(s ^ 2)
//     y = s / Sqrt(v + eps)   [* gamma]   [+ beta]
//   GELU with Erf (torch's gelu before opset 20):
//     y = x * 0.5 * (1 + Erf(x / sqrt(2)))   (the three ways the muls group)
//   SiLU (torch's silu, EfficientNet):  y = x * Sigmoid(x)
//   HardSwish below opset 14 (MobileNetV3):  y = x * HardSigmoid(x, 1/6, 1/2)
//
// The last op of a match becomes the fused op (LAYERNORM, ACT GELU, SILU or
// HARDSWISH) on x, or an alias of x when x's producer applies the activation,
// and writes the same value; the ops before it are left unread, and the
// planner drops them. A match needs every inner value to be read by the
// pattern alone (not a graph output), no fused activation on the inner ops,
// and constants of the expected sizes and values.

#include "runtime/graph.h"

#include "core/errors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cd_graph *g;
    int *nread; // per value: op inputs reading it (+1 for a graph output)
} fctx;

static cd_op *producer(fctx *f, int v) {
    int p = v >= 0 ? f->g->values[v].producer_op : -1;
    return p >= 0 ? &f->g->ops[p] : NULL;
}

// The op reading v, when exactly one does and v is not a graph output.
static cd_op *only_reader(fctx *f, int v) {
    if (f->nread[v] != 1) return NULL;
    for (int k = 0; k < f->g->nops; k++)
        for (int i = 0; i < f->g->ops[k].nin; i++)
            if (f->g->ops[k].in[i] == v) return &f->g->ops[k];
    return NULL;
}

static int is_scalar(fctx *f, int v, float *val) {
    const cd_value *x = &f->g->values[v];
    if (x->kind != CD_VAL_CONST_F32 || x->numel != 1) return 0;
    *val = x->f[0];
    return 1;
}

static int near(float a, double b) { return fabs((double)a - b) <= 1e-5 * fabs(b); }

// A binary op of kind with no activation, one operand the scalar want: its
// other operand (or -1).
static int binary_with_scalar(fctx *f, const cd_op *op, cd_binary_kind kind, double want, int commutes) {
    if (!op || op->kind != CD_OP_BINARY || op->u.binary.kind != kind || op->u.binary.act.kind != CD_ACT_NONE) return -1;
    float v;
    if (is_scalar(f, op->in[1], &v) && near(v, want)) return op->in[0];
    if (commutes && is_scalar(f, op->in[0], &v) && near(v, want)) return op->in[1];
    return -1;
}

static int plain_binary(const cd_op *op, cd_binary_kind kind) {
    return op && op->kind == CD_OP_BINARY && op->u.binary.kind == kind && op->u.binary.act.kind == CD_ACT_NONE;
}

// The reduced-dims mask of a mean that keeps its dims: a REDUCE MEAN, or the
// global average pool a mean over H and W lowers to; 0 otherwise.
static unsigned mean_mask(fctx *f, const cd_op *op) {
    if (!op) return 0;
    const cd_value *in = &f->g->values[op->in[0]], *out = &f->g->values[op->out];
    if (in->rank != out->rank) return 0;
    if (op->kind == CD_OP_REDUCE && op->u.reduce.kind == CD_REDUCE_MEAN) return op->u.reduce.mask;
    if (op->kind == CD_OP_POOL) {
        const cd_pool_desc *p = &op->u.pool;
        if (p->kind == CD_POOL_AVG && p->kh == p->h && p->kw == p->w && p->oh == 1 && p->ow == 1 && !p->pad_t &&
            !p->pad_l && !p->pad_b && !p->pad_r)
            return 0xcu;
    }
    return 0;
}

// The constant gamma/beta operand of a Mul/Add after a LayerNorm over the
// trailing len elements: a scalar or len values that broadcast along the
// normalized dims only. Returns its value id or -1.
static int ln_param(fctx *f, const cd_op *op, cd_binary_kind kind, int y, int64_t len, int rank, int axis,
                    const int64_t *xshape) {
    if (!plain_binary(op, kind)) return -1;
    int cst = op->in[0] == y ? op->in[1] : op->in[1] == y ? op->in[0] : -1;
    if (cst < 0) return -1;
    const cd_value *c = &f->g->values[cst];
    if (c->kind != CD_VAL_CONST_F32) return -1;
    if (c->numel == 1) return cst;
    if (c->numel != len || c->rank > rank) return -1;
    // Its dims from the end equal x's normalized dims (leading ones are 1).
    for (int i = 0; i < c->rank; i++) {
        int xd = rank - c->rank + i;
        if (xd < axis ? c->shape[i] != 1 : c->shape[i] != xshape[xd]) return -1;
    }
    return cst;
}

static int fuse_layernorm(fctx *f, cd_op *div) {
    cd_graph *g = f->g;
    if (!plain_binary(div, CD_BINARY_DIV)) return 0;
    int s = div->in[0], q = div->in[1];
    cd_op *sq = producer(f, q);
    if (!sq || sq->kind != CD_OP_ACT || sq->u.act.kind != CD_ACT_SQRT || f->nread[q] != 1) return 0;
    int e = sq->in[0];
    cd_op *add = producer(f, e);
    if (e < 0 || f->nread[e] != 1) return 0;
    float eps;
    int v = -1;
    if (plain_binary(add, CD_BINARY_ADD)) {
        if (is_scalar(f, add->in[1], &eps))
            v = add->in[0];
        else if (is_scalar(f, add->in[0], &eps))
            v = add->in[1];
    }
    if (v < 0 || !(eps >= 0.0f) || f->nread[v] != 1) return 0;
    cd_op *var = producer(f, v);
    unsigned mask = mean_mask(f, var);
    if (!mask) return 0;
    int p = var->in[0];
    cd_op *pw = producer(f, p);
    if (f->nread[p] != 1 || !pw) return 0;
    int squares =
        (pw->kind == CD_OP_ACT && pw->u.act.kind == CD_ACT_POW && pw->u.act.alpha == 2.0f && pw->in[0] == s) ||
        (plain_binary(pw, CD_BINARY_MUL) && pw->in[0] == s && pw->in[1] == s);
    if (!squares || f->nread[s] != (pw->kind == CD_OP_ACT ? 2 : 3)) return 0;
    cd_op *sub = producer(f, s);
    if (!plain_binary(sub, CD_BINARY_SUB)) return 0;
    int x = sub->in[0], m = sub->in[1];
    cd_op *mean = producer(f, m);
    if (f->nread[m] != 1 || mean_mask(f, mean) != mask || mean->in[0] != x) return 0;
    const cd_value *xv = &g->values[x];
    if (xv->kind != CD_VAL_ACT || g->values[s].rank != xv->rank ||
        memcmp(g->values[s].shape, xv->shape, sizeof(int64_t) * (size_t)xv->rank) != 0)
        return 0;
    // The reduced dims must be the trailing ones: axis .. rank-1.
    int axis = xv->rank;
    while (axis > 1 && (mask >> (axis - 1)) & 1u) axis--;
    if (axis == xv->rank || mask != ((1u << xv->rank) - 1u) - ((1u << axis) - 1u)) return 0;
    cd_layernorm_desc d = {1, 1, eps};
    for (int i = 1; i < xv->rank; i++) *(i < axis ? &d.outer : &d.len) *= xv->shape[i];
    // Then a Mul by gamma and an Add of beta, when they follow alone.
    cd_op *last = div;
    int gamma = -1, beta = -1;
    cd_op *r = only_reader(f, div->out);
    if ((gamma = ln_param(f, r, CD_BINARY_MUL, div->out, d.len, xv->rank, axis, xv->shape)) >= 0) {
        last = r;
        r = only_reader(f, r->out);
    }
    if ((beta = ln_param(f, r, CD_BINARY_ADD, last->out, d.len, xv->rank, axis, xv->shape)) >= 0) last = r;
    float *gm = malloc((size_t)d.len * sizeof(float)), *bt = beta >= 0 ? malloc((size_t)d.len * sizeof(float)) : NULL;
    if (!gm || (beta >= 0 && !bt)) {
        free(gm);
        free(bt);
        return CD_ENOMEM;
    }
    for (int64_t i = 0; i < d.len; i++) {
        gm[i] = gamma >= 0 ? g->values[gamma].f[g->values[gamma].numel == 1 ? 0 : i] : 1.0f;
        if (bt) bt[i] = g->values[beta].f[g->values[beta].numel == 1 ? 0 : i];
    }
    cd_op_free(last);
    last->kind = CD_OP_LAYERNORM;
    last->nin = 1;
    last->in[0] = x;
    memset(&last->u, 0, sizeof last->u);
    last->u.ln.d = d;
    last->u.ln.gamma = gm;
    last->u.ln.beta = bt;
    snprintf(last->label, sizeof last->label, "LayerNorm(pattern)");
    return 1;
}

static int fuse_gelu(fctx *f, cd_op *erf) {
    if (erf->kind != CD_OP_ACT || erf->u.act.kind != CD_ACT_ERF) return 0;
    int t = erf->in[0];
    cd_op *scale = producer(f, t);
    if (f->nread[t] != 1 || f->nread[erf->out] != 1) return 0;
    int x = binary_with_scalar(f, scale, CD_BINARY_DIV, 1.4142135623730951, 0);
    if (x < 0) x = binary_with_scalar(f, scale, CD_BINARY_MUL, 0.7071067811865476, 1);
    if (x < 0 || f->g->values[x].kind != CD_VAL_ACT) return 0;
    cd_op *plus = only_reader(f, erf->out);
    if (binary_with_scalar(f, plus, CD_BINARY_ADD, 1.0, 1) != erf->out) return 0;
    int a = plus->out;
    cd_op *m1 = only_reader(f, a), *last = NULL;
    if (!plain_binary(m1, CD_BINARY_MUL)) return 0;
    int other = m1->in[0] == a ? m1->in[1] : m1->in[0];
    cd_op *m2 = only_reader(f, m1->out);
    if (other == x) { // (x * a) * 0.5
        if (binary_with_scalar(f, m2, CD_BINARY_MUL, 0.5, 1) == m1->out) last = m2;
    } else if (binary_with_scalar(f, m1, CD_BINARY_MUL, 0.5, 1) == a) { // x * (a * 0.5)
        if (plain_binary(m2, CD_BINARY_MUL) && (m2->in[0] == x || m2->in[1] == x) && m2->in[0] != m2->in[1]) last = m2;
    } else if (f->nread[other] == 1 && binary_with_scalar(f, producer(f, other), CD_BINARY_MUL, 0.5, 1) == x) {
        last = m1; // (x * 0.5) * a
    }
    if (!last) return 0;
    const cd_value *xv = &f->g->values[x], *ov = &f->g->values[last->out];
    if (xv->rank != ov->rank || memcmp(xv->shape, ov->shape, sizeof(int64_t) * (size_t)xv->rank) != 0) return 0;
    cd_op_free(last);
    last->kind = CD_OP_ACT;
    last->nin = 1;
    last->in[0] = x;
    memset(&last->u, 0, sizeof last->u);
    last->u.act.kind = CD_ACT_GELU;
    snprintf(last->label, sizeof last->label, "Gelu(Erf pattern)");
    return 1;
}

// The gate of x * gate(x) that is one activation: Sigmoid (SiLU), or
// HardSigmoid(1/6, 1/2) (HardSwish, as torch exports it below opset 14).
static cd_act gated_act(const cd_activation *gate, const char **name) {
    if (gate->kind == CD_ACT_SIGMOID) return *name = "SiLU", CD_ACT_SILU;
    if (gate->kind == CD_ACT_HARDSIGMOID && near(gate->alpha, 1.0 / 6.0) && gate->beta == 0.5f)
        return *name = "HardSwish", CD_ACT_HARDSWISH;
    return CD_ACT_NONE;
}

// SiLU and HardSwish: Mul(x, gate(x)) in either order, the gate read by the
// Mul alone: one pass over x instead of two (onnxruntime fuses them too), none
// when x's producer can apply it.
static int fuse_gated(fctx *f, cd_op *mul) {
    if (!plain_binary(mul, CD_BINARY_MUL) || mul->in[0] == mul->in[1]) return 0;
    for (int i = 0; i < 2; i++) {
        const int s = mul->in[i], x = mul->in[1 - i];
        const cd_op *gate = producer(f, s);
        const char *name = NULL;
        if (!gate || gate->kind != CD_OP_ACT || gate->in[0] != x || f->nread[s] != 1 ||
            f->g->values[x].kind != CD_VAL_ACT)
            continue;
        const cd_act kind = gated_act(&gate->u.act, &name);
        if (kind == CD_ACT_NONE) continue;
        const cd_value *xv = &f->g->values[x], *ov = &f->g->values[mul->out];
        if (xv->rank != ov->rank || memcmp(xv->shape, ov->shape, sizeof(int64_t) * (size_t)xv->rank) != 0) return 0;
        cd_op_free(mul);
        mul->nin = 1;
        mul->in[0] = x;
        memset(&mul->u, 0, sizeof mul->u);
        // x read by the pattern alone: its producer applies the activation in
        // its epilogue (as the lowering fuses a Relu) and the Mul is an alias.
        cd_op *p = f->nread[x] == 2 ? producer(f, x) : NULL;
        cd_activation *slot = cd_op_act_slot(p);
        if (slot && slot->kind == CD_ACT_NONE) {
            slot->kind = kind;
            size_t n = strlen(p->label);
            snprintf(p->label + n, sizeof p->label - n, "+%s", name);
            mul->kind = CD_OP_ALIAS;
            snprintf(mul->label, sizeof mul->label, "%s(fused into the producer)", name);
            return 1;
        }
        mul->kind = CD_OP_ACT;
        mul->u.act.kind = kind;
        snprintf(mul->label, sizeof mul->label, "%s(%s+Mul)", name, kind == CD_ACT_SILU ? "Sigmoid" : "HardSigmoid");
        return 1;
    }
    return 0;
}

// Counts the readers of every value (ops and graph outputs).
static void count_readers(fctx *f) {
    cd_graph *g = f->g;
    memset(f->nread, 0, (size_t)g->nvalues * sizeof(int));
    for (int k = 0; k < g->nops; k++)
        for (int i = 0; i < g->ops[k].nin; i++)
            if (g->ops[k].in[i] >= 0) f->nread[g->ops[k].in[i]]++;
    for (int i = 0; i < g->noutputs; i++) f->nread[g->outputs[i]]++;
}

int cd_graph_fuse_patterns(cd_graph *g, char *err, size_t errlen) {
    fctx f = {g, calloc((size_t)g->nvalues + 1, sizeof(int))};
    if (!f.nread) return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    count_readers(&f);
    for (int k = 0; k < g->nops; k++) {
        int rc = fuse_layernorm(&f, &g->ops[k]);
        if (rc == 0) rc = fuse_gelu(&f, &g->ops[k]);
        if (rc == 0) rc = fuse_gated(&f, &g->ops[k]);
        if (rc == 1) count_readers(&f); // (a fusion changes who reads what)
        if (rc < 0) {
            free(f.nread);
            return cd_errf(rc, err, errlen, "out of memory");
        }
    }
    free(f.nread);
    return 0;
}
