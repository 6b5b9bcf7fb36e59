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

#include "runtime/lower-internal.h"

#include "core/checked.h"
#include "core/errors.h"
#include "core/limits.h"
#include "core/words.h"
#include "kernels/cpu/ref.h"
#include "onnx.pb-c.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- operators ----------------------------------------------------------------

int cd_lower_conv(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 3)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0), *w = in_val(c, 1), *b = in_val(c, 2);
    if (x->rank != 4)
        return node_fail(c, CD_EUNSUPPORTED, "input rank %d: only 2-D convolution (NCHW) is supported", x->rank);
    if (!w || w->kind != CD_VAL_CONST_F32 || w->rank != 4)
        return node_fail(c, CD_EUNSUPPORTED, "weights must be a float initializer of rank 4 (they are %s)",
                         kind_name(w));
    if (b && (b->kind != CD_VAL_CONST_F32 || b->rank != 1 || b->shape[0] != w->shape[0]))
        return node_fail(c, CD_EUNSUPPORTED, "bias must be a float initializer of shape [%lld]",
                         (long long)w->shape[0]);
    int64_t group;
    if ((rc = attr_int(c, "group", 1, &group))) return rc;
    int64_t C = x->shape[1], K = w->shape[0];
    if (group < 1 || C % group || K % group || w->shape[1] != C / group || K < 1)
        return node_fail(c, CD_EMODEL, "weights [%lld,%lld,...] do not fit %lld input channels in %lld groups",
                         (long long)K, (long long)w->shape[1], (long long)C, (long long)group);
    spatial s = {.kh = (int)w->shape[2], .kw = (int)w->shape[3]};
    if ((rc = read_spatial(c, (int)x->shape[2], (int)x->shape[3], &s, 0, 1))) return rc;
    // A zero Pad in front becomes the conv's padding.
    int in0 = in_id(c, 0), ih = (int)x->shape[2], iw = (int)x->shape[3], pads[4] = {s.pt, s.pl, s.pb, s.pr};
    const int folded = cd_lower_fold_pad(c, 0, &in0, &ih, &iw, pads);
    s.pt = pads[0], s.pl = pads[1], s.pb = pads[2], s.pr = pads[3];
    cd_conv_desc d = {.n = 1,
                      .c = (int)C,
                      .h = ih,
                      .w = iw,
                      .k = (int)K,
                      .r = s.kh,
                      .s = s.kw,
                      .stride_h = s.sh,
                      .stride_w = s.sw,
                      .pad_t = s.pt,
                      .pad_l = s.pl,
                      .pad_b = s.pb,
                      .pad_r = s.pr,
                      .dil_h = s.dh,
                      .dil_w = s.dw,
                      .groups = (int)group};
    cd_conv_out_dims(&d);
    if (d.oh < 1 || d.ow < 1) return node_fail(c, CD_EMODEL, "output would be empty (%dx%d)", d.oh, d.ow);
    int op = new_op(c, CD_OP_CONV, folded ? "Pad+Conv" : "Conv");
    if (op < 0) return op;
    cd_op *o = &c->g->ops[op];
    o->nin = 1;
    o->in[0] = in0;
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
    if ((rc = cd_conv_crop_dead_taps(&o->u.conv.d, &o->u.conv.w)))
        return rc == CD_ENOMEM ? OOM(c) : node_fail(c, rc, "cropping the taps that read only padding");
    // int8 weights (a DequantizeLinear folded): per tensor, or per output channel.
    const cd_quant *wq = w->q;
    if (wq && (wq->d.channels == 1 || (wq->d.channels == K && wq->d.axis == 0))) {
        if (!(o->u.conv.wscale = malloc((size_t)K * sizeof(float)))) return OOM(c);
        for (int64_t k = 0; k < K; k++) o->u.conv.wscale[k] = wq->scale[wq->d.channels == 1 ? 0 : k];
    }
    int64_t shape[4] = {1, K, d.oh, d.ow};
    return set_act_out(c, op, 4, shape);
}

