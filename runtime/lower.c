// Lowering: ONNX nodes (topological order) -> cd_op list.
//
// One pass over the nodes. Each node either
//   - folds to a constant (Constant, and Shape/Gather/Unsqueeze/Squeeze/
//     Concat/Cast/Reshape/... on constants: the shape sub-graphs PyTorch
//     exports in front of a Reshape). Integer constants carry a per-element
//     "batch mark" so that Shape(x)[0] stays "the batch size" through the
//     sub-graph and the Reshape it feeds works for every batch;
//   - merges into the op that produced its input (BatchNormalization into a
//     Conv, an activation into Conv/Gemm/Add/Mul, a residual Add into a Conv)
//     when that producer's output has no other reader; or
//   - becomes a new op, with its output shape inferred (per batch item).

#include "runtime/graph.h"

#include "core/checked.h"
#include "core/errors.h"
#include "core/limits.h"
#include "kernels/cpu/ref.h"
#include "onnx.pb-c.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cd_graph *g;
    const cd_node *n;
    const Onnx__NodeProto *np;
    char *err;
    size_t errlen;
} lctx;

static int node_fail(lctx *c, int code, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "node '%s' (%s): %s", c->n->name, c->n->op, msg);
    return code;
}

#define OOM(c) node_fail((c), CD_ENOMEM, "out of memory")

// ---- attributes -------------------------------------------------------------

static const Onnx__AttributeProto *attr_find(lctx *c, const char *name) {
    for (size_t i = 0; i < c->np->n_attribute; i++) {
        const Onnx__AttributeProto *a = c->np->attribute[i];
        if (a && a->name && strcmp(a->name, name) == 0) return a;
    }
    return NULL;
}

static int attr_type(const Onnx__AttributeProto *a) { return a->has_type ? (int)a->type : 0; }

// Each getter: 0 with *out set (default when absent), or CD_EMODEL when the
// attribute has the wrong type.
static int attr_int(lctx *c, const char *name, int64_t dflt, int64_t *out) {
    const Onnx__AttributeProto *a = attr_find(c, name);
    *out = dflt;
    if (!a) return 0;
    if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && !(a->has_i && !a->has_type))
        return node_fail(c, CD_EMODEL, "attribute '%s' must be an int", name);
    *out = a->i;
    return 0;
}

static int attr_float(lctx *c, const char *name, float dflt, float *out) {
    const Onnx__AttributeProto *a = attr_find(c, name);
    *out = dflt;
    if (!a) return 0;
    if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT && !(a->has_f && !a->has_type))
        return node_fail(c, CD_EMODEL, "attribute '%s' must be a float", name);
    *out = a->f;
    return 0;
}

// Copies up to max ints; *count = -1 when absent.
static int attr_ints(lctx *c, const char *name, int64_t *out, int max, int *count) {
    const Onnx__AttributeProto *a = attr_find(c, name);
    *count = -1;
    if (!a) return 0;
    if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && a->has_type)
        return node_fail(c, CD_EMODEL, "attribute '%s' must be a list of ints", name);
    if (a->n_ints > (size_t)max)
        return node_fail(c, CD_EMODEL, "attribute '%s' has %zu values (at most %d)", name, a->n_ints, max);
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    *count = (int)a->n_ints;
    return 0;
}

static int attr_str(lctx *c, const char *name, const char *dflt, char *out, size_t outlen) {
    const Onnx__AttributeProto *a = attr_find(c, name);
    snprintf(out, outlen, "%s", dflt);
    if (!a) return 0;
    if ((attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING && a->has_type) || !a->has_s)
        return node_fail(c, CD_EMODEL, "attribute '%s' must be a string", name);
    size_t n = a->s.len < outlen - 1 ? a->s.len : outlen - 1;
    memcpy(out, a->s.data, n);
    out[n] = '\0';
    return 0;
}

// ---- values -----------------------------------------------------------------

static cd_value *in_val(lctx *c, int j) {
    if (j >= c->n->ninputs || c->n->inputs[j] < 0) return NULL;
    return &c->g->values[c->n->inputs[j]];
}

static int in_id(lctx *c, int j) { return j < c->n->ninputs ? c->n->inputs[j] : -1; }

static int is_act(const cd_value *v) { return v && v->kind == CD_VAL_ACT; }
static int is_const(const cd_value *v) { return v && (v->kind == CD_VAL_CONST_F32 || v->kind == CD_VAL_CONST_I64); }

static const char *kind_name(const cd_value *v) {
    if (!v) return "missing";
    return v->kind == CD_VAL_ACT ? "an activation" : v->kind == CD_VAL_CONST_F32 ? "a float constant" : "an integer constant";
}

static int need_inputs(lctx *c, int min, int max) {
    if (c->n->ninputs < min || c->n->ninputs > max)
        return node_fail(c, CD_EMODEL, "has %d inputs, expected %d..%d", c->n->ninputs, min, max);
    for (int j = 0; j < min; j++)
        if (c->n->inputs[j] < 0) return node_fail(c, CD_EMODEL, "required input %d is empty", j);
    return 0;
}

// The node's extra outputs (beyond the first) must not be read by anyone.
static int only_first_output(lctx *c) {
    if (c->n->noutputs < 1 || c->n->outputs[0] < 0) return node_fail(c, CD_EMODEL, "has no output");
    for (int j = 1; j < c->n->noutputs; j++) {
        int id = c->n->outputs[j];
        if (id >= 0 && c->g->values[id].nconsumers > 0)
            return node_fail(c, CD_EUNSUPPORTED, "output %d ('%s') is used; only the first output is supported", j,
                             c->g->values[id].name);
    }
    return 0;
}

static int need_act(lctx *c, int j) {
    cd_value *v = in_val(c, j);
    if (!is_act(v)) return node_fail(c, CD_EUNSUPPORTED, "input %d must be computed at run time, it is %s", j, kind_name(v));
    return 0;
}

static cd_value *out_val(lctx *c) { return &c->g->values[c->n->outputs[0]]; }

// Declares the node's output an activation of the given per-item shape: at
// least one element and at most CD_MAX_ACT_ELEMS (so every dim fits an int).
static int set_act_out(lctx *c, int op, int rank, const int64_t *shape) {
    int64_t n;
    if (cd_ck_shape_numel(rank, shape, &n) || n > CD_MAX_ACT_ELEMS)
        return node_fail(c, CD_ETOO_LARGE, "the output would have more than %lld elements per batch item",
                         (long long)CD_MAX_ACT_ELEMS);
    if (n == 0) return node_fail(c, CD_EMODEL, "the output would be empty");
    cd_value *o = out_val(c);
    o->kind = CD_VAL_ACT;
    o->rank = rank;
    memcpy(o->shape, shape, sizeof(int64_t) * (size_t)rank);
    o->numel = n;
    o->producer_op = op;
    if (op >= 0) c->g->ops[op].out = c->n->outputs[0];
    return 0;
}

static int new_op(lctx *c, cd_op_kind kind, const char *label) {
    int id = cd_graph_add_op(c->g, kind, c->n->name);
    if (id < 0) return OOM(c);
    snprintf(c->g->ops[id].label, sizeof c->g->ops[id].label, "%s", label);
    return id;
}

