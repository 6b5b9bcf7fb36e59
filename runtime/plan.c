// Planning: lowered ops -> layers on a backend.
//
//   1. drop ops whose results no output needs (the folded shape sub-graphs);
//   2. walk the ops in order choosing each one's activation layout: a conv
//      goes to the backend's blocked layout (cd_backend_blocked_layout: on
//      the CPU NCHW16C with AVX-512, NCHW8C with AVX2) when the backend runs
//      it there with a kernel that is not a reference loop (those are the
//      last resort, after every other layout: a warning names the layer),
//      the element-wise ops, pools and concats stay in the layout of their
//      input when the backend supports it, everything else (and every graph
//      output) is NCHW; a reorder layer is inserted only where a tensor's
//      layout differs from the one its reader needs (one per tensor and
//      layout, shared by all readers);
//   3. prepare every layer on the backend (weights packed once);
//   4. give every activation a lifetime (first writer to last reader; aliases
//      such as Reshape share their source's storage) and lay them out in one
//      arena sized for max_batch (runtime/arena.c).

#include "runtime/model.h"

#include "core/checked.h"
#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "runtime/arena.h"
#include "runtime/plan-internal.h"
#include "sparse/analysis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cd_plan_add_tensor(pctx *p, const cd_tdesc *t) {
    cd_model *m = p->m;
    if (m->ntensors == m->tensors_cap) {
        int cap = m->tensors_cap ? m->tensors_cap * 2 : 64;
        cd_ptensor *nt = realloc(m->tensors, (size_t)cap * sizeof *nt);
        int(*nr)[CD_LAYOUT_COUNT] = realloc(p->reord, (size_t)cap * sizeof *nr);
        if (nt) m->tensors = nt;
        if (nr) p->reord = nr;
        if (!nt || !nr) return CD_ENOMEM;
        m->tensors_cap = cap;
    }
    size_t item_bytes = cd_tdesc_item_bytes(t);
    if (item_bytes == SIZE_MAX) return CD_ETOO_LARGE;
    int id = m->ntensors++;
    cd_ptensor *pt = &m->tensors[id];
    memset(pt, 0, sizeof *pt);
    pt->t = *t;
    pt->item_bytes = item_bytes;
    pt->root = id;
    pt->cvalue = -1;
    pt->first = pt->last = -2;
    for (int l = 0; l < CD_LAYOUT_COUNT; l++) p->reord[id][l] = -1;
    return id;
}

// The error of a failed add_tensor.
static int tensor_fail(pctx *p, int rc) {
    return rc == CD_ETOO_LARGE ? cd_errf(rc, p->err, p->errlen, "a tensor's size does not fit in memory")
                               : cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
}

static int add_layer(pctx *p) {
    cd_model *m = p->m;
    if (m->nlayers == m->layers_cap) {
        int cap = m->layers_cap ? m->layers_cap * 2 : 64;
        cd_layer *nl = realloc(m->layers, (size_t)cap * sizeof *nl);
        if (!nl) return CD_ENOMEM;
        m->layers = nl;
        m->layers_cap = cap;
    }
    cd_layer *l = &m->layers[m->nlayers];
    memset(l, 0, sizeof *l);
    l->density = 1.0;
    return m->nlayers++;
}

static void fill_bop_io(pctx *p, cd_bop_desc *d, int nin, const int *in, const cd_tdesc *dst) {
    d->max_batch = p->m->max_batch;
    d->nsrc = nin;
    for (int i = 0; i < nin; i++) d->src[i] = p->m->tensors[in[i]].t;
    d->dst = *dst;
}

// Prepares a layer on the backend (or takes st, already prepared for d) and
// appends it. Returns the layer index.
int cd_plan_emit(pctx *p, cd_bop_desc *d, cd_op_state *st, int nin, const int *in, int out, const char *name,
                 const char *label) {
    int rc = st ? 0 : cd_backend_op_init(p->m->be, d, &st);
    if (rc)
        return cd_errf(rc == CD_EUNSUPPORTED ? CD_EUNSUPPORTED : rc, p->err, p->errlen,
                       "node '%s' (%s): the %s backend cannot run it (%s, %s layout): %s", name, label,
                       cd_backend_name(p->m->be), cd_bop_name(d->op), cd_layout_name(d->dst.layout), cd_strerror(rc));
    int li = add_layer(p);
    if (li < 0) {
        cd_backend_op_state_free(p->m->be, st);
        return cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
    }
    cd_layer *l = &p->m->layers[li];
    l->op = d->op;
    l->nin = nin;
    memcpy(l->in, in, sizeof(int) * (size_t)nin);
    for (int i = 0; i < nin; i++) l->view_in |= p->m->tensors[in[i]].view; // image by image (plan-view.c)
    l->out = out;
    l->st = st;
    snprintf(l->name, sizeof l->name, "%s", name);
    snprintf(l->label, sizeof l->label, "%s", label);
    snprintf(l->kernel, sizeof l->kernel, "%s", cd_backend_op_kernel(p->m->be, st));
    l->reference = (d->op == CD_BOP_CONV2D || d->op == CD_BOP_GEMM || d->op == CD_BOP_POOL) &&
                   cd_backend_kernel_is_reference(l->kernel);
    if (l->reference)
        cd_rt_log(CD_RT_LOG_WARN,
                  "convd: warning: layer '%s' (%s) runs on the reference kernel %s of the %s backend "
                  "(no faster kernel for it in any layout); expect it to be slow",
                  name, label, l->kernel, cd_backend_name(p->m->be));
    return li;
}

