// Lowering of Expand, Tile, Where, Equal/Less/Greater/Not, Range,
// ConstantOfShape and Gather (beyond a constant 1-D list): folded at load
// where their inputs are constants or shape values, which is where PyTorch's
// exports use them (a plan is made for concrete input sizes, so every shape
// is known here); where they move real activations, Expand and Tile become
// one TILE op (a broadcast copy) and Gather a GATHER op. A boolean is an
// integer constant of 0 and 1 (activations are float32, so a condition
// computed at run time cannot exist: comparisons of activations are refused).

#include "runtime/lower-internal.h"

#include "onnx.pb-c.h"

#include <math.h>
#include <stdlib.h>

// Element offset into a tensor of rank `rank` (shape s) for output index idx
// of rank `orank`, numpy-aligned from the right, each dim taken modulo its
// size (a dim of 1 broadcasts; Tile repeats).
static int64_t src_offset(int orank, const int64_t *idx, int rank, const int64_t *s) {
    int64_t off = 0;
    for (int i = 0; i < rank; i++) off = off * s[i] + idx[orank - rank + i] % s[i];
    return off;
}

static void next_index(int rank, const int64_t *shape, int64_t *idx) {
    for (int i = rank - 1; i >= 0; i--) {
        if (++idx[i] < shape[i]) return;
        idx[i] = 0;
    }
}

// Out = x repeated to shape (rank, shape): Expand and Tile of constants.
// Batch marks travel with the integers.
static int fold_repeat(lctx *c, cd_value *x, int rank, const int64_t *shape) {
    int rc = const_out(c, x->kind, rank, shape, CD_MAX_FOLD_ELEMS);
    if (rc) return rc;
    x = in_val(c, 0);
    cd_value *o = out_val(c);
    int64_t idx[CD_MAX_RANK] = {0};
    for (int64_t e = 0; e < o->numel; e++, next_index(rank, shape, idx)) {
        int64_t s = src_offset(rank, idx, x->rank, x->shape);
        if (x->kind == CD_VAL_CONST_F32) {
            o->f[e] = x->f[s];
        } else {
            o->i[e] = x->i[s];
            o->batch_mark[e] = x->batch_mark ? x->batch_mark[s] : 0;
        }
    }
    return 0;
}

// A TILE op from activation input 0 to shape, or an alias when nothing repeats.
static int emit_tile(lctx *c, int rank, const int64_t *shape) {
    cd_value *x = in_val(c, 0);
    const int same = x->rank == rank && memcmp(x->shape, shape, sizeof(int64_t) * (size_t)rank) == 0;
    int id = new_op(c, same ? CD_OP_ALIAS : CD_OP_TILE, same ? "Expand(none)" : c->n->op);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    return set_act_out(c, id, rank, shape);
}

// A 1-D integer constant input j (a shape or repeats), batch marks in marks.
static int int_vector(lctx *c, int j, const char *what, int64_t *out, uint8_t *marks, int *n) {
    cd_value *v = in_val(c, j);
    if (!v || v->kind != CD_VAL_CONST_I64 || v->rank != 1)
        return node_fail(c, CD_EUNSUPPORTED, "%s must be a 1-D integer constant computable at load (it is %s)", what,
                         kind_name(v));
    if (v->numel > CD_MAX_RANK)
        return node_fail(c, CD_EUNSUPPORTED, "%s has %lld values (rank at most %d)", what, (long long)v->numel,
                         CD_MAX_RANK);
    for (int64_t i = 0; i < v->numel; i++) {
        out[i] = v->i[i];
        marks[i] = v->batch_mark ? v->batch_mark[i] : 0;
    }
    *n = (int)v->numel;
    return 0;
}

