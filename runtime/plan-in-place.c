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

void cd_plan_residual_in_place(cd_model *m) {
    if (!cd_backend_get_caps(m->be).residual_in_place) return;
    for (int li = 0; li < m->nlayers; li++) {
        const cd_layer *l = &m->layers[li];
        if (l->op != CD_BOP_CONV2D || l->nin != 2) continue;
        const int res = l->in[1], out = l->out, r = m->tensors[res].root;
        cd_ptensor *R = &m->tensors[r];
        // R read last here (a model output lives to nlayers), not the caller's
        // input (first -1: staged there, never written over).
        if (R->last != li || R->first < 0 || m->tensors[out].root != out || m->tensors[l->in[0]].root == r) continue;
        if (!same_storage(m, res, out) || !same_storage(m, r, out)) continue;
        for (int i = 0; i < m->ntensors; i++) // out and its aliases now live in r
            if (m->tensors[i].root == out) m->tensors[i].root = r;
        R->last = m->tensors[out].last;
        m->residual_in_place++;
    }
}
