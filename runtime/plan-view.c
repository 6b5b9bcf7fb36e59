// Slice and Split outputs as views: no copy where the layout allows.
//
// The arena holds a tensor as [batch][item]. A slice that keeps one
// contiguous run of every item (ShuffleNet's channel split: channels c0..c1
// of NCHW, or whole blocks of channels of nChw16c / nChw8c) is a window of
// its source: view_offset bytes into each item, items the source's
// item_bytes apart. At batch 1 a reader sees an ordinary tensor (a pointer
// into the middle of the source); at batch > 1 the executor runs each
// layer that reads a view image by image (cd_exec_run_layer), so that no
// kernel needs an item stride. Host-memory backends only: a device
// kernel's vector loads may want more than the 4-byte alignment a view's
// start has, so on hip the Slice layers stay copies.
//
// What stays a copy (a Slice layer, kernel "copy"): a slice with a step,
// one that is not a single run per item (an H or W window of a
// multi-channel tensor), a blocked slice that cuts a block (then the
// source is reordered to NCHW and viewed there), and a view that is a
// model output (copied out by a same-layout reorder, cd_plan_unview).

#include "runtime/plan-internal.h"

#include "core/errors.h"

#include <stdio.h>
#include <string.h>

// The element offset in each item of slice d of a tensor s when the
// slice's output (shape o) is one contiguous run of every item in layout
// l; -1 when it is not.
static int64_t run_start(const cd_slice_desc *d, const cd_tdesc *s, const int64_t *o, cd_layout l) {
    const int rank = s->rank;
    int k = 1;
    while (k < rank && d->start[k] == 0 && d->step[k] == 1 && o[k] == s->shape[k]) k++;
    if (k == rank || d->step[k] != 1) return -1;
    for (int i = k + 1; i < rank; i++)
        if (d->start[i] != 0 || d->step[i] != 1 || o[i] != s->shape[i]) return -1;
    for (int i = 1; i < k; i++)
        if (s->shape[i] != 1) return -1;
    int64_t inner = 1;
    for (int i = k + 1; i < rank; i++) inner *= s->shape[i];
    if (l == CD_LAYOUT_NCHW) return d->start[k] * inner;
    // Blocked: whole blocks of channels, or the last channels (whose
    // padding is the source's own).
    const int64_t b = cd_layout_block(l);
    if (b < 2 || rank != 4 || k != 1 || d->start[1] % b || (o[1] % b && d->start[1] + o[1] != s->shape[1])) return -1;
    return d->start[1] * inner;
}

int cd_plan_slice_view(pctx *p, const cd_op *op, int in0) {
    cd_model *m = p->m;
    if (cd_backend_get_caps(m->be).device_memory) return 0;
    const cd_value *ov = &p->g->values[op->out];
    const cd_slice_desc *d = &op->u.slice;
    const cd_ptensor *s = &m->tensors[in0];
    if (s->t.is_const || s->t.int8 || s->t.rank != ov->rank || ov->rank < 2) return 0;
    cd_layout l = s->t.layout;
    int64_t start = run_start(d, &s->t, ov->shape, l);
    if (start < 0 && l != CD_LAYOUT_NCHW && run_start(d, &s->t, ov->shape, CD_LAYOUT_NCHW) >= 0) {
        // A cut through a block: view the NCHW copy the Slice layer would read.
        in0 = cd_plan_in_layout(p, in0, CD_LAYOUT_NCHW);
        if (in0 < 0) return in0;
        l = CD_LAYOUT_NCHW;
        start = run_start(d, &m->tensors[in0].t, ov->shape, l);
    }
    if (start < 0) return 0;
    cd_tdesc t = cd_plan_value_desc(ov, l, ov->rank);
    int id = cd_plan_add_tensor(p, &t);
    if (id < 0) return cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
    cd_plan_alias_of(m, in0, id); // its storage (a window of it when in0 is a view itself)
    m->tensors[id].view = 1;
    m->tensors[id].view_offset += (size_t)start * sizeof(float);
    p->vt[op->out] = id;
    m->slice_views++;
    return 1;
}

void cd_plan_alias_of(cd_model *m, int src, int id) {
    m->tensors[id].root = m->tensors[src].root;
    m->tensors[id].view = m->tensors[src].view;
    m->tensors[id].view_offset = m->tensors[src].view_offset;
}

int cd_plan_unview(pctx *p, int t, const char *name) {
    cd_model *m = p->m;
    if (!m->tensors[t].view) return t;
    cd_tdesc td = m->tensors[t].t;
    int id = cd_plan_add_tensor(p, &td);
    if (id < 0) return cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
    char nm[128];
    snprintf(nm, sizeof nm, "%s(copy)", name);
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_REORDER; // same layout in and out: a copy of each item's run
    d.max_batch = m->max_batch;
    d.nsrc = 1;
    d.src[0] = td;
    d.dst = td;
    int rc = cd_plan_emit(p, &d, NULL, 1, &t, id, nm, "Slice(copy)");
    return rc < 0 ? rc : id;
}
