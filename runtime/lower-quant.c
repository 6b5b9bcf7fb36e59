// Lowering of quantized ONNX: the QDQ form (QuantizeLinear/DequantizeLinear
// around float ops, what onnxruntime's quantize_static writes by default)
// and the QOperator form (QLinearConv, QLinearMatMul, com.microsoft's
// QGemm/QLinearAdd/QLinearMul/QLinearGlobalAveragePool, ConvInteger,
// MatMulInteger), all run in f32:
//
//   - DequantizeLinear of a constant folds at load into a float constant, so
//     a QDQ conv's weights are ordinary f32 weights (dense, sparse or
//     compacted: a pruned zero stays 0, since a symmetric s8 zero point is 0);
//     QuantizeLinear of a constant folds into an integer constant.
//   - QuantizeLinear of a float activation becomes a FAKEQUANT op. Its output
//     value is the quantized tensor, held as its dequantized values with the
//     parameters attached (cd_value.q): a DequantizeLinear with the same
//     parameters is then an alias, and with others a Mul and an Add.
//   - A QOperator op becomes dequantize -> the float op -> FAKEQUANT: inputs
//     are their dequantized values, weights and int32 biases dequantized
//     constants, and the output is quantized like a QuantizeLinear's.
//   - ConvInteger/MatMulInteger produce their int32 sums exactly as floats
//     (a quantized tensor of scale 1, zero point 0).
//
// A quantized tensor passes unchanged through MaxPool, Reshape and the other
// ops that only move or select values; any other op refuses it (an ONNX type
// error: the file lacks a DequantizeLinear). Quantized graph inputs and
// outputs are refused (convd's inputs and outputs are float32).

#include "runtime/lower-internal.h"

#include <math.h>

// ---- quantization parameters ----------------------------------------------------

static const char *dtype_name(int dt) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return "uint8";
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return "int8";
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return "uint16";
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return "int16";
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return "int32";
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return "int64";
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return "float";
    }
    return "an unsupported type";
}

// The range of a quantized type; -1 for a type that is not one.
static int qrange(int dt, float *lo, float *hi) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *lo = 0, *hi = 255; return 0;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *lo = -128, *hi = 127; return 0;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: *lo = 0, *hi = 65535; return 0;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *lo = -32768, *hi = 32767; return 0;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *lo = -2147483648.0f, *hi = 2147483647.0f; return 0;
    }
    return -1;
}

// The type of an integer tensor x: a constant's file type, a quantized
// activation's; 0 when unknown (a computed constant), -1 for a float tensor.
static int value_dtype(const cd_value *x) {
    if (x->kind == CD_VAL_CONST_I64) return x->dtype;
    if (x->kind == CD_VAL_ACT && x->q) return x->q->dtype;
    return -1;
}