int cd_lower_make_const(lctx *c, const char *suffix, int rank, const int64_t *shape, const float *data) {
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
            return node_fail(c, CD_EUNSUPPORTED, "input %d must be a float initializer of %lld values", j,
                             (long long)C);
        p[j - 1] = v->f;
    }
    float *scale = malloc((size_t)C * sizeof(float)), *shift = malloc((size_t)C * sizeof(float));
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return OOM(c);
    }
    cd_op *prod = fusable_producer(c, x);
    const int fold =
        prod && prod->kind == CD_OP_CONV && prod->u.conv.d.act.kind == CD_ACT_NONE && !prod->u.conv.d.has_residual;
    for (int64_t i = 0; i < C; i++) {
        if (fold) { // into weights: as exact as we can
            double sc = (double)p[0][i] / sqrt((double)p[3][i] + eps);
            scale[i] = (float)sc;
            shift[i] = (float)((double)p[1][i] - (double)p[2][i] * sc);
        } else {
            // Standalone, in float step by step as onnxruntime computes it:
            // in a quantized graph a BN between a DequantizeLinear and a
            // QuantizeLinear can land an output exactly on a rounding tie,
            // and one last-bit difference then moves a whole step.
            volatile float inv = 1.0f / sqrtf(p[3][i] + eps), sc = inv * p[0][i], m = p[2][i] * sc;
            scale[i] = sc;
            shift[i] = p[1][i] - m;
        }
    }
    if (fold) {
        // Fold: w'[k] = w[k] * scale[k]; b'[k] = b[k] * scale[k] + shift[k].
        const cd_conv_desc *d = &prod->u.conv.d;
        size_t per_k = (size_t)(d->c / d->groups) * d->r * d->s;
        for (int k = 0; k < d->k; k++) {
            for (size_t e = 0; e < per_k; e++) prod->u.conv.w[k * per_k + e] *= scale[k];
            prod->u.conv.bias[k] = prod->u.conv.bias[k] * scale[k] + shift[k];
            // int8 weights stay integers with a scaled scale (a zero or
            // non-finite factor: not integers any more).
            if (prod->u.conv.wscale && !(isfinite(scale[k]) && scale[k] != 0.0f)) {
                free(prod->u.conv.wscale);
                prod->u.conv.wscale = NULL;
            }
            if (prod->u.conv.wscale) prod->u.conv.wscale[k] *= scale[k];
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
    const int crank = x->rank - 1; // (x moves when a value is added)
    int sid = cd_lower_make_const(c, "bn_scale", crank, cshape, scale);
    int tid = sid >= 0 ? cd_lower_make_const(c, "bn_shift", crank, cshape, shift) : sid;
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
        cd_activation *slot = cd_op_act_slot(prod);
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

// x op y on int64 for the shape computations, defined for every input: an
// overflow, a division by zero and INT64_MIN / -1 are errors (CD_EMODEL naming
// the node), never undefined behaviour or SIGFPE.
static int fold_i64(lctx *c, cd_binary_kind kind, int64_t x, int64_t y, int64_t *out) {
    const char *what = NULL;
    switch (kind) {
    case CD_BINARY_ADD:
        if (cd_ck_add_i64(x, y, out)) what = "addition";
        break;
    case CD_BINARY_SUB:
        if (cd_ck_sub_i64(x, y, out)) what = "subtraction";
        break;
    case CD_BINARY_MUL:
        if (cd_ck_mul_i64(x, y, out)) what = "multiplication";
        break;
    case CD_BINARY_MIN: *out = x < y ? x : y; break;
    case CD_BINARY_MAX: *out = x > y ? x : y; break;
    default:
        if (y == 0) return node_fail(c, CD_EMODEL, "integer division by zero (%lld / 0)", (long long)x);
        if (x == INT64_MIN && y == -1)
            what = "division";
        else
            *out = x / y;
        break;
    }
    if (what)
        return node_fail(c, CD_EMODEL, "integer %s overflows 64 bits (%lld and %lld)", what, (long long)x,
                         (long long)y);
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
        if (cd_ck_shape_numel(r, shape, &on) || !(a->numel == 1 || a->numel == on) ||
            !(b->numel == 1 || b->numel == on))
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
                if ((kind == CD_BINARY_MUL || kind == CD_BINARY_DIV) &&
                    ((ma && !mb && y == 1) || (mb && !ma && kind == CD_BINARY_MUL && x == 1)))
                    o->batch_mark[e] = 1;
                else
                    return node_fail(c, CD_EUNSUPPORTED, "arithmetic on the batch size in a shape computation");
            }
        }
        return 0;
    }
    return node_fail(c, CD_EUNSUPPORTED, "constant operands of mixed or unsupported types");
}

