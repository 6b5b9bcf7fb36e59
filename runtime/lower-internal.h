#ifndef CD_RUNTIME_LOWER_INTERNAL_H
#define CD_RUNTIME_LOWER_INTERNAL_H

// What the lowering files share (lower.c: the pass, the op table and the
// compute ops; lower-shape.c: the shape ops and the constant folding of shape
// sub-graphs): the per-node context and the small helpers on attributes and
// values, static inline so that each file keeps them private. Internal to
// runtime/.

#include "runtime/graph.h"

#include "onnx.pb-c.h"
#include "core/errors.h"
#include "core/limits.h"
#include "core/checked.h"

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

static inline int node_fail(lctx *c, int code, const char *fmt, ...) {
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

static inline const Onnx__AttributeProto *attr_find(lctx *c, const char *name) {
    for (size_t i = 0; i < c->np->n_attribute; i++) {
        const Onnx__AttributeProto *a = c->np->attribute[i];
        if (a && a->name && strcmp(a->name, name) == 0) return a;
    }
    return NULL;
}

static inline int attr_type(const Onnx__AttributeProto *a) { return a->has_type ? (int)a->type : 0; }

// Each getter: 0 with *out set (default when absent), or CD_EMODEL when the
// attribute has the wrong type.
static inline int attr_int(lctx *c, const char *name, int64_t dflt, int64_t *out) {
    const Onnx__AttributeProto *a = attr_find(c, name);
    *out = dflt;
    if (!a) return 0;
    if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && !(a->has_i && !a->has_type))
        return node_fail(c, CD_EMODEL, "attribute '%s' must be an int", name);
    *out = a->i;
    return 0;
}

static inline int attr_float(lctx *c, const char *name, float dflt, float *out) {
    const Onnx__AttributeProto *a = attr_find(c, name);
    *out = dflt;
    if (!a) return 0;
    if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT && !(a->has_f && !a->has_type))
        return node_fail(c, CD_EMODEL, "attribute '%s' must be a float", name);
    *out = a->f;
    return 0;
}

