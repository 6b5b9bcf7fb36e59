// Lowering of Pad, Slice and Split, and the folding of a zero Pad into the
// conv or pool that reads it.
//
// Pad: opset 11+ (pads, constant_value and, from 18, axes as inputs; mode
// constant, reflect or edge). A constant zero pad of H and W in front of a
// Conv, an AveragePool (its padding then counts in the divisor) or a MaxPool
// of a non-negative input (zero and -inf padding give the same maximum when
// every window holds an input element) becomes that op's padding
// (cd_lower_fold_pad); anything else is a PAD op.
// Slice (opset 11+: starts, ends, axes, steps inputs) and Split (split as an
// attribute up to opset 12, as an input from 13, num_outputs from 18) on
// activations become SLICE ops (one per Split output); on constants they
// fold. The batch dim is never cut.

#include "runtime/lower-internal.h"

#include "kernels/cpu/ref.h"

#include <stdlib.h>

// Input j as a constant integer list of at most max values, none of them the
// batch size. 0 with *n set (-1: the input is absent), or CD_EUNSUPPORTED.
static int const_ints(lctx *c, int j, const char *what, int64_t *out, int max, int *n) {
    cd_value *v = in_val(c, j);
    *n = -1;
    if (!v) return 0;
    if (v->kind != CD_VAL_CONST_I64 || v->rank > 1)
        return node_fail(c, CD_EUNSUPPORTED, "%s must be a constant integer list computable at load (it is %s)", what,
                         kind_name(v));
    if (v->numel > max)
        return node_fail(c, CD_EUNSUPPORTED, "%s has %lld values (at most %d)", what, (long long)v->numel, max);
    for (int64_t i = 0; i < v->numel; i++) {
        if (v->batch_mark && v->batch_mark[i])
            return node_fail(c, CD_EUNSUPPORTED, "%s depends on the batch size", what);
        out[i] = v->i[i];
    }
    *n = (int)v->numel;
    return 0;
}

// Normalizes the n axes in place against rank (negative from the end);
// CD_EMODEL for one out of range or repeated.
static int norm_axes(lctx *c, int64_t *axes, int n, int rank) {
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
        axes[i] = norm_axis(axes[i], rank);
        if (axes[i] < 0 || axes[i] >= rank) return node_fail(c, CD_EMODEL, "axis %d out of range", i);
        if (seen & (1u << axes[i])) return node_fail(c, CD_EMODEL, "axis %lld repeated", (long long)axes[i]);
        seen |= 1u << axes[i];
    }
    return 0;
}

// Declares output j of the node an activation of the given shape produced
// by op (set_act_out for any output).
static int set_out_j(lctx *c, int j, int op, int rank, const int64_t *shape) {
    int64_t n;
    if (cd_ck_shape_numel(rank, shape, &n) || n > CD_MAX_ACT_ELEMS)
        return node_fail(c, CD_ETOO_LARGE, "output %d would have more than %lld elements per batch item", j,
                         (long long)CD_MAX_ACT_ELEMS);
    if (n == 0) return node_fail(c, CD_EMODEL, "output %d would be empty", j);
    cd_value *o = &c->g->values[c->n->outputs[j]];
    o->kind = CD_VAL_ACT;
    o->rank = rank;
    memcpy(o->shape, shape, sizeof(int64_t) * (size_t)rank);
    o->numel = n;
    o->producer_op = op;
    c->g->ops[op].out = c->n->outputs[j];
    return 0;
}

// ---- Pad ------------------------------------------------------------------------

