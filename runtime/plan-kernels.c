// Planning, the kernel choice: dense or sparse for every live conv/FC op,
// by the planner's cost model or timings (runtime/planner.h), counting the
// reorders a sparse choice implies. Runs before the layouts are chosen
// (runtime/plan.c).

#include "runtime/plan-internal.h"

#include "core/errors.h"
#include "sparse/analysis.h"

#include <stdlib.h>
#include <string.h>

// ---- kernel choice (planner.h) for every live conv/FC, before the layouts ----------

typedef struct {
    const char *live;
    int *prod;         // value -> live op writing it (-1 none)
    double *eff_dense; // per op: ms per image the decision uses (tuned, else predicted)
    double *eff_sparse;
    double *margin;
} kctx;

static int is_follower(const cd_op *op) {
    return op->kind == CD_OP_POOL || op->kind == CD_OP_ACT || op->kind == CD_OP_BINARY || op->kind == CD_OP_CONCAT ||
           op->kind == CD_OP_FAKEQUANT;
}

// 1 when value v will be in the blocked layout under the current choices (approximate:
// what plan_op would choose).
static int value_blocked(pctx *p, kctx *k, int v, int depth) {
    int o = k->prod[v];
    if (o < 0 || depth > 32 || p->blk == CD_LAYOUT_NCHW) return 0;
    const cd_op *op = &p->g->ops[o];
    if (op->kind == CD_OP_CONV) return !p->ch[o].sparse && !cd_plan_readers_want_nchw(p, v);
    if (is_follower(op)) return value_blocked(p, k, op->in[0], depth + 1);
    return 0;
}

// 1 when some reader of v (through layout-following ops) is a dense conv
// that will want it blocked.
static int readers_blocked(pctx *p, kctx *k, int v, int depth) {
    const cd_graph *g = p->g;
    if (depth > 8 || p->blk == CD_LAYOUT_NCHW) return 0;
    for (int o = 0; o < g->nops; o++) {
        const cd_op *op = &g->ops[o];
        if (!k->live[o]) continue;
        for (int i = 0; i < op->nin; i++) {
            if (op->in[i] != v) continue;
            if (op->kind == CD_OP_CONV && !p->ch[o].sparse && op->u.conv.d.c >= cd_layout_block(p->blk)) return 1;
            if (is_follower(op) && readers_blocked(p, k, op->out, depth + 1)) return 1;
        }
    }
    return 0;
}

static double value_bytes(const cd_graph *g, int v) { return (double)g->values[v].numel * 4.0; }

