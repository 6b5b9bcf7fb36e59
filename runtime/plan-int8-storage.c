// Planning, the storage of int8 activations: after the layers are prepared,
// before the arena. An activation written by an int8 conv that quantizes its
// output (out_scale > 0) and read only by int8 convs, as their input or as
// the residual of a fused QDQ residual block, needs no float32: it is stored
// as its 1-byte integers (cd_tdesc.int8) and the layers concerned are
// prepared again with dst_int, src_int or res_int (kernels/op-desc.h).
//
// Layout: NHWC first. oneDNN 2.6's int8 jit kernels exist only for u8/s8
// nhwc (in nChw16c it falls to its reference loop), so integers kept in the
// plan's blocked layout cost a relayout on each side of every dense int8
// layer (bench/results/onednn-versions.md, "+bnd"). In CD_LAYOUT_NHWC a
// oneDNN int8 conv reads and writes the tensor with no reorder at all.
// When a layer concerned cannot take NHWC (the sparse and reference int8
// kernels are NCHW, or oneDNN would run a reference loop) the integers stay
// in the plan's layout; when that fails too, float32 grid values as before.
// A max pool whose output is read only by int8 convs (the FakeQuant after
// it an alias: plan-int8.c elide_pool_fakequants) passes the integers
// through: the max of grid values is on the grid, so the pool runs on the
// bytes, its input and output stored as integers alike (ResNet's stem:
// no dequantizing reorder and float32 pool over 64x112x112). Any other
// reader (an average pool, an Add left in float32, a FakeQuant, a graph
// output) keeps the tensor float32 in the plan's layout, so no float32 op
// is ever planned on NHWC and no reorder layer is needed for it: the
// choice is whole-tensor, by what every kernel of it takes.

#include "runtime/plan-internal.h"

#include "core/errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_READS = 64 };

// One read of the tensor: layer and input index.
typedef struct {
    int layer, in;
} tread;

// A recorded max pool (not an int8 conv).
static int is_pool(const cd_i8layer *r) { return r->d.op == CD_BOP_POOL; }

// The recorded int8 conv or max pool that is layer li, or NULL.
static cd_i8layer *i8_of_layer(pctx *p, int li) {
    for (int i = 0; i < p->ni8l; i++)
        if (p->i8l[i].layer == li) return &p->i8l[i];
    return NULL;
}

// Recorded layer r's descriptor with its current quantization and its
// tensors' current storage (type and layout), weights not set.
static cd_bop_desc desc_now(const pctx *p, cd_i8layer *r) {
    cd_bop_desc d = r->d;
    d.quant = is_pool(r) ? NULL : &r->q;
    const cd_model *m = p->m;
    const cd_layer *l = &m->layers[r->layer];
    for (int i = 0; i < l->nin; i++) {
        d.src[i].int8 = m->tensors[l->in[i]].t.int8;
        d.src[i].int8_signed = m->tensors[l->in[i]].t.int8_signed;
        d.src[i].layout = m->tensors[l->in[i]].t.layout;
    }
    d.dst.int8 = m->tensors[l->out].t.int8;
    d.dst.int8_signed = m->tensors[l->out].t.int8_signed;
    d.dst.layout = m->tensors[l->out].t.layout;
    return d;
}

// Prepares recorded layer r again with d (its desc_now, which the backend
// supports) into *st.
static int reinit(pctx *p, cd_i8layer *r, cd_bop_desc d, cd_op_state **st) {
    const cd_model *m = p->m;
    const cd_layer *l = &m->layers[r->layer];
    if (!is_pool(r) && !(d.wq = cd_plan_int8_weights(p, &p->g->ops[r->op]))) return CD_ENOMEM;
    int rc = cd_backend_op_init(m->be, &d, st);
    if (!rc && cd_backend_kernel_is_reference(cd_backend_op_kernel(m->be, *st)) &&
        !cd_backend_kernel_is_reference(l->kernel)) {
        cd_backend_op_state_free(m->be, *st); // never a slower kernel for it
        *st = NULL;
        rc = CD_EUNSUPPORTED;
    }
    if (!rc) r->d = d, r->d.quant = NULL, r->d.wq = NULL; // the layouts it now runs in
    return rc;
}