int cd_lower_pad(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 4)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    if (!is_act(x))
        return node_fail(c, CD_EUNSUPPORTED, "input 0 must be computed at run time, it is %s", kind_name(x));
    char mode[16];
    if ((rc = attr_str(c, "mode", "constant", mode, sizeof mode))) return rc;
    cd_pad_desc d;
    memset(&d, 0, sizeof d);
    if (strcmp(mode, "constant") == 0)
        d.mode = CD_PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0)
        d.mode = CD_PAD_REFLECT;
    else if (strcmp(mode, "edge") == 0)
        d.mode = CD_PAD_EDGE;
    else
        return node_fail(c, CD_EUNSUPPORTED, "mode '%s' is not supported (constant, reflect, edge)", mode);
    const int rank = x->rank;
    int64_t pads[2 * CD_MAX_RANK], axes[CD_MAX_RANK];
    int np, na;
    if ((rc = const_ints(c, 1, "pads", pads, 2 * CD_MAX_RANK, &np))) return rc;
    if ((rc = const_ints(c, 3, "axes", axes, CD_MAX_RANK, &na))) return rc;
    if (na >= 0 && c->g->opset < 18)
        return node_fail(c, CD_EMODEL, "the axes input is not in opset %d (from opset 18)", c->g->opset);
    if (na < 0) {
        na = rank;
        for (int i = 0; i < rank; i++) axes[i] = i;
    } else if ((rc = norm_axes(c, axes, na, rank))) {
        return rc;
    }
    if (np != 2 * na) return node_fail(c, CD_EMODEL, "pads has %d values, expected %d", np, 2 * na);
    cd_value *cv = in_val(c, 2);
    if (cv) {
        if (cv->kind != CD_VAL_CONST_F32 || cv->numel != 1)
            return node_fail(c, CD_EUNSUPPORTED, "constant_value must be a constant float scalar");
        d.value = cv->f[0];
    }
    int64_t end[CD_MAX_RANK] = {0}, shape[CD_MAX_RANK];
    for (int i = 0; i < na; i++) {
        d.begin[axes[i]] = pads[i];
        end[axes[i]] = pads[na + i];
    }
    for (int i = 0; i < rank; i++) {
        if (i == 0 && (d.begin[0] || end[0])) return node_fail(c, CD_EUNSUPPORTED, "padding the batch dim");
        if (d.begin[i] < -CD_MAX_ACT_ELEMS || d.begin[i] > CD_MAX_ACT_ELEMS || end[i] < -CD_MAX_ACT_ELEMS ||
            end[i] > CD_MAX_ACT_ELEMS)
            return node_fail(c, CD_EMODEL, "pads out of range");
        shape[i] = x->shape[i] + d.begin[i] + end[i];
        if (shape[i] < 1) return node_fail(c, CD_EMODEL, "dim %d would be %lld after padding", i, (long long)shape[i]);
        if (d.mode == CD_PAD_REFLECT && x->shape[i] < 2 && (d.begin[i] > 0 || end[i] > 0))
            return node_fail(c, CD_EMODEL, "reflect padding of dim %d of size 1", i);
    }
    int id = new_op(c, CD_OP_PAD, "Pad");
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    c->g->ops[id].u.pad = d;
    return set_act_out(c, id, rank, shape);
}

// 1 when every value of v is >= 0: the output of a Relu (fused or not), a
// Clip with a non-negative floor, a Sigmoid.
static int nonnegative(const cd_graph *g, const cd_value *v) {
    if (v->producer_op < 0) return 0;
    const cd_op *op = &g->ops[v->producer_op];
    const cd_activation *a = op->kind == CD_OP_CONV     ? &op->u.conv.d.act
                             : op->kind == CD_OP_GEMM   ? &op->u.gemm.d.act
                             : op->kind == CD_OP_BINARY ? &op->u.binary.act
                             : op->kind == CD_OP_ACT    ? &op->u.act
                                                        : NULL;
    if (!a) return 0;
    return a->kind == CD_ACT_RELU || (a->kind == CD_ACT_CLIP && a->alpha >= 0.0f) || a->kind == CD_ACT_SIGMOID ||
           a->kind == CD_ACT_HARDSIGMOID;
}

int cd_lower_fold_pad(lctx *c, int need_nonneg, int *in, int *h, int *w, int pads[4]) {
    cd_value *v = in_val(c, 0);
    cd_op *pad = fusable_producer(c, v);
    if (!pad || pad->kind != CD_OP_PAD || v->rank != 4) return 0;
    const cd_pad_desc *d = &pad->u.pad;
    const cd_value *src = &c->g->values[pad->in[0]];
    // Only H and W, only growing, zeros.
    if (d->mode != CD_PAD_CONSTANT || d->value != 0.0f || d->begin[1] || v->shape[1] != src->shape[1]) return 0;
    int64_t pt = d->begin[2], pl = d->begin[3], pb = v->shape[2] - src->shape[2] - pt,
            pr = v->shape[3] - src->shape[3] - pl;
    if (pt < 0 || pl < 0 || pb < 0 || pr < 0 || pt > 4096 || pl > 4096 || pb > 4096 || pr > 4096) return 0;
    if (need_nonneg && !nonnegative(c->g, src)) return 0;
    *in = pad->in[0];
    *h = (int)src->shape[2];
    *w = (int)src->shape[3];
    pads[0] += (int)pt;
    pads[1] += (int)pl;
    pads[2] += (int)pb;
    pads[3] += (int)pr;
    return 1;
}