// The tensor holding src's data in layout l (src itself, or a reorder of it
// made once and shared).
int cd_plan_in_layout(pctx *p, int src, cd_layout l) {
    cd_ptensor *s = &p->m->tensors[src];
    if (s->t.layout == l || s->t.is_const) return src;
    if (p->reord[src][l] >= 0) return p->reord[src][l];
    cd_tdesc t = s->t;
    t.layout = l;
    int id = cd_plan_add_tensor(p, &t);
    if (id < 0) return tensor_fail(p, id);
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_REORDER;
    fill_bop_io(p, &d, 1, &src, &t);
    char name[128], label[32];
    snprintf(name, sizeof name, "reorder%d", id);
    snprintf(label, sizeof label, "Reorder(->%s)", cd_layout_name(l));
    int rc = cd_plan_emit(p, &d, NULL, 1, &src, id, name, label);
    if (rc < 0) return rc;
    p->reord[src][l] = id;
    return id;
}

static int supports(pctx *p, cd_bop_desc *d) { return cd_backend_supports_op(p->m->be, d); }

// The copy of constant tensor t in layout l (made once; place_consts reorders
// the data at upload). Returns its index or CD_ENOMEM.
static int const_blocked(pctx *p, int t, cd_layout l) {
    if (p->reord[t][l] >= 0) return p->reord[t][l];
    cd_tdesc d = p->m->tensors[t].t;
    d.layout = l;
    int id = cd_plan_add_tensor(p, &d);
    if (id < 0) return tensor_fail(p, id);
    p->m->tensors[id].cvalue = p->m->tensors[t].cvalue;
    p->reord[t][l] = id;
    return id;
}

// True when every reader of value v needs it in NCHW anyway (graph outputs,
// reshapes, Gemm, Softmax, Transpose): its producer should write NCHW directly
// instead of the blocked layout plus a reorder.
int cd_plan_readers_want_nchw(pctx *p, int v) {
    const cd_graph *g = p->g;
    if (g->values[v].is_output) return 1;
    int readers = 0;
    for (int k = 0; k < g->nops; k++) {
        const cd_op *op = &g->ops[k];
        for (int i = 0; i < op->nin; i++) {
            if (op->in[i] != v) continue;
            readers++;
            if (op->kind != CD_OP_ALIAS && op->kind != CD_OP_GEMM && op->kind != CD_OP_SOFTMAX &&
                op->kind != CD_OP_TRANSPOSE && op->kind < CD_OP_PAD)
                return 0;
        }
    }
    return readers > 0;
}

// The GEMM part of a backend op descriptor for a Gemm op: op, shape, act,
// weights and bias (tensors are set by the caller).
void cd_plan_gemm_desc(const cd_op *op, cd_bop_desc *d) {
    d->op = CD_BOP_GEMM;
    d->u.gemm = op->u.gemm.d;
    d->w = op->u.gemm.w;
    d->bias = op->u.gemm.bias;
}

// Tensor descriptor of a value (activation per item, or constant padded to rank).
cd_tdesc cd_plan_value_desc(const cd_value *v, cd_layout l, int rank) {
    cd_tdesc t;
    memset(&t, 0, sizeof t);
    t.layout = l;
    if (v->kind == CD_VAL_ACT) {
        t.rank = v->rank;
        memcpy(t.shape, v->shape, sizeof t.shape);
    } else {
        t.is_const = 1;
        t.rank = rank;
        int pad = rank - v->rank;
        for (int i = 0; i < rank; i++) t.shape[i] = i < pad ? 1 : v->shape[i - pad];
    }
    return t;
}

