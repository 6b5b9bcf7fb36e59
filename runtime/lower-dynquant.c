// Dynamic quantization, as onnxruntime's quantize_dynamic writes it:
//
//   DynamicQuantizeLinear(x) -> y, y_scale, y_zp
//   Mul(y_scale, w_scale) -> s
//   ConvInteger(y, w, y_zp, w_zp) or MatMulInteger -> acc   (int32)
//   Cast(acc) -> accf
//   Mul(accf, s) -> out = acc * y_scale * w_scale
//
// out is conv(x_fq, w - w_zp) * w_scale with x_fq = (y - y_zp) * y_scale,
// the fake-quantized x. So the chain lowers to one dynamic FakeQuant
// (the scale and zero point taken from each batch item's own range, at run
// time; onnxruntime takes them over the whole tensor, which at batch 1 is
// the same) and a float Conv or Gemm over x_fq, then the per-channel w_scale
// as a constant Mul. The values along the way carry cd_value.dynq so that
// only this pattern reads them; any other reader is refused by name.

#include "runtime/lower-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DYNQ_NONE = 0,
    DYNQ_Y,      // y: holds x_fq (the dequantized values)
    DYNQ_SCALE,  // y_scale: no data (a run-time value per item)
    DYNQ_ZP,     // y_zp: no data
    DYNQ_SCALED, // y_scale times the constant this value holds
    DYNQ_ACC,    // the integer sums times y_scale
};

static const char *dynq_name(int t) {
    switch (t) {
    case DYNQ_Y: return "quantized values";
    case DYNQ_SCALE: return "scale";
    case DYNQ_ZP: return "zero point";
    case DYNQ_SCALED: return "scale product";
    default: return "integer sums";
    }
}

static void tag(lctx *c, int id, int t, int src) {
    c->g->values[id].dynq = t;
    c->g->values[id].dynq_src = src;
}

int cd_lower_dynamic_quantize(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = need_act(c, 0))) return rc;
    if (c->n->noutputs != 3 || c->n->outputs[0] < 0 || c->n->outputs[1] < 0 || c->n->outputs[2] < 0)
        return node_fail(c, CD_EMODEL, "has %d outputs, expected y, y_scale and y_zero_point", c->n->noutputs);
    const cd_value *x = in_val(c, 0);
    if (x->q || x->dynq) return node_fail(c, CD_EMODEL, "input 0 is quantized; DynamicQuantizeLinear takes float");
    // y: the dynamic FakeQuant of x (u8, the only type the operator has).
    float one = 1.0f, zero = 0.0f;
    cd_quant qp = {{1, 0, 0.0f, 255.0f, 1}, &one, &zero, ONNX__TENSOR_PROTO__DATA_TYPE__UINT8};
    int op = new_op(c, CD_OP_FAKEQUANT, "DynamicQuantizeLinear");
    if (op < 0) return op;
    cd_op *o = &c->g->ops[op];
    o->nin = 1;
    o->in[0] = in_id(c, 0);
    if (cd_quant_copy(&qp, &o->u.fq)) return OOM(c);
    int64_t shape[CD_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    if ((rc = set_act_out(c, op, x->rank, shape))) return rc;
    const int y = c->n->outputs[0];
    tag(c, y, DYNQ_Y, y);
    // The scale and zero point: placeholders of one element, read by nobody
    // but the pattern.
    int64_t one_dim[1] = {1};
    for (int j = 1; j < 3; j++) {
        cd_value *v = &c->g->values[c->n->outputs[j]];
        v->kind = j == 1 ? CD_VAL_CONST_F32 : CD_VAL_CONST_I64;
        v->rank = 1;
        memcpy(v->shape, one_dim, sizeof one_dim);
        v->numel = 1;
        if (j == 1 && !v->f && !(v->f = calloc(1, sizeof(float)))) return OOM(c);
        if (j == 2 && !v->i && !(v->i = calloc(1, sizeof(int64_t)))) return OOM(c);
        if (j == 2 && !v->batch_mark && !(v->batch_mark = calloc(1, 1))) return OOM(c);
        tag(c, c->n->outputs[j], j == 1 ? DYNQ_SCALE : DYNQ_ZP, y);
    }
    return 0;
}