// ---- Slice -----------------------------------------------------------------------

// The start and element count of a Slice along a dim of size dim (the ONNX
// clamping rules); 0 or CD_EMODEL for step 0.
static int slice_range(lctx *c, int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *count) {
    if (step == 0) return node_fail(c, CD_EMODEL, "a step is 0");
    if (step == INT64_MIN) return node_fail(c, CD_EMODEL, "a step is out of range");
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        *count = end > start ? (end - start - 1) / step + 1 : 0; // (never overflows)
    } else {
        start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        *count = start > end ? (start - end - 1) / -step + 1 : 0;
    }
    *first = start;
    return 0;
}

// Folds a slice of constant x (float or integer with its batch marks).
static int fold_slice(lctx *c, const cd_slice_desc *d, int rank, const int64_t *shape) {
    cd_value *x = in_val(c, 0);
    int rc = const_out(c, x->kind, rank, shape, CD_MAX_CONST_ELEMS);
    if (rc) return rc;
    x = in_val(c, 0);
    cd_value *o = out_val(c);
    if (x->kind == CD_VAL_CONST_F32) {
        cd_ref_slice(d, rank, x->shape, x->f, shape, o->f, sizeof(float));
    } else {
        cd_ref_slice(d, rank, x->shape, x->i, shape, o->i, sizeof(int64_t));
        if (x->batch_mark) cd_ref_slice(d, rank, x->shape, x->batch_mark, shape, o->batch_mark, 1);
    }
    return 0;
}

// Makes the SLICE op of output j: x (activation) to shape. A slice that
// selects everything is an alias.
static int emit_slice(lctx *c, int j, const cd_slice_desc *d, const int64_t *shape) {
    cd_value *x = in_val(c, 0);
    int whole = 1;
    for (int i = 0; i < x->rank; i++) whole &= d->start[i] == 0 && d->step[i] == 1 && shape[i] == x->shape[i];
    int id = new_op(c, whole ? CD_OP_ALIAS : CD_OP_SLICE, whole ? "Slice(all)" : c->n->op);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    if (!whole) c->g->ops[id].u.slice = *d;
    return set_out_j(c, j, id, in_val(c, 0)->rank, shape);
}

int cd_lower_slice(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 3, 5)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0);
    if (!is_act(x) && !is_const(x)) return node_fail(c, CD_EMODEL, "input 0 has no value");
    const int rank = x->rank;
    int64_t starts[CD_MAX_RANK], ends[CD_MAX_RANK], axes[CD_MAX_RANK], steps[CD_MAX_RANK];
    int ns, ne, na, nst;
    if ((rc = const_ints(c, 1, "starts", starts, CD_MAX_RANK, &ns)) ||
        (rc = const_ints(c, 2, "ends", ends, CD_MAX_RANK, &ne)) ||
        (rc = const_ints(c, 3, "axes", axes, CD_MAX_RANK, &na)) ||
        (rc = const_ints(c, 4, "steps", steps, CD_MAX_RANK, &nst)))
        return rc;
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return node_fail(c, CD_EMODEL, "starts, ends, axes and steps differ in length");
    if (na < 0)
        for (int i = 0; i < ns; i++) axes[i] = i;
    if ((rc = norm_axes(c, axes, ns, rank))) return rc;
    cd_slice_desc d;
    memset(&d, 0, sizeof d);
    int64_t shape[CD_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        d.step[i] = 1;
        shape[i] = x->shape[i];
    }
    for (int i = 0; i < ns; i++) {
        int a = (int)axes[i];
        int64_t step = nst >= 0 ? steps[i] : 1;
        if (is_act(x) && a == 0) {
            // Dim 0 is the batch: only "all of it" is expressible.
            if (starts[i] != 0 || step != 1 || ends[i] < INT32_MAX)
                return node_fail(c, CD_EUNSUPPORTED, "slicing the batch dim");
            continue;
        }
        if ((rc = slice_range(c, x->shape[a], starts[i], ends[i], step, &d.start[a], &shape[a]))) return rc;
        d.step[a] = step;
    }
    if (is_const(x)) return fold_slice(c, &d, rank, shape);
    return emit_slice(c, 0, &d, shape);
}