// Reads the scale (input js) and the zero point (input jz, optional) of a
// quantization of x into *qp (arrays owned by the caller afterwards):
// per tensor, or per channel along axis (of x) when the scale is 1-D of
// more than one value. xdtype is the quantized type when the node fixes it
// (a DequantizeLinear's input, a QuantizeLinear's output_dtype; 0 when not):
// the zero point must match it. Without either, the type is uint8.
// Returns 0, CD_EMODEL (a missing or inconsistent parameter, axis out of
// range), CD_EUNSUPPORTED (parameters computed at run time, another type)
// or CD_ENOMEM.
static int read_quant(lctx *c, int js, int jz, const cd_value *x, int xdtype, int64_t axis, cd_quant *qp) {
    memset(qp, 0, sizeof *qp);
    const cd_value *s = in_val(c, js), *z = in_val(c, jz);
    if (!s) return node_fail(c, CD_EMODEL, "the scale (input %d) is missing", js);
    if (is_act(s) || is_act(z))
        return node_fail(c, CD_EUNSUPPORTED,
                         "the %s (input %d) is computed at run time: dynamic quantization is not supported",
                         is_act(s) ? "scale" : "zero point", is_act(s) ? js : jz);
    if (s->kind != CD_VAL_CONST_F32)
        return node_fail(c, CD_EMODEL, "the scale (input %d) must be a float constant, it is %s", js, kind_name(s));
    if (z && z->kind != CD_VAL_CONST_I64)
        return node_fail(c, CD_EMODEL, "the zero point (input %d) must be an integer constant, it is %s", jz,
                         kind_name(z));
    if (s->rank > 1 || s->numel < 1)
        return node_fail(c, CD_EMODEL, "the scale must be a scalar or 1-D and not empty (rank %d, %lld values)",
                         s->rank, (long long)s->numel);
    const int per_channel = s->numel != 1;
    int64_t ax = 0;
    if (per_channel) {
        ax = norm_axis(axis, x->rank);
        if (ax < 0 || ax >= x->rank)
            return node_fail(c, CD_EMODEL, "axis %lld is out of range for an input of rank %d", (long long)axis,
                             x->rank);
        if (is_act(x) && ax == 0)
            return node_fail(c, CD_EUNSUPPORTED, "per-channel parameters along the batch dim (axis 0)");
        if (s->numel != x->shape[ax])
            return node_fail(c, CD_EMODEL, "the scale has %lld values, dim %lld of the input has %lld",
                             (long long)s->numel, (long long)ax, (long long)x->shape[ax]);
    }
    if (z && (z->numel != s->numel || z->rank > 1))
        return node_fail(c, CD_EMODEL, "the zero point has %lld values (rank %d), the scale %lld", (long long)z->numel,
                         z->rank, (long long)s->numel);
    int dt = z && z->dtype ? z->dtype : xdtype;
    if (z && z->dtype && xdtype > 0 && z->dtype != xdtype)
        return node_fail(c, CD_EMODEL, "the zero point is %s, the quantized tensor %s", dtype_name(z->dtype),
                         dtype_name(xdtype));
    if (dt <= 0) dt = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    float lo, hi;
    if (qrange(dt, &lo, &hi))
        return node_fail(c, CD_EUNSUPPORTED,
                         "quantized type %s (%d) is not supported (uint8, int8, uint16, int16, int32)", dtype_name(dt),
                         dt);
    qp->d = (cd_fakequant_desc){(int)s->numel, (int)ax, lo, hi};
    qp->dtype = dt;
    qp->scale = malloc((size_t)s->numel * sizeof(float));
    qp->zero_point = malloc((size_t)s->numel * sizeof(float));
    if (!qp->scale || !qp->zero_point) {
        cd_quant_clear(qp);
        return OOM(c);
    }
    for (int64_t i = 0; i < s->numel; i++) {
        float sc = s->f[i];
        int64_t zp = z ? z->i[i] : 0;
        if (!(sc > 0.0f) || !isfinite(sc)) {
            cd_quant_clear(qp);
            return node_fail(c, CD_EMODEL, "the scale must be positive and finite (value %lld is %g)", (long long)i,
                             (double)sc);
        }
        if ((float)zp < lo || (float)zp > hi) {
            cd_quant_clear(qp);
            return node_fail(c, CD_EMODEL, "zero point %lld is outside the range of %s", (long long)zp, dtype_name(dt));
        }
        qp->scale[i] = sc;
        qp->zero_point[i] = (float)zp;
    }
    return 0;
}

static int quant_equal(const cd_quant *a, const cd_quant *b) {
    if (a->d.channels != b->d.channels || (a->d.channels > 1 && a->d.axis != b->d.axis)) return 0;
    size_t n = (size_t)a->d.channels * sizeof(float);
    return memcmp(a->scale, b->scale, n) == 0 && memcmp(a->zero_point, b->zero_point, n) == 0;
}

// The channel of element e of a tensor of x's shape quantized as qp.
static int64_t channel_of(const cd_quant *qp, const cd_value *x, int64_t e) {
    if (qp->d.channels <= 1) return 0;
    int64_t inner = 1;
    for (int i = qp->d.axis + 1; i < x->rank; i++) inner *= x->shape[i];
    return e / inner % qp->d.channels;
}

// ---- building blocks --------------------------------------------------------------