// ConvInteger / MatMulInteger reading a DynamicQuantizeLinear's y: the float
// op over x_fq with the weights' integers minus their zero points.
static int lower_integer_op(lctx *c) {
    int rc;
    const int conv = strcmp(c->n->op, "ConvInteger") == 0;
    if ((rc = need_inputs(c, 2, 4)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0), *w = in_val(c, 1), *xz = in_val(c, 2), *wz = in_val(c, 3);
    if (x->dynq != DYNQ_Y)
        return node_fail(c, CD_EUNSUPPORTED, "input 0 is the %s of a DynamicQuantizeLinear, not its values",
                         dynq_name(x->dynq));
    if (xz && !(xz->dynq == DYNQ_ZP && xz->dynq_src == x->dynq_src))
        return node_fail(c, CD_EUNSUPPORTED,
                         "input 2 must be the zero point of the DynamicQuantizeLinear that wrote input 0");
    if (w->dynq || (wz && wz->dynq)) return node_fail(c, CD_EUNSUPPORTED, "dynamic quantization of the weights");
    if (!w || w->kind != CD_VAL_CONST_I64 || w->rank != (conv ? 4 : 2))
        return node_fail(c, CD_EUNSUPPORTED, "the weights must be an integer initializer of rank %d", conv ? 4 : 2);
    if (wz && wz->kind != CD_VAL_CONST_I64)
        return node_fail(c, CD_EUNSUPPORTED, "the weights' zero point must be an integer initializer");
    const int64_t nout = conv ? w->shape[0] : w->shape[1];
    if (nout < 1) return node_fail(c, CD_EMODEL, "the weights are empty");
    if (wz && wz->numel != 1 && wz->numel != nout)
        return node_fail(c, CD_EMODEL, "the weights' zero point has %lld values (1 or %lld)", (long long)wz->numel,
                         (long long)nout);
    float *f = malloc((size_t)w->numel * sizeof(float));
    if (!f) return OOM(c);
    const int64_t per = w->numel / nout;
    for (int64_t e = 0; e < w->numel; e++) {
        int64_t oc = conv ? e / per : e % nout;
        f[e] = (float)(w->i[e] - (wz ? wz->i[wz->numel == 1 ? 0 : oc] : 0));
    }
    int64_t shape[CD_MAX_RANK];
    memcpy(shape, w->shape, sizeof shape);
    int wid = cd_lower_make_const(c, "dyn_w", w->rank, shape, f);
    free(f);
    if (wid < 0) return wid;
    int ins[2] = {in_id(c, 0), wid};
    vnode v;
    vnode_init(&v, c, conv ? "Conv" : "MatMul", 2, ins, c->n->outputs[0]);
    if ((rc = conv ? cd_lower_conv(&v.c) : cd_lower_gemm(&v.c))) return rc;
    tag(c, c->n->outputs[0], DYNQ_ACC, c->g->values[in_id(c, 0)].dynq_src);
    return 0;
}

static int lower_cast(lctx *c) {
    int rc;
    int64_t to;
    if ((rc = need_inputs(c, 1, 1)) || (rc = only_first_output(c)) || (rc = attr_int(c, "to", 0, &to))) return rc;
    const cd_value *x = in_val(c, 0);
    if (x->dynq != DYNQ_ACC || to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return node_fail(c, CD_EUNSUPPORTED, "a Cast of the %s of a DynamicQuantizeLinear (to %lld)",
                         dynq_name(x->dynq), (long long)to);
    int ins[1] = {in_id(c, 0)};
    int op = new_op(c, CD_OP_ALIAS, "Cast");
    if (op < 0) return op;
    c->g->ops[op].nin = 1;
    c->g->ops[op].in[0] = ins[0];
    int64_t shape[CD_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    if ((rc = set_act_out(c, op, x->rank, shape))) return rc;
    tag(c, c->n->outputs[0], DYNQ_ACC, x->dynq_src);
    return 0;
}

// A per-tensor weight scale folded into the Conv or Gemm that wrote acc
// (read only by this Mul): 1 when done.
static int fold_scale(lctx *c, const cd_value *acc, float s) {
    const int alias = acc->producer_op; // the Cast
    if (alias < 0 || c->g->ops[alias].kind != CD_OP_ALIAS) return 0;
    const cd_value *sums = &c->g->values[c->g->ops[alias].in[0]];
    cd_op *op = fusable_producer(c, sums);
    if (!op || (op->kind != CD_OP_CONV && op->kind != CD_OP_GEMM)) return 0;
    if (op->kind == CD_OP_CONV ? op->u.conv.d.has_residual || op->u.conv.d.act.kind != CD_ACT_NONE
                               : op->u.gemm.d.act.kind != CD_ACT_NONE)
        return 0;
    float *w = op->kind == CD_OP_CONV ? op->u.conv.w : op->u.gemm.w;
    float *bias = op->kind == CD_OP_CONV ? op->u.conv.bias : op->u.gemm.bias;
    const cd_conv_desc *d = &op->u.conv.d;
    size_t n = op->kind == CD_OP_CONV ? (size_t)d->k * (size_t)(d->c / d->groups) * d->r * d->s
                                      : (size_t)op->u.gemm.d.n * op->u.gemm.d.k;
    size_t nb = op->kind == CD_OP_CONV ? (size_t)d->k : (size_t)op->u.gemm.d.n;
    for (size_t i = 0; i < n; i++) w[i] *= s;
    for (size_t i = 0; bias && i < nb; i++) bias[i] *= s;
    take_over_output(c, acc->producer_op, "Mul");
    return 1;
}

static int lower_mul(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 2)) || (rc = only_first_output(c))) return rc;
    for (int j = 0; j < 2; j++) {
        const cd_value *a = in_val(c, j), *b = in_val(c, 1 - j);
        if (a->dynq == DYNQ_SCALE && b->kind == CD_VAL_CONST_F32 && !b->dynq) {
            // y_scale * w_scale: keep w_scale, remember the y_scale.
            if ((rc = const_out(c, CD_VAL_CONST_F32, b->rank, b->shape, CD_MAX_CONST_ELEMS))) return rc;
            b = in_val(c, 1 - j);
            memcpy(out_val(c)->f, b->f, (size_t)b->numel * sizeof(float));
            tag(c, c->n->outputs[0], DYNQ_SCALED, a->dynq_src);
            return 0;
        }
        if (a->dynq == DYNQ_ACC && b->dynq == DYNQ_SCALED && a->dynq_src == b->dynq_src) {
            // acc * y_scale is what a holds; the w_scale part is a constant Mul.
            if (a->nconsumers != 1 || a->is_output)
                return node_fail(c, CD_EUNSUPPORTED, "the integer sums '%s' are read by more than this Mul", a->name);
            if (b->numel == 1 && fold_scale(c, in_val(c, j), b->f[0])) return 0;
            int64_t shape[CD_MAX_RANK];
            memcpy(shape, b->shape, sizeof shape);
            int sid = cd_lower_make_const(c, "dyn_scale", b->rank, shape, b->f);
            if (sid < 0) return sid;
            int ins[2] = {in_id(c, j), sid};
            vnode v;
            vnode_init(&v, c, "Mul", 2, ins, c->n->outputs[0]);
            return cd_lower_binary(&v.c);
        }
    }
    const cd_value *a = in_val(c, 0), *b = in_val(c, 1);
    const cd_value *d = a->dynq ? a : b;
    return node_fail(c, CD_EUNSUPPORTED,
                     "a Mul of the %s of a DynamicQuantizeLinear with %s; quantize_dynamic's pattern multiplies "
                     "the scale by the weights' scale, and the integer sums by that product",
                     dynq_name(d->dynq),
                     d == a ? (b->dynq ? dynq_name(b->dynq) : kind_name(b))
                            : (a->dynq ? dynq_name(a->dynq) : kind_name(a)));
}