int cd_lower_binary(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 2)) || (rc = only_first_output(c))) return rc;
    const char *op = c->n->op;
    cd_binary_kind kind = strcmp(op, "Add") == 0   ? CD_BINARY_ADD
                          : strcmp(op, "Mul") == 0 ? CD_BINARY_MUL
                          : strcmp(op, "Sub") == 0 ? CD_BINARY_SUB
                          : strcmp(op, "Min") == 0 ? CD_BINARY_MIN
                          : strcmp(op, "Max") == 0 ? CD_BINARY_MAX
                                                   : CD_BINARY_DIV;
    cd_value *a = in_val(c, 0), *b = in_val(c, 1);
    if (is_const(a) && is_const(b)) return fold_binary_const(c, kind, a, b);
    int r;
    int64_t shape[CD_MAX_RANK];
    if (broadcast(a->rank, a->shape, b->rank, b->shape, &r, shape))
        return node_fail(c, CD_EMODEL, "shapes do not broadcast");
    for (int j = 0; j < 2; j++) {
        cd_value *v = j ? b : a;
        if (is_act(v) && v->rank != r)
            return node_fail(c, CD_EUNSUPPORTED,
                             "activation operand of rank %d broadcast to rank %d (the batch dim must stay first)",
                             v->rank, r);
        if (v->kind == CD_VAL_CONST_I64)
            return node_fail(c, CD_EUNSUPPORTED, "integer constant operand on activations");
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
            if (prod && prod->kind == CD_OP_CONV && prod->u.conv.d.act.kind == CD_ACT_NONE &&
                !prod->u.conv.d.has_residual && in_id(c, j) != other) {
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

int cd_lower_pool(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    if (x->rank != 4)
        return node_fail(c, CD_EUNSUPPORTED, "input rank %d: only 2-D pooling (NCHW) is supported", x->rank);
    const char *op = c->n->op;
    int global = strncmp(op, "Global", 6) == 0;
    int is_max = strstr(op, "Max") != NULL;
    cd_pool_desc d = {.kind = is_max ? CD_POOL_MAX : CD_POOL_AVG,
                      .n = 1,
                      .c = (int)x->shape[1],
                      .h = (int)x->shape[2],
                      .w = (int)x->shape[3],
                      .dil_h = 1,
                      .dil_w = 1,
                      .stride_h = 1,
                      .stride_w = 1};
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
    // A zero Pad in front becomes the pool's padding where that is exact:
    // an average then counts it (count_include_pad), a max needs an input
    // that is never negative; no ceil_mode (its extra windows differ).
    int in0 = in_id(c, 0), folded = 0;
    if (!global && !d.ceil_mode && (is_max || d.count_include_pad || !(d.pad_t | d.pad_l | d.pad_b | d.pad_r))) {
        int h = d.h, w = d.w, pads[4] = {d.pad_t, d.pad_l, d.pad_b, d.pad_r}, src = in0;
        if (cd_lower_fold_pad(c, is_max, &src, &h, &w, pads) && pads[0] < d.kh && pads[2] < d.kh && pads[1] < d.kw &&
            pads[3] < d.kw) {
            folded = 1;
            in0 = src;
            d.h = h, d.w = w;
            d.pad_t = pads[0], d.pad_l = pads[1], d.pad_b = pads[2], d.pad_r = pads[3];
            d.count_include_pad = !is_max;
        }
    }
    cd_pool_out_dims(&d);
    if (d.oh < 1 || d.ow < 1) return node_fail(c, CD_EMODEL, "output would be empty");
    char label[48];
    snprintf(label, sizeof label, "%s%s", folded ? "Pad+" : "", op);
    int id = new_op(c, CD_OP_POOL, label);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in0;
    c->g->ops[id].u.pool = d;
    int64_t shape[4] = {1, d.c, d.oh, d.ow};
    return set_act_out(c, id, 4, shape);
}

int cd_lower_gemm(lctx *c) {
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
        return node_fail(c, CD_EUNSUPPORTED, "B must be a float initializer of rank 2 (it is %s of rank %d)",
                         kind_name(b), b ? b->rank : 0);
    if (ta) return node_fail(c, CD_EUNSUPPORTED, "transA=1 is not supported (the batch must be the rows of A)");
    if (matmul ? a->rank < 2 : a->rank != 2)
        return node_fail(c, CD_EUNSUPPORTED, "A has rank %d (%s)", a->rank, matmul ? "at least 2 needed" : "2 needed");
    int64_t K = a->shape[a->rank - 1];
    int64_t N = tb ? b->shape[0] : b->shape[1], bk = tb ? b->shape[1] : b->shape[0];
    if (bk != K) return node_fail(c, CD_EMODEL, "inner dims disagree (%lld vs %lld)", (long long)K, (long long)bk);
    if (cc && (cc->kind != CD_VAL_CONST_F32 || !(cc->numel == 1 || cc->numel == N) || cc->rank > 2 ||
               (cc->rank == 2 && cc->shape[0] != 1)))
        return node_fail(c, CD_EUNSUPPORTED,
                         "C must be a float initializer broadcast over rows ([N], [1,N] or scalar)");
    int id = new_op(c, CD_OP_GEMM, matmul ? "MatMul" : "Gemm");
    if (id < 0) return id;
    cd_op *o = &c->g->ops[id];
    o->nin = 1;
    o->in[0] = in_id(c, 0);
    o->u.gemm.d.rows = (int)(a->numel / K);
    o->u.gemm.d.n = (int)N;
    o->u.gemm.d.k = (int)K;
    size_t wbytes; // N x K is the size of B, already checked: this cannot fail
    int64_t nk;
    if (cd_ck_mul_i64(N, K, &nk) || cd_ck_bytes(nk, sizeof(float), &wbytes))
        return node_fail(c, CD_ETOO_LARGE, "weights of %lld x %lld do not fit in memory", (long long)N, (long long)K);
    o->u.gemm.w = malloc(wbytes ? wbytes : 1);
    if (!o->u.gemm.w) return OOM(c);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) o->u.gemm.w[n * K + k] = alpha * (tb ? b->f[n * K + k] : b->f[k * N + n]);
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
        if (cd_ck_mul_i64(*p, x->shape[i], p))
            return node_fail(c, CD_ETOO_LARGE, "the softmax's size overflows 64 bits");
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

// ---- the op table -------------------------------------------------------------

// What an op does with a quantized activation input (cd_value.q).
typedef enum {
    Q_REFUSE = 0, // takes float only: a quantized input is a type error
    Q_PASS,       // moves or selects values: the output is quantized like input 0
    Q_PASS_PC,    // the same, per-channel parameters included (the channels stay)
    Q_OWN,        // the lowering handles it
} quant_mode;

typedef struct {
    const char *op;
    int (*lower)(lctx *c);
    const char *attrs; // allowed attribute names, comma-separated
    quant_mode quant;
    const char *domain; // NULL: the default domain; else e.g. "com.microsoft"
} op_entry;

#define MS "com.microsoft"

static const op_entry g_ops[] = {
    {"Conv", cd_lower_conv, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"BatchNormalization", lower_batchnorm, "epsilon,momentum,training_mode"},
    {"Relu", lower_activation, ""},
    {"Clip", lower_activation, "min,max"},
    {"Sigmoid", lower_activation, ""},
    {"HardSigmoid", lower_activation, "alpha,beta"},
    {"HardSwish", lower_activation, ""},
    {"LeakyRelu", lower_activation, "alpha"},
    {"Add", cd_lower_binary, ""},
    {"Mul", cd_lower_binary, ""},
    {"Sub", cd_lower_binary, ""},
    {"Div", cd_lower_binary, ""},
    {"MaxPool", cd_lower_pool, "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides", Q_PASS_PC},
    {"AveragePool", cd_lower_pool, "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides"},
    {"GlobalAveragePool", cd_lower_pool, ""},
    {"GlobalMaxPool", cd_lower_pool, "", Q_PASS_PC},
    {"Flatten", cd_lower_flatten, "axis", Q_PASS},
    {"Reshape", cd_lower_reshape, "allowzero", Q_PASS},
    {"Transpose", cd_lower_transpose, "perm", Q_PASS},
    {"Concat", cd_lower_concat, "axis"},
    {"Gemm", cd_lower_gemm, "alpha,beta,transA,transB"},
    {"MatMul", cd_lower_gemm, ""},
    {"Softmax", lower_softmax, "axis"},
    {"Identity", cd_lower_identity, "", Q_PASS_PC},
    {"Dropout", cd_lower_identity, "seed,ratio", Q_PASS_PC},
    {"Constant", cd_lower_constant, "value,value_float,value_floats,value_int,value_ints"},
    {"Shape", cd_lower_shape, "start,end"},
    {"Gather", cd_lower_gather, "axis"},
    {"Unsqueeze", cd_lower_squeeze, "axes", Q_PASS},
    {"Squeeze", cd_lower_squeeze, "axes", Q_PASS},
    {"Cast", cd_lower_cast, "to,saturate", Q_OWN},
    {"QuantizeLinear", cd_lower_quantize, "axis,block_size,output_dtype,saturate", Q_OWN},
    {"DequantizeLinear", cd_lower_dequantize, "axis,block_size", Q_OWN},
    {"QLinearConv", cd_lower_qlinear_conv, "auto_pad,dilations,group,kernel_shape,pads,strides", Q_OWN},
    {"QLinearMatMul", cd_lower_qlinear_matmul, "", Q_OWN},
    {"ConvInteger", cd_lower_integer_op, "auto_pad,dilations,group,kernel_shape,pads,strides", Q_OWN},
    {"MatMulInteger", cd_lower_integer_op, "", Q_OWN},
    {"DynamicQuantizeLinear", cd_lower_dynamic_quantize, "", Q_OWN},
    {"QGemm", cd_lower_qgemm, "alpha,transA,transB", Q_OWN, MS},
    {"QLinearAdd", cd_lower_qlinear_binary, "", Q_OWN, MS},
    {"QLinearMul", cd_lower_qlinear_binary, "", Q_OWN, MS},
    {"QLinearGlobalAveragePool", cd_lower_qlinear_global_pool, "channels_last", Q_OWN, MS},
    // issue 22: lower-pad-slice.c, lower-reduce.c, lower-elementwise.c
    {"Pad", cd_lower_pad, "mode"},
    {"Slice", cd_lower_slice, ""},
    {"Split", cd_lower_split, "axis,split,num_outputs"},
    {"ReduceMean", cd_lower_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceSum", cd_lower_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMax", cd_lower_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"LayerNormalization", cd_lower_layernorm, "axis,epsilon,stash_type"},
    {"Pow", cd_lower_unary, ""},
    {"Sqrt", cd_lower_unary, ""},
    {"Erf", cd_lower_unary, ""},
    {"Gelu", cd_lower_unary, "approximate"},
    {"Tanh", cd_lower_unary, ""},
    {"Softplus", cd_lower_unary, ""},
    {"Mish", cd_lower_unary, ""},
    {"Neg", cd_lower_unary, ""},
    {"Abs", cd_lower_unary, ""},
    {"Min", cd_lower_minmax, ""},
    {"Max", cd_lower_minmax, ""},
    // issue 22, segmentation: lower-resize.c, lower-convt.c
    {"Resize", cd_lower_resize,
     "mode,coordinate_transformation_mode,nearest_mode,cubic_coeff_a,exclude_outside,extrapolation_value,antialias,"
     "axes,keep_aspect_ratio_policy"},
    {"Upsample", cd_lower_upsample, "mode,scales"},
    {"ConvTranspose", cd_lower_convtranspose,
     "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides"},
    // issue 22, second part: lower-expand.c
    {"Expand", cd_lower_expand, "", Q_PASS},
    {"Tile", cd_lower_tile, "", Q_PASS},
    {"Where", cd_lower_where, ""},
    {"Equal", cd_lower_compare, ""},
    {"Less", cd_lower_compare, ""},
    {"Greater", cd_lower_compare, ""},
    {"Not", cd_lower_compare, ""},
    {"Range", cd_lower_range, ""},
    {"ConstantOfShape", cd_lower_constant_of_shape, "value"},
};

// The entry of op name in domain dom ("" and "ai.onnx" are the default).
static const op_entry *find_op(const char *dom, const char *name) {
    int dflt = !dom || !*dom || strcmp(dom, "ai.onnx") == 0;
    for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0]; i++)
        if (strcmp(g_ops[i].op, name) == 0 && (g_ops[i].domain ? !dflt && strcmp(g_ops[i].domain, dom) == 0 : dflt))
            return &g_ops[i];
    return NULL;
}