// Attaches a copy of qp to value id (a quantized activation).
static int tag_quant(lctx *c, int id, const cd_quant *qp) {
    cd_value *v = &c->g->values[id];
    if (!v->q && !(v->q = calloc(1, sizeof *v->q))) return OOM(c);
    cd_quant_clear(v->q);
    return cd_quant_copy(qp, v->q) ? OOM(c) : 0;
}

// out = FAKEQUANT(x) with qp; out becomes a quantized activation.
static int emit_fakequant(lctx *c, int x, const cd_quant *qp, int out, const char *label) {
    int ins[1] = {x};
    vnode v;
    vnode_init(&v, c, "QuantizeLinear", 1, ins, out);
    int op = new_op(&v.c, CD_OP_FAKEQUANT, label);
    if (op < 0) return op;
    cd_op *o = &c->g->ops[op];
    o->nin = 1;
    o->in[0] = x;
    if (cd_quant_copy(qp, &o->u.fq)) return OOM(c);
    const cd_value *xv = &c->g->values[x];
    int64_t shape[CD_MAX_RANK];
    memcpy(shape, xv->shape, sizeof shape);
    int rc = set_act_out(&v.c, op, xv->rank, shape);
    return rc ? rc : tag_quant(c, out, qp);
}

// The dequantized values of the quantized activation x read with the
// parameters want: (q - want.zp) * want.scale where q = x / x.scale + x.zp,
// i.e. x * (want.scale / x.scale) + (x.zp - want.zp) * want.scale. Written
// to out (an alias when the parameters agree), or with out = -1 to a new
// value (x itself when they agree). Returns the value's id or a negative code.
static int requant(lctx *c, int x, const cd_quant *want, int out, const char *label) {
    const cd_quant *have = c->g->values[x].q;
    if (quant_equal(have, want)) {
        if (out < 0) return x;
        int ins[1] = {x};
        vnode v;
        vnode_init(&v, c, label, 1, ins, out);
        int op = new_op(&v.c, CD_OP_ALIAS, label);
        if (op < 0) return op;
        c->g->ops[op].nin = 1;
        c->g->ops[op].in[0] = x;
        const cd_value *xv = &c->g->values[x];
        int64_t shape[CD_MAX_RANK];
        memcpy(shape, xv->shape, sizeof shape);
        int rc = set_act_out(&v.c, op, xv->rank, shape);
        return rc ? rc : out;
    }
    if (have->d.channels > 1 && want->d.channels > 1 &&
        (have->d.axis != want->d.axis || have->d.channels != want->d.channels))
        return node_fail(c, CD_EUNSUPPORTED, "requantization between per-channel parameters of different axes");
    const cd_quant *pc = have->d.channels > 1 ? have : want;
    int C = pc->d.channels, axis = pc->d.channels > 1 ? pc->d.axis : c->g->values[x].rank - 1;
    float *mul = malloc((size_t)C * sizeof(float)), *add = malloc((size_t)C * sizeof(float));
    if (!mul || !add) {
        free(mul);
        free(add);
        return OOM(c);
    }
    for (int i = 0; i < C; i++) {
        int h = have->d.channels > 1 ? i : 0, w = want->d.channels > 1 ? i : 0;
        mul[i] = want->scale[w] / have->scale[h];
        add[i] = (have->zero_point[h] - want->zero_point[w]) * want->scale[w];
    }
    // Constants of shape [C, 1, ...] broadcast along axis.
    int64_t cshape[CD_MAX_RANK];
    int crank = c->g->values[x].rank - axis;
    cshape[0] = C;
    for (int i = 1; i < crank; i++) cshape[i] = 1;
    char sfx[64];
    snprintf(sfx, sizeof sfx, "rq_mul%d", x);
    int mid = cd_lower_make_const(c, sfx, crank, cshape, mul);
    snprintf(sfx, sizeof sfx, "rq_add%d", x);
    int aid = mid >= 0 ? cd_lower_make_const(c, sfx, crank, cshape, add) : mid;
    free(mul);
    free(add);
    if (aid < 0) return aid;
    snprintf(sfx, sizeof sfx, "rq%d", x);
    int tmp = new_value(c, sfx);
    if (tmp < 0) return tmp;
    if (out < 0) {
        snprintf(sfx, sizeof sfx, "dq%d", x);
        if ((out = new_value(c, sfx)) < 0) return out;
    }
    int in1[2] = {x, mid}, in2[2] = {tmp, aid};
    vnode v;
    vnode_init(&v, c, "Mul", 2, in1, tmp);
    int rc = cd_lower_binary(&v.c);
    if (rc) return rc;
    vnode_init(&v, c, "Add", 2, in2, out);
    rc = cd_lower_binary(&v.c);
    return rc ? rc : out;
}

