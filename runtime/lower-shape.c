// Lowering of the shape ops: Identity/Dropout, Flatten, Reshape,
// Squeeze/Unsqueeze, Transpose and Concat on activations, and the constant
// folding of the shape sub-graphs PyTorch exports in front of a Reshape
// (Constant, Shape, Gather, Cast, and the ops above on constants), with the
// per-element batch marks described in lower.c.

#include "runtime/lower-internal.h"

#include "kernels/cpu/ref.h"

#include <stdlib.h>

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

int cd_lower_identity(lctx *c) {
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

int cd_lower_flatten(lctx *c) {
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
        return node_fail(c, CD_EUNSUPPORTED, "axis %lld would fold the batch into other dims (axis 1 is supported)",
                         (long long)axis);
    int64_t shape[2] = {outer, inner};
    return reshape_to(c, 2, shape, "Flatten");
}

// Integer list from a constant input (shape/axes); marks optional.
static int int_list(lctx *c, int j, const char *what, int64_t *out, uint8_t *marks, int max, int *n) {
    cd_value *v = in_val(c, j);
    if (!v || v->kind != CD_VAL_CONST_I64 || v->rank > 1)
        return node_fail(c, CD_EUNSUPPORTED, "%s must be a constant integer list computable at load (it is %s)", what,
                         kind_name(v));
    if (v->numel > max)
        return node_fail(c, CD_EUNSUPPORTED, "%s has %lld values (at most %d)", what, (long long)v->numel, max);
    for (int64_t i = 0; i < v->numel; i++) {
        out[i] = v->i[i];
        if (marks)
            marks[i] = v->batch_mark ? v->batch_mark[i] : 0;
        else if (v->batch_mark && v->batch_mark[i])
            return node_fail(c, CD_EUNSUPPORTED, "%s depends on the batch size", what);
    }
    *n = (int)v->numel;
    return 0;
}

int cd_lower_reshape(lctx *c) {
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
            if (i != 0)
                return node_fail(c, CD_EUNSUPPORTED, "the batch size may only appear in dim 0 of the target shape");
            shape[i] = 1;
        } else if (t[i] == 0 && !allowzero) {
            if (i >= x->rank)
                return node_fail(c, CD_EMODEL, "0 in target dim %d copies a dim the input does not have", i);
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

int cd_lower_squeeze(lctx *c) {
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

int cd_lower_transpose(lctx *c) {
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

int cd_lower_concat(lctx *c) {
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
            if (i != axis && v->shape[i] != x0->shape[i])
                return node_fail(c, CD_EMODEL, "input %d's shape disagrees", j);
        shape[axis] += v->shape[axis];
    }
    if (nact == 0) {
        // Constants: shape vectors (1-D integers, keeping batch marks) or floats.
        if ((rc = const_out(c, x0->kind, x0->rank, shape, CD_MAX_FOLD_ELEMS))) return rc;
        if (x0->rank != 1)
            return node_fail(c, CD_EUNSUPPORTED, "concat of constants of rank %d (1 supported)", x0->rank);
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

int cd_lower_constant(lctx *c) {
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
        if (o->kind == CD_VAL_CONST_I64 && !(o->batch_mark = calloc((size_t)(o->numel ? o->numel : 1), 1)))
            return OOM(c);
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
        return node_fail(c, CD_EUNSUPPORTED, "attribute '%s' not supported (value, value_float(s), value_int(s))",
                         a->name);
    }
    return 0;
}

int cd_lower_shape(lctx *c) {
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

int cd_lower_gather(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 2)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0), *ix = in_val(c, 1);
    int64_t axis;
    if ((rc = attr_int(c, "axis", 0, &axis))) return rc;
    if (!is_const(x) || x->rank != 1 || !ix || ix->kind != CD_VAL_CONST_I64 || ix->rank > 1 || norm_axis(axis, 1) != 0)
        return cd_lower_gather_tensor(c); // any rank, any axis (lower-expand.c)
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

int cd_lower_cast(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = only_first_output(c))) return rc;
    int64_t to;
    if ((rc = attr_int(c, "to", 0, &to))) return rc;
    cd_value *x = in_val(c, 0);
    int to_float = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || to == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
                   to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    const int to_bool = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL; // 0 and 1 (lower-expand.c's booleans)
    int to_int = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || to_bool;
    if (is_act(x)) {
        if (x->q && to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return cd_lower_quant_cast(c);
        if (to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            return node_fail(c, CD_EUNSUPPORTED, "activations stay float32 (Cast to %lld)", (long long)to);
        return reshape_to(c, x->rank, x->shape, "Cast");
    }
    if (!to_float && !to_int)
        return node_fail(c, CD_EUNSUPPORTED, "cast to type %lld (float, int32/int64 and bool supported)",
                         (long long)to);
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
            if (to_bool) {
                if (x->kind == CD_VAL_CONST_I64 && x->batch_mark && x->batch_mark[e])
                    return node_fail(c, CD_EUNSUPPORTED, "cast of the batch size to bool");
                o->i[e] = x->kind == CD_VAL_CONST_I64 ? x->i[e] != 0 : x->f[e] != 0.0f;
                continue;
            }
            if (x->kind == CD_VAL_CONST_F32 && !(x->f[e] >= -0x1p63f && x->f[e] < 0x1p63f))
                return node_fail(c, CD_EMODEL, "cast of %g to an integer", (double)x->f[e]);
            o->i[e] = x->kind == CD_VAL_CONST_I64 ? x->i[e] : (int64_t)x->f[e];
            o->batch_mark[e] = x->kind == CD_VAL_CONST_I64 && x->batch_mark ? x->batch_mark[e] : 0;
        }
    }
    return 0;
}