// Fills the conv/FC figures of layer l (planned from op; nz nonzero weights
// after compaction, pix output pixels per weight).
static void describe_weighted(pctx *p, const cd_op *op, cd_layer *l, int64_t nz, int64_t pix) {
    const cd_sparse_analysis *a = op->analysis;
    l->sparse = strncmp(l->kernel, "sparse", 6) == 0;
    l->choice = p->ch[op - p->g->ops];
    l->int8 = l->choice.int8;
    l->flops_dense = op->flops0 ? op->flops0 : l->flops;
    l->flops_run = l->sparse ? 2 * nz * pix : l->flops;
    snprintf(l->compact, sizeof l->compact, "%s", op->compact);
    if (!a) {
        l->params = l->flops / 2 / (pix ? pix : 1);
        l->density = 1.0;
        return;
    }
    l->has_analysis = 1;
    l->params = (int64_t)a->total + (op->kind == CD_OP_CONV ? a->k : (op->u.gemm.bias ? op->u.gemm.d.n : 0));
    l->density = a->density;
    cd_sparse_analysis_format(a, l->structure, sizeof l->structure);
    l->an = (cd_layer_sparsity){
        .zero_filters = a->zero_out_channels,
        .zero_in_channels = a->zero_in_channels,
        .zero_connections = (int64_t)a->zero_connections,
        .connections = (int64_t)a->connections,
        .nm_2_4 = a->nm_2_4,
        .is_2_4 = a->is_2_4,
        .is_4_8 = a->is_4_8,
    };
    if (a->best_block >= 0) {
        l->an.best_block_h = a->blocks[a->best_block].bh;
        l->an.best_block_w = a->blocks[a->best_block].bw;
        l->an.best_block_fill = a->blocks[a->best_block].fill;
    }
}

// A (source, destination) layout pair a conv may run in.
typedef struct {
    cd_layout src, dst;
} lpair;

// Appends (s, o) to the n pairs of l unless it is there already; the new n.
static int lp_add(lpair *l, int n, cd_layout s, cd_layout o) {
    for (int i = 0; i < n; i++)
        if (l[i].src == s && l[i].dst == o) return n;
    l[n] = (lpair){s, o};
    return n + 1;
}

// The layouts a dense conv is tried in, best first (at most 8). The blocked
// layout in and out; a source already blocked as it is, an NCHW one reordered
// unless it is a stem with fewer channels than a block (oneDNN on NCHW
// sources is 1.2-1.7x slower than the reorder costs); NCHW out when every
// reader needs NCHW, and then blocked out plus a reorder (oneDNN 2.6 has no
// jit kernel for some blocked-in/plain-out convs: 1x1 falls to its reference
// loop). Then every other pair, so that a reference kernel is taken only
// after all of them.
static int conv_layouts(pctx *p, const cd_op *op, cd_layout cur, lpair *out) {
    const cd_layout b = p->blk, N = CD_LAYOUT_NCHW;
    const cd_layout want = cd_plan_readers_want_nchw(p, op->out) ? N : b;
    const cd_layout first = cur == N && op->u.conv.d.c >= cd_layout_block(b) ? b : cur;
    int n = 0;
    n = lp_add(out, n, first, want);
    n = lp_add(out, n, first, b);
    n = lp_add(out, n, N, want);
    n = lp_add(out, n, N, N);
    const cd_layout srcs[3] = {cur, b, N}, dsts[2] = {b, N};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) n = lp_add(out, n, srcs[i], dsts[j]);
    return n;
}

// Prepares conv op in the first of the nc layout pairs the backend runs with
// a kernel that is not a reference loop, or else in the first it runs at all.
// d holds the conv (sparse or not); on return its tensors describe the
// chosen pair, *chosen is its index (-1: none runs) and *st the prepared
// state. Returns 0, or an error other than CD_EUNSUPPORTED from preparing.
static int conv_prepare(pctx *p, const cd_op *op, const int *in, const lpair *cand, int nc, cd_bop_desc *d,
                        cd_op_state **st, int *chosen) {
    cd_model *m = p->m;
    const cd_value *ov = &p->g->values[op->out];
    cd_op_state *slow = NULL;
    int slow_i = -1;
    *st = NULL;
    *chosen = -1;
    for (int t = 0; t < nc && *chosen < 0; t++) {
        d->nsrc = op->nin;
        d->max_batch = m->max_batch;
        d->src[0] = m->tensors[in[0]].t;
        d->src[0].layout = cand[t].src;
        d->dst = cd_plan_value_desc(ov, cand[t].dst, ov->rank);
        if (op->nin > 1) {
            d->src[1] = m->tensors[in[1]].t;
            d->src[1].layout = cand[t].dst;
        }
        if (!supports(p, d)) continue;
        cd_op_state *s = NULL;
        int rc = cd_backend_op_init(m->be, d, &s);
        if (rc == CD_EUNSUPPORTED) continue;
        if (rc) {
            if (slow) cd_backend_op_state_free(m->be, slow);
            return cd_errf(rc, p->err, p->errlen, "node '%s' (%s): %s", op->name, op->label, cd_strerror(rc));
        }
        if (!cd_backend_kernel_is_reference(cd_backend_op_kernel(m->be, s))) {
            *st = s;
            *chosen = t;
        } else if (!slow) {
            slow = s;
            slow_i = t;
        } else {
            cd_backend_op_state_free(m->be, s);
        }
    }
    if (*chosen < 0 && slow) {
        *st = slow;
        *chosen = slow_i;
        slow = NULL;
    }
    if (slow) cd_backend_op_state_free(m->be, slow);
    if (*chosen >= 0) {
        // Leave d describing the chosen pair.
        d->src[0].layout = cand[*chosen].src;
        d->dst = cd_plan_value_desc(ov, cand[*chosen].dst, ov->rank);
        if (op->nin > 1) d->src[1].layout = cand[*chosen].dst;
    }
    return 0;
}