// out[e] = (x[e] - zero_point) * scale over the integer constant x read
// with qp. 0, or CD_EMODEL for a value outside the range of qp's type (the
// file's data disagrees with its type, or a computed constant).
static int dequant_values(lctx *c, const cd_value *x, const cd_quant *qp, float *out) {
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t ch = channel_of(qp, x, e);
        if ((x->batch_mark && x->batch_mark[e]) || (float)x->i[e] < qp->d.qmin || (float)x->i[e] > qp->d.qmax)
            return node_fail(c, CD_EMODEL, "value %lld of '%s' (%lld) is not a %s", (long long)e, x->name,
                             (long long)x->i[e], dtype_name(qp->dtype));
        out[e] = (float)((double)(x->i[e] - (int64_t)qp->zero_point[ch]) * qp->scale[ch]);
    }
    return 0;
}

// A float constant folded from integers read with qp keeps qp when they are
// symmetric int8 (every zero point 0): a conv over it can run on the int8
// kernels (cd_op conv.wscale). 0 or a negative code.
static int tag_weight_scales(lctx *c, int id, const cd_quant *qp) {
    if (qp->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__INT8) return 0;
    for (int i = 0; i < qp->d.channels; i++)
        if (qp->zero_point[i] != 0.0f || !(qp->scale[i] > 0.0f)) return 0;
    return tag_quant(c, id, qp);
}

// A float constant value (new) holding the dequantized integer constant x
// read with qp; its id or a negative code.
static int dequant_const(lctx *c, int x, const cd_quant *qp, const char *suffix) {
    const cd_value *xv = &c->g->values[x];
    float *f = malloc((size_t)(xv->numel ? xv->numel : 1) * sizeof(float));
    if (!f) return OOM(c);
    int rc = dequant_values(c, xv, qp, f);
    int64_t shape[CD_MAX_RANK];
    memcpy(shape, xv->shape, sizeof shape);
    int id = rc ? rc : cd_lower_make_const(c, suffix, xv->rank, shape, f);
    free(f);
    if (id >= 0 && (rc = tag_weight_scales(c, id, qp))) return rc;
    return id;
}

// Input j of a QOperator op, a quantized tensor with its parameters in
// inputs js, jz, as the id of a float value: its dequantized values (an
// activation, or a constant folded now). Negative code on failure.
static int qinput(lctx *c, int j, int js, int jz, const char *what) {
    cd_value *x = in_val(c, j);
    int dt = x ? value_dtype(x) : -1;
    if (!x || dt < 0 || (is_act(x) && !x->q))
        return node_fail(c, CD_EMODEL, "%s (input %d) must be a quantized (integer) tensor, it is %s", what, j,
                         !x          ? "missing"
                         : is_act(x) ? "a float activation"
                                     : kind_name(x));
    cd_quant qp;
    int64_t axis = 1;
    int rc = read_quant(c, js, jz, x, dt, axis, &qp);
    if (rc) return rc;
    char sfx[32];
    snprintf(sfx, sizeof sfx, "dq_in%d", j);
    int id = is_act(x) ? requant(c, in_id(c, j), &qp, -1, "Dequantize") : dequant_const(c, in_id(c, j), &qp, sfx);
    cd_quant_clear(&qp);
    return id;
}