// The reads of root tensor t: every one must be an int8 conv's input 0 or
// the residual of one, or (unless nested) a max pool's input whose output
// is read so (its reads follow its own entry). At most cap entries. The
// count, or -1 when some reader is anything else (or a view of t, or t is
// a model output).
static int int8_reads(pctx *p, int t, tread *rd, int cap, int nested) {
    cd_model *m = p->m;
    for (int i = 0; i < m->noutputs; i++)
        if (m->tensors[m->outputs[i].tensor].root == t) return -1;
    int nr = 0;
    for (int li = 0; li < m->nlayers; li++) {
        const cd_layer *l = &m->layers[li];
        for (int i = 0; i < l->nin; i++) {
            if (m->tensors[l->in[i]].root != t) continue;
            if (m->tensors[l->in[i]].view) return -1; // a window (plan-view.c), placed in float32 bytes
            cd_i8layer *r = i8_of_layer(p, li);
            if (!r || nr == cap) return -1;
            if (is_pool(r)) {
                if (nested || i != 0) return -1;
                rd[nr++] = (tread){li, 0};
                const int n = int8_reads(p, m->tensors[l->out].root, rd + nr, cap - nr, 1);
                if (n <= 0) return -1;
                nr += n;
                continue;
            }
            if (i != 0 && !(i == 1 && r->d.u.conv.has_residual)) return -1;
            rd[nr++] = (tread){li, i};
        }
    }
    return nr;
}

// 1 when every tensor sharing root t is a 4-d tensor of t's shape (NHWC
// has no meaning for a reshaped view).
static int views_are_4d(const cd_model *m, int t) {
    const cd_tdesc *a = &m->tensors[t].t;
    if (a->rank != 4) return 0;
    for (int i = 0; i < m->ntensors; i++) {
        const cd_tdesc *b = &m->tensors[i].t;
        if (m->tensors[i].root == t && (b->rank != 4 || memcmp(a->shape + 1, b->shape + 1, 3 * sizeof a->shape[0])))
            return 0;
    }
    return 1;
}

// Sets (on 1) or undoes (on 0) the quantization fields of writer w and the
// reads rd that integer storage of w's output means.
static void mark(pctx *p, cd_i8layer *w, const tread *rd, int nr, int on) {
    w->q.dst_int = on;
    for (int i = 0; i < nr; i++) {
        cd_i8layer *r = i8_of_layer(p, rd[i].layer);
        if (is_pool(r)) continue; // no quantization of its own
        cd_conv_quant *q = &r->q;
        if (rd[i].in == 0) {
            q->src_int = on;
            continue;
        }
        q->res_int = on;
        q->res_scale = on ? w->q.out_scale : 0.0f;
        q->res_zp = on ? w->q.out_zp : 0;
        q->res_signed = on ? w->q.out_signed : 0;
    }
}

// The roots that integer storage of root t read as rd switches: t, and
// the output of each max pool among the reads. Their count (at most cap).
static int storage_roots(pctx *p, int t, const tread *rd, int nr, int *roots, int cap) {
    const cd_model *m = p->m;
    int n = 0;
    roots[n++] = t;
    for (int i = 0; i < nr && n < cap; i++)
        if (is_pool(i8_of_layer(p, rd[i].layer))) roots[n++] = m->tensors[m->layers[rd[i].layer].out].root;
    return n;
}

// Sets the tensors of the roots to integers of w's type in layout lay
// (on), or back to float32 in layouts was[] (off).
static void set_storage(cd_model *m, const int *roots, int nroots, const cd_i8layer *w, int on, cd_layout lay,
                        const cd_layout *was) {
    for (int i = 0; i < m->ntensors; i++)
        for (int k = 0; k < nroots; k++) {
            if (m->tensors[i].root != roots[k]) continue;
            cd_tdesc *t = &m->tensors[i].t;
            // (Views are all 4-d in the root's shape when the layout changes: views_are_4d.)
            if (lay != was[k]) t->layout = on ? lay : was[k];
            t->int8 = on;
            t->int8_signed = on ? w->q.out_signed : 0;
        }
}