// Allocates constant storage for the output value, of at most limit elements
// (checked before anything is allocated): CD_MAX_CONST_ELEMS for a copy of
// a constant (reshaped, cast, transposed), CD_MAX_FOLD_ELEMS for a result that
// can grow beyond its operands (broadcast, concat).
static int const_out(lctx *c, cd_val_kind kind, int rank, const int64_t *shape, int64_t limit) {
    cd_value *o = out_val(c);
    int64_t n;
    if (cd_ck_shape_numel(rank, shape, &n) || n > limit)
        return node_fail(c, CD_ETOO_LARGE, "the constant result would have more than %lld elements", (long long)limit);
    for (int i = 0; i < rank; i++)
        if (shape[i] > CD_MAX_CONST_DIM)
            return node_fail(c, CD_ETOO_LARGE, "the constant result's dim %d would be %lld (at most %d)", i,
                             (long long)shape[i], CD_MAX_CONST_DIM);
    o->kind = kind;
    o->rank = rank;
    memcpy(o->shape, shape, sizeof(int64_t) * (size_t)rank);
    o->numel = n;
    if (kind == CD_VAL_CONST_F32) {
        o->f = calloc((size_t)(n ? n : 1), sizeof(float));
        if (!o->f) return OOM(c);
    } else {
        o->i = calloc((size_t)(n ? n : 1), sizeof(int64_t));
        o->batch_mark = calloc((size_t)(n ? n : 1), 1);
        if (!o->i || !o->batch_mark) return OOM(c);
    }
    return 0;
}

// The single reader rule for fusion: v has exactly one consumer and is not a
// graph output, and its producer is an op of one of the given kinds.
static cd_op *fusable_producer(lctx *c, const cd_value *v) {
    if (!is_act(v) || v->nconsumers != 1 || v->is_output || v->producer_op < 0) return NULL;
    return &c->g->ops[v->producer_op];
}

// Moves op idx to the end of the list (it now runs where the current node
// is), fixing the producer indices of the values.
static int move_op_last(cd_graph *g, int idx) {
    if (idx == g->nops - 1) return idx;
    cd_op tmp = g->ops[idx];
    memmove(&g->ops[idx], &g->ops[idx + 1], (size_t)(g->nops - idx - 1) * sizeof(cd_op));
    g->ops[g->nops - 1] = tmp;
    for (int i = 0; i < g->nvalues; i++) {
        int p = g->values[i].producer_op;
        if (p == idx) g->values[i].producer_op = g->nops - 1;
        else if (p > idx) g->values[i].producer_op = p - 1;
    }
    return g->nops - 1;
}

// Gives the producer's output to this node's output (the node merged into it).
static void take_over_output(lctx *c, int op_idx, const char *suffix) {
    cd_op *op = &c->g->ops[op_idx];
    cd_value *old = &c->g->values[op->out];
    (void)set_act_out(c, op_idx, old->rank, old->shape); // the same shape: cannot fail
    size_t l = strlen(op->label);
    snprintf(op->label + l, sizeof op->label - l, "+%s", suffix);
}

static void count_weights(cd_graph *g, const float *w, int64_t n) {
    g->params += n;
    for (int64_t i = 0; i < n; i++) g->zero_params += w[i] == 0.0f;
}

static int64_t norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

// ---- spatial attributes shared by Conv and the pools --------------------------

typedef struct {
    int kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
} spatial;

static int read_spatial(lctx *c, int h, int w, spatial *s, int kernel_from_attr, int allow_dil) {
    int64_t v[8];
    int n;
    int rc;
    if ((rc = attr_ints(c, "kernel_shape", v, 8, &n))) return rc;
    if (kernel_from_attr) {
        if (n != 2) return node_fail(c, CD_EUNSUPPORTED, "kernel_shape must have 2 values (2-D only)");
        s->kh = (int)v[0];
        s->kw = (int)v[1];
    } else if (n >= 0 && (n != 2 || v[0] != s->kh || v[1] != s->kw)) {
        return node_fail(c, CD_EMODEL, "kernel_shape disagrees with the weights");
    }
    if (s->kh < 1 || s->kw < 1 || s->kh > 1024 || s->kw > 1024) return node_fail(c, CD_EMODEL, "bad kernel size");
    if ((rc = attr_ints(c, "strides", v, 8, &n))) return rc;
    if (n >= 0 && n != 2) return node_fail(c, CD_EUNSUPPORTED, "strides must have 2 values");
    s->sh = n == 2 ? (int)v[0] : 1;
    s->sw = n == 2 ? (int)v[1] : 1;
    if (allow_dil) {
        if ((rc = attr_ints(c, "dilations", v, 8, &n))) return rc;
        if (n >= 0 && n != 2) return node_fail(c, CD_EUNSUPPORTED, "dilations must have 2 values");
        s->dh = n == 2 ? (int)v[0] : 1;
        s->dw = n == 2 ? (int)v[1] : 1;
    } else {
        s->dh = s->dw = 1;
    }
    if (s->sh < 1 || s->sw < 1 || s->dh < 1 || s->dw < 1 || s->sh > 1024 || s->sw > 1024 || s->dh > 1024 || s->dw > 1024)
        return node_fail(c, CD_EMODEL, "strides and dilations must be >= 1");
    char ap[32];
    if ((rc = attr_str(c, "auto_pad", "NOTSET", ap, sizeof ap))) return rc;
    if ((rc = attr_ints(c, "pads", v, 8, &n))) return rc;
    if (strcmp(ap, "NOTSET") == 0) {
        if (n >= 0 && n != 4) return node_fail(c, CD_EUNSUPPORTED, "pads must have 4 values");
        s->pt = n == 4 ? (int)v[0] : 0;
        s->pl = n == 4 ? (int)v[1] : 0;
        s->pb = n == 4 ? (int)v[2] : 0;
        s->pr = n == 4 ? (int)v[3] : 0;
        if (s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0 || s->pt > 4096 || s->pl > 4096 || s->pb > 4096 || s->pr > 4096)
            return node_fail(c, CD_EMODEL, "pads out of range");
    } else if (strcmp(ap, "VALID") == 0) {
        s->pt = s->pl = s->pb = s->pr = 0;
    } else if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        int upper = ap[5] == 'U';
        int dims[2] = {h, w}, k[2] = {s->kh, s->kw}, st[2] = {s->sh, s->sw}, d[2] = {s->dh, s->dw}, beg[2], end[2];
        for (int i = 0; i < 2; i++) {
            int out = (dims[i] + st[i] - 1) / st[i];
            int total = (out - 1) * st[i] + (k[i] - 1) * d[i] + 1 - dims[i];
            if (total < 0) total = 0;
            beg[i] = upper ? total / 2 : total - total / 2;
            end[i] = total - beg[i];
        }
        s->pt = beg[0];
        s->pl = beg[1];
        s->pb = end[0];
        s->pr = end[1];
    } else {
        return node_fail(c, CD_EUNSUPPORTED, "auto_pad '%s' not supported (NOTSET, SAME_UPPER, SAME_LOWER, VALID)", ap);
    }
    return 0;
}

// ---- operators ----------------------------------------------------------------

static int lower_conv(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 3)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0), *w = in_val(c, 1), *b = in_val(c, 2);
    if (x->rank != 4) return node_fail(c, CD_EUNSUPPORTED, "input rank %d: only 2-D convolution (NCHW) is supported", x->rank);
    if (!w || w->kind != CD_VAL_CONST_F32 || w->rank != 4)
        return node_fail(c, CD_EUNSUPPORTED, "weights must be a float initializer of rank 4 (they are %s)", kind_name(w));
    if (b && (b->kind != CD_VAL_CONST_F32 || b->rank != 1 || b->shape[0] != w->shape[0]))
        return node_fail(c, CD_EUNSUPPORTED, "bias must be a float initializer of shape [%lld]", (long long)w->shape[0]);
    int64_t group;
    if ((rc = attr_int(c, "group", 1, &group))) return rc;
    int64_t C = x->shape[1], K = w->shape[0];
    if (group < 1 || C % group || K % group || w->shape[1] != C / group || K < 1)
        return node_fail(c, CD_EMODEL, "weights [%lld,%lld,...] do not fit %lld input channels in %lld groups", (long long)K,
                         (long long)w->shape[1], (long long)C, (long long)group);
    spatial s = {.kh = (int)w->shape[2], .kw = (int)w->shape[3]};
    if ((rc = read_spatial(c, (int)x->shape[2], (int)x->shape[3], &s, 0, 1))) return rc;
    cd_conv_desc d = {.n = 1, .c = (int)C, .h = (int)x->shape[2], .w = (int)x->shape[3], .k = (int)K, .r = s.kh,
                      .s = s.kw, .stride_h = s.sh, .stride_w = s.sw, .pad_t = s.pt, .pad_l = s.pl, .pad_b = s.pb,
                      .pad_r = s.pr, .dil_h = s.dh, .dil_w = s.dw, .groups = (int)group};
    cd_conv_out_dims(&d);
    if (d.oh < 1 || d.ow < 1) return node_fail(c, CD_EMODEL, "output would be empty (%dx%d)", d.oh, d.ow);
    int op = new_op(c, CD_OP_CONV, "Conv");
    if (op < 0) return op;
    cd_op *o = &c->g->ops[op];
    o->nin = 1;
    o->in[0] = in_id(c, 0);
    o->u.conv.d = d;
    o->u.conv.w = malloc((size_t)w->numel * sizeof(float));
    o->u.conv.bias = calloc((size_t)K, sizeof(float));
    if (!o->u.conv.w || !o->u.conv.bias) return OOM(c);
    memcpy(o->u.conv.w, w->f, (size_t)w->numel * sizeof(float));
    count_weights(c->g, w->f, w->numel);
    if (b) {
        memcpy(o->u.conv.bias, b->f, (size_t)K * sizeof(float));
        count_weights(c->g, b->f, K);
    }
    int64_t shape[4] = {1, K, d.oh, d.ow};
    return set_act_out(c, op, 4, shape);
}