// Input j must be an initializer of a quantized type (int8, uint8 ...) and rank.
static int need_int_const(lctx *c, int j, const char *what, int rank) {
    cd_value *w = in_val(c, j);
    float lo, hi;
    if (!w || w->kind != CD_VAL_CONST_I64 || (rank && w->rank != rank) || qrange(w->dtype, &lo, &hi))
        return node_fail(c, is_act(w) ? CD_EUNSUPPORTED : CD_EMODEL,
                         "%s (input %d) must be an integer initializer of rank %d, it is %s", what, j, rank,
                         kind_name(w));
    return 0;
}

// The int32 bias of a QOperator conv/gemm (input j, n values, optional) as
// a float constant: bias * x_scale * w_scale[k]. Its id, -1 when absent, or
// a negative code (below -1).
static int qbias(lctx *c, int j, int64_t n, const cd_quant *qx, const cd_quant *qw) {
    cd_value *b = in_val(c, j);
    if (!b) return -1;
    if (b->kind != CD_VAL_CONST_I64 || b->numel != n)
        return node_fail(c, CD_EMODEL, "the bias (input %d) must be an int32 initializer of %lld values", j,
                         (long long)n);
    if (qx->d.channels != 1) return node_fail(c, CD_EUNSUPPORTED, "a per-channel quantized input with a bias");
    float *f = malloc((size_t)n * sizeof(float));
    if (!f) return OOM(c);
    for (int64_t k = 0; k < n; k++)
        f[k] = (float)((double)b->i[k] * qx->scale[0] * qw->scale[qw->d.channels > 1 ? k : 0]);
    int64_t shape[1] = {n};
    int id = cd_lower_make_const(c, "dq_bias", 1, shape, f);
    free(f);
    return id;
}

// Lowers the float op (fn as op) on inputs into a new value, then
// quantizes it with the parameters in inputs js, jz into the node's output.
static int float_op_then_quantize(lctx *c, const char *op, int (*fn)(lctx *), int nin, int *ins, int js, int jz) {
    int mid = new_value(c, "f32");
    if (mid < 0) return mid;
    vnode v;
    vnode_init(&v, c, op, nin, ins, mid);
    int rc = fn(&v.c);
    if (rc) return rc;
    cd_quant qy;
    if ((rc = read_quant(c, js, jz, &c->g->values[mid], 0, 1, &qy))) return rc;
    rc = emit_fakequant(c, mid, &qy, c->n->outputs[0], c->n->op);
    cd_quant_clear(&qy);
    return rc;
}

// ---- QuantizeLinear, DequantizeLinear ---------------------------------------------

static int qdq_attrs(lctx *c, int64_t *axis, int64_t *out_dtype) {
    int64_t block = 0;
    int rc;
    if ((rc = attr_int(c, "axis", 1, axis)) || (rc = attr_int(c, "block_size", 0, &block))) return rc;
    if (out_dtype && (rc = attr_int(c, "output_dtype", 0, out_dtype))) return rc;
    if (block)
        return node_fail(c, CD_EUNSUPPORTED, "block_size %lld (blocked quantization) is not supported",
                         (long long)block);
    return 0;
}

int cd_lower_quantize(lctx *c) {
    int rc;
    int64_t axis, odt;
    if ((rc = need_inputs(c, 2, 3)) || (rc = only_first_output(c)) || (rc = qdq_attrs(c, &axis, &odt))) return rc;
    cd_value *x = in_val(c, 0);
    if (x->kind == CD_VAL_CONST_I64 || (is_act(x) && x->q))
        return node_fail(c, CD_EMODEL, "input 0 is an integer tensor; QuantizeLinear takes float");
    cd_quant qp;
    if ((rc = read_quant(c, 1, 2, x, (int)odt, axis, &qp))) return rc;
    if (is_act(x)) {
        rc = emit_fakequant(c, in_id(c, 0), &qp, c->n->outputs[0], "QuantizeLinear");
    } else if (!(rc = const_out(c, CD_VAL_CONST_I64, x->rank, x->shape, CD_MAX_CONST_ELEMS))) {
        x = in_val(c, 0);
        cd_value *o = out_val(c);
        o->dtype = qp.dtype;
        for (int64_t e = 0; e < x->numel; e++) {
            int64_t ch = channel_of(&qp, x, e);
            float q = rintf(x->f[e] / qp.scale[ch]) + qp.zero_point[ch];
            o->i[e] = (int64_t)fminf(fmaxf(q, qp.d.qmin), qp.d.qmax);
        }
    }
    cd_quant_clear(&qp);
    return rc;
}