// Fills p->ch for every live conv/FC op. Returns 0 or CD_ENOMEM.
int cd_plan_choose_kernels(pctx *p, const char *live) {
    cd_model *m = p->m;
    cd_graph *g = p->g;
    cd_plan_mode mode = cd_planner_mode(&m->popts);
    int is_cpu = !cd_backend_get_caps(m->be).device_memory; // the cost model is the host's
    kctx k = {live, malloc(sizeof(int) * ((size_t)g->nvalues + 1)), calloc((size_t)g->nops + 1, sizeof(double)),
              calloc((size_t)g->nops + 1, sizeof(double)), calloc((size_t)g->nops + 1, sizeof(double))};
    int rc = 0;
    if (!k.prod || !k.eff_dense || !k.eff_sparse || !k.margin) {
        rc = CD_ENOMEM;
        goto done;
    }
    for (int v = 0; v < g->nvalues; v++) k.prod[v] = -1;
    for (int o = 0; o < g->nops; o++) {
        cd_plan_choice *c = &p->ch[o];
        memset(c, 0, sizeof *c);
        c->pred_dense_ms = c->pred_sparse_ms = c->tuned_dense_ms = c->tuned_sparse_ms = -1;
        c->i8_ms = c->f32_ms = c->i8d_ms = -1;
        if (live[o]) k.prod[g->ops[o].out] = o;
    }
    for (int o = 0; o < g->nops; o++) {
        const cd_op *op = &g->ops[o];
        cd_plan_choice *c = &p->ch[o];
        if (!live[o] || (op->kind != CD_OP_CONV && op->kind != CD_OP_GEMM)) continue;
        if (mode == CD_PLAN_SPARSE) {
            // Every backend is asked (the HIP backend has sparse kernels for
            // some geometries); supports_op = no falls back to dense below.
            c->sparse = 1;
            continue;
        }
        if (mode != CD_PLAN_AUTO || !is_cpu) continue;
        cd_bop_desc d;
        memset(&d, 0, sizeof d);
        size_t total, nnz = 0;
        if (op->kind == CD_OP_CONV) {
            d.op = CD_BOP_CONV2D;
            d.u.conv = op->u.conv.d;
            d.u.conv.n = 1;
            d.w = op->u.conv.w;
            d.bias = op->u.conv.bias;
            total = (size_t)d.u.conv.k * (d.u.conv.c / d.u.conv.groups) * d.u.conv.r * d.u.conv.s;
            d.nsrc = op->nin;
            d.src[0] = cd_plan_value_desc(&g->values[op->in[0]], CD_LAYOUT_NCHW, 4);
            if (op->nin > 1) d.src[1] = cd_plan_value_desc(&g->values[op->in[1]], CD_LAYOUT_NCHW, 4);
            d.dst = cd_plan_value_desc(&g->values[op->out], CD_LAYOUT_NCHW, 4);
        } else {
            cd_plan_gemm_desc(op, &d);
            total = (size_t)d.u.gemm.n * d.u.gemm.k;
            d.nsrc = 1;
            d.src[0] = cd_plan_value_desc(&g->values[op->in[0]], CD_LAYOUT_NCHW, g->values[op->in[0]].rank);
            d.dst = cd_plan_value_desc(&g->values[op->out], CD_LAYOUT_NCHW, g->values[op->out].rank);
        }
        d.max_batch = m->max_batch;
        for (size_t i = 0; i < total; i++) nnz += d.w[i] != 0.0f;
        const cd_sparse_analysis *a = op->analysis;
        int best = a ? a->best_block : -1;
        double f4 = a ? a->blocks[1].fill : -1, f8 = a ? a->blocks[2].fill : -1;
        if (cd_planner_predict(m->be, &m->popts, &d, nnz, total, f4, f8, c)) continue; // dense
        k.eff_dense[o] = c->pred_dense_ms;
        k.eff_sparse[o] = c->pred_sparse_ms;
        k.margin[o] = CD_PLANNER_MARGIN;
        // Off oneDNN's jit kernels, timing decides even without --tune; so
        // for a Gemm of many rows (a MatMul over a [N, H, W, C] tensor),
        // since the cost model's Gemm rates are those of one row.
        const int timed = (op->kind == CD_OP_CONV && cd_planner_dense_off_jit(&d.u.conv, cd_layout_block(p->blk))) ||
                          (op->kind == CD_OP_GEMM && d.u.gemm.rows > 1);
        const int candidate = cd_planner_sparse_candidate(&d, nnz, total, cd_layout_block(p->blk));
        if ((m->popts.tune || timed) && candidate && !cd_planner_tune(m->be, &m->popts, &d, nnz, best, c)) {
            k.eff_dense[o] = c->tuned_dense_ms / c->tune_batch;
            k.eff_sparse[o] = c->tuned_sparse_ms / c->tune_batch;
            k.margin[o] = 1.05;
            c->sparse = k.eff_sparse[o] * k.margin[o] < k.eff_dense[o];
        }
    }
    // The reorders a sparse choice implies (its input and residual when they
    // come blocked, its output when a dense conv reads it): a sparse layer
    // alone in a dense chain pays both, a run of sparse layers only at its ends.
    if (mode == CD_PLAN_AUTO && is_cpu)
        for (int it = 0, changed = 1; it < 3 && changed; it++) {
            changed = 0;
            for (int o = 0; o < g->nops; o++) {
                const cd_op *op = &g->ops[o];
                cd_plan_choice *c = &p->ch[o];
                if (!live[o] || !c->sparse) continue;
                double r = 0;
                for (int i = 0; i < op->nin; i++)
                    if (value_blocked(p, &k, op->in[i], 0)) r += cd_planner_reorder_ms(value_bytes(g, op->in[i]));
                if (readers_blocked(p, &k, op->out, 0)) r += cd_planner_reorder_ms(value_bytes(g, op->out));
                c->reorder_ms = r;
                if ((k.eff_sparse[o] + r) * k.margin[o] >= k.eff_dense[o]) {
                    c->sparse = 0;
                    changed = 1;
                }
            }
        }
done:
    free(k.prod);
    free(k.eff_dense);
    free(k.eff_sparse);
    free(k.margin);
    return rc;
}