// ---- Split ------------------------------------------------------------------------

int cd_lower_split(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, 2)) || (rc = need_act(c, 0))) return rc;
    cd_value *x = in_val(c, 0);
    const int nout = c->n->noutputs;
    int64_t axis, num_outputs, sizes[CD_OP_MAX_IN];
    if ((rc = attr_int(c, "axis", 0, &axis)) || (rc = attr_int(c, "num_outputs", 0, &num_outputs))) return rc;
    axis = norm_axis(axis, x->rank);
    if (axis < 0 || axis >= x->rank) return node_fail(c, CD_EMODEL, "axis out of range");
    if (axis == 0) return node_fail(c, CD_EUNSUPPORTED, "splitting the batch dim");
    if (nout < 1 || nout > CD_OP_MAX_IN)
        return node_fail(c, CD_EUNSUPPORTED, "%d outputs (1 to %d supported)", nout, CD_OP_MAX_IN);
    if (num_outputs && num_outputs != nout)
        return node_fail(c, CD_EMODEL, "num_outputs %lld but %d outputs", (long long)num_outputs, nout);
    if (c->g->opset >= 13 && attr_find(c, "split"))
        return node_fail(c, CD_EUNSUPPORTED, "attribute 'split' is not in opset %d (an input from opset 13)",
                         c->g->opset);
    if (c->g->opset < 18 && attr_find(c, "num_outputs"))
        return node_fail(c, CD_EUNSUPPORTED, "attribute 'num_outputs' is not in opset %d (from opset 18)", c->g->opset);
    if (c->g->opset < 13 && c->n->ninputs > 1)
        return node_fail(c, CD_EMODEL, "split is an attribute, not an input, before opset 13");
    int n;
    if (c->g->opset >= 13) {
        if ((rc = const_ints(c, 1, "split", sizes, CD_OP_MAX_IN, &n))) return rc;
    } else if ((rc = attr_ints(c, "split", sizes, CD_OP_MAX_IN, &n))) {
        return rc;
    }
    const int64_t dim = x->shape[axis];
    if (n < 0) {
        // Equal parts; from opset 18 the last may be smaller (ceil).
        int64_t part = (dim + nout - 1) / nout;
        if (c->g->opset < 18 && dim % nout)
            return node_fail(c, CD_EMODEL, "dim %lld does not split in %d equal parts", (long long)dim, nout);
        for (int j = 0; j < nout; j++) sizes[j] = j < nout - 1 ? part : dim - part * (nout - 1);
        n = nout;
    }
    if (n != nout) return node_fail(c, CD_EMODEL, "split has %d values for %d outputs", n, nout);
    int64_t off = 0;
    for (int j = 0; j < nout; j++) {
        if (sizes[j] < 1 || sizes[j] > dim - off)
            return node_fail(c, CD_EMODEL, "split sizes do not add up to dim %lld", (long long)dim);
        off += sizes[j];
    }
    if (off != dim) return node_fail(c, CD_EMODEL, "split sizes do not add up to dim %lld", (long long)dim);
    off = 0;
    for (int j = 0; j < nout; j++) {
        cd_slice_desc d;
        memset(&d, 0, sizeof d);
        int64_t shape[CD_MAX_RANK];
        x = in_val(c, 0);
        for (int i = 0; i < x->rank; i++) {
            d.step[i] = 1;
            shape[i] = x->shape[i];
        }
        d.start[axis] = off;
        shape[axis] = sizes[j];
        off += sizes[j];
        if (c->n->outputs[j] < 0) continue;
        if ((rc = emit_slice(c, j, &d, shape))) return rc;
    }
    return 0;
}