// Makes a float constant value (generated name) and returns its id.
static int make_const(lctx *c, const char *suffix, int rank, const int64_t *shape, const float *data) {
    char name[512];
    snprintf(name, sizeof name, "%s::%s", c->g->values[c->n->outputs[0]].name, suffix);
    int id = cd_graph_add_value(c->g, name);
    if (id < 0) return id == CD_ENOMEM ? OOM(c) : node_fail(c, CD_EMODEL, "name clash for '%s'", name);
    cd_value *v = &c->g->values[id];
    v->kind = CD_VAL_CONST_F32;
    v->rank = rank;
    memcpy(v->shape, shape, sizeof(int64_t) * (size_t)rank);
    v->numel = cd_shape_numel(rank, shape);
    v->f = malloc((size_t)v->numel * sizeof(float));
    if (!v->f) return OOM(c);
    memcpy(v->f, data, (size_t)v->numel * sizeof(float));
    return id;
}

static int lower_batchnorm(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 5, 5)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    int64_t training;
    float eps;
    if ((rc = attr_int(c, "training_mode", 0, &training)) || (rc = attr_float(c, "epsilon", 1e-5f, &eps))) return rc;
    if (training) return node_fail(c, CD_EUNSUPPORTED, "training_mode=1 is not supported (inference only)");
    cd_value *x = in_val(c, 0);
    if (x->rank < 2) return node_fail(c, CD_EMODEL, "input rank %d (need [N, C, ...])", x->rank);
    int64_t C = x->shape[1];
    const float *p[4];
    for (int j = 1; j < 5; j++) {
        cd_value *v = in_val(c, j);
        if (!v || v->kind != CD_VAL_CONST_F32 || v->numel != C)
            return node_fail(c, CD_EUNSUPPORTED, "input %d must be a float initializer of %lld values", j, (long long)C);
        p[j - 1] = v->f;
    }
    float *scale = malloc((size_t)C * sizeof(float)), *shift = malloc((size_t)C * sizeof(float));
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return OOM(c);
    }
    for (int64_t i = 0; i < C; i++) {
        double sc = (double)p[0][i] / sqrt((double)p[3][i] + eps);
        scale[i] = (float)sc;
        shift[i] = (float)((double)p[1][i] - (double)p[2][i] * sc);
    }
    cd_op *prod = fusable_producer(c, x);
    if (prod && prod->kind == CD_OP_CONV && prod->u.conv.d.act.kind == CD_ACT_NONE && !prod->u.conv.d.has_residual) {
        // Fold: w'[k] = w[k] * scale[k]; b'[k] = b[k] * scale[k] + shift[k].
        const cd_conv_desc *d = &prod->u.conv.d;
        size_t per_k = (size_t)(d->c / d->groups) * d->r * d->s;
        for (int k = 0; k < d->k; k++) {
            for (size_t e = 0; e < per_k; e++) prod->u.conv.w[k * per_k + e] *= scale[k];
            prod->u.conv.bias[k] = prod->u.conv.bias[k] * scale[k] + shift[k];
        }
        c->g->params += 4 * C;
        take_over_output(c, x->producer_op, "BN");
        free(scale);
        free(shift);
        return 0;
    }
    // No conv before it: y = x * scale[c] + shift[c], as two broadcast ops.
    int64_t cshape[CD_MAX_RANK];
    cshape[0] = C;
    for (int i = 2; i < x->rank; i++) cshape[i - 1] = 1;
    int sid = make_const(c, "bn_scale", x->rank - 1, cshape, scale);
    int tid = sid >= 0 ? make_const(c, "bn_shift", x->rank - 1, cshape, shift) : sid;
    free(scale);
    free(shift);
    if (tid < 0) return tid;
    c->g->params += 4 * C;
    char mid[512];
    snprintf(mid, sizeof mid, "%s::bn_mul", c->g->values[c->n->outputs[0]].name);
    int mid_id = cd_graph_add_value(c->g, mid);
    if (mid_id < 0) return mid_id == CD_ENOMEM ? OOM(c) : node_fail(c, CD_EMODEL, "name clash for '%s'", mid);
    x = in_val(c, 0); // values may have moved
    int op = new_op(c, CD_OP_BINARY, "BN(Mul)");
    if (op < 0) return op;
    cd_op *o = &c->g->ops[op];
    o->nin = 2;
    o->in[0] = in_id(c, 0);
    o->in[1] = sid;
    o->u.binary.kind = CD_BINARY_MUL;
    o->out = mid_id;
    cd_value *m = &c->g->values[mid_id];
    m->kind = CD_VAL_ACT;
    m->rank = x->rank;
    memcpy(m->shape, x->shape, sizeof x->shape);
    m->numel = x->numel;
    m->producer_op = op;
    m->nconsumers = 1;
    int op2 = new_op(c, CD_OP_BINARY, "BN(Add)");
    if (op2 < 0) return op2;
    o = &c->g->ops[op2];
    o->nin = 2;
    o->in[0] = mid_id;
    o->in[1] = tid;
    o->u.binary.kind = CD_BINARY_ADD;
    return set_act_out(c, op2, m->rank, c->g->values[mid_id].shape);
}

static float scalar_input(lctx *c, int j, float dflt, int *rc) {
    cd_value *v = in_val(c, j);
    *rc = 0;
    if (!v) return dflt;
    if (v->kind != CD_VAL_CONST_F32 || v->numel != 1) {
        *rc = node_fail(c, CD_EUNSUPPORTED, "input %d must be a constant float scalar", j);
        return dflt;
    }
    return v->f[0];
}

