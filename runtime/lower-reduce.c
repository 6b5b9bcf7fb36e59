// Lowering of ReduceSum, ReduceMean, ReduceMax and LayerNormalization.
//
// Reductions take their axes as an attribute up to opset 17 (ReduceSum up to
// 12) and as an input after; keepdims only changes the shape. A mean or max
// over H and W of a rank-4 activation is the global pool it is
// (GlobalAveragePool / GlobalMaxPool's kernels), followed by an alias when
// keepdims is 0; other reductions are REDUCE ops. The batch dim is never
// reduced. LayerNormalization (opset 17) normalizes the dims from axis on:
// a LAYERNORM op with gamma and beta (runtime/fuse-patterns.c makes the same
// op from the pattern older exporters write).

#include "runtime/lower-internal.h"

#include <stdlib.h>

int cd_lower_reduce(lctx *c) {
    int rc;
    const char *op = c->n->op;
    const cd_reduce_kind kind = strcmp(op, "ReduceSum") == 0    ? CD_REDUCE_SUM
                                : strcmp(op, "ReduceMean") == 0 ? CD_REDUCE_MEAN
                                                                : CD_REDUCE_MAX;
    const int input_opset = kind == CD_REDUCE_SUM ? 13 : 18; // where axes moved to an input
    const int axes_input = c->g->opset >= input_opset;
    if ((rc = need_inputs(c, 1, axes_input ? 2 : 1)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    int64_t keepdims, noop_empty, axes[CD_MAX_RANK];
    if ((rc = attr_int(c, "keepdims", 1, &keepdims)) || (rc = attr_int(c, "noop_with_empty_axes", 0, &noop_empty)))
        return rc;
    if (!axes_input && attr_find(c, "noop_with_empty_axes"))
        return node_fail(c, CD_EUNSUPPORTED, "attribute 'noop_with_empty_axes' is not in opset %d", c->g->opset);
    int n = -1;
    if (axes_input) {
        if (attr_find(c, "axes"))
            return node_fail(c, CD_EUNSUPPORTED, "attribute 'axes' is not in opset %d (axes is an input from opset %d)",
                             c->g->opset, input_opset);
        cd_value *a = in_val(c, 1);
        if (a) {
            if (a->kind != CD_VAL_CONST_I64 || a->rank > 1 || a->numel > CD_MAX_RANK)
                return node_fail(c, CD_EUNSUPPORTED, "axes must be a constant integer list computable at load");
            n = (int)a->numel;
            for (int i = 0; i < n; i++) axes[i] = a->i[i];
        }
    } else if ((rc = attr_ints(c, "axes", axes, CD_MAX_RANK, &n))) {
        return rc;
    }
    cd_value *x = in_val(c, 0);
    if (n <= 0 && noop_empty && axes_input) {
        // No axes and the no-op flag: the input itself.
        int id = new_op(c, CD_OP_ALIAS, op);
        if (id < 0) return id;
        c->g->ops[id].nin = 1;
        c->g->ops[id].in[0] = in_id(c, 0);
        return set_act_out(c, id, x->rank, x->shape);
    }
    if (n <= 0) return node_fail(c, CD_EUNSUPPORTED, "a reduction over every dim (the batch included)");
    unsigned mask = 0;
    for (int i = 0; i < n; i++) {
        int64_t a = norm_axis(axes[i], x->rank);
        if (a < 0 || a >= x->rank) return node_fail(c, CD_EMODEL, "axis %lld out of range", (long long)axes[i]);
        if (a == 0) return node_fail(c, CD_EUNSUPPORTED, "a reduction over the batch dim");
        mask |= 1u << a;
    }
    int64_t shape[CD_MAX_RANK], kept[CD_MAX_RANK];
    int rank = 0;
    for (int i = 0; i < x->rank; i++) {
        kept[i] = (mask >> i) & 1u ? 1 : x->shape[i];
        if (keepdims || !((mask >> i) & 1u)) shape[rank++] = kept[i];
    }
    if (x->rank == 4 && mask == 0xcu && kind != CD_REDUCE_SUM) {
        // The global pool over H and W (then reshaped when the dims go).
        cd_pool_desc d = {.kind = kind == CD_REDUCE_MAX ? CD_POOL_MAX : CD_POOL_AVG,
                          .n = 1,
                          .c = (int)x->shape[1],
                          .h = (int)x->shape[2],
                          .w = (int)x->shape[3],
                          .kh = (int)x->shape[2],
                          .kw = (int)x->shape[3],
                          .stride_h = 1,
                          .stride_w = 1,
                          .dil_h = 1,
                          .dil_w = 1,
                          .oh = 1,
                          .ow = 1};
        int id =
            new_op(c, CD_OP_POOL, kind == CD_REDUCE_MAX ? "ReduceMax(GlobalMaxPool)" : "ReduceMean(GlobalAvgPool)");
        if (id < 0) return id;
        c->g->ops[id].nin = 1;
        c->g->ops[id].in[0] = in_id(c, 0);
        c->g->ops[id].u.pool = d;
        if (keepdims) return set_act_out(c, id, 4, kept);
        char name[512];
        snprintf(name, sizeof name, "%s::pooled", c->g->values[c->n->outputs[0]].name);
        int mid = cd_graph_add_value(c->g, name);
        if (mid < 0) return mid == CD_ENOMEM ? OOM(c) : node_fail(c, CD_EMODEL, "name clash for '%s'", name);
        cd_value *m = &c->g->values[mid];
        m->kind = CD_VAL_ACT;
        m->rank = 4;
        memcpy(m->shape, kept, sizeof(int64_t) * 4);
        m->numel = kept[1];
        m->producer_op = id;
        m->nconsumers = 1;
        c->g->ops[id].out = mid;
        int al = new_op(c, CD_OP_ALIAS, "Reshape");
        if (al < 0) return al;
        c->g->ops[al].nin = 1;
        c->g->ops[al].in[0] = mid;
        return set_act_out(c, al, rank, shape);
    }
    int id = new_op(c, CD_OP_REDUCE, op);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    c->g->ops[id].u.reduce = (cd_reduce_desc){kind, mask};
    return set_act_out(c, id, rank, shape);
}

// Copies a per-element parameter of len values (or a scalar, repeated) from
// input j into a new array *out; 0, CD_EUNSUPPORTED or CD_ENOMEM.
static int ln_param(lctx *c, int j, const char *what, int64_t len, float **out) {
    cd_value *v = in_val(c, j);
    *out = NULL;
    if (!v) return 0;
    if (v->kind != CD_VAL_CONST_F32 || !(v->numel == len || v->numel == 1))
        return node_fail(c, CD_EUNSUPPORTED, "%s must be a float initializer of %lld values", what, (long long)len);
    float *p = malloc((size_t)len * sizeof(float));
    if (!p) return OOM(c);
    for (int64_t i = 0; i < len; i++) p[i] = v->f[v->numel == 1 ? 0 : i];
    *out = p;
    return 0;
}

int cd_lower_layernorm(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 3)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    int64_t axis, stash;
    float eps;
    if ((rc = attr_int(c, "axis", -1, &axis)) || (rc = attr_float(c, "epsilon", 1e-5f, &eps)) ||
        (rc = attr_int(c, "stash_type", 1, &stash)))
        return rc;
    if (stash != 1) return node_fail(c, CD_EUNSUPPORTED, "stash_type %lld (only 1, float)", (long long)stash);
    if (!(eps >= 0.0f)) return node_fail(c, CD_EMODEL, "epsilon must be >= 0");
    cd_value *x = in_val(c, 0);
    axis = norm_axis(axis, x->rank);
    if (axis < 0 || axis >= x->rank) return node_fail(c, CD_EMODEL, "axis out of range");
    if (axis == 0) return node_fail(c, CD_EUNSUPPORTED, "normalizing over the batch dim");
    cd_layernorm_desc d = {1, 1, eps};
    for (int i = 1; i < x->rank; i++) *(i < axis ? &d.outer : &d.len) *= x->shape[i];
    int id = new_op(c, CD_OP_LAYERNORM, "LayerNorm");
    if (id < 0) return id;
    cd_op *o = &c->g->ops[id];
    o->nin = 1;
    o->in[0] = in_id(c, 0);
    o->u.ln.d = d;
    if ((rc = ln_param(c, 1, "Scale", d.len, &o->u.ln.gamma))) return rc;
    if ((rc = ln_param(c, 2, "B", d.len, &o->u.ln.beta))) return rc;
    c->g->params += 2 * d.len;
    return set_act_out(c, id, x->rank, x->shape);
}