int cd_lower_table_size(void) { return (int)(sizeof g_ops / sizeof g_ops[0]); }

const char *cd_lower_table_entry(int i, const char **domain, const char **attrs) {
    if (i < 0 || i >= cd_lower_table_size()) return NULL;
    *domain = g_ops[i].domain ? g_ops[i].domain : "";
    *attrs = g_ops[i].attrs;
    return g_ops[i].op;
}

// The refusal of an operator the table does not have, naming every default-
// domain operator it has. The list is as long as the table: it is built to
// its size (no fixed buffer), and where the caller's err is too small for it
// the message says so in full words instead of ending mid-list
// (CD_LOAD_ERR_MAX holds it). Returns CD_EUNSUPPORTED, or CD_ENOMEM.
static int unsupported_op(lctx *c) {
    size_t len = 1;
    for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0]; i++)
        if (!g_ops[i].domain) len += strlen(g_ops[i].op) + 2;
    char *list = malloc(len);
    if (!list) return OOM(c);
    size_t l = 0;
    int n = 0;
    list[0] = '\0';
    for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0]; i++) {
        if (g_ops[i].domain) continue;
        l += (size_t)snprintf(list + l, len - l, "%s%s", n++ ? ", " : "", g_ops[i].op);
    }
    if (c->err && c->errlen) {
        int need = snprintf(c->err, c->errlen, "node '%s' (%s): operator %s is not supported (the %d supported: %s)",
                            c->n->name, c->n->op, c->n->op, n, list);
        if (need < 0 || (size_t)need >= c->errlen)
            snprintf(c->err, c->errlen,
                     "node '%s' (%s): operator %s is not supported (%d operators are; the list is longer than this "
                     "message: `convctl ops` or docs/OPERATORS.md)",
                     c->n->name, c->n->op, c->n->op, n);
    }
    free(list);
    return CD_EUNSUPPORTED;
}