int cd_lower_expand(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 2)) || (rc = only_first_output(c))) return rc;
    int64_t t[CD_MAX_RANK], shape[CD_MAX_RANK];
    uint8_t mark[CD_MAX_RANK];
    int n, r;
    if ((rc = int_vector(c, 1, "the shape", t, mark, &n))) return rc;
    cd_value *x = in_val(c, 0);
    const int act = is_act(x);
    for (int i = 0; i < n; i++) {
        if (mark[i] && !(act && i == n - x->rank && i == 0))
            return node_fail(c, CD_EUNSUPPORTED, "the shape's dim %d is the batch size, which is not the input's dim 0",
                             i);
        if (mark[i]) t[i] = 1; // the batch, per item
        if (t[i] < 1) return node_fail(c, CD_EMODEL, "the shape's dim %d is %lld", i, (long long)t[i]);
    }
    if (broadcast(x->rank, x->shape, n, t, &r, shape))
        return node_fail(c, CD_EMODEL, "the input does not broadcast to the shape");
    if (!act) return fold_repeat(c, x, r, shape);
    if (r != x->rank)
        return node_fail(c, CD_EUNSUPPORTED,
                         "expanding an activation to rank %d puts dims before the "
                         "batch (rank %d kept)",
                         r, x->rank);
    if (shape[0] != 1) return node_fail(c, CD_EUNSUPPORTED, "expanding the batch dim of an activation");
    return emit_tile(c, r, shape);
}

int cd_lower_tile(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 2)) || (rc = only_first_output(c))) return rc;
    int64_t rep[CD_MAX_RANK], shape[CD_MAX_RANK];
    uint8_t mark[CD_MAX_RANK];
    int n;
    if ((rc = int_vector(c, 1, "repeats", rep, mark, &n))) return rc;
    cd_value *x = in_val(c, 0);
    if (n != x->rank) return node_fail(c, CD_EMODEL, "repeats has %d values for rank %d", n, x->rank);
    for (int i = 0; i < n; i++) {
        if (mark[i] || rep[i] < 1)
            return node_fail(c, CD_EUNSUPPORTED, "repeats[%d] is %s", i, mark[i] ? "the batch size" : "below 1");
        if (cd_ck_mul_i64(x->shape[i], rep[i], &shape[i]))
            return node_fail(c, CD_ETOO_LARGE, "dim %d overflows 64 bits", i);
    }
    if (!is_act(x)) return fold_repeat(c, x, n, shape);
    if (rep[0] != 1)
        return node_fail(c, CD_EUNSUPPORTED, "tiling the batch dim of an activation (repeats[0] must be 1)");
    return emit_tile(c, n, shape);
}

// Equal, Less, Greater of constants; Not. Comparing the batch size with a
// value below 1 has one answer for every batch; other comparisons of it
// would change with the batch and are refused.
int cd_lower_compare(lctx *c) {
    int rc;
    const char *op = c->n->op;
    const int is_not = strcmp(op, "Not") == 0;
    if ((rc = need_inputs(c, is_not ? 1 : 2, is_not ? 1 : 2)) || (rc = only_first_output(c))) return rc;
    for (int j = 0; j < c->n->ninputs; j++)
        if (!is_const(in_val(c, j)))
            return node_fail(c, CD_EUNSUPPORTED,
                             "input %d is an activation: comparisons are folded at load only (activations are float32, "
                             "a boolean tensor at run time is not supported)",
                             j);
    cd_value *a = in_val(c, 0), *b = is_not ? a : in_val(c, 1);
    int r;
    int64_t shape[CD_MAX_RANK];
    if (broadcast(a->rank, a->shape, b->rank, b->shape, &r, shape))
        return node_fail(c, CD_EMODEL, "shapes do not broadcast");
    if (!is_not && a->kind != b->kind)
        return node_fail(c, CD_EUNSUPPORTED, "compares a float with an integer constant");
    if ((rc = const_out(c, CD_VAL_CONST_I64, r, shape, CD_MAX_FOLD_ELEMS))) return rc;
    a = in_val(c, 0);
    b = is_not ? a : in_val(c, 1);
    cd_value *o = out_val(c);
    const int kind = op[0]; // 'E'qual, 'L'ess, 'G'reater, 'N'ot
    int64_t idx[CD_MAX_RANK] = {0};
    for (int64_t e = 0; e < o->numel; e++, next_index(r, shape, idx)) {
        int64_t sa = src_offset(r, idx, a->rank, a->shape), sb = src_offset(r, idx, b->rank, b->shape);
        if (is_not) {
            o->i[e] = a->kind == CD_VAL_CONST_F32 ? a->f[sa] == 0.0f : a->i[sa] == 0;
            continue;
        }
        if (a->kind == CD_VAL_CONST_F32) {
            float x = a->f[sa], y = b->f[sb];
            o->i[e] = kind == 'E' ? x == y : kind == 'L' ? x < y : x > y;
            continue;
        }
        int64_t x = a->i[sa], y = b->i[sb];
        int ma = a->batch_mark && a->batch_mark[sa], mb = b->batch_mark && b->batch_mark[sb];
        if (ma && mb) {
            o->i[e] = kind == 'E'; // the batch equals itself
        } else if (ma || mb) {
            // batch (>= 1) against v < 1: never equal, never less, always greater.
            int64_t v = ma ? y : x;
            if (v >= 1)
                return node_fail(c, CD_EUNSUPPORTED,
                                 "compares the batch size with %lld (the answer depends on the batch)", (long long)v);
            o->i[e] = kind == 'E' ? 0 : (kind == 'G') == (ma != 0);
        } else {
            o->i[e] = kind == 'E' ? x == y : kind == 'L' ? x < y : x > y;
        }
    }
    return 0;
}