// Tries the roots (storage_roots: w's output first, then the outputs of
// the max pools among the reads rd) as integers in layout lay. 1 when
// switched, 0 when a layer declines (all undone), or a negative code.
static int try_layout(pctx *p, cd_i8layer *w, const int *roots, int nroots, const tread *rd, int nr, cd_layout lay) {
    cd_model *m = p->m;
    cd_layout was[MAX_READS + 1];
    for (int k = 0; k < nroots; k++) was[k] = m->tensors[roots[k]].t.layout;
    cd_op_state *st[MAX_READS + 1] = {0};
    cd_bop_desc d[MAX_READS + 1];
    int layers[MAX_READS + 1], n = 0, rc = 0;
    layers[n++] = w->layer;
    for (int i = 0; i < nr; i++) {
        int dup = 0;
        for (int k = 0; k < n; k++) dup |= layers[k] == rd[i].layer;
        if (!dup) layers[n++] = rd[i].layer;
    }
    set_storage(m, roots, nroots, w, 1, lay, was);
    mark(p, w, rd, nr, 1);
    // Every layer's kernel checked first: preparing one (packing its
    // weights) is wasted when another then declines.
    for (int i = 0; i < n && !rc; i++) {
        d[i] = desc_now(p, i8_of_layer(p, layers[i]));
        if (!cd_backend_supports_op(m->be, &d[i])) rc = CD_EUNSUPPORTED;
    }
    for (int i = 0; i < n && !rc; i++) rc = reinit(p, i8_of_layer(p, layers[i]), d[i], &st[i]);
    if (rc) {
        for (int i = 0; i < n; i++)
            if (st[i]) cd_backend_op_state_free(m->be, st[i]);
        set_storage(m, roots, nroots, w, 0, lay, was);
        mark(p, w, rd, nr, 0);
        for (int i = 0; i < n; i++) { // the recorded layouts back to what the layers run in
            cd_i8layer *r = i8_of_layer(p, layers[i]);
            const cd_layer *l = &m->layers[r->layer];
            for (int k = 0; k < l->nin; k++) r->d.src[k].layout = m->tensors[l->in[k]].t.layout;
            r->d.dst.layout = m->tensors[l->out].t.layout;
        }
        return rc == CD_EUNSUPPORTED ? 0 : rc;
    }
    for (int i = 0; i < n; i++) {
        cd_layer *l = &m->layers[layers[i]];
        cd_backend_op_state_free(m->be, l->st);
        l->st = st[i];
        snprintf(l->kernel, sizeof l->kernel, "%s", cd_backend_op_kernel(m->be, st[i]));
    }
    for (int i = 0; i < m->ntensors; i++)
        for (int k = 0; k < nroots; k++)
            if (m->tensors[i].root == roots[k]) m->tensors[i].item_bytes = cd_tdesc_item_bytes(&m->tensors[i].t);
    return 1;
}

// Integer storage for the output of recorded layer w: NHWC, else the
// plan's layout. 1 when switched, 0 when not, or a negative code.
static int try_int_storage(pctx *p, cd_i8layer *w) {
    cd_model *m = p->m;
    int t = m->tensors[m->layers[w->layer].out].root;
    if (!(w->q.out_scale > 0.0f)) return 0;
    tread rd[MAX_READS];
    int nr = int8_reads(p, t, rd, MAX_READS, 0);
    if (nr <= 0) return 0;
    int rc = 0, roots[MAX_READS + 1], four_d = 1;
    const int nroots = storage_roots(p, t, rd, nr, roots, MAX_READS + 1);
    for (int k = 0; k < nroots; k++) four_d &= views_are_4d(m, roots[k]);
    if (four_d && m->tensors[t].t.layout != CD_LAYOUT_NHWC)
        rc = try_layout(p, w, roots, nroots, rd, nr, CD_LAYOUT_NHWC);
    if (!rc) rc = try_layout(p, w, roots, nroots, rd, nr, m->tensors[t].t.layout);
    return rc;
}

int cd_plan_int8_storage(pctx *p) {
    for (int i = 0; i < p->ni8l; i++) {
        int rc = try_int_storage(p, &p->i8l[i]);
        if (rc < 0) return cd_errf(rc, p->err, p->errlen, "out of memory");
    }
    return 0;
}
