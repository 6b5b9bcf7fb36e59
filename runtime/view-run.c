// Running one layer, image by image when it reads a view (plan-view.c):
// a view's items lie its root's item_bytes apart, which no kernel is told,
// so at batch > 1 each image runs as a batch of 1 with every activation
// pointer moved to that image.

#include "runtime/model.h"

int cd_exec_run_layer(cd_exec *ex, const cd_layer *l, int batch) {
    const cd_model *m = ex->m;
    const cd_btensor *srcs[CD_OP_MAX_IN];
    for (int i = 0; i < l->nin; i++) srcs[i] = &ex->bt[l->in[i]];
    if (!l->view_in || batch == 1) return cd_backend_op_run(m->be, l->op, ex->ctx, l->st, batch, srcs, &ex->bt[l->out]);
    cd_btensor one[CD_OP_MAX_IN + 1];
    for (int b = 0; b < batch; b++) {
        for (int i = 0; i <= l->nin; i++) {
            const int t = i < l->nin ? l->in[i] : l->out;
            const cd_ptensor *pt = &m->tensors[t];
            one[i] = ex->bt[t];
            if (!pt->t.is_const) {
                size_t stride = pt->view ? m->tensors[pt->root].item_bytes : pt->item_bytes;
                one[i].shape[0] = 1;
                one[i].data = (char *)one[i].data + (size_t)b * stride;
            }
            if (i < l->nin) srcs[i] = &one[i];
        }
        int rc = cd_backend_op_run(m->be, l->op, ex->ctx, l->st, 1, srcs, &one[l->nin]);
        if (rc) return rc;
    }
    return 0;
}