// Where(cond, x, y) of constants, elementwise with broadcasting; with
// activation operands only where the condition picks one side everywhere.
int cd_lower_where(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 3, 3)) || (rc = only_first_output(c))) return rc;
    cd_value *cond = in_val(c, 0), *x = in_val(c, 1), *y = in_val(c, 2);
    if (!is_const(cond))
        return node_fail(c, CD_EUNSUPPORTED,
                         "the condition is an activation: Where is folded at load only (a boolean tensor at run time "
                         "is not supported)");
    int r, r2;
    int64_t s1[CD_MAX_RANK], shape[CD_MAX_RANK];
    if (broadcast(x->rank, x->shape, y->rank, y->shape, &r, s1) ||
        broadcast(cond->rank, cond->shape, r, s1, &r2, shape))
        return node_fail(c, CD_EMODEL, "shapes do not broadcast");
    if (is_act(x) || is_act(y)) {
        int any = 0, all = 1;
        for (int64_t e = 0; e < cond->numel; e++) {
            int t = cond->kind == CD_VAL_CONST_F32 ? cond->f[e] != 0.0f : cond->i[e] != 0;
            any |= t;
            all &= t;
        }
        cd_value *pick = all ? x : !any ? y : NULL;
        if (!pick || !is_act(pick) || pick->rank != r2 || memcmp(pick->shape, shape, sizeof(int64_t) * (size_t)r2) != 0)
            return node_fail(c, CD_EUNSUPPORTED,
                             "selects between activations and constants element by element (only a condition that "
                             "picks the same activation everywhere, at its own shape, is supported)");
        int id = new_op(c, CD_OP_ALIAS, "Where(one side)");
        if (id < 0) return id;
        c->g->ops[id].nin = 1;
        c->g->ops[id].in[0] = in_id(c, pick == x ? 1 : 2);
        return set_act_out(c, id, r2, shape);
    }
    if (x->kind != y->kind) return node_fail(c, CD_EUNSUPPORTED, "x and y are constants of different types");
    if ((rc = const_out(c, x->kind, r2, shape, CD_MAX_FOLD_ELEMS))) return rc;
    cond = in_val(c, 0), x = in_val(c, 1), y = in_val(c, 2);
    cd_value *o = out_val(c);
    int64_t idx[CD_MAX_RANK] = {0};
    for (int64_t e = 0; e < o->numel; e++, next_index(r2, shape, idx)) {
        int64_t sc = src_offset(r2, idx, cond->rank, cond->shape);
        int t = cond->kind == CD_VAL_CONST_F32 ? cond->f[sc] != 0.0f : cond->i[sc] != 0;
        if (cond->kind == CD_VAL_CONST_I64 && cond->batch_mark && cond->batch_mark[sc])
            return node_fail(c, CD_EUNSUPPORTED, "the condition is the batch size");
        cd_value *v = t ? x : y;
        int64_t s = src_offset(r2, idx, v->rank, v->shape);
        if (o->kind == CD_VAL_CONST_F32) {
            o->f[e] = v->f[s];
        } else {
            o->i[e] = v->i[s];
            o->batch_mark[e] = v->batch_mark ? v->batch_mark[s] : 0;
        }
    }
    return 0;
}