int cd_graph_lower(cd_graph *g, char *err, size_t errlen) {
    for (int k = 0; k < g->nnodes; k++) {
        lctx c = {g, &g->nodes[k], g->nodes[k].proto, err, errlen};
        const char *dom = c.np->domain;
        const op_entry *e = find_op(dom, c.n->op);
        if (!e && dom && *dom && strcmp(dom, "ai.onnx") != 0)
            return node_fail(&c, CD_EUNSUPPORTED,
                             "operator %s of domain '%s' is not supported (the default ONNX domain, and " MS
                             "'s QGemm, QLinearAdd, QLinearMul, QLinearGlobalAveragePool)",
                             c.n->op, dom);
        if (!e) return unsupported_op(&c);
        for (size_t i = 0; i < c.np->n_attribute; i++) {
            const Onnx__AttributeProto *a = c.np->attribute[i];
            if (!a || !a->name) return node_fail(&c, CD_EMODEL, "attribute without a name");
            if (!cd_word_in_list(a->name, e->attrs))
                return node_fail(&c, CD_EUNSUPPORTED, "attribute '%s' is not supported (supported: %s)", a->name,
                                 *e->attrs ? e->attrs : "none");
        }
        // The operator, its attributes and its inputs at the model's opset.
        int orc = e->domain ? 0 : cd_lower_check_opset(&c);
        if (orc) return orc;
        // Inputs must have been produced (a value read before its producer ran
        // is an inconsistent graph).
        for (int j = 0; j < c.n->ninputs; j++)
            if (c.n->inputs[j] >= 0 && g->values[c.n->inputs[j]].kind == CD_VAL_NONE)
                return node_fail(&c, CD_EMODEL, "input '%s' has no value", g->values[c.n->inputs[j]].name);
        int rc = e->quant == Q_REFUSE ? cd_lower_quant_refuse(&c) : 0;
        // A node reading a DynamicQuantizeLinear's outputs is that pattern's
        // (lower-dynquant.c), whatever its op.
        if (!rc) rc = cd_lower_dynq_op(&c);
        if (rc == 1) rc = e->lower(&c); // not the pattern's: the op's own lowering
        if (rc) return rc;
        if ((e->quant == Q_PASS || e->quant == Q_PASS_PC) && (rc = cd_lower_quant_pass(&c, e->quant == Q_PASS_PC)))
            return rc;
        if (c.n->noutputs > 0 && c.n->outputs[0] >= 0 && g->values[c.n->outputs[0]].kind == CD_VAL_NONE)
            return node_fail(&c, CD_EINTERNAL, "lowering produced no output");
    }
    int rc = cd_graph_fuse_patterns(g, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < g->noutputs; i++) {
        cd_value *v = &g->values[g->outputs[i]];
        if ((rc = cd_lower_dynq_output(g, g->outputs[i], err, errlen))) return rc;
        if (v->kind != CD_VAL_ACT) {
            if (err && errlen) snprintf(err, errlen, "graph output '%s' is a constant (not supported)", v->name);
            return CD_EUNSUPPORTED;
        }
        if (v->q) {
            if (err && errlen)
                snprintf(err, errlen,
                         "graph output '%s' of node '%s' is a quantized tensor: not supported (convd's outputs "
                         "are float32; end the model with a DequantizeLinear)",
                         v->name, v->producer_op >= 0 ? g->ops[v->producer_op].name : "?");
            return CD_EUNSUPPORTED;
        }
    }
    return 0;
}