// 1 when the backend would run pool d (in a blocked layout) on a reference
// loop, which it then runs in NCHW instead; otherwise 0 with *st prepared.
static int pool_is_reference(pctx *p, const cd_bop_desc *d, cd_op_state **st) {
    if (cd_backend_op_init(p->m->be, d, st)) {
        *st = NULL;
        return 0; // emit prepares it again and reports the error
    }
    if (!cd_backend_kernel_is_reference(cd_backend_op_kernel(p->m->be, *st))) return 0;
    cd_backend_op_state_free(p->m->be, *st);
    *st = NULL;
    return 1;
}

// Plans one lowered op.
// An alias (Reshape-like): same bytes, new shape, only in NCHW (plain C
// order); no layer. Returns 0 or a negative code.
static int plan_alias(pctx *p, const cd_op *op, int in0) {
    cd_model *m = p->m;
    const cd_value *ov = &p->g->values[op->out], *iv = &p->g->values[op->in[0]];
    // An alias of the same shape (Identity, a DequantizeLinear of a fake
    // quantization) keeps its source's layout; a reshape needs NCHW.
    const cd_layout keep = iv->rank == ov->rank && memcmp(iv->shape, ov->shape, sizeof(int64_t) * (size_t)ov->rank) == 0
                               ? m->tensors[in0].t.layout
                               : CD_LAYOUT_NCHW;
    int src = cd_plan_in_layout(p, in0, keep);
    if (src < 0) return src;
    cd_tdesc t = cd_plan_value_desc(ov, keep, ov->rank);
    int id = cd_plan_add_tensor(p, &t);
    if (id < 0) return tensor_fail(p, id);
    cd_plan_alias_of(m, src, id); // shares src's storage (a window of it when src is a view)
    p->vt[op->out] = id;
    return 0;
}

// A conv: its kernel (the planner's sparse choice, else the best dense
// layout pair) is prepared into *pre, its inputs are brought into the chosen
// layouts (in[] updated) and *lay gets its output layout. Returns 0 or a
// negative code (*pre freed).
static int plan_conv(pctx *p, const cd_op *op, int *in, cd_bop_desc *d, cd_op_state **pre, cd_layout *lay) {
    cd_model *m = p->m;
    cd_graph *g = p->g;
    const cd_layout cur = m->tensors[in[0]].t.layout;
    d->op = CD_BOP_CONV2D;
    d->u.conv = op->u.conv.d;
    d->w = op->u.conv.w;
    d->bias = op->u.conv.bias;
    d->u.conv.n = 1;
    cd_plan_choice *pc = &p->ch[op - g->ops];
    lpair cand[8];
    int nc = 1;
    cand[0] = (lpair){CD_LAYOUT_NCHW, CD_LAYOUT_NCHW};
    if (pc->sparse && !pc->i8_dense) {
        // The sparse kernels: NCHW in and out.
        d->sparse = 1;
        d->sparse_format = pc->format;
    } else {
        nc = conv_layouts(p, op, cur, cand);
    }
    int chosen = -1, rc = 0;
    if (pc->int8) { // the int8 kernels (plan-int8.c) in the layouts above; float32 when none runs
        if (!(d->wq = cd_plan_int8_weights(p, op))) return cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
        d->quant = &p->in8[op - g->ops];
        rc = conv_prepare(p, op, in, cand, nc, d, pre, &chosen);
        d->wq = NULL;
        if (rc) return rc;
        if (chosen < 0 && pc->i8_dense) { // float32 on the sparse kernels, as chosen
            pc->i8_dense = 0;
            d->sparse = 1;
            d->sparse_format = pc->format;
            nc = 1;
            cand[0] = (lpair){CD_LAYOUT_NCHW, CD_LAYOUT_NCHW};
        }
        if (chosen < 0) {
            d->quant = NULL;
            pc->int8 = 0;
            for (int o = 0; o < g->nops; o++) // its FakeQuant runs after all
                if (g->ops[o].kind == CD_OP_FAKEQUANT && g->ops[o].in[0] == op->out) p->fq_fused[o] = 0;
        }
    }
    // Float32 with the output's FakeQuant in the epilogue, in the preferred layouts only (plan-int8.c).
    const int fq = chosen < 0 ? cd_plan_fq_f32_desc(p, op, d) : -1;
    if (fq >= 0 && (rc = conv_prepare(p, op, in, cand, 1, d, pre, &chosen))) return rc;
    if (fq >= 0) cd_plan_fq_f32_done(p, op, fq, chosen >= 0, d);
    if (chosen < 0 && (rc = conv_prepare(p, op, in, cand, nc, d, pre, &chosen))) return rc;
    if (chosen < 0 && d->sparse) {
        // No sparse kernel for it after all: dense, as it would have been.
        d->sparse = 0;
        p->ch[op - g->ops].sparse = 0;
        nc = conv_layouts(p, op, cur, cand);
        if ((rc = conv_prepare(p, op, in, cand, nc, d, pre, &chosen))) return rc;
    }
    if (chosen < 0) chosen = nc - 1; // emit reports the failure
    int s0 = cd_plan_in_layout(p, in[0], cand[chosen].src);
    if (s0 < 0) goto conv_fail;
    in[0] = s0;
    if (op->nin > 1) {
        int s1 = cd_plan_in_layout(p, in[1], cand[chosen].dst);
        if (s1 < 0) {
            s0 = s1;
            goto conv_fail;
        }
        in[1] = s1;
    }
    *lay = cand[chosen].dst;
    return 0;
conv_fail:
    if (*pre) cd_backend_op_state_free(m->be, *pre);
    return s0;
}