// Range(start, limit, delta): scalars, integer or float, not the batch.
int cd_lower_range(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 3, 3)) || (rc = only_first_output(c))) return rc;
    cd_value *v[3];
    for (int j = 0; j < 3; j++) {
        v[j] = in_val(c, j);
        if (!is_const(v[j]) || v[j]->numel != 1)
            return node_fail(c, CD_EUNSUPPORTED, "input %d must be a constant scalar (it is %s)", j, kind_name(v[j]));
        if (v[j]->kind != v[0]->kind) return node_fail(c, CD_EMODEL, "inputs of different types");
        if (v[j]->kind == CD_VAL_CONST_I64 && v[j]->batch_mark && v[j]->batch_mark[0])
            return node_fail(c, CD_EUNSUPPORTED, "input %d is the batch size", j);
    }
    const int fl = v[0]->kind == CD_VAL_CONST_F32;
    double start = fl ? v[0]->f[0] : (double)v[0]->i[0], limit = fl ? v[1]->f[0] : (double)v[1]->i[0],
           delta = fl ? v[2]->f[0] : (double)v[2]->i[0];
    if (delta == 0 || !isfinite(start) || !isfinite(limit) || !isfinite(delta))
        return node_fail(c, CD_EMODEL, "delta is 0 or a value is not finite");
    double count = ceil((limit - start) / delta);
    if (!(count >= 0)) count = 0;
    if (count > (double)CD_MAX_FOLD_ELEMS)
        return node_fail(c, CD_ETOO_LARGE, "the range would have more than %lld elements",
                         (long long)CD_MAX_FOLD_ELEMS);
    int64_t n = (int64_t)count;
    if ((rc = const_out(c, v[0]->kind, 1, &n, CD_MAX_FOLD_ELEMS))) return rc;
    for (int j = 0; j < 3; j++) v[j] = in_val(c, j);
    cd_value *o = out_val(c);
    for (int64_t e = 0; e < n; e++) {
        if (fl) {
            o->f[e] = v[0]->f[0] + (float)e * v[2]->f[0]; // the spec: start + i * delta (in float)
        } else if (cd_ck_mul_i64(e, v[2]->i[0], &o->i[e]) || cd_ck_add_i64(o->i[e], v[0]->i[0], &o->i[e])) {
            return node_fail(c, CD_EMODEL, "the range overflows 64 bits");
        }
    }
    return 0;
}

// ConstantOfShape(shape) filled with the one value of attribute 'value'
// (float 0 when absent).
int cd_lower_constant_of_shape(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 1)) || (rc = only_first_output(c))) return rc;
    int64_t shape[CD_MAX_RANK];
    uint8_t mark[CD_MAX_RANK];
    int n;
    if ((rc = int_vector(c, 0, "the shape", shape, mark, &n))) return rc;
    for (int i = 0; i < n; i++) {
        if (mark[i])
            return node_fail(c, CD_EUNSUPPORTED, "the shape's dim %d is the batch size (a constant cannot follow it)",
                             i);
        if (shape[i] < 0) return node_fail(c, CD_EMODEL, "the shape's dim %d is %lld", i, (long long)shape[i]);
    }
    cd_value val = {0};
    const Onnx__AttributeProto *a = attr_find(c, "value");
    if (a) {
        if (!a->t) return node_fail(c, CD_EMODEL, "'value' holds no tensor");
        char e[300];
        rc = cd_onnx_tensor_value(c->g, a->t, "value", &val, e, sizeof e);
        if (!rc && val.numel != 1)
            rc = node_fail(c, CD_EMODEL, "'value' has %lld elements (1 needed)", (long long)val.numel);
        else if (rc)
            rc = node_fail(c, rc, "%s", e);
        if (rc) {
            free(val.f);
            free(val.i);
            return rc;
        }
    }
    const cd_val_kind kind = a ? val.kind : CD_VAL_CONST_F32;
    const float f = a && val.f ? val.f[0] : 0.0f;
    const int64_t i = a && val.i ? val.i[0] : 0;
    free(val.f);
    free(val.i);
    if ((rc = const_out(c, kind, n, shape, CD_MAX_FOLD_ELEMS))) return rc;
    cd_value *o = out_val(c);
    for (int64_t e = 0; e < o->numel; e++) {
        if (kind == CD_VAL_CONST_F32)
            o->f[e] = f;
        else
            o->i[e] = i;
    }
    return 0;
}