static int lower_activation(lctx *c) {
    int rc;
    const char *op = c->n->op;
    cd_activation a = {CD_ACT_NONE, 0, 0};
    if (strcmp(op, "Relu") == 0) {
        if ((rc = need_inputs(c, 1, 1))) return rc;
        a.kind = CD_ACT_RELU;
    } else if (strcmp(op, "Clip") == 0) {
        if ((rc = need_inputs(c, 1, 3))) return rc;
        a.kind = CD_ACT_CLIP;
        if ((rc = attr_float(c, "min", -FLT_MAX, &a.alpha)) || (rc = attr_float(c, "max", FLT_MAX, &a.beta))) return rc;
        a.alpha = scalar_input(c, 1, a.alpha, &rc);
        if (rc) return rc;
        a.beta = scalar_input(c, 2, a.beta, &rc);
        if (rc) return rc;
    } else if (strcmp(op, "Sigmoid") == 0) {
        if ((rc = need_inputs(c, 1, 1))) return rc;
        a.kind = CD_ACT_SIGMOID;
    } else if (strcmp(op, "HardSigmoid") == 0) {
        if ((rc = need_inputs(c, 1, 1))) return rc;
        a.kind = CD_ACT_HARDSIGMOID;
        if ((rc = attr_float(c, "alpha", 0.2f, &a.alpha)) || (rc = attr_float(c, "beta", 0.5f, &a.beta))) return rc;
    } else if (strcmp(op, "HardSwish") == 0) {
        if ((rc = need_inputs(c, 1, 1))) return rc;
        a.kind = CD_ACT_HARDSWISH;
    } else {
        if ((rc = need_inputs(c, 1, 1))) return rc;
        a.kind = CD_ACT_LEAKYRELU;
        if ((rc = attr_float(c, "alpha", 0.01f, &a.alpha))) return rc;
    }
    if ((rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    cd_op *prod = fusable_producer(c, x);
    if (prod) {
        cd_activation *slot = prod->kind == CD_OP_CONV ? &prod->u.conv.d.act
                              : prod->kind == CD_OP_GEMM ? &prod->u.gemm.act
                              : prod->kind == CD_OP_BINARY ? &prod->u.binary.act : NULL;
        if (slot && slot->kind == CD_ACT_NONE) {
            *slot = a;
            take_over_output(c, x->producer_op, op);
            return 0;
        }
    }
    int id = new_op(c, CD_OP_ACT, op);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    c->g->ops[id].u.act = a;
    return set_act_out(c, id, x->rank, x->shape);
}

// NumPy broadcast of two shapes; 0 or CD_EMODEL.
static int broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o) {
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i - (r - ra) >= 0 ? a[i - (r - ra)] : 1, db = i - (r - rb) >= 0 ? b[i - (r - rb)] : 1;
        if (da != db && da != 1 && db != 1) return CD_EMODEL;
        o[i] = da == 1 ? db : da;
    }
    *ro = r;
    return 0;
}

// x op y on int64 for the shape computations, defined for every input: an
// overflow, a division by zero and INT64_MIN / -1 are errors (CD_EMODEL naming
// the node), never undefined behaviour or SIGFPE.
static int fold_i64(lctx *c, cd_binary_kind kind, int64_t x, int64_t y, int64_t *out) {
    const char *what = NULL;
    switch (kind) {
    case CD_BINARY_ADD: if (cd_ck_add_i64(x, y, out)) what = "addition"; break;
    case CD_BINARY_SUB: if (cd_ck_sub_i64(x, y, out)) what = "subtraction"; break;
    case CD_BINARY_MUL: if (cd_ck_mul_i64(x, y, out)) what = "multiplication"; break;
    default:
        if (y == 0) return node_fail(c, CD_EMODEL, "integer division by zero (%lld / 0)", (long long)x);
        if (x == INT64_MIN && y == -1) what = "division";
        else *out = x / y;
        break;
    }
    if (what)
        return node_fail(c, CD_EMODEL, "integer %s overflows 64 bits (%lld and %lld)", what, (long long)x, (long long)y);
    return 0;
}

static int fold_binary_const(lctx *c, cd_binary_kind kind, cd_value *a, cd_value *b) {
    int r;
    int64_t shape[CD_MAX_RANK];
    if (broadcast(a->rank, a->shape, b->rank, b->shape, &r, shape))
        return node_fail(c, CD_EMODEL, "constant operands do not broadcast");
    // The result may be as large as the larger operand; growth by broadcasting
    // is capped at CD_MAX_FOLD_ELEMS.
    int64_t limit = a->numel > b->numel ? a->numel : b->numel;
    if (limit < CD_MAX_FOLD_ELEMS) limit = CD_MAX_FOLD_ELEMS;
    if (a->kind == CD_VAL_CONST_F32 && b->kind == CD_VAL_CONST_F32) {
        int rc = const_out(c, CD_VAL_CONST_F32, r, shape, limit);
        if (rc) return rc;
        int64_t sa[CD_MAX_RANK], sb[CD_MAX_RANK];
        for (int i = 0; i < r; i++) {
            sa[i] = i - (r - a->rank) >= 0 ? a->shape[i - (r - a->rank)] : 1;
            sb[i] = i - (r - b->rank) >= 0 ? b->shape[i - (r - b->rank)] : 1;
        }
        cd_activation none = {CD_ACT_NONE, 0, 0};
        cd_ref_binary(kind, r, sa, a->f, sb, b->f, shape, none, out_val(c)->f);
        return 0;
    }
    if (a->kind == CD_VAL_CONST_I64 && b->kind == CD_VAL_CONST_I64) {
        // Integer operands: each a scalar or of the result's size (a real
        // broadcast of two shape vectors is not a shape computation).
        int64_t on;
        if (cd_ck_shape_numel(r, shape, &on) || !(a->numel == 1 || a->numel == on) || !(b->numel == 1 || b->numel == on))
            return node_fail(c, CD_EUNSUPPORTED, "integer constants broadcast to a new shape");
        int rc = const_out(c, CD_VAL_CONST_I64, r, shape, limit);
        if (rc) return rc;
        cd_value *o = out_val(c);
        for (int64_t e = 0; e < o->numel; e++) {
            int64_t x = a->i[a->numel == 1 ? 0 : e], y = b->i[b->numel == 1 ? 0 : e];
            int ma = a->batch_mark && a->batch_mark[a->numel == 1 ? 0 : e];
            int mb = b->batch_mark && b->batch_mark[b->numel == 1 ? 0 : e];
            if ((rc = fold_i64(c, kind, x, y, &o->i[e]))) return rc;
            // batch * 1 and batch / 1 stay the batch; other arithmetic on it is not expressible.
            if (ma || mb) {
                if ((kind == CD_BINARY_MUL || kind == CD_BINARY_DIV) && ((ma && !mb && y == 1) || (mb && !ma && kind == CD_BINARY_MUL && x == 1)))
                    o->batch_mark[e] = 1;
                else
                    return node_fail(c, CD_EUNSUPPORTED, "arithmetic on the batch size in a shape computation");
            }
        }
        return 0;
    }
    return node_fail(c, CD_EUNSUPPORTED, "constant operands of mixed or unsupported types");
}

static int lower_binary(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 2)) || (rc = only_first_output(c))) return rc;
    const char *op = c->n->op;
    cd_binary_kind kind = strcmp(op, "Add") == 0 ? CD_BINARY_ADD : strcmp(op, "Mul") == 0 ? CD_BINARY_MUL
                        : strcmp(op, "Sub") == 0 ? CD_BINARY_SUB : CD_BINARY_DIV;
    cd_value *a = in_val(c, 0), *b = in_val(c, 1);
    if (is_const(a) && is_const(b)) return fold_binary_const(c, kind, a, b);
    int r;
    int64_t shape[CD_MAX_RANK];
    if (broadcast(a->rank, a->shape, b->rank, b->shape, &r, shape))
        return node_fail(c, CD_EMODEL, "shapes do not broadcast");
    for (int j = 0; j < 2; j++) {
        cd_value *v = j ? b : a;
        if (is_act(v) && v->rank != r)
            return node_fail(c, CD_EUNSUPPORTED, "activation operand of rank %d broadcast to rank %d (the batch dim must stay first)", v->rank, r);
        if (v->kind == CD_VAL_CONST_I64) return node_fail(c, CD_EUNSUPPORTED, "integer constant operand on activations");
        if (is_const(v) && v->rank == r && v->shape[0] != 1)
            return node_fail(c, CD_EUNSUPPORTED, "constant operand spans the batch dimension");
    }
    // Residual fusion: Add(conv(x), y) -> conv(x) + y inside the conv.
    if (kind == CD_BINARY_ADD && is_act(a) && is_act(b) && a->rank == b->rank &&
        memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0) {
        for (int j = 0; j < 2; j++) {
            cd_value *x = j ? b : a;
            int other = in_id(c, 1 - j);
            cd_op *prod = fusable_producer(c, x);
            if (prod && prod->kind == CD_OP_CONV && prod->u.conv.d.act.kind == CD_ACT_NONE && !prod->u.conv.d.has_residual &&
                in_id(c, j) != other) {
                prod->u.conv.d.has_residual = 1;
                prod->in[1] = other;
                prod->nin = 2;
                int idx = move_op_last(c->g, x->producer_op);
                take_over_output(c, idx, "Add");
                return 0;
            }
        }
    }
    int id = new_op(c, CD_OP_BINARY, op);
    if (id < 0) return id;
    cd_op *o = &c->g->ops[id];
    o->nin = 2;
    o->in[0] = in_id(c, 0);
    o->in[1] = in_id(c, 1);
    o->u.binary.kind = kind;
    return set_act_out(c, id, r, shape);
}