int cd_lower_dynq_output(const cd_graph *g, int id, char *err, size_t errlen) {
    const cd_value *v = &g->values[id];
    if (!v->dynq) return 0;
    if (err && errlen)
        snprintf(err, errlen,
                 "graph output '%s' is the %s of a DynamicQuantizeLinear: not supported (only quantize_dynamic's "
                 "pattern, ending in the Mul by the scales, is)",
                 v->name, dynq_name(v->dynq));
    return CD_EUNSUPPORTED;
}

int cd_lower_dynq_op(lctx *c) {
    const cd_value *v = NULL;
    for (int j = 0; j < c->n->ninputs && !v; j++)
        if (in_val(c, j) && in_val(c, j)->dynq) v = in_val(c, j);
    if (!v) return 1; // not ours
    const char *op = c->n->op;
    if (strcmp(op, "Mul") == 0) return lower_mul(c);
    if (strcmp(op, "Cast") == 0) return lower_cast(c);
    if (strcmp(op, "ConvInteger") == 0 || strcmp(op, "MatMulInteger") == 0) return lower_integer_op(c);
    return node_fail(c, CD_EUNSUPPORTED,
                     "input '%s' is the %s of a DynamicQuantizeLinear; only the pattern quantize_dynamic writes "
                     "(ConvInteger/MatMulInteger, Cast, Mul by the scales) can read it",
                     v->name, dynq_name(v->dynq));
}
