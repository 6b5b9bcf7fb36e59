// The backend descriptions of the ops that always run in NCHW and need no
// layout choice of the planner (Pad, Slice, Reduce, LayerNorm, Resize,
// ConvTranspose: issue 22).

#include "runtime/plan-internal.h"

#include "core/errors.h"

int cd_plan_nchw_op_desc(const cd_op *op, cd_bop_desc *d) {
    switch (op->kind) {
    case CD_OP_PAD:
        d->op = CD_BOP_PAD;
        d->u.pad = op->u.pad;
        break;
    case CD_OP_SLICE:
        d->op = CD_BOP_SLICE;
        d->u.slice = op->u.slice;
        break;
    case CD_OP_REDUCE:
        d->op = CD_BOP_REDUCE;
        d->u.reduce = op->u.reduce;
        break;
    case CD_OP_LAYERNORM:
        d->op = CD_BOP_LAYERNORM;
        d->u.ln = op->u.ln.d;
        d->w = op->u.ln.gamma;
        d->bias = op->u.ln.beta;
        break;
    case CD_OP_RESIZE:
        d->op = CD_BOP_RESIZE;
        d->u.resize = op->u.resize;
        break;
    case CD_OP_CONVT:
        d->op = CD_BOP_DECONV;
        d->u.deconv = op->u.convt.d;
        d->w = op->u.convt.w;
        d->bias = op->u.convt.bias;
        break;
    default: return CD_EINTERNAL; // a kind plan_op does not know
    }
    return 0;
}

void cd_plan_convt_figures(const cd_op *op, cd_layer *l) {
    const cd_deconv_desc *d = &op->u.convt.d;
    const int64_t nw = (int64_t)d->c * (d->k / d->groups) * d->r * d->s;
    int64_t nz = 0;
    for (int64_t i = 0; i < nw; i++) nz += op->u.convt.w[i] != 0.0f;
    l->params = nw + (op->u.convt.bias ? d->k : 0);
    l->flops = l->flops_dense = l->flops_run = 2 * nw * d->h * d->w; // every input pixel meets every weight
    l->density = nw ? (double)nz / (double)nw : 1.0;
}
