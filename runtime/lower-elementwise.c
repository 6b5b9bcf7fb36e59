// Lowering of the element-wise ops that are not fused into a conv: Tanh,
// Softplus, Mish, Neg, Abs, Sqrt, Erf, Gelu (opset 20, both approximations),
// Pow with a constant scalar exponent (stand-alone ACT ops; on constants
// they fold), and the variadic Min and Max (a chain of broadcast binary ops).

#include "runtime/lower-internal.h"

#include "kernels/cpu/ref.h"

#include <stdlib.h>

int cd_lower_unary(lctx *c) {
    int rc;
    const char *op = c->n->op;
    const int is_pow = strcmp(op, "Pow") == 0;
    if ((rc = need_inputs(c, is_pow ? 2 : 1, is_pow ? 2 : 1)) || (rc = only_first_output(c))) return rc;
    cd_activation a = {CD_ACT_NONE, 0, 0};
    if (strcmp(op, "Tanh") == 0)
        a.kind = CD_ACT_TANH;
    else if (strcmp(op, "Softplus") == 0)
        a.kind = CD_ACT_SOFTPLUS;
    else if (strcmp(op, "Mish") == 0)
        a.kind = CD_ACT_MISH;
    else if (strcmp(op, "Neg") == 0)
        a.kind = CD_ACT_NEG;
    else if (strcmp(op, "Abs") == 0)
        a.kind = CD_ACT_ABS;
    else if (strcmp(op, "Sqrt") == 0)
        a.kind = CD_ACT_SQRT;
    else if (strcmp(op, "Erf") == 0)
        a.kind = CD_ACT_ERF;
    else if (strcmp(op, "Gelu") == 0) {
        char approx[16];
        if ((rc = attr_str(c, "approximate", "none", approx, sizeof approx))) return rc;
        if (strcmp(approx, "none") == 0)
            a.kind = CD_ACT_GELU;
        else if (strcmp(approx, "tanh") == 0)
            a.kind = CD_ACT_GELU_TANH;
        else
            return node_fail(c, CD_EUNSUPPORTED, "approximate '%s' is not supported (none, tanh)", approx);
    } else {
        cd_value *e = in_val(c, 1);
        if (!e || e->numel != 1 || !is_const(e))
            return node_fail(c, CD_EUNSUPPORTED, "the exponent must be a constant scalar (it is %s)", kind_name(e));
        a.kind = CD_ACT_POW;
        a.alpha = e->kind == CD_VAL_CONST_F32 ? e->f[0] : (float)e->i[0];
    }
    cd_value *x = in_val(c, 0);
    if (x->kind == CD_VAL_CONST_F32) {
        if ((rc = const_out(c, CD_VAL_CONST_F32, x->rank, x->shape, CD_MAX_CONST_ELEMS))) return rc;
        x = in_val(c, 0);
        cd_ref_activation(a, (size_t)x->numel, x->f, out_val(c)->f);
        return 0;
    }
    if ((rc = need_act(c, 0))) return rc;
    int id = new_op(c, CD_OP_ACT, op);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    c->g->ops[id].u.act = a;
    return set_act_out(c, id, x->rank, x->shape);
}

// Min/Max of more than two inputs: ((in0 op in1) op in2) ..., each step a
// binary op into a value of its own, the last into the node's output; at
// most one input may be a constant (the binary ops take one), and it may
// not span the batch dim.
static int minmax_chain(lctx *c, cd_binary_kind kind) {
    const int n = c->n->ninputs;
    int nconst = 0;
    for (int j = 0; j < n; j++) {
        cd_value *v = in_val(c, j);
        if (!v) return node_fail(c, CD_EMODEL, "input %d is empty", j);
        if (v->kind == CD_VAL_CONST_I64) return node_fail(c, CD_EUNSUPPORTED, "integer constant operand");
        nconst += is_const(v);
    }
    if (nconst > 1) return node_fail(c, CD_EUNSUPPORTED, "more than one constant operand");
    int acc = in_id(c, 0);
    for (int j = 1; j < n; j++) {
        cd_value *a = &c->g->values[acc], *b = in_val(c, j);
        int r;
        int64_t shape[CD_MAX_RANK];
        if (broadcast(a->rank, a->shape, b->rank, b->shape, &r, shape))
            return node_fail(c, CD_EMODEL, "input %d does not broadcast", j);
        for (int k = 0; k < 2; k++) {
            cd_value *v = k ? b : a;
            if (is_act(v) && v->rank != r)
                return node_fail(c, CD_EUNSUPPORTED, "activation operand of rank %d broadcast to rank %d", v->rank, r);
            if (is_const(v) && v->rank == r && v->shape[0] != 1)
                return node_fail(c, CD_EUNSUPPORTED, "constant operand spans the batch dimension");
        }
        int out;
        if (j == n - 1) {
            out = c->n->outputs[0];
        } else {
            char name[512];
            snprintf(name, sizeof name, "%s::%s%d", c->g->values[c->n->outputs[0]].name, c->n->op, j);
            out = cd_graph_add_value(c->g, name);
            if (out < 0) return out == CD_ENOMEM ? OOM(c) : node_fail(c, CD_EMODEL, "name clash for '%s'", name);
        }
        int id = new_op(c, CD_OP_BINARY, c->n->op);
        if (id < 0) return id;
        cd_op *o = &c->g->ops[id];
        o->nin = 2;
        o->in[0] = acc;
        o->in[1] = in_id(c, j);
        o->u.binary.kind = kind;
        o->out = out;
        cd_value *ov = &c->g->values[out];
        if (j == n - 1) return set_act_out(c, id, r, shape);
        ov->kind = CD_VAL_ACT;
        ov->rank = r;
        memcpy(ov->shape, shape, sizeof(int64_t) * (size_t)r);
        ov->numel = cd_shape_numel(r, shape);
        ov->producer_op = id;
        ov->nconsumers = 1;
        acc = out;
    }
    return 0;
}

int cd_lower_minmax(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 1, CD_OP_MAX_IN)) || (rc = only_first_output(c))) return rc;
    const cd_binary_kind kind = strcmp(c->n->op, "Min") == 0 ? CD_BINARY_MIN : CD_BINARY_MAX;
    if (c->n->ninputs == 1) return cd_lower_identity(c);
    if (c->n->ninputs == 2) return cd_lower_binary(c);
    // Fold constants only when every input is one (shape computations).
    int all_const = 1;
    for (int j = 0; j < c->n->ninputs; j++) all_const &= is_const(in_val(c, j));
    if (all_const) return node_fail(c, CD_EUNSUPPORTED, "%s of more than two constants", c->n->op);
    return minmax_chain(c, kind);
}
