// Planning, the residual in place: a conv that adds a skip tensor (a
// residual block's Conv + Add) writes its output into the skip tensor's own
// storage when the conv is the skip tensor's last reader. The kernels then
// add the residual where it lies instead of copying it into a fresh output
// first: oneDNN's sum post-op reads the sum from dst, and a separate dst
// costs one copy of the skip tensor per block, single-threaded (dense
// ResNet-50 f32 at 2 threads: 1.9 ms of 42 in the Conv+Add layers).
// Every CPU conv kernel reads an output's residual before it writes that
// output (backends/cpu/dnnl.h, dw3x3.h, winograd.h, sparse-conv*.h, the
// references); a backend says so with cd_backend_caps.residual_in_place.

#include "runtime/plan-internal.h"

#include <stdlib.h>

// 1 when tensors a and b hold the same bytes in the same arrangement
// (shape, layout, float or which integers), neither a window of another.
static int same_storage(const cd_model *m, int a, int b) {
    const cd_ptensor *x = &m->tensors[a], *y = &m->tensors[b];
    if (x->view || y->view || x->view_offset || y->view_offset || x->t.is_const || y->t.is_const) return 0;
    if (x->item_bytes != y->item_bytes || x->t.layout != y->t.layout || x->t.int8 || y->t.int8) return 0;
    if (x->t.rank != y->t.rank) return 0;
    for (int i = 1; i < x->t.rank; i++)
        if (x->t.shape[i] != y->t.shape[i]) return 0;
    return 1;
}

int cd_plan_residual_in_place(pctx *p) {
    cd_model *m = p->m;
    if (!cd_backend_get_caps(m->be).residual_in_place) return 0;
    // last[r]: the last layer touching storage root r; nlayers for a model
    // output (read after the layers) and for a model input (the caller's
    // data, staged there: never written over).
    int *last = malloc(((size_t)m->ntensors + 1) * sizeof *last);
    if (!last) return -1;
    for (int i = 0; i < m->ntensors; i++) last[i] = -2;
    for (int li = 0; li < m->nlayers; li++) {
        const cd_layer *l = &m->layers[li];
        last[m->tensors[l->out].root] = li;
        for (int i = 0; i < l->nin; i++) last[m->tensors[l->in[i]].root] = li;
    }
    for (int i = 0; i < m->noutputs; i++) last[m->tensors[m->outputs[i].tensor].root] = m->nlayers;
    for (int i = 0; i < m->ninputs; i++) last[m->tensors[m->inputs[i].tensor].root] = m->nlayers;
    for (int li = 0; li < m->nlayers; li++) {
        const cd_layer *l = &m->layers[li];
        if (l->op != CD_BOP_CONV2D || l->nin != 2) continue;
        const int res = l->in[1], out = l->out, r = m->tensors[res].root;
        if (last[r] != li || m->tensors[out].root != out || m->tensors[l->in[0]].root == r) continue;
        if (!same_storage(m, res, out) || !same_storage(m, r, out)) continue;
        for (int i = 0; i < m->ntensors; i++) // out and its aliases now live in r
            if (m->tensors[i].root == out) m->tensors[i].root = r;
        last[r] = last[out];
        m->residual_in_place++;
    }
    free(last);
    return 0;
}