// A Gemm: sparse when the planner chose it and the backend supports it.
static void plan_gemm(pctx *p, const cd_op *op, const int *in, cd_bop_desc *d) {
    cd_model *m = p->m;
    cd_graph *g = p->g;
    const cd_value *ov = &g->values[op->out];
    cd_plan_gemm_desc(op, d);
    if (p->ch[op - g->ops].sparse) {
        cd_bop_desc t = *d;
        t.sparse = 1;
        t.sparse_format = p->ch[op - g->ops].format;
        t.max_batch = m->max_batch;
        t.nsrc = 1;
        t.src[0] = m->tensors[in[0]].t;
        t.src[0].layout = CD_LAYOUT_NCHW;
        t.dst = cd_plan_value_desc(ov, CD_LAYOUT_NCHW, ov->rank);
        if (supports(p, &t)) {
            d->sparse = 1;
            d->sparse_format = t.sparse_format;
        } else {
            p->ch[op - g->ops].sparse = 0;
        }
    }
}

// A pool, activation, binary op or concat: stays in its input's layout when
// the backend can (*lay; constants with a spatial extent follow, in[]
// updated), else NCHW. Returns 0 or a negative code (*pre freed).
static int plan_follower(pctx *p, const cd_op *op, int *in, cd_bop_desc *d, cd_op_state **pre, cd_layout *lay) {
    cd_model *m = p->m;
    const cd_value *ov = &p->g->values[op->out];
    const cd_layout cur = m->tensors[in[0]].t.layout;
    d->op = op->kind == CD_OP_POOL        ? CD_BOP_POOL
            : op->kind == CD_OP_ACT       ? CD_BOP_ACTIVATION
            : op->kind == CD_OP_BINARY    ? CD_BOP_BINARY
            : op->kind == CD_OP_FAKEQUANT ? CD_BOP_FAKEQUANT
                                          : CD_BOP_CONCAT;
    if (op->kind == CD_OP_POOL) d->u.pool = op->u.pool;
    if (op->kind == CD_OP_ACT) d->u.act = op->u.act;
    if (op->kind == CD_OP_BINARY) d->u.binary = op->u.binary;
    if (op->kind == CD_OP_CONCAT) d->u.axis = op->u.concat.axis;
    if (op->kind == CD_OP_FAKEQUANT) {
        d->u.fq = op->u.fq.d;
        d->scale = op->u.fq.scale;
        d->zero_point = op->u.fq.zero_point;
    }
    // Stay in the input's layout when the backend can.
    if (cur != CD_LAYOUT_NCHW) {
        d->max_batch = m->max_batch;
        d->nsrc = op->nin;
        int blocked[CD_OP_MAX_IN] = {0};
        for (int i = 0; i < op->nin; i++) {
            d->src[i] = m->tensors[in[i]].t;
            if (!d->src[i].is_const) d->src[i].layout = cur;
            // A constant with channels (a border map, a BatchNorm's per-channel
            // scale: oneDNN 2.6 runs a plain one against a blocked tensor on
            // its reference loop, ~40x slower) goes blocked too.
            if (d->src[i].is_const && d->src[i].rank == 4 && d->src[i].shape[1] > 1) {
                d->src[i].layout = cur;
                blocked[i] = 1;
            }
        }
        d->dst = cd_plan_value_desc(ov, cur, ov->rank);
        if (supports(p, d) && !(op->kind == CD_OP_POOL && pool_is_reference(p, d, pre))) {
            *lay = cur;
            for (int i = 0; i < op->nin; i++) {
                if (!blocked[i]) continue;
                int b = const_blocked(p, in[i], cur);
                if (b < 0) {
                    if (*pre) cd_backend_op_state_free(m->be, *pre);
                    return b;
                }
                in[i] = b;
            }
        }
    }
    return 0;
}