// Copies up to max ints; *count = -1 when absent.
static inline int attr_ints(lctx *c, const char *name, int64_t *out, int max, int *count) {
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

static inline int attr_str(lctx *c, const char *name, const char *dflt, char *out, size_t outlen) {
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

static inline cd_value *in_val(lctx *c, int j) {
    if (j >= c->n->ninputs || c->n->inputs[j] < 0) return NULL;
    return &c->g->values[c->n->inputs[j]];
}

static inline int in_id(lctx *c, int j) { return j < c->n->ninputs ? c->n->inputs[j] : -1; }

static inline int is_act(const cd_value *v) { return v && v->kind == CD_VAL_ACT; }
static inline int is_const(const cd_value *v) {
    return v && (v->kind == CD_VAL_CONST_F32 || v->kind == CD_VAL_CONST_I64);
}

static inline const char *kind_name(const cd_value *v) {
    if (!v) return "missing";
    return v->kind == CD_VAL_ACT         ? "an activation"
           : v->kind == CD_VAL_CONST_F32 ? "a float constant"
                                         : "an integer constant";
}

static inline int need_inputs(lctx *c, int min, int max) {
    if (c->n->ninputs < min || c->n->ninputs > max)
        return node_fail(c, CD_EMODEL, "has %d inputs, expected %d..%d", c->n->ninputs, min, max);
    for (int j = 0; j < min; j++)
        if (c->n->inputs[j] < 0) return node_fail(c, CD_EMODEL, "required input %d is empty", j);
    return 0;
}

// The node's extra outputs (beyond the first) must not be read by anyone.
static inline int only_first_output(lctx *c) {
    if (c->n->noutputs < 1 || c->n->outputs[0] < 0) return node_fail(c, CD_EMODEL, "has no output");
    for (int j = 1; j < c->n->noutputs; j++) {
        int id = c->n->outputs[j];
        if (id >= 0 && c->g->values[id].nconsumers > 0)
            return node_fail(c, CD_EUNSUPPORTED, "output %d ('%s') is used; only the first output is supported", j,
                             c->g->values[id].name);
    }
    return 0;
}

static inline int need_act(lctx *c, int j) {
    cd_value *v = in_val(c, j);
    if (!is_act(v))
        return node_fail(c, CD_EUNSUPPORTED, "input %d must be computed at run time, it is %s", j, kind_name(v));
    return 0;
}

static inline cd_value *out_val(lctx *c) { return &c->g->values[c->n->outputs[0]]; }

// Declares the node's output an activation of the given per-item shape: at
// least one element and at most CD_MAX_ACT_ELEMS (so every dim fits an int).
static inline int set_act_out(lctx *c, int op, int rank, const int64_t *shape) {
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

static inline int new_op(lctx *c, cd_op_kind kind, const char *label) {
    int id = cd_graph_add_op(c->g, kind, c->n->name);
    if (id < 0) return OOM(c);
    snprintf(c->g->ops[id].label, sizeof c->g->ops[id].label, "%s", label);
    return id;
}

// Allocates constant storage for the output value, of at most limit elements
// (checked before anything is allocated): CD_MAX_CONST_ELEMS for a copy of
// a constant (reshaped, cast, transposed), CD_MAX_FOLD_ELEMS for a result that
// can grow beyond its operands (broadcast, concat).
static inline int const_out(lctx *c, cd_val_kind kind, int rank, const int64_t *shape, int64_t limit) {
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

// A context whose node has the given inputs and one output, out (a value
// id): the compute ops' lowering run on values this file made.
typedef struct {
    cd_node n;
    int out;
    lctx c;
} vnode;

static inline void vnode_init(vnode *v, lctx *c, const char *op, int nin, int *inputs, int out) {
    v->n = *c->n;
    v->n.op = op;
    v->n.ninputs = nin;
    v->n.inputs = inputs;
    v->out = out;
    v->n.noutputs = 1;
    v->n.outputs = &v->out;
    v->c = (lctx){c->g, &v->n, c->np, c->err, c->errlen};
}

// A new value named after the node's output (an intermediate activation,
// read once). Its id or a negative code.
static inline int new_value(lctx *c, const char *suffix) {
    char name[512];
    snprintf(name, sizeof name, "%s::%s", c->g->values[c->n->outputs[0]].name, suffix);
    int id = cd_graph_add_value(c->g, name);
    if (id < 0) return id == CD_ENOMEM ? OOM(c) : node_fail(c, CD_EMODEL, "name clash for '%s'", name);
    c->g->values[id].nconsumers = 1;
    return id;
}

// The single reader rule for fusion: v has exactly one consumer and is not a
// graph output, and its producer is an op of one of the given kinds.
static inline cd_op *fusable_producer(lctx *c, const cd_value *v) {
    if (!is_act(v) || v->nconsumers != 1 || v->is_output || v->producer_op < 0) return NULL;
    return &c->g->ops[v->producer_op];
}

// Moves op idx to the end of the list (it now runs where the current node
// is), fixing the producer indices of the values.
static inline int move_op_last(cd_graph *g, int idx) {
    if (idx == g->nops - 1) return idx;
    cd_op tmp = g->ops[idx];
    memmove(&g->ops[idx], &g->ops[idx + 1], (size_t)(g->nops - idx - 1) * sizeof(cd_op));
    g->ops[g->nops - 1] = tmp;
    for (int i = 0; i < g->nvalues; i++) {
        int p = g->values[i].producer_op;
        if (p == idx)
            g->values[i].producer_op = g->nops - 1;
        else if (p > idx)
            g->values[i].producer_op = p - 1;
    }
    return g->nops - 1;
}

// Gives the producer's output to this node's output (the node merged into it).
static inline void take_over_output(lctx *c, int op_idx, const char *suffix) {
    cd_op *op = &c->g->ops[op_idx];
    cd_value *old = &c->g->values[op->out];
    (void)set_act_out(c, op_idx, old->rank, old->shape); // the same shape: cannot fail
    size_t l = strlen(op->label);
    snprintf(op->label + l, sizeof op->label - l, "+%s", suffix);
}

static inline void count_weights(cd_graph *g, const float *w, int64_t n) {
    g->params += n;
    for (int64_t i = 0; i < n; i++) g->zero_params += w[i] == 0.0f;
}

static inline int64_t norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

// ---- spatial attributes shared by Conv and the pools --------------------------

typedef struct {
    int kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
} spatial;

static inline int read_spatial(lctx *c, int h, int w, spatial *s, int kernel_from_attr, int allow_dil) {
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
    if (s->sh < 1 || s->sw < 1 || s->dh < 1 || s->dw < 1 || s->sh > 1024 || s->sw > 1024 || s->dh > 1024 ||
        s->dw > 1024)
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
        if (s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0 || s->pt > 4096 || s->pl > 4096 || s->pb > 4096 ||
            s->pr > 4096)
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

// NumPy broadcast of two shapes; 0 or CD_EMODEL.
static inline int broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o) {
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i - (r - ra) >= 0 ? a[i - (r - ra)] : 1, db = i - (r - rb) >= 0 ? b[i - (r - rb)] : 1;
        if (da != db && da != 1 && db != 1) return CD_EMODEL;
        o[i] = da == 1 ? db : da;
    }
    *ro = r;
    return 0;
}

// ---- the compute ops (lower.c), also for the quantized ops' lowering --------------

int cd_lower_conv(lctx *c);
int cd_lower_binary(lctx *c);
int cd_lower_pool(lctx *c);
int cd_lower_gemm(lctx *c);
// Makes a float constant value named after the node's output and suffix
// (data copied) and returns its id, or a negative code.
int cd_lower_make_const(lctx *c, const char *suffix, int rank, const int64_t *shape, const float *data);
// Drops the kernel taps that read only padding at this input size
// (lower-conv-taps.c; dilated convs on small maps): weights replaced.
int cd_conv_crop_dead_taps(cd_conv_desc *d, float **w);

// ---- the quantized ops (lower-quant.c), for the op table --------------------------

int cd_lower_quantize(lctx *c);
int cd_lower_dequantize(lctx *c);
int cd_lower_qlinear_conv(lctx *c);
int cd_lower_qlinear_matmul(lctx *c);
int cd_lower_qgemm(lctx *c);
int cd_lower_qlinear_binary(lctx *c);
int cd_lower_qlinear_global_pool(lctx *c);
int cd_lower_integer_op(lctx *c);
int cd_lower_dynamic_quantize(lctx *c);
// runtime/lower-dynquant.c: a node reading a DynamicQuantizeLinear's
// outputs is lowered as part of quantize_dynamic's pattern (Mul, Cast,
// ConvInteger, MatMulInteger) or refused naming them: 0 or an error; 1 when
// none of its inputs is one of the pattern's (the op's own lowering runs).
int cd_lower_dynq_op(lctx *c);
// CD_EUNSUPPORTED (err filled) when graph output id is one of the pattern's
// values (they hold scaled numbers), else 0.
int cd_lower_dynq_output(const cd_graph *g, int id, char *err, size_t errlen);
// Cast of a quantized activation to float (its integer values).
int cd_lower_quant_cast(lctx *c);
// After an op that passes a quantized input through (MaxPool, Reshape ...):
// the output is quantized like input 0. 0, CD_EUNSUPPORTED or CD_ENOMEM.
int cd_lower_quant_pass(lctx *c, int per_channel_ok);
// Refuses a quantized activation as an input of an op that takes float.
int cd_lower_quant_refuse(lctx *c);

// ---- the shape ops (lower-shape.c), for the op table -----------------------------

int cd_lower_identity(lctx *c);
int cd_lower_flatten(lctx *c);
int cd_lower_reshape(lctx *c);
int cd_lower_squeeze(lctx *c);
int cd_lower_transpose(lctx *c);
int cd_lower_concat(lctx *c);
int cd_lower_constant(lctx *c);
int cd_lower_shape(lctx *c);
int cd_lower_gather(lctx *c);
int cd_lower_cast(lctx *c);

// ---- the ops of issue 22 (lower-pad-slice.c, lower-reduce.c, lower-elementwise.c) --

int cd_lower_pad(lctx *c);
int cd_lower_slice(lctx *c);
int cd_lower_split(lctx *c);
int cd_lower_reduce(lctx *c);
int cd_lower_layernorm(lctx *c);
int cd_lower_unary(lctx *c);
int cd_lower_minmax(lctx *c);
// When input 0 of the node is a zero constant Pad of H and W alone that
// nobody else reads (and with need_nonneg, whose input is never negative):
// *in becomes the Pad's input, *h and *w its size, pads (t, l, b, r) grow by
// the Pad's. Returns 1 when folded, else 0 with nothing changed.
int cd_lower_fold_pad(lctx *c, int need_nonneg, int *in, int *h, int *w, int pads[4]);

// ---- Resize, Upsample, ConvTranspose (lower-resize.c, lower-convt.c) ---------------

int cd_lower_resize(lctx *c);
int cd_lower_upsample(lctx *c);
int cd_lower_convtranspose(lctx *c);
// ---- Expand, Tile, Where, comparisons, Range, ConstantOfShape, Gather of
// tensors (lower-expand.c): folded on constants, TILE/GATHER on activations --

int cd_lower_expand(lctx *c);
int cd_lower_tile(lctx *c);
int cd_lower_compare(lctx *c); // Equal, Less, Greater, Not
int cd_lower_where(lctx *c);
int cd_lower_range(lctx *c);
int cd_lower_constant_of_shape(lctx *c);
// Gather beyond a constant 1-D list (cd_lower_gather's own case).
int cd_lower_gather_tensor(lctx *c);

// ---- opsets (lower-opset.c) and the op table (lower.c), for op-info.c --------------

// Refuses the node when its operator, one of its attributes or one of its
// inputs is not part of the model's opset. 0 or CD_EUNSUPPORTED.
int cd_lower_check_opset(lctx *c);
// The first default-domain opset convd reads op at (CD_OPSET_MIN unless newer).
int cd_lower_op_since(const char *op);
// 1 with the opsets attribute attr of op exists in where narrower than the
// op's, else 0.
int cd_lower_attr_opsets(const char *op, const char *attr, int *from, int *to);
// The entries of lower.c's op table: name (NULL past the end), domain ("" for
// the default) and accepted attributes (comma-separated).
int cd_lower_table_size(void);
const char *cd_lower_table_entry(int i, const char **domain, const char **attrs);

#endif // CD_RUNTIME_LOWER_INTERNAL_H