int cd_lower_dequantize(lctx *c) {
    int rc;
    int64_t axis;
    if ((rc = need_inputs(c, 2, 3)) || (rc = only_first_output(c)) || (rc = qdq_attrs(c, &axis, NULL))) return rc;
    cd_value *x = in_val(c, 0);
    int dt = value_dtype(x);
    if (dt < 0 || (is_act(x) && !x->q))
        return node_fail(c, CD_EMODEL, "input 0 is %s; DequantizeLinear takes a quantized (integer) tensor",
                         is_act(x) ? "a float activation" : kind_name(x));
    cd_quant qp;
    if ((rc = read_quant(c, 1, 2, x, dt, axis, &qp))) return rc;
    if (is_act(x)) {
        rc = requant(c, in_id(c, 0), &qp, c->n->outputs[0], "DequantizeLinear");
        rc = rc < 0 ? rc : 0;
    } else if (!(rc = const_out(c, CD_VAL_CONST_F32, x->rank, x->shape, CD_MAX_CONST_ELEMS))) {
        rc = dequant_values(c, in_val(c, 0), &qp, out_val(c)->f);
        if (!rc) rc = tag_weight_scales(c, c->n->outputs[0], &qp);
    }
    cd_quant_clear(&qp);
    return rc;
}

int cd_lower_quant_cast(lctx *c) {
    cd_value *x = in_val(c, 0);
    // Its integer values: the parameters scale 1, zero point 0.
    float one = 1.0f, zero = 0.0f;
    cd_quant ints = {{1, 0, x->q->d.qmin, x->q->d.qmax}, &one, &zero, x->q->dtype};
    int rc = requant(c, in_id(c, 0), &ints, c->n->outputs[0], "Cast");
    return rc < 0 ? rc : 0;
}

// ---- the QOperator ops ----------------------------------------------------------------

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?).
int cd_lower_qlinear_conv(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 8, 9)) || (rc = only_first_output(c)) || (rc = need_int_const(c, 3, "the weights", 4)))
        return rc;
    int xin = qinput(c, 0, 1, 2, "x");
    if (xin < 0) return xin;
    cd_quant qx, qw;
    if ((rc = read_quant(c, 1, 2, in_val(c, 0), value_dtype(in_val(c, 0)), 1, &qx))) return rc;
    if ((rc = read_quant(c, 4, 5, in_val(c, 3), in_val(c, 3)->dtype, 0, &qw))) {
        cd_quant_clear(&qx);
        return rc;
    }
    int w = dequant_const(c, in_id(c, 3), &qw, "dq_w");
    int b = w < 0 ? w : qbias(c, 8, c->g->values[in_id(c, 3)].shape[0], &qx, &qw);
    cd_quant_clear(&qx);
    cd_quant_clear(&qw);
    if (w < 0) return w;
    if (b < -1) return b;
    int ins[3] = {xin, w, b};
    return float_op_then_quantize(c, "Conv", cd_lower_conv, b >= 0 ? 3 : 2, ins, 6, 7);
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): b a
// constant [K, N], per tensor or per column.
int cd_lower_qlinear_matmul(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 8, 8)) || (rc = only_first_output(c)) || (rc = need_int_const(c, 3, "B", 2))) return rc;
    int a = qinput(c, 0, 1, 2, "A");
    if (a < 0) return a;
    cd_quant qb;
    if ((rc = read_quant(c, 4, 5, in_val(c, 3), in_val(c, 3)->dtype, 1, &qb))) return rc;
    int b = dequant_const(c, in_id(c, 3), &qb, "dq_b");
    cd_quant_clear(&qb);
    if (b < 0) return b;
    int ins[2] = {a, b};
    return float_op_then_quantize(c, "MatMul", cd_lower_gemm, 2, ins, 6, 7);
}