static int lower_pool(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    if (x->rank != 4) return node_fail(c, CD_EUNSUPPORTED, "input rank %d: only 2-D pooling (NCHW) is supported", x->rank);
    const char *op = c->n->op;
    int global = strncmp(op, "Global", 6) == 0;
    int is_max = strstr(op, "Max") != NULL;
    cd_pool_desc d = {.kind = is_max ? CD_POOL_MAX : CD_POOL_AVG, .n = 1, .c = (int)x->shape[1], .h = (int)x->shape[2],
                      .w = (int)x->shape[3], .dil_h = 1, .dil_w = 1, .stride_h = 1, .stride_w = 1};
    if (global) {
        d.kh = d.h;
        d.kw = d.w;
    } else {
        spatial s = {0};
        if ((rc = read_spatial(c, d.h, d.w, &s, 1, is_max))) return rc;
        int64_t ceil_mode, cip = 0, storage;
        if ((rc = attr_int(c, "ceil_mode", 0, &ceil_mode))) return rc;
        if (is_max) {
            if ((rc = attr_int(c, "storage_order", 0, &storage))) return rc;
            if (storage) return node_fail(c, CD_EUNSUPPORTED, "storage_order=1 is not supported");
        } else if ((rc = attr_int(c, "count_include_pad", 0, &cip))) {
            return rc;
        }
        d.kh = s.kh;
        d.kw = s.kw;
        d.stride_h = s.sh;
        d.stride_w = s.sw;
        d.dil_h = s.dh;
        d.dil_w = s.dw;
        d.pad_t = s.pt;
        d.pad_l = s.pl;
        d.pad_b = s.pb;
        d.pad_r = s.pr;
        d.ceil_mode = ceil_mode != 0;
        d.count_include_pad = cip != 0;
        if (d.pad_t >= d.kh || d.pad_b >= d.kh || d.pad_l >= d.kw || d.pad_r >= d.kw)
            return node_fail(c, CD_EMODEL, "pads must be smaller than the kernel");
    }
    cd_pool_out_dims(&d);
    if (d.oh < 1 || d.ow < 1) return node_fail(c, CD_EMODEL, "output would be empty");
    int id = new_op(c, CD_OP_POOL, op);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    c->g->ops[id].u.pool = d;
    int64_t shape[4] = {1, d.c, d.oh, d.ow};
    return set_act_out(c, id, 4, shape);
}

// Output value takes the input's data with a new shape (an alias op for an
// activation, a copy for a constant).
static int reshape_to(lctx *c, int rank, const int64_t *shape, const char *label) {
    cd_value *x = in_val(c, 0);
    if (cd_shape_numel(rank, shape) != x->numel)
        return node_fail(c, CD_EMODEL, "cannot reshape %lld elements to %lld", (long long)x->numel,
                         (long long)cd_shape_numel(rank, shape));
    if (is_const(x)) {
        int rc = const_out(c, x->kind, rank, shape, CD_MAX_CONST_ELEMS);
        if (rc) return rc;
        x = in_val(c, 0);
        cd_value *o = out_val(c);
        if (x->kind == CD_VAL_CONST_F32) {
            memcpy(o->f, x->f, (size_t)x->numel * sizeof(float));
        } else {
            memcpy(o->i, x->i, (size_t)x->numel * sizeof(int64_t));
            if (x->batch_mark) memcpy(o->batch_mark, x->batch_mark, (size_t)x->numel);
        }
        return 0;
    }
    if (rank < 1 || shape[0] != 1) return node_fail(c, CD_EUNSUPPORTED, "the result would not keep the batch as dim 0");
    int id = new_op(c, CD_OP_ALIAS, label);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    return set_act_out(c, id, rank, shape);
}

static int lower_identity(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 3)) || (rc = only_first_output(c))) return rc;
    if (strcmp(c->n->op, "Dropout") == 0) {
        cd_value *t = in_val(c, 2);
        if (t && (!is_const(t) || t->numel != 1 || (t->kind == CD_VAL_CONST_I64 ? t->i[0] != 0 : t->f[0] != 0.0f)))
            return node_fail(c, CD_EUNSUPPORTED, "training_mode must be a false constant");
    } else if (c->n->ninputs != 1) {
        return node_fail(c, CD_EMODEL, "expects one input");
    }
    cd_value *x = in_val(c, 0);
    return reshape_to(c, x->rank, x->shape, c->n->op);
}

static int lower_flatten(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    int64_t axis;
    if ((rc = attr_int(c, "axis", 1, &axis))) return rc;
    axis = norm_axis(axis, x->rank);
    if (axis < 0 || axis > x->rank) return node_fail(c, CD_EMODEL, "axis out of range");
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < x->rank; i++)
        if (cd_ck_mul_i64(i < axis ? outer : inner, x->shape[i], i < axis ? &outer : &inner))
            return node_fail(c, CD_ETOO_LARGE, "the flattened size overflows 64 bits");
    if (is_act(x) && (axis == 0 || outer != 1))
        return node_fail(c, CD_EUNSUPPORTED, "axis %lld would fold the batch into other dims (axis 1 is supported)", (long long)axis);
    int64_t shape[2] = {outer, inner};
    return reshape_to(c, 2, shape, "Flatten");
}

// Integer list from a constant input (shape/axes); marks optional.
static int int_list(lctx *c, int j, const char *what, int64_t *out, uint8_t *marks, int max, int *n) {
    cd_value *v = in_val(c, j);
    if (!v || v->kind != CD_VAL_CONST_I64 || v->rank > 1)
        return node_fail(c, CD_EUNSUPPORTED, "%s must be a constant integer list computable at load (it is %s)", what, kind_name(v));
    if (v->numel > max) return node_fail(c, CD_EUNSUPPORTED, "%s has %lld values (at most %d)", what, (long long)v->numel, max);
    for (int64_t i = 0; i < v->numel; i++) {
        out[i] = v->i[i];
        if (marks) marks[i] = v->batch_mark ? v->batch_mark[i] : 0;
        else if (v->batch_mark && v->batch_mark[i])
            return node_fail(c, CD_EUNSUPPORTED, "%s depends on the batch size", what);
    }
    *n = (int)v->numel;
    return 0;
}