// The FLOPs and weight figures of a conv/FC layer l planned from op.
static void describe_flops(pctx *p, const cd_op *op, cd_layer *l) {
    int64_t nz = 0, pix;
    if (op->kind == CD_OP_CONV) {
        const cd_conv_desc *c = &op->u.conv.d;
        int64_t nw = (int64_t)c->k * (c->c / c->groups) * c->r * c->s;
        for (int64_t i = 0; i < nw; i++) nz += op->u.conv.w[i] != 0.0f;
        pix = (int64_t)c->oh * c->ow;
        l->flops = 2 * nw * pix;
    } else {
        int64_t nw = (int64_t)op->u.gemm.d.n * op->u.gemm.d.k;
        for (int64_t i = 0; i < nw; i++) nz += op->u.gemm.w[i] != 0.0f;
        pix = op->u.gemm.d.rows;
        l->flops = 2 * nw * pix;
    }
    describe_weighted(p, op, l, nz, pix);
}

static int plan_op(pctx *p, const cd_op *op) {
    cd_model *m = p->m;
    cd_graph *g = p->g;
    const cd_value *ov = &g->values[op->out];
    int in[CD_OP_MAX_IN];
    for (int i = 0; i < op->nin; i++) in[i] = p->vt[op->in[i]];
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    cd_layout lay = CD_LAYOUT_NCHW;
    cd_op_state *pre = NULL; // the layer, when prepared while choosing its layout
    int rc = 0;

    if (op->kind == CD_OP_ALIAS || (op->kind == CD_OP_FAKEQUANT && p->fq_fused && p->fq_fused[op - g->ops]))
        return plan_alias(p, op, in[0]); // a FakeQuant its int8 conv did
    if (op->kind == CD_OP_SLICE && (rc = cd_plan_slice_view(p, op, in[0]))) return rc < 0 ? rc : 0; // no copy
    switch (op->kind) {
    case CD_OP_CONV: rc = plan_conv(p, op, in, &d, &pre, &lay); break;
    case CD_OP_GEMM: plan_gemm(p, op, in, &d); break;
    case CD_OP_SOFTMAX:
        d.op = CD_BOP_SOFTMAX;
        d.u.softmax = op->u.softmax;
        break;
    case CD_OP_TRANSPOSE:
        d.op = CD_BOP_TRANSPOSE;
        memcpy(d.u.perm, op->u.transpose.perm, sizeof d.u.perm);
        break;
    case CD_OP_POOL:
    case CD_OP_ACT:
    case CD_OP_BINARY:
    case CD_OP_FAKEQUANT:
    case CD_OP_CONCAT: rc = plan_follower(p, op, in, &d, &pre, &lay); break;
    case CD_OP_ALIAS: break;
    default: rc = cd_plan_nchw_op_desc(op, &d); break; // Pad, Slice, Reduce, LayerNorm (plan-ops.c)
    }
    if (rc) return rc;
    if (op->kind != CD_OP_CONV)
        for (int i = 0; i < op->nin; i++) {
            int s = cd_plan_in_layout(p, in[i], lay);
            if (s < 0) {
                if (pre) cd_backend_op_state_free(m->be, pre);
                return s;
            }
            in[i] = s;
        }
    cd_tdesc ot = cd_plan_value_desc(ov, lay, ov->rank);
    int out = cd_plan_add_tensor(p, &ot);
    if (out < 0) {
        if (pre) cd_backend_op_state_free(m->be, pre);
        return tensor_fail(p, out);
    }
    fill_bop_io(p, &d, op->nin, in, &ot);
    int li = cd_plan_emit(p, &d, pre, op->nin, in, out, op->name, op->label);
    if (li < 0) return li;
    // int8 convs, and the max pools int8 storage may pass through.
    const int max_pool = d.op == CD_BOP_POOL && d.u.pool.kind == CD_POOL_MAX;
    if ((d.quant || max_pool) && (rc = cd_plan_int8_record(p, li, op, &d)))
        return cd_errf(rc, p->err, p->errlen, "out of memory");
    p->vt[op->out] = out;
    if (op->kind == CD_OP_CONV || op->kind == CD_OP_GEMM) describe_flops(p, op, &m->layers[li]);
    if (op->kind == CD_OP_CONVT) cd_plan_convt_figures(op, &m->layers[li]);
    return 0;
}