// com.microsoft QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?,
// y_zp?): alpha, transA, transB as Gemm's; C int32 with scale a_scale *
// b_scale; without y_scale the output is float.
int cd_lower_qgemm(lctx *c) {
    int rc;
    int64_t tb;
    if ((rc = need_inputs(c, 6, 9)) || (rc = only_first_output(c)) || (rc = need_int_const(c, 3, "B", 2)) ||
        (rc = attr_int(c, "transB", 0, &tb)))
        return rc;
    int a = qinput(c, 0, 1, 2, "A");
    if (a < 0) return a;
    cd_quant qa, qb;
    if ((rc = read_quant(c, 1, 2, in_val(c, 0), value_dtype(in_val(c, 0)), 1, &qa))) return rc;
    if ((rc = read_quant(c, 4, 5, in_val(c, 3), in_val(c, 3)->dtype, tb ? 0 : 1, &qb))) {
        cd_quant_clear(&qa);
        return rc;
    }
    const int64_t n = tb ? in_val(c, 3)->shape[0] : in_val(c, 3)->shape[1];
    int b = dequant_const(c, in_id(c, 3), &qb, "dq_b");
    int bias = b < 0 ? b : qbias(c, 6, n, &qa, &qb);
    cd_quant_clear(&qa);
    cd_quant_clear(&qb);
    if (b < 0) return b;
    if (bias < -1) return bias;
    int ins[3] = {a, b, bias};
    int nin = bias >= 0 ? 3 : 2;
    if (!in_val(c, 7)) { // float output
        vnode v;
        vnode_init(&v, c, "Gemm", nin, ins, c->n->outputs[0]);
        return cd_lower_gemm(&v.c);
    }
    return float_op_then_quantize(c, "Gemm", cd_lower_gemm, nin, ins, 7, 8);
}

// com.microsoft QLinearAdd / QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp,
// C_scale, C_zp).
int cd_lower_qlinear_binary(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 7, 8)) || (rc = only_first_output(c))) return rc;
    int a = qinput(c, 0, 1, 2, "A");
    if (a < 0) return a;
    int b = qinput(c, 3, 4, 5, "B");
    if (b < 0) return b;
    int ins[2] = {a, b};
    return float_op_then_quantize(c, strcmp(c->n->op, "QLinearMul") == 0 ? "Mul" : "Add", cd_lower_binary, 2, ins, 6,
                                  7);
}

// com.microsoft QLinearGlobalAveragePool(X, x_scale, x_zp, y_scale, y_zp), NCHW.
int cd_lower_qlinear_global_pool(lctx *c) {
    int rc;
    int64_t cl;
    if ((rc = need_inputs(c, 5, 5)) || (rc = only_first_output(c)) || (rc = attr_int(c, "channels_last", 0, &cl)))
        return rc;
    if (cl) return node_fail(c, CD_EUNSUPPORTED, "channels_last=1 is not supported (NCHW only)");
    int x = qinput(c, 0, 1, 2, "X");
    if (x < 0) return x;
    int ins[1] = {x};
    return float_op_then_quantize(c, "GlobalAveragePool", cd_lower_pool, 1, ins, 3, 4);
}

