// Structured-sparsity compaction of a lowered graph: turn
// zero filters, unread input channels and block-diagonal connection patterns
// into smaller dense work, before planning.
//
// Every rank-4 activation has a channel axis (dim 1). One *element* is one
// channel of one such value. For each element the pass knows
//   - its status: LIVE (varies with the input) or CONST k (the same value k
//     at every pixel of every image: a zero filter's act(bias), and what ops
//     make of such planes: act(k), a max pool of k, k1 + k2 ...);
//   - whether it is *stored*: kept in the compacted tensor.
// Ops that map channel c of their inputs to channel c of their output
// (activations, pools, same-shape Add/Mul, a conv's fused residual, depthwise
// convs, channel concats at an offset) tie their elements together
// (union-find): a class is stored in all of its values or in none, so e.g. a
// residual Add keeps the union of both branches' live channels. Everything
// the pass does not understand (reshapes, Gemm, broadcast ops with
// constants, other grouped convs), model inputs and model outputs pins its
// channels as stored, so outputs keep their shapes.
//
// A dense conv (groups == 1) is where channels die: it needs input channel c
// iff some stored output filter o has a nonzero connection (o, c), unless c
// is CONST k: then b[o] += k * sum(w[o, c, :, :]) is exact when k == 0 or the
// conv has no padding; with padding (border pixels see zeros instead of k)
// the exact contribution is a constant map K' x OH x OW, added after the conv
// by an inserted "Add(conv, map) + act" op (the conv's activation moves into
// it; insert_border_adds). The stored classes
// are the least fixpoint of these demands (convs are visited backwards, so
// a demand usually travels the whole net in one sweep); a value never ends
// with zero channels (one is kept, a CONST one when there is one).
//
// Rewrite: convs get the rows and columns of their stored channels (bias
// folded), depthwise convs their stored channels, pools their new C, values
// their new shape. A dense conv whose remaining connection matrix is
// block-diagonal in G equal aligned blocks becomes a grouped conv.

#include "runtime/graph.h"

#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "sparse/analysis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cd_graph *g;
    int *base;              // value -> first element (-1: not a rank-4 activation)
    int nel;                // elements
    int *parent;            // union-find over elements
    unsigned char *isconst; // per element: CONST
    float *kval;            // per element: the constant
    unsigned char *stored;  // per class root
    unsigned char **conn;   // per op: dense conv connection matrix K x C (nonzero (o, c)), else NULL
    float **border;         // per op: border map K' x OH x OW to add after the conv, else NULL
} cctx;

static int find(cctx *x, int e) {
    while (x->parent[e] != e) {
        x->parent[e] = x->parent[x->parent[e]];
        e = x->parent[e];
    }
    return e;
}

static void unite(cctx *x, int a, int b) {
    a = find(x, a);
    b = find(x, b);
    if (a != b) x->parent[a] = b;
}

static int tracked(const cctx *x, int v) { return v >= 0 && x->base[v] >= 0; }
static int nch(const cctx *x, int v) { return (int)x->g->values[v].shape[1]; }
static int el(const cctx *x, int v, int c) { return x->base[v] + c; }

static void pin(cctx *x, int v) {
    if (!tracked(x, v)) return;
    for (int c = 0; c < nch(x, v); c++) x->stored[find(x, el(x, v, c))] = 1;
}

static int is_depthwise(const cd_op *op) {
    const cd_conv_desc *d = &op->u.conv.d;
    return op->kind == CD_OP_CONV && d->groups > 1 && d->groups == d->c && d->k == d->c;
}

static int has_pad(const cd_conv_desc *d) { return d->pad_t || d->pad_l || d->pad_b || d->pad_r; }