// Copies the constant operands into one backend buffer.
static int place_consts(pctx *p) {
    cd_model *m = p->m;
    cd_graph *g = p->g;
    size_t total = 0;
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].t.is_const) {
            size_t need;
            m->tensors[i].offset = total;
            if (cd_ck_align_size(m->tensors[i].item_bytes, 64, &need) || cd_ck_add_size(total, need, &total))
                return cd_errf(CD_ETOO_LARGE, p->err, p->errlen, "the constants' size does not fit in memory");
        }
    m->const_bytes = total;
    if (!total) return 0;
    int rc = cd_backend_buffer_alloc(m->be, total, &m->consts);
    if (rc) return cd_errf(rc, p->err, p->errlen, "cannot allocate %zu bytes of constants", total);
    for (int t = 0; t < m->ntensors; t++) {
        const cd_ptensor *pt = &m->tensors[t];
        if (!pt->t.is_const || pt->cvalue < 0) continue;
        const float *data = g->values[pt->cvalue].f;
        float *tmp = NULL;
        if (pt->t.layout != CD_LAYOUT_NCHW) {
            const int64_t *s = pt->t.shape;
            tmp = calloc(pt->item_bytes / sizeof(float) + 1, sizeof(float));
            if (!tmp) return cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
            cd_ref_reorder(CD_LAYOUT_NCHW, pt->t.layout, (int)s[0], (int)s[1], (int)s[2], (int)s[3], data, tmp);
            data = tmp;
        }
        rc = cd_backend_upload(m->be, (char *)m->consts + pt->offset, data, pt->item_bytes);
        free(tmp);
        if (rc) return cd_errf(rc, p->err, p->errlen, "cannot upload constants");
    }
    return 0;
}

// The model inputs (tensor i = input i), then the constant operands of
// the live binary ops, as tensors. Returns 0 or a negative code.
static int plan_inputs(pctx *p, const char *live) {
    cd_model *m = p->m;
    cd_graph *g = p->g;
    // Model inputs first (tensor i = input i), then constant operands.
    for (int i = 0; i < g->ninputs; i++) {
        const cd_value *v = &g->values[g->inputs[i]];
        cd_tdesc t = cd_plan_value_desc(v, CD_LAYOUT_NCHW, v->rank);
        int id = cd_plan_add_tensor(p, &t);
        if (id < 0) return tensor_fail(p, id);
        m->tensors[id].first = -1;
        p->vt[g->inputs[i]] = id;
    }
    for (int k = 0; k < g->nops; k++) {
        const cd_op *op = &g->ops[k];
        if (!live[k] || op->kind != CD_OP_BINARY) continue;
        for (int i = 0; i < 2; i++) {
            const cd_value *v = &g->values[op->in[i]];
            if (v->kind != CD_VAL_CONST_F32 || p->vt[op->in[i]] >= 0) continue;
            cd_tdesc t = cd_plan_value_desc(v, CD_LAYOUT_NCHW, g->values[op->out].rank);
            int id = cd_plan_add_tensor(p, &t);
            if (id < 0) return tensor_fail(p, id);
            m->tensors[id].cvalue = op->in[i];
            p->vt[op->in[i]] = id;
        }
    }
    return 0;
}

// The model's input and output descriptions (outputs reordered to NCHW
// where needed). Returns 0 or a negative code.
static int plan_io(pctx *p) {
    cd_model *m = p->m;
    cd_graph *g = p->g;
    m->ninputs = g->ninputs;
    m->noutputs = g->noutputs;
    m->inputs = calloc((size_t)g->ninputs, sizeof *m->inputs);
    m->outputs = calloc((size_t)g->noutputs, sizeof *m->outputs);
    if (!m->inputs || !m->outputs) {
        return cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
    }
    for (int i = 0; i < g->ninputs + g->noutputs; i++) {
        int is_in = i < g->ninputs;
        const cd_value *v = &g->values[is_in ? g->inputs[i] : g->outputs[i - g->ninputs]];
        cd_io *io = is_in ? &m->inputs[i] : &m->outputs[i - g->ninputs];
        int t = p->vt[v - g->values];
        if (!is_in && (t = cd_plan_in_layout(p, t, CD_LAYOUT_NCHW)) >= 0) t = cd_plan_unview(p, t, v->name);
        if (t < 0) return t;
        io->tensor = t;
        io->d.name = strdup(v->name);
        if (!io->d.name) {
            return cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
        }
        io->d.dtype = CD_DTYPE_F32;
        io->d.rank = v->rank;
        memcpy(io->d.shape, v->shape, sizeof io->d.shape);
    }
    return 0;
}