// ConvInteger(x, w, x_zp?, w_zp?) and MatMulInteger(A, B, a_zp?, b_zp?):
// the int32 sums of (x - x_zp) * (w - w_zp), computed as
// ((x - x_zp) * s) * ((w - w_zp) / s) in float with s x's scale, and held as
// a quantized int32 tensor of scale 1. x is a quantized activation; w an
// integer initializer (w_zp per tensor, or per output channel / column).
int cd_lower_integer_op(lctx *c) {
    int rc;
    const int conv = strcmp(c->n->op, "ConvInteger") == 0;
    if ((rc = need_inputs(c, 2, 4)) || (rc = only_first_output(c)) ||
        (rc = need_int_const(c, 1, conv ? "the weights" : "B", conv ? 4 : 2)))
        return rc;
    cd_value *x = in_val(c, 0), *w = in_val(c, 1), *xz = in_val(c, 2), *wz = in_val(c, 3);
    if (!is_act(x) || !x->q)
        return node_fail(c, CD_EMODEL, "input 0 must be a quantized activation, it is %s",
                         is_act(x) ? "a float activation" : kind_name(x));
    if (x->q->d.channels != 1) return node_fail(c, CD_EUNSUPPORTED, "a per-channel quantized input");
    if ((xz && (xz->kind != CD_VAL_CONST_I64 || xz->numel != 1)) || (wz && wz->kind != CD_VAL_CONST_I64))
        return node_fail(c, CD_EUNSUPPORTED, "the zero points must be integer initializers (x's a scalar)");
    const int64_t nout = conv ? w->shape[0] : w->shape[1];
    if (nout < 1) return node_fail(c, CD_EMODEL, "the weights are empty");
    if (wz && wz->numel != 1 && wz->numel != nout)
        return node_fail(c, CD_EMODEL, "the weights' zero point has %lld values (1 or %lld)", (long long)wz->numel,
                         (long long)nout);
    float s = x->q->scale[0], xzp = xz ? (float)xz->i[0] : 0.0f;
    cd_quant at = {{1, 0, x->q->d.qmin, x->q->d.qmax}, &s, &xzp, x->q->dtype};
    int xin = requant(c, in_id(c, 0), &at, -1, "Dequantize");
    if (xin < 0) return xin;
    w = in_val(c, 1);
    wz = in_val(c, 3);
    float *f = malloc((size_t)w->numel * sizeof(float));
    if (!f) return OOM(c);
    const int64_t per = w->numel / nout;
    for (int64_t e = 0; e < w->numel; e++) {
        int64_t o = conv ? e / per : e % nout;
        int64_t zp = wz ? wz->i[wz->numel == 1 ? 0 : o] : 0;
        f[e] = (float)((double)(w->i[e] - zp) / s);
    }
    int64_t shape[CD_MAX_RANK];
    memcpy(shape, w->shape, sizeof shape);
    int wid = cd_lower_make_const(c, "dq_w", w->rank, shape, f);
    free(f);
    if (wid < 0) return wid;
    int ins[2] = {xin, wid};
    vnode v;
    vnode_init(&v, c, conv ? "Conv" : "MatMul", 2, ins, c->n->outputs[0]);
    if ((rc = conv ? cd_lower_conv(&v.c) : cd_lower_gemm(&v.c))) return rc;
    float one = 1.0f, zero = 0.0f, lo, hi;
    qrange(ONNX__TENSOR_PROTO__DATA_TYPE__INT32, &lo, &hi);
    cd_quant sums = {{1, 0, lo, hi}, &one, &zero, ONNX__TENSOR_PROTO__DATA_TYPE__INT32};
    return tag_quant(c, c->n->outputs[0], &sums);
}

// ---- quantized tensors through other ops ----------------------------------------------

int cd_lower_quant_pass(lctx *c, int per_channel_ok) {
    cd_value *x = in_val(c, 0), *o = out_val(c);
    if (!is_act(x) || !x->q || !is_act(o)) return 0;
    if (x->q->d.channels > 1 && !per_channel_ok)
        return node_fail(c, CD_EUNSUPPORTED, "a per-channel quantized tensor through %s", c->n->op);
    return tag_quant(c, c->n->outputs[0], x->q);
}

int cd_lower_quant_refuse(lctx *c) {
    for (int j = 0; j < c->n->ninputs; j++) {
        cd_value *v = in_val(c, j);
        if (is_act(v) && v->q)
            return node_fail(c, CD_EMODEL,
                             "input %d ('%s') is a quantized %s tensor; %s takes float (is a "
                             "DequantizeLinear missing?)",
                             j, v->name, dtype_name(v->q->dtype), c->n->op);
    }
    return 0;
}