// Gather of any tensor along any axis with constant integer indices (any
// rank): folded for a constant, a GATHER op for an activation (not along its
// batch dim).
int cd_lower_gather_tensor(lctx *c) {
    int rc;
    cd_value *x = in_val(c, 0), *ix = in_val(c, 1);
    int64_t axis;
    if ((rc = attr_int(c, "axis", 0, &axis))) return rc;
    if (!ix || ix->kind != CD_VAL_CONST_I64)
        return node_fail(c, CD_EUNSUPPORTED, "the indices must be an integer constant (they are %s)", kind_name(ix));
    if (x->rank < 1) return node_fail(c, CD_EMODEL, "gather from a scalar");
    axis = norm_axis(axis, x->rank);
    if (axis < 0 || axis >= x->rank) return node_fail(c, CD_EMODEL, "axis out of range");
    const int orank = x->rank - 1 + ix->rank;
    if (orank > CD_MAX_RANK)
        return node_fail(c, CD_EUNSUPPORTED, "the output's rank %d is above %d", orank, CD_MAX_RANK);
    if (ix->numel < 1) return node_fail(c, CD_EUNSUPPORTED, "no indices (an empty output)");
    int64_t shape[CD_MAX_RANK], len = x->shape[axis];
    int r = 0;
    for (int i = 0; i < axis; i++) shape[r++] = x->shape[i];
    for (int i = 0; i < ix->rank; i++) shape[r++] = ix->shape[i];
    for (int i = (int)axis + 1; i < x->rank; i++) shape[r++] = x->shape[i];
    int64_t *idx = malloc((size_t)ix->numel * sizeof(int64_t));
    if (!idx) return OOM(c);
    for (int64_t j = 0; j < ix->numel; j++) {
        int64_t k = ix->i[j] < 0 ? ix->i[j] + len : ix->i[j];
        if ((ix->batch_mark && ix->batch_mark[j]) || k < 0 || k >= len) {
            free(idx);
            return node_fail(c, CD_EMODEL, "index %lld out of range for a dim of %lld", (long long)ix->i[j],
                             (long long)len);
        }
        idx[j] = k;
    }
    if (is_act(x)) {
        if (axis == 0) {
            free(idx);
            return node_fail(c, CD_EUNSUPPORTED, "gather along the batch dim of an activation");
        }
        int id = new_op(c, CD_OP_GATHER, "Gather");
        if (id < 0) {
            free(idx);
            return id;
        }
        cd_op *o = &c->g->ops[id];
        o->nin = 1;
        o->in[0] = in_id(c, 0);
        o->u.gather.idx = idx;
        o->u.gather.d = (cd_gather_desc){.axis = (int)axis, .nidx = ix->numel, .idx = idx};
        return set_act_out(c, id, orank, shape);
    }
    rc = const_out(c, x->kind, orank, shape, CD_MAX_FOLD_ELEMS);
    if (rc) {
        free(idx);
        return rc;
    }
    x = in_val(c, 0);
    ix = in_val(c, 1);
    cd_value *o = out_val(c);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->shape[i];
    for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->shape[i];
    for (int64_t p = 0, e = 0; p < outer; p++)
        for (int64_t j = 0; j < ix->numel; j++)
            for (int64_t q = 0; q < inner; q++, e++) {
                int64_t s = (p * len + idx[j]) * inner + q;
                if (x->kind == CD_VAL_CONST_F32) {
                    o->f[e] = x->f[s];
                } else {
                    o->i[e] = x->i[s];
                    o->batch_mark[e] = x->batch_mark ? x->batch_mark[s] : 0;
                }
            }
    free(idx);
    return 0;
}