// Lifetimes (in layer steps) of the storage roots, then their places in
// the arena. Returns 0 or a negative code.
static int plan_arena(pctx *p) {
    cd_model *m = p->m;
    for (int li = 0; li < m->nlayers; li++) {
        const cd_layer *l = &m->layers[li];
        cd_ptensor *o = &m->tensors[m->tensors[l->out].root];
        if (o->first == -2) o->first = li;
        if (o->last < li) o->last = li;
        for (int i = 0; i < l->nin; i++) {
            cd_ptensor *s = &m->tensors[m->tensors[l->in[i]].root];
            if (s->last < li) s->last = li;
        }
    }
    for (int i = 0; i < m->noutputs; i++) m->tensors[m->tensors[m->outputs[i].tensor].root].last = m->nlayers;
    for (int i = 0; i < m->ninputs; i++) {
        cd_ptensor *s = &m->tensors[m->inputs[i].tensor];
        if (s->last < 0) s->last = 0;
    }
    cd_plan_residual_in_place(m);
    size_t *offsets = malloc(((size_t)m->ntensors + 1) * sizeof *offsets);
    if (!offsets) return cd_errf(CD_ENOMEM, p->err, p->errlen, "out of memory");
    for (int i = 0; i < m->ntensors; i++) offsets[i] = m->tensors[i].offset; // constants keep theirs
    int rc = cd_model_arena_layout(m, m->max_batch, offsets, &m->arena_bytes);
    for (int i = 0; i < m->ntensors && !rc; i++) m->tensors[i].offset = offsets[i];
    free(offsets);
    if (rc == CD_ETOO_LARGE)
        return cd_errf(rc, p->err, p->errlen, "the activations at batch %d do not fit in memory", m->max_batch);
    if (rc) return cd_errf(rc, p->err, p->errlen, "out of memory");
    return 0;
}

int cd_plan_build(cd_model *m, cd_graph *g, char *err, size_t errlen) {
    pctx p = {m, g, NULL, NULL, NULL, err, errlen, cd_backend_blocked_layout(m->be), NULL, NULL, NULL, 0, 0};
    int rc = 0;
    char *live = calloc((size_t)g->nops + 1, 1), *need = calloc((size_t)g->nvalues + 1, 1);
    p.vt = malloc(((size_t)g->nvalues + 1) * sizeof(int));
    p.ch = calloc((size_t)g->nops + 1, sizeof *p.ch);
    if (!live || !need || !p.vt || !p.ch) {
        rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->nvalues; i++) p.vt[i] = -1;
    // 1. Liveness of ops, backwards from the outputs.
    for (int i = 0; i < g->noutputs; i++) need[g->outputs[i]] = 1;
    for (int k = g->nops - 1; k >= 0; k--) {
        const cd_op *op = &g->ops[k];
        if (!need[op->out]) continue;
        live[k] = 1;
        for (int i = 0; i < op->nin; i++) need[op->in[i]] = 1;
    }
    if ((rc = plan_inputs(&p, live))) goto done;
    if ((rc = cd_plan_choose_kernels(&p, live)) || (rc = cd_plan_choose_int8(&p, live))) {
        rc = cd_errf(rc, err, errlen, "out of memory");
        goto done;
    }
    // 2./3. Layers.
    for (int k = 0; k < g->nops; k++) {
        if (!live[k]) continue;
        if ((rc = plan_op(&p, &g->ops[k]))) goto done;
    }
    if ((rc = plan_io(&p))) goto done;
    if ((rc = cd_plan_int8_storage(&p))) goto done;
    // 4. Lifetimes and the arena.
    if ((rc = plan_arena(&p))) goto done;
    if ((rc = place_consts(&p))) goto done;
done:
    free(live);
    free(need);
    free(p.vt);
    free(p.ch);
    free(p.reord);
    free(p.in8);
    free(p.fq_fused);
    free(p.fq_f32);
    free(p.i8l);
    cd_plan_int8_free(&p);
    return rc;
}

void cd_plan_free(cd_model *m) {
    for (int i = 0; i < m->nlayers; i++) cd_backend_op_state_free(m->be, m->layers[i].st);
    if (m->consts) cd_backend_buffer_free(m->be, m->consts);
    for (int i = 0; i < m->ninputs; i++) free((char *)m->inputs[i].d.name);
    for (int i = 0; i < m->noutputs; i++) free((char *)m->outputs[i].d.name);
    free(m->inputs);
    free(m->outputs);
    free(m->layers);
    free(m->tensors);
}