static int lower_reshape(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 2)) || (rc = only_first_output(c))) return rc;
    int64_t allowzero;
    if ((rc = attr_int(c, "allowzero", 0, &allowzero))) return rc;
    int64_t t[CD_MAX_RANK];
    uint8_t mark[CD_MAX_RANK];
    int n;
    if ((rc = int_list(c, 1, "the target shape", t, mark, CD_MAX_RANK, &n))) return rc;
    cd_value *x = in_val(c, 0);
    const int act = is_act(x);
    int64_t shape[CD_MAX_RANK], known = 1;
    int infer = -1;
    for (int i = 0; i < n; i++) {
        if (mark[i] || (act && i == 0 && t[i] == 1)) {
            // The batch size: per item 1. A literal 1 in dim 0 of an
            // activation is the batch too (static exports write it so).
            if (i != 0) return node_fail(c, CD_EUNSUPPORTED, "the batch size may only appear in dim 0 of the target shape");
            shape[i] = 1;
        } else if (t[i] == 0 && !allowzero) {
            if (i >= x->rank) return node_fail(c, CD_EMODEL, "0 in target dim %d copies a dim the input does not have", i);
            shape[i] = x->shape[i];
        } else if (t[i] == -1) {
            if (infer >= 0) return node_fail(c, CD_EMODEL, "more than one -1 in the target shape");
            infer = i;
            continue;
        } else if (t[i] < 1) {
            return node_fail(c, CD_EUNSUPPORTED, "target dim %d is %lld", i, (long long)t[i]);
        } else {
            shape[i] = t[i];
        }
        if (cd_ck_mul_i64(known, shape[i], &known))
            return node_fail(c, CD_ETOO_LARGE, "the target shape's size overflows 64 bits");
    }
    if (infer >= 0) {
        if (known == 0 || x->numel % known) return node_fail(c, CD_EMODEL, "cannot infer the -1 dim");
        shape[infer] = x->numel / known;
        // A -1 outside dim 0 absorbs the batch unless dim 0 is the batch.
        if (act && infer != 0 && !(n > 0 && (mark[0] || t[0] == 1 || t[0] == 0)))
            return node_fail(c, CD_EUNSUPPORTED, "the target shape does not keep the batch in dim 0");
    }
    return reshape_to(c, n, shape, "Reshape");
}

static int axes_of(lctx *c, int64_t *axes, int *n) {
    int rc;
    if (c->n->ninputs >= 2 && in_id(c, 1) >= 0) return int_list(c, 1, "axes", axes, NULL, CD_MAX_RANK, n);
    if ((rc = attr_ints(c, "axes", axes, CD_MAX_RANK, n))) return rc;
    return 0;
}

static int lower_squeeze(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 2)) || (rc = only_first_output(c))) return rc;
    int unsq = strcmp(c->n->op, "Unsqueeze") == 0;
    int64_t axes[CD_MAX_RANK];
    int n;
    if ((rc = axes_of(c, axes, &n))) return rc;
    cd_value *x = in_val(c, 0);
    int64_t shape[CD_MAX_RANK];
    int rank;
    if (unsq) {
        if (n < 1) return node_fail(c, CD_EMODEL, "axes missing");
        rank = x->rank + n;
        if (rank > CD_MAX_RANK) return node_fail(c, CD_EUNSUPPORTED, "rank above %d", CD_MAX_RANK);
        uint8_t is_new[CD_MAX_RANK] = {0};
        for (int i = 0; i < n; i++) {
            int64_t a = norm_axis(axes[i], rank);
            if (a < 0 || a >= rank || is_new[a]) return node_fail(c, CD_EMODEL, "bad axes");
            if (a == 0 && is_act(x)) return node_fail(c, CD_EUNSUPPORTED, "cannot insert a dim before the batch");
            is_new[a] = 1;
        }
        for (int i = 0, j = 0; i < rank; i++) shape[i] = is_new[i] ? 1 : x->shape[j++];
    } else {
        uint8_t drop[CD_MAX_RANK] = {0};
        if (n < 0) {
            for (int i = 0; i < x->rank; i++) drop[i] = x->shape[i] == 1 && !(i == 0 && is_act(x));
        } else {
            for (int i = 0; i < n; i++) {
                int64_t a = norm_axis(axes[i], x->rank);
                if (a < 0 || a >= x->rank || x->shape[a] != 1) return node_fail(c, CD_EMODEL, "bad axes");
                if (a == 0 && is_act(x)) return node_fail(c, CD_EUNSUPPORTED, "cannot squeeze the batch dim");
                drop[a] = 1;
            }
        }
        rank = 0;
        for (int i = 0; i < x->rank; i++)
            if (!drop[i]) shape[rank++] = x->shape[i];
    }
    return reshape_to(c, rank, shape, c->n->op);
}

static int lower_transpose(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    int64_t p[CD_MAX_RANK];
    int n;
    if ((rc = attr_ints(c, "perm", p, CD_MAX_RANK, &n))) return rc;
    if (n < 0) {
        n = x->rank;
        for (int i = 0; i < n; i++) p[i] = n - 1 - i;
    }
    if (n != x->rank) return node_fail(c, CD_EMODEL, "perm has %d values for rank %d", n, x->rank);
    int perm[CD_MAX_RANK], seen[CD_MAX_RANK] = {0};
    int64_t shape[CD_MAX_RANK];
    for (int i = 0; i < n; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]]++) return node_fail(c, CD_EMODEL, "perm is not a permutation");
        perm[i] = (int)p[i];
        shape[i] = x->shape[p[i]];
    }
    if (x->kind == CD_VAL_CONST_F32) {
        if ((rc = const_out(c, CD_VAL_CONST_F32, n, shape, CD_MAX_CONST_ELEMS))) return rc;
        x = in_val(c, 0);
        cd_ref_transpose(n, x->shape, perm, x->f, out_val(c)->f);
        return 0;
    }
    if (!is_act(x)) return node_fail(c, CD_EUNSUPPORTED, "transpose of an integer constant");
    if (perm[0] != 0) return node_fail(c, CD_EUNSUPPORTED, "perm moves the batch dim (perm[0] must be 0)");
    int id = new_op(c, CD_OP_TRANSPOSE, "Transpose");
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    memcpy(c->g->ops[id].u.transpose.perm, perm, sizeof perm);
    return set_act_out(c, id, n, shape);
}

static int lower_concat(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, CD_OP_MAX_IN)) || (rc = only_first_output(c))) return rc;
    int64_t axis;
    if ((rc = attr_int(c, "axis", 0, &axis))) return rc;
    cd_value *x0 = in_val(c, 0);
    int nact = 0;
    for (int j = 0; j < c->n->ninputs; j++) {
        cd_value *v = in_val(c, j);
        if (!v) return node_fail(c, CD_EMODEL, "empty input %d", j);
        nact += is_act(v);
    }
    axis = norm_axis(axis, x0->rank);
    if (axis < 0 || axis >= x0->rank) return node_fail(c, CD_EMODEL, "axis out of range");
    int64_t shape[CD_MAX_RANK];
    memcpy(shape, x0->shape, sizeof shape);
    shape[axis] = 0;
    for (int j = 0; j < c->n->ninputs; j++) {
        cd_value *v = in_val(c, j);
        if (v->rank != x0->rank) return node_fail(c, CD_EMODEL, "inputs of different ranks");
        for (int i = 0; i < v->rank; i++)
            if (i != axis && v->shape[i] != x0->shape[i]) return node_fail(c, CD_EMODEL, "input %d's shape disagrees", j);
        shape[axis] += v->shape[axis];
    }
    if (nact == 0) {
        // Constants: shape vectors (1-D integers, keeping batch marks) or floats.
        if ((rc = const_out(c, x0->kind, x0->rank, shape, CD_MAX_FOLD_ELEMS))) return rc;
        if (x0->rank != 1) return node_fail(c, CD_EUNSUPPORTED, "concat of constants of rank %d (1 supported)", x0->rank);
        int64_t at = 0;
        for (int j = 0; j < c->n->ninputs; j++) {
            cd_value *v = in_val(c, j), *o = out_val(c);
            if (v->kind != o->kind) return node_fail(c, CD_EUNSUPPORTED, "constants of mixed types");
            for (int64_t e = 0; e < v->numel; e++, at++) {
                if (o->kind == CD_VAL_CONST_F32) {
                    o->f[at] = v->f[e];
                } else {
                    o->i[at] = v->i[e];
                    o->batch_mark[at] = v->batch_mark ? v->batch_mark[e] : 0;
                }
            }
        }
        return 0;
    }
    if (nact != c->n->ninputs) return node_fail(c, CD_EUNSUPPORTED, "concat of activations with constants");
    if (axis == 0) return node_fail(c, CD_EUNSUPPORTED, "concat along the batch dim");
    int id = new_op(c, CD_OP_CONCAT, "Concat");
    if (id < 0) return id;
    cd_op *o = &c->g->ops[id];
    o->nin = c->n->ninputs;
    for (int j = 0; j < o->nin; j++) o->in[j] = in_id(c, j);
    o->u.concat.axis = (int)axis;
    return set_act_out(c, id, x0->rank, shape);
}