static int same_shape(const cd_value *a, const cd_value *b) {
    return a->rank == b->rank && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

// Sum of the R x S kernel of filter o, input channel cl (within its group).
static double ksum(const cd_conv_desc *d, const float *w, int o, int cl) {
    int cpg = d->c / d->groups, rs = d->r * d->s;
    const float *p = w + ((size_t)o * cpg + cl) * rs;
    double s = 0;
    for (int i = 0; i < rs; i++) s += p[i];
    return s;
}

// An op that maps channel c to channel c value by value, the same function
// for every channel: an activation, a per-tensor FakeQuant (QDQ models), an
// alias of the same 4-D shape (the DequantizeLinear after a FakeQuant).
static int elementwise(const cctx *x, const cd_op *op) {
    const cd_value *a = &x->g->values[op->in[0]], *b = &x->g->values[op->out];
    if (!tracked(x, op->in[0]) || !tracked(x, op->out)) return 0;
    // (A dynamic one takes its scale from all channels together: not per channel.)
    if (op->kind == CD_OP_FAKEQUANT) return op->u.fq.d.channels == 1 && !op->u.fq.d.dynamic;
    if (op->kind == CD_OP_ALIAS)
        return a->rank == 4 && b->rank == 4 && memcmp(a->shape, b->shape, sizeof a->shape) == 0;
    return op->kind == CD_OP_ACT;
}

// What elementwise op does to a constant channel's value v.
static float elementwise_apply(const cd_op *op, float v) {
    if (op->kind == CD_OP_ACT) return cd_act_apply(op->u.act, v);
    if (op->kind == CD_OP_FAKEQUANT)
        return cd_fakequant_apply(v, op->u.fq.scale[0], op->u.fq.zero_point[0], op->u.fq.d.qmin, op->u.fq.d.qmax);
    return v;
}

// Forward pass: the status (LIVE / CONST k) of every element.
static void statuses(cctx *x) {
    cd_graph *g = x->g;
    for (int k = 0; k < g->nops; k++) {
        const cd_op *op = &g->ops[k];
        int out = op->out, in0 = op->in[0];
        if (!tracked(x, out)) continue;
        int C = nch(x, out);
        for (int c = 0; c < C; c++) x->isconst[el(x, out, c)] = 0;
        switch (op->kind) {
        case CD_OP_CONV: {
            const cd_conv_desc *d = &op->u.conv.d;
            int cpg = d->c / d->groups, kpg = d->k / d->groups, pad = has_pad(d), rs = d->r * d->s;
            for (int o = 0; o < d->k; o++) {
                int gi = o / kpg, isc = 1;
                double acc = op->u.conv.bias[o];
                for (int cl = 0; cl < cpg && isc; cl++) {
                    const float *p = op->u.conv.w + ((size_t)o * cpg + cl) * rs;
                    int nz = 0;
                    for (int i = 0; i < rs; i++) nz |= p[i] != 0.0f;
                    if (!nz) continue;
                    int e = el(x, in0, gi * cpg + cl);
                    if (!x->isconst[e] || (pad && x->kval[e] != 0.0f))
                        isc = 0;
                    else
                        acc += (double)x->kval[e] * ksum(d, op->u.conv.w, o, cl);
                }
                if (isc && d->has_residual) {
                    int e = el(x, op->in[1], o);
                    if (!x->isconst[e])
                        isc = 0;
                    else
                        acc += x->kval[e];
                }
                if (isc) {
                    x->isconst[el(x, out, o)] = 1;
                    x->kval[el(x, out, o)] = cd_act_apply(d->act, (float)acc);
                }
            }
            break;
        }
        case CD_OP_ACT:
        case CD_OP_FAKEQUANT:
        case CD_OP_ALIAS:
            if (!elementwise(x, op)) break;
            for (int c = 0; c < C; c++)
                if (x->isconst[el(x, in0, c)]) {
                    x->isconst[el(x, out, c)] = 1;
                    x->kval[el(x, out, c)] = elementwise_apply(op, x->kval[el(x, in0, c)]);
                }
            break;
        case CD_OP_POOL: {
            const cd_pool_desc *p = &op->u.pool;
            int exact = p->kind == CD_POOL_MAX || !p->count_include_pad ||
                        (!p->pad_t && !p->pad_l && !p->pad_b && !p->pad_r && !p->ceil_mode);
            if (!tracked(x, in0) || !exact) break;
            for (int c = 0; c < C; c++)
                if (x->isconst[el(x, in0, c)]) {
                    x->isconst[el(x, out, c)] = 1;
                    x->kval[el(x, out, c)] = x->kval[el(x, in0, c)];
                }
            break;
        }
        case CD_OP_BINARY: {
            int a = op->in[0], b = op->in[1];
            if (!tracked(x, a) || !tracked(x, b) || !same_shape(&g->values[a], &g->values[out]) ||
                !same_shape(&g->values[b], &g->values[out]))
                break;
            for (int c = 0; c < C; c++)
                if (x->isconst[el(x, a, c)] && x->isconst[el(x, b, c)]) {
                    x->isconst[el(x, out, c)] = 1;
                    x->kval[el(x, out, c)] =
                        cd_act_apply(op->u.binary.act,
                                     cd_ref_binary_op(op->u.binary.kind, x->kval[el(x, a, c)], x->kval[el(x, b, c)]));
                }
            break;
        }
        case CD_OP_CONCAT: {
            if (op->u.concat.axis != 1) break;
            int off = 0, ok = 1;
            for (int i = 0; i < op->nin; i++) ok &= tracked(x, op->in[i]);
            if (!ok) break;
            for (int i = 0; i < op->nin; i++) {
                int v = op->in[i];
                for (int c = 0; c < nch(x, v); c++) {
                    x->isconst[el(x, out, off + c)] = x->isconst[el(x, v, c)];
                    x->kval[el(x, out, off + c)] = x->kval[el(x, v, c)];
                }
                off += nch(x, v);
            }
            break;
        }
        default: break;
        }
    }
}

// Ties elements together and pins what must stay (see the file comment).
// Returns 0 or CD_ENOMEM (connection matrices).
static int ties(cctx *x) {
    cd_graph *g = x->g;
    for (int k = 0; k < g->nops; k++) {
        const cd_op *op = &g->ops[k];
        int out = op->out;
        switch (op->kind) {
        case CD_OP_CONV: {
            const cd_conv_desc *d = &op->u.conv.d;
            if (d->has_residual)
                for (int c = 0; c < d->k; c++) unite(x, el(x, op->in[1], c), el(x, out, c));
            if (is_depthwise(op)) {
                for (int c = 0; c < d->c; c++) unite(x, el(x, op->in[0], c), el(x, out, c));
            } else if (d->groups == 1) {
                int rs = d->r * d->s;
                unsigned char *m = malloc((size_t)d->k * d->c);
                if (!m) return CD_ENOMEM;
                for (size_t i = 0; i < (size_t)d->k * d->c; i++) {
                    const float *p = op->u.conv.w + i * rs;
                    unsigned char nz = 0;
                    for (int j = 0; j < rs; j++) nz |= p[j] != 0.0f;
                    m[i] = nz;
                }
                x->conn[k] = m;
            }
            break;
        }
        case CD_OP_ACT:
        case CD_OP_FAKEQUANT:
        case CD_OP_ALIAS:
        case CD_OP_POOL:
            if (op->kind != CD_OP_POOL && !elementwise(x, op)) break;
            if (tracked(x, op->in[0]) && tracked(x, out) && nch(x, op->in[0]) == nch(x, out))
                for (int c = 0; c < nch(x, out); c++) unite(x, el(x, op->in[0], c), el(x, out, c));
            break;
        case CD_OP_BINARY: {
            int a = op->in[0], b = op->in[1];
            if (tracked(x, a) && tracked(x, b) && tracked(x, out) && same_shape(&g->values[a], &g->values[out]) &&
                same_shape(&g->values[b], &g->values[out]))
                for (int c = 0; c < nch(x, out); c++) {
                    unite(x, el(x, a, c), el(x, out, c));
                    unite(x, el(x, b, c), el(x, out, c));
                }
            break;
        }
        case CD_OP_CONCAT: {
            int ok = op->u.concat.axis == 1 && tracked(x, out);
            for (int i = 0; i < op->nin; i++) ok &= tracked(x, op->in[i]);
            if (!ok) break;
            int off = 0;
            for (int i = 0; i < op->nin; i++) {
                for (int c = 0; c < nch(x, op->in[i]); c++) unite(x, el(x, op->in[i], c), el(x, out, off + c));
                off += nch(x, op->in[i]);
            }
            break;
        }
        default: break;
        }
    }
    // Pins come after every union so that they mark final roots.
    for (int i = 0; i < g->ninputs; i++) pin(x, g->inputs[i]);
    for (int i = 0; i < g->noutputs; i++) pin(x, g->outputs[i]);
    for (int k = 0; k < g->nops; k++) {
        const cd_op *op = &g->ops[k];
        int out = op->out, keep = 0;
        switch (op->kind) {
        case CD_OP_CONV: keep = !is_depthwise(op) && op->u.conv.d.groups != 1; break;
        case CD_OP_ACT:
        case CD_OP_POOL: keep = !(tracked(x, op->in[0]) && tracked(x, out)); break;
        case CD_OP_FAKEQUANT:
        case CD_OP_ALIAS: keep = !elementwise(x, op); break;
        case CD_OP_BINARY: {
            int a = op->in[0], b = op->in[1];
            keep = !(tracked(x, a) && tracked(x, b) && tracked(x, out) && same_shape(&g->values[a], &g->values[out]) &&
                     same_shape(&g->values[b], &g->values[out]));
            break;
        }
        case CD_OP_CONCAT: {
            int ok = op->u.concat.axis == 1 && tracked(x, out);
            for (int i = 0; i < op->nin; i++) ok &= tracked(x, op->in[i]);
            keep = !ok;
            break;
        }
        default: keep = 1; break;
        }
        if (!keep) continue;
        for (int i = 0; i < op->nin; i++) pin(x, op->in[i]);
        pin(x, out);
    }
    return 0;
}

// The least fixpoint of the dense convs' demands, with no value left empty.
static void demands(cctx *x) {
    cd_graph *g = x->g;
    for (;;) {
        int changed = 1;
        while (changed) {
            changed = 0;
            for (int k = g->nops - 1; k >= 0; k--) {
                const cd_op *op = &g->ops[k];
                if (!x->conn[k]) continue;
                const cd_conv_desc *d = &op->u.conv.d;
                for (int c = 0; c < d->c; c++) {
                    int e = el(x, op->in[0], c), r = find(x, e);
                    if (x->stored[r]) continue;
                    if (x->isconst[e]) continue; // folds into the bias (or the border map)
                    for (int o = 0; o < d->k; o++)
                        if (x->conn[k][(size_t)o * d->c + c] && x->stored[find(x, el(x, op->out, o))]) {
                            x->stored[r] = 1;
                            changed = 1;
                            break;
                        }
                }
            }
        }
        int forced = 0;
        for (int v = 0; v < g->nvalues; v++) {
            if (!tracked(x, v)) continue;
            int C = nch(x, v), any = 0, pick = 0;
            for (int c = 0; c < C && !any; c++) any = x->stored[find(x, el(x, v, c))];
            if (any) continue;
            for (int c = C - 1; c >= 0; c--)
                if (x->isconst[el(x, v, c)]) pick = c;
            x->stored[find(x, el(x, v, pick))] = 1;
            forced = 1;
        }
        if (!forced) return;
    }
}

// Rewrites conv op k to its stored rows/columns. Returns 0 or CD_ENOMEM.
static int shrink_conv(cctx *x, cd_op *op, int k) {
    cd_conv_desc *d = &op->u.conv.d;
    int in = op->in[0], out = op->out, rs = d->r * d->s;
    int K = d->k, C = d->c, k2 = 0, c2 = 0;
    for (int o = 0; o < K; o++) k2 += x->stored[find(x, el(x, out, o))];
    for (int c = 0; c < C; c++) c2 += x->stored[find(x, el(x, in, c))];
    if (k2 == K && c2 == C) return 0;
    if (is_depthwise(op)) {
        // Tied: the same channels in and out.
        int j = 0;
        for (int c = 0; c < C; c++) {
            if (!x->stored[find(x, el(x, out, c))]) continue;
            memmove(op->u.conv.w + (size_t)j * rs, op->u.conv.w + (size_t)c * rs, sizeof(float) * (size_t)rs);
            if (op->u.conv.wscale) op->u.conv.wscale[j] = op->u.conv.wscale[c]; // int8 weights' scales follow
            op->u.conv.bias[j++] = op->u.conv.bias[c];
        }
        d->c = d->k = d->groups = j;
        snprintf(op->compact, sizeof op->compact, "channels %d->%d", C, j);
        return 0;
    }
    float *w = malloc(sizeof(float) * ((size_t)k2 * c2 * rs + 1)), *b = malloc(sizeof(float) * (size_t)k2);
    if (!w || !b) {
        free(w);
        free(b);
        return CD_ENOMEM;
    }
    // Constant planes k != 0 behind padding: their exact contribution varies
    // at the border, so it becomes a map (a conv of those planes alone),
    // added after the conv. bidx[c]: the channel's column in that conv, -1.
    int pad = has_pad(d), nb = 0;
    int *bidx = malloc(sizeof(int) * ((size_t)C + 1));
    if (!bidx) {
        free(w), free(b);
        return CD_ENOMEM;
    }
    for (int c = 0; c < C; c++) {
        int e = el(x, in, c), used = 0;
        bidx[c] = -1;
        if (!pad || x->stored[find(x, e)] || !x->isconst[e] || x->kval[e] == 0.0f) continue;
        for (int o = 0; o < K && !used; o++) used = x->conn[k][(size_t)o * C + c] && x->stored[find(x, el(x, out, o))];
        if (used) bidx[c] = nb++;
    }
    float *bw = NULL, *planes = NULL, *map = NULL;
    if (nb) {
        bw = calloc((size_t)k2 * nb * rs + 1, sizeof(float));
        planes = malloc(sizeof(float) * ((size_t)nb * d->h * d->w + 1));
        map = malloc(sizeof(float) * ((size_t)k2 * d->oh * d->ow + 1));
        if (!bw || !planes || !map) {
            free(bw), free(planes), free(map), free(w), free(b), free(bidx);
            return CD_ENOMEM;
        }
    }
    int j = 0;
    for (int o = 0; o < K; o++) {
        if (!x->stored[find(x, el(x, out, o))]) continue;
        if (op->u.conv.wscale) op->u.conv.wscale[j] = op->u.conv.wscale[o]; // j <= o: in place
        double acc = op->u.conv.bias[o];
        int i = 0;
        for (int c = 0; c < C; c++) {
            int e = el(x, in, c);
            const float *src = op->u.conv.w + ((size_t)o * C + c) * rs;
            if (x->stored[find(x, e)]) {
                memcpy(w + ((size_t)j * c2 + i) * rs, src, sizeof(float) * (size_t)rs);
                i++;
            } else if (bidx[c] >= 0) {
                memcpy(bw + ((size_t)j * nb + bidx[c]) * rs, src, sizeof(float) * (size_t)rs);
            } else if (x->conn[k][(size_t)o * C + c]) {
                // By the fixpoint: a CONST channel, exact in the bias (k == 0 or no padding).
                acc += (double)x->kval[e] * ksum(d, op->u.conv.w, o, c);
            }
        }
        b[j++] = (float)acc;
    }
    if (nb) {
        size_t hw = (size_t)d->h * d->w;
        for (int c = 0; c < C; c++)
            for (size_t p = 0; bidx[c] >= 0 && p < hw; p++) planes[(size_t)bidx[c] * hw + p] = x->kval[el(x, in, c)];
        cd_conv_desc md = *d;
        md.n = 1;
        md.c = nb;
        md.k = k2;
        md.groups = 1;
        md.has_residual = 0;
        md.act = (cd_activation){CD_ACT_NONE, 0, 0};
        cd_ref_conv2d(&md, planes, bw, NULL, NULL, map);
        x->border[k] = map;
        free(bw);
        free(planes);
    }
    free(bidx);
    free(op->u.conv.w);
    free(op->u.conv.bias);
    op->u.conv.w = w;
    op->u.conv.bias = b;
    d->k = k2;
    d->c = c2;
    snprintf(op->compact, sizeof op->compact, "filters %d->%d, in %d->%d%s", K, k2, C, c2, nb ? ", border map" : "");
    return 0;
}

// Turns a dense conv whose connection matrix is block-diagonal in G aligned
// equal blocks (the largest such G) into a grouped conv. Returns 0 or CD_ENOMEM.
static int to_grouped(cd_op *op) {
    cd_conv_desc *d = &op->u.conv.d;
    int K = d->k, C = d->c, rs = d->r * d->s;
    if (d->groups != 1 || K < 2 || C < 2) return 0;
    size_t nzc = 0;
    unsigned char *m = malloc((size_t)K * C);
    if (!m) return CD_ENOMEM;
    for (size_t i = 0; i < (size_t)K * C; i++) {
        const float *p = op->u.conv.w + i * rs;
        unsigned char nz = 0;
        for (int j = 0; j < rs; j++) nz |= p[j] != 0.0f;
        m[i] = nz;
        nzc += nz;
    }
    int best = 1;
    if (nzc > 0 && 2 * nzc <= (size_t)K * C) {
        int gmax = K < C ? K : C;
        for (int G = gmax; G >= 2 && best == 1; G--) {
            if (K % G || C % G) continue;
            int kpg = K / G, cpg = C / G, ok = 1;
            for (int o = 0; o < K && ok; o++)
                for (int c = 0; c < C; c++)
                    if (m[(size_t)o * C + c] && c / cpg != o / kpg) {
                        ok = 0;
                        break;
                    }
            if (ok) best = G;
        }
    }
    free(m);
    if (best == 1) return 0;
    int kpg = K / best, cpg = C / best;
    float *w = malloc(sizeof(float) * (size_t)K * cpg * rs);
    if (!w) return CD_ENOMEM;
    for (int o = 0; o < K; o++)
        memcpy(w + (size_t)o * cpg * rs, op->u.conv.w + ((size_t)o * C + (size_t)(o / kpg) * cpg) * rs,
               sizeof(float) * (size_t)cpg * rs);
    free(op->u.conv.w);
    op->u.conv.w = w;
    d->groups = best;
    size_t n = strlen(op->compact);
    snprintf(op->compact + n, sizeof op->compact - n, "%sgroups %d", n ? ", " : "", best);
    return 0;
}

// Inserts after every conv with a border map an op "Add(conv, map) + act":
// the conv loses its activation and writes a new value, the map becomes a
// constant [1, K, OH, OW] broadcast over the batch. Values are made first
// and the op list swapped last, so a failure leaves a consistent graph.
// Returns 0 or CD_ENOMEM.
static int insert_border_adds(cctx *x) {
    cd_graph *g = x->g;
    int n = 0, nold = g->nops;
    for (int k = 0; k < nold; k++) n += x->border[k] != NULL;
    if (!n) return 0;
    int *tmp = malloc(sizeof(int) * (size_t)nold * 2);
    cd_op *ops = calloc((size_t)(nold + n), sizeof *ops);
    unsigned char *ins = calloc((size_t)nold, 1);
    if (!tmp || !ops || !ins) {
        free(tmp);
        free(ops);
        free(ins);
        return CD_ENOMEM;
    }
    for (int k = 0; k < nold; k++) {
        if (!x->border[k]) continue;
        char name[600];
        for (int i = 0; i < 2; i++) {
            snprintf(name, sizeof name, "%s::%s", g->values[g->ops[k].out].name, i ? "border" : "preborder");
            int v = cd_graph_add_value(g, name);
            if (v < 0) {
                free(tmp);
                free(ops);
                free(ins);
                return CD_ENOMEM;
            }
            tmp[2 * k + i] = v;
            const cd_value *ov = &g->values[g->ops[k].out];
            cd_value *nv = &g->values[v];
            nv->rank = 4;
            memcpy(nv->shape, ov->shape, sizeof nv->shape);
            nv->numel = ov->numel;
            if (i) {
                nv->kind = CD_VAL_CONST_F32;
                nv->shape[0] = 1;
                nv->f = x->border[k];
                x->border[k] = NULL; // the value owns it now
                ins[k] = 1;
            } else {
                nv->kind = CD_VAL_ACT;
                nv->nconsumers = 1;
            }
        }
    }
    int j = 0;
    for (int k = 0; k < nold; k++) {
        ops[j++] = g->ops[k];
        if (!ins[k]) continue;
        cd_op *conv = &ops[j - 1], *add = &ops[j++];
        add->kind = CD_OP_BINARY;
        snprintf(add->name, sizeof add->name, "%.100s+border", g->ops[k].name);
        snprintf(add->label, sizeof add->label, "BorderMap%s", conv->u.conv.d.act.kind != CD_ACT_NONE ? "+Act" : "");
        add->nin = 2;
        add->in[0] = tmp[2 * k];
        add->in[1] = tmp[2 * k + 1];
        add->out = conv->out;
        add->u.binary.kind = CD_BINARY_ADD;
        add->u.binary.act = conv->u.conv.d.act;
        conv->u.conv.d.act = (cd_activation){CD_ACT_NONE, 0, 0};
        conv->out = tmp[2 * k];
    }
    free(g->ops);
    g->ops = ops;
    g->nops = g->ops_cap = nold + n;
    free(tmp);
    free(ins);
    return 0;
}

// Records the analysis and dense FLOPs of every conv/FC as loaded.
static int analyse(cd_graph *g) {
    for (int k = 0; k < g->nops; k++) {
        cd_op *op = &g->ops[k];
        if (op->kind != CD_OP_CONV && op->kind != CD_OP_GEMM) continue;
        cd_sparse_analysis *a = calloc(1, sizeof *a);
        if (!a) return CD_ENOMEM;
        free(op->analysis);
        op->analysis = a;
        op->compact[0] = '\0';
        if (op->kind == CD_OP_CONV) {
            const cd_conv_desc *d = &op->u.conv.d;
            cd_sparse_analyze(op->u.conv.w, d->k, d->c / d->groups, d->r, d->s, d->groups, a);
            op->flops0 = 2 * (int64_t)d->k * (d->c / d->groups) * d->r * d->s * d->oh * d->ow;
        } else {
            cd_sparse_analyze(op->u.gemm.w, op->u.gemm.d.n, op->u.gemm.d.k, 1, 1, 1, a);
            op->flops0 = 2 * (int64_t)op->u.gemm.d.n * op->u.gemm.d.k * op->u.gemm.d.rows;
        }
    }
    return 0;
}

int cd_graph_compact(cd_graph *g, int enable, char *err, size_t errlen) {
    if (analyse(g)) return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    if (!enable) return 0;
    cctx x = {.g = g};
    int rc = 0, nops0 = g->nops;
    x.base = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    x.conn = calloc((size_t)g->nops + 1, sizeof *x.conn);
    x.border = calloc((size_t)g->nops + 1, sizeof *x.border);
    if (!x.base || !x.conn || !x.border) {
        rc = CD_ENOMEM;
        goto done;
    }
    for (int v = 0; v < g->nvalues; v++) {
        const cd_value *val = &g->values[v];
        x.base[v] = -1;
        if (val->kind == CD_VAL_ACT && val->rank == 4 && val->shape[1] > 0) {
            x.base[v] = x.nel;
            x.nel += (int)val->shape[1];
        }
    }
    x.parent = malloc(sizeof(int) * ((size_t)x.nel + 1));
    x.isconst = calloc((size_t)x.nel + 1, 1);
    x.kval = calloc((size_t)x.nel + 1, sizeof(float));
    x.stored = calloc((size_t)x.nel + 1, 1);
    if (!x.parent || !x.isconst || !x.kval || !x.stored) {
        rc = CD_ENOMEM;
        goto done;
    }
    for (int e = 0; e < x.nel; e++) x.parent[e] = e;
    statuses(&x);
    if ((rc = ties(&x))) goto done;
    demands(&x);
    // Rewrite the ops, then the values' shapes.
    for (int k = 0; k < g->nops && !rc; k++) {
        cd_op *op = &g->ops[k];
        if (op->kind == CD_OP_CONV && (x.conn[k] || is_depthwise(op))) rc = shrink_conv(&x, op, k);
        if (!rc && op->kind == CD_OP_CONV) rc = to_grouped(op);
    }
    if (rc) goto done;
    for (int v = 0; v < g->nvalues; v++) {
        if (!tracked(&x, v)) continue;
        int C = nch(&x, v), n = 0;
        for (int c = 0; c < C; c++) n += x.stored[find(&x, el(&x, v, c))];
        cd_value *val = &g->values[v];
        val->shape[1] = n;
        val->numel = cd_shape_numel(val->rank, val->shape);
    }
    for (int k = 0; k < g->nops; k++) {
        cd_op *op = &g->ops[k];
        if (op->kind == CD_OP_POOL && tracked(&x, op->out)) op->u.pool.c = nch(&x, op->out);
    }
    rc = insert_border_adds(&x);
done:
    if (x.conn)
        for (int k = 0; k < nops0; k++) free(x.conn[k]);
    free(x.conn);
    if (x.border)
        for (int k = 0; k < nops0; k++) free(x.border[k]); // maps not handed over
    free(x.border);
    free(x.base);
    free(x.parent);
    free(x.isconst);
    free(x.kval);
    free(x.stored);
    return rc ? cd_errf(rc, err, errlen, "compaction: %s", cd_strerror(rc)) : 0;
}