static int lower_gemm(lctx *c) {
    int rc;
    const int matmul = strcmp(c->n->op, "MatMul") == 0;
    if ((rc = need_inputs(c, 2, matmul ? 2 : 3)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    cd_value *a = in_val(c, 0), *b = in_val(c, 1), *cc = in_val(c, 2);
    int64_t ta = 0, tb = 0;
    float alpha = 1.0f, beta = 1.0f;
    if (!matmul && ((rc = attr_int(c, "transA", 0, &ta)) || (rc = attr_int(c, "transB", 0, &tb)) ||
                    (rc = attr_float(c, "alpha", 1.0f, &alpha)) || (rc = attr_float(c, "beta", 1.0f, &beta))))
        return rc;
    if (!b || b->kind != CD_VAL_CONST_F32 || b->rank != 2)
        return node_fail(c, CD_EUNSUPPORTED, "B must be a float initializer of rank 2 (it is %s of rank %d)", kind_name(b), b ? b->rank : 0);
    if (ta) return node_fail(c, CD_EUNSUPPORTED, "transA=1 is not supported (the batch must be the rows of A)");
    if (matmul ? a->rank < 2 : a->rank != 2)
        return node_fail(c, CD_EUNSUPPORTED, "A has rank %d (%s)", a->rank, matmul ? "at least 2 needed" : "2 needed");
    int64_t K = a->shape[a->rank - 1];
    int64_t N = tb ? b->shape[0] : b->shape[1], bk = tb ? b->shape[1] : b->shape[0];
    if (bk != K) return node_fail(c, CD_EMODEL, "inner dims disagree (%lld vs %lld)", (long long)K, (long long)bk);
    if (cc && (cc->kind != CD_VAL_CONST_F32 || !(cc->numel == 1 || cc->numel == N) || cc->rank > 2 ||
               (cc->rank == 2 && cc->shape[0] != 1)))
        return node_fail(c, CD_EUNSUPPORTED, "C must be a float initializer broadcast over rows ([N], [1,N] or scalar)");
    int id = new_op(c, CD_OP_GEMM, matmul ? "MatMul" : "Gemm");
    if (id < 0) return id;
    cd_op *o = &c->g->ops[id];
    o->nin = 1;
    o->in[0] = in_id(c, 0);
    o->u.gemm.rows = (int)(a->numel / K);
    o->u.gemm.n = (int)N;
    o->u.gemm.k = (int)K;
    size_t wbytes; // N x K is the size of B, already checked: this cannot fail
    int64_t nk;
    if (cd_ck_mul_i64(N, K, &nk) || cd_ck_bytes(nk, sizeof(float), &wbytes))
        return node_fail(c, CD_ETOO_LARGE, "weights of %lld x %lld do not fit in memory", (long long)N, (long long)K);
    o->u.gemm.w = malloc(wbytes ? wbytes : 1);
    if (!o->u.gemm.w) return OOM(c);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            o->u.gemm.w[n * K + k] = alpha * (tb ? b->f[n * K + k] : b->f[k * N + n]);
    count_weights(c->g, b->f, b->numel);
    if (cc) {
        o->u.gemm.bias = malloc((size_t)N * sizeof(float));
        if (!o->u.gemm.bias) return OOM(c);
        for (int64_t n = 0; n < N; n++) o->u.gemm.bias[n] = beta * cc->f[cc->numel == 1 ? 0 : n];
        count_weights(c->g, cc->f, cc->numel);
    }
    int64_t shape[CD_MAX_RANK];
    memcpy(shape, a->shape, sizeof shape);
    shape[a->rank - 1] = N;
    return set_act_out(c, id, a->rank, shape);
}

static int lower_softmax(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    int64_t axis;
    const int v13 = c->g->opset >= 13;
    if ((rc = attr_int(c, "axis", v13 ? -1 : 1, &axis))) return rc;
    axis = norm_axis(axis, x->rank);
    if (axis < 0 || axis >= x->rank) return node_fail(c, CD_EMODEL, "axis out of range");
    if (axis == 0) return node_fail(c, CD_EUNSUPPORTED, "softmax over the batch dim");
    int64_t outer = 1, len = 1, inner = 1;
    for (int i = 1; i < x->rank; i++) {
        // (each a product of some dims of an activation, whose size is capped)
        int64_t *p = i < axis ? &outer : i == axis || !v13 ? &len : &inner; // before opset 13: 2-D at axis
        if (cd_ck_mul_i64(*p, x->shape[i], p)) return node_fail(c, CD_ETOO_LARGE, "the softmax's size overflows 64 bits");
    }
    int id = new_op(c, CD_OP_SOFTMAX, "Softmax");
    if (id < 0) return id;
    cd_op *o = &c->g->ops[id];
    o->nin = 1;
    o->in[0] = in_id(c, 0);
    o->u.softmax.outer = outer;
    o->u.softmax.len = len;
    o->u.softmax.inner = inner;
    return set_act_out(c, id, x->rank, x->shape);
}

static int lower_constant(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 0, 0)) || (rc = only_first_output(c))) return rc;
    if (c->np->n_attribute != 1) return node_fail(c, CD_EMODEL, "needs exactly one value attribute");
    const Onnx__AttributeProto *a = c->np->attribute[0];
    cd_value *o = out_val(c);
    if (strcmp(a->name, "value") == 0) {
        if (!a->t) return node_fail(c, CD_EMODEL, "'value' holds no tensor");
        char e[300];
        rc = cd_onnx_tensor_value(c->g, a->t, o->name, o, e, sizeof e);
        if (rc) return node_fail(c, rc, "%s", e);
        if (o->kind == CD_VAL_CONST_I64 && !(o->batch_mark = calloc((size_t)(o->numel ? o->numel : 1), 1))) return OOM(c);
        return 0;
    }
    int64_t one = 1;
    if (strcmp(a->name, "value_float") == 0) {
        if ((rc = const_out(c, CD_VAL_CONST_F32, 0, &one, 1))) return rc;
        out_val(c)->f[0] = a->f;
    } else if (strcmp(a->name, "value_int") == 0) {
        if ((rc = const_out(c, CD_VAL_CONST_I64, 0, &one, 1))) return rc;
        out_val(c)->i[0] = a->i;
    } else if (strcmp(a->name, "value_floats") == 0) {
        int64_t n = (int64_t)a->n_floats;
        if ((rc = const_out(c, CD_VAL_CONST_F32, 1, &n, CD_MAX_CONST_ELEMS))) return rc;
        memcpy(out_val(c)->f, a->floats, a->n_floats * sizeof(float));
    } else if (strcmp(a->name, "value_ints") == 0) {
        int64_t n = (int64_t)a->n_ints;
        if ((rc = const_out(c, CD_VAL_CONST_I64, 1, &n, CD_MAX_CONST_ELEMS))) return rc;
        memcpy(out_val(c)->i, a->ints, a->n_ints * sizeof(int64_t));
    } else {
        return node_fail(c, CD_EUNSUPPORTED, "attribute '%s' not supported (value, value_float(s), value_int(s))", a->name);
    }
    return 0;
}

static int lower_shape(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    int64_t start, end;
    if ((rc = attr_int(c, "start", 0, &start)) || (rc = attr_int(c, "end", x->rank, &end))) return rc;
    start = norm_axis(start, x->rank);
    end = norm_axis(end, x->rank);
    if (start < 0) start = 0;
    if (end > x->rank) end = x->rank;
    int64_t n = end > start ? end - start : 0;
    if ((rc = const_out(c, CD_VAL_CONST_I64, 1, &n, CD_MAX_RANK))) return rc;
    x = in_val(c, 0);
    cd_value *o = out_val(c);
    for (int64_t i = 0; i < n; i++) {
        o->i[i] = x->shape[start + i];
        o->batch_mark[i] = is_act(x) && start + i == 0;
    }
    return 0;
}

static int lower_gather(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 2)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0), *ix = in_val(c, 1);
    int64_t axis;
    if ((rc = attr_int(c, "axis", 0, &axis))) return rc;
    if (!is_const(x) || x->rank != 1 || ix->kind != CD_VAL_CONST_I64 || ix->rank > 1 || norm_axis(axis, 1) != 0)
        return node_fail(c, CD_EUNSUPPORTED, "only gathers from a constant 1-D list (shape computations) are supported");
    int64_t n = ix->numel;
    if ((rc = const_out(c, x->kind, ix->rank, &n, CD_MAX_CONST_ELEMS))) return rc;
    x = in_val(c, 0);
    ix = in_val(c, 1);
    cd_value *o = out_val(c);
    for (int64_t e = 0; e < n; e++) {
        int64_t k = ix->i[e] < 0 ? ix->i[e] + x->numel : ix->i[e];
        if (k < 0 || k >= x->numel) return node_fail(c, CD_EMODEL, "index %lld out of range", (long long)ix->i[e]);
        if (x->kind == CD_VAL_CONST_F32) {
            o->f[e] = x->f[k];
        } else {
            o->i[e] = x->i[k];
            o->batch_mark[e] = x->batch_mark ? x->batch_mark[k] : 0;
        }
    }
    return 0;
}

static int lower_cast(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = only_first_output(c))) return rc;
    int64_t to;
    if ((rc = attr_int(c, "to", 0, &to))) return rc;
    cd_value *x = in_val(c, 0);
    int to_float = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || to == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
                   to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    int to_int = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    if (is_act(x)) {
        if (to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return node_fail(c, CD_EUNSUPPORTED, "activations stay float32 (Cast to %lld)", (long long)to);
        return reshape_to(c, x->rank, x->shape, "Cast");
    }
    if (!to_float && !to_int) return node_fail(c, CD_EUNSUPPORTED, "cast to type %lld (float and int32/int64 supported)", (long long)to);
    cd_val_kind k = to_float ? CD_VAL_CONST_F32 : CD_VAL_CONST_I64;
    if ((rc = const_out(c, k, x->rank, x->shape, CD_MAX_CONST_ELEMS))) return rc;
    x = in_val(c, 0);
    cd_value *o = out_val(c);
    for (int64_t e = 0; e < x->numel; e++) {
        if (k == CD_VAL_CONST_F32) {
            if (x->kind == CD_VAL_CONST_I64 && x->batch_mark && x->batch_mark[e])
                return node_fail(c, CD_EUNSUPPORTED, "cast of the batch size to float");
            o->f[e] = x->kind == CD_VAL_CONST_F32 ? x->f[e] : (float)x->i[e];
        } else {
            if (x->kind == CD_VAL_CONST_F32 && !(x->f[e] >= -0x1p63f && x->f[e] < 0x1p63f))
                return node_fail(c, CD_EMODEL, "cast of %g to an integer", (double)x->f[e]);
            o->i[e] = x->kind == CD_VAL_CONST_I64 ? x->i[e] : (int64_t)x->f[e];
            o->batch_mark[e] = x->kind == CD_VAL_CONST_I64 && x->batch_mark ? x->batch_mark[e] : 0;
        }
    }
    return 0;
}

// ---- the op table -------------------------------------------------------------

typedef struct {
    const char *op;
    int (*lower)(lctx *c);
    const char *attrs; // allowed attribute names, comma-separated
} op_entry;

static const op_entry g_ops[] = {
    {"Conv", lower_conv, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"BatchNormalization", lower_batchnorm, "epsilon,momentum,training_mode"},
    {"Relu", lower_activation, ""},
    {"Clip", lower_activation, "min,max"},
    {"Sigmoid", lower_activation, ""},
    {"HardSigmoid", lower_activation, "alpha,beta"},
    {"HardSwish", lower_activation, ""},
    {"LeakyRelu", lower_activation, "alpha"},
    {"Add", lower_binary, ""},
    {"Mul", lower_binary, ""},
    {"Sub", lower_binary, ""},
    {"Div", lower_binary, ""},
    {"MaxPool", lower_pool, "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"},
    {"AveragePool", lower_pool, "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides"},
    {"GlobalAveragePool", lower_pool, ""},
    {"GlobalMaxPool", lower_pool, ""},
    {"Flatten", lower_flatten, "axis"},
    {"Reshape", lower_reshape, "allowzero"},
    {"Transpose", lower_transpose, "perm"},
    {"Concat", lower_concat, "axis"},
    {"Gemm", lower_gemm, "alpha,beta,transA,transB"},
    {"MatMul", lower_gemm, ""},
    {"Softmax", lower_softmax, "axis"},
    {"Identity", lower_identity, ""},
    {"Dropout", lower_identity, "seed,ratio"},
    {"Constant", lower_constant, "value,value_float,value_floats,value_int,value_ints"},
    {"Shape", lower_shape, "start,end"},
    {"Gather", lower_gather, "axis"},
    {"Unsqueeze", lower_squeeze, "axes"},
    {"Squeeze", lower_squeeze, "axes"},
    {"Cast", lower_cast, "to,saturate"},
};

static const op_entry *find_op(const char *name) {
    for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0]; i++)
        if (strcmp(g_ops[i].op, name) == 0) return &g_ops[i];
    return NULL;
}

static int attr_allowed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, name, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int cd_graph_lower(cd_graph *g, char *err, size_t errlen) {
    for (int k = 0; k < g->nnodes; k++) {
        lctx c = {g, &g->nodes[k], g->nodes[k].proto, err, errlen};
        const char *dom = c.np->domain;
        if (dom && *dom && strcmp(dom, "ai.onnx") != 0)
            return node_fail(&c, CD_EUNSUPPORTED, "domain '%s' is not supported (only the default ONNX domain)", dom);
        const op_entry *e = find_op(c.n->op);
        if (!e) {
            char list[1024] = "";
            size_t l = 0;
            for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0] && l < sizeof list; i++)
                l += (size_t)snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", g_ops[i].op);
            return node_fail(&c, CD_EUNSUPPORTED, "operator %s is not supported (supported: %s)", c.n->op, list);
        }
        for (size_t i = 0; i < c.np->n_attribute; i++) {
            const Onnx__AttributeProto *a = c.np->attribute[i];
            if (!a || !a->name) return node_fail(&c, CD_EMODEL, "attribute without a name");
            if (!attr_allowed(e->attrs, a->name))
                return node_fail(&c, CD_EUNSUPPORTED, "attribute '%s' is not supported (supported: %s)", a->name,
                                 *e->attrs ? e->attrs : "none");
        }
        // Inputs must have been produced (a value read before its producer ran
        // is an inconsistent graph).
        for (int j = 0; j < c.n->ninputs; j++)
            if (c.n->inputs[j] >= 0 && g->values[c.n->inputs[j]].kind == CD_VAL_NONE)
                return node_fail(&c, CD_EMODEL, "input '%s' has no value", g->values[c.n->inputs[j]].name);
        int rc = e->lower(&c);
        if (rc) return rc;
        if (c.n->noutputs > 0 && c.n->outputs[0] >= 0 && g->values[c.n->outputs[0]].kind == CD_VAL_NONE)
            return node_fail(&c, CD_EINTERNAL, "lowering produced no output");
    }
    for (int i = 0; i < g->noutputs; i++) {
        cd_value *v = &g->values[g->outputs[i]];
        if (v->kind != CD_VAL_ACT) {
            if (err && errlen) snprintf(err, errlen, "graph output '%s' is a constant (not supported)", v->name);
            return CD_EUNSUPPORTED;
        }
    }
    return 0;
}
