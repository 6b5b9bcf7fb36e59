// The choice between our Winograd conv (F2, F4, F6), oneDNN's own Winograd
// (where this CPU has it) and oneDNN's direct conv, per layer, by measured
// time at create (backends/cpu/winograd.h cd_wino_offer). The
// backend cannot reach the planner's cache files (runtime/), so the timing is
// kept cheap instead: batch 1, the candidates interleaved, the best of a few
// runs each.

#include "backends/cpu/winograd-hook.h"
#include "backends/cpu/winograd-impl.h"

#include "core/clock.h"
#include "kernels/cpu/ref.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define OFFER_ROUNDS 5 // timed runs of each candidate, after one warm-up

// The ISA of our body on this CPU for layout l: AVX-512 needs a 16-channel
// block (AVX2 runs either), SCALAR only when forced.
static cd_sparse_isa offer_isa(cd_layout l, int forced) {
    cd_sparse_isa best = cd_sparse_isa_f32(cd_sparse_isa_best());
    if (best == CD_SPARSE_ISA_AVX512F && cd_layout_block(l) % 16) best = CD_SPARSE_ISA_AVX2;
    if (best == CD_SPARSE_ISA_SCALAR && !forced) return CD_SPARSE_ISA_AUTO;
    return best;
}

// The candidates, in the order of their figures in the cache (winograd-cache.c).
enum { CAND_ONEDNN, CAND_F2, CAND_F4, CAND_F6, CAND_ONEDNN_WINO, CAND_COUNT };
#define NOT_BUILT UINT64_MAX

// One candidate: our Winograd, or a oneDNN conv op (direct or Winograd).
typedef struct {
    cd_wino *wg;
    cd_dnnl_op *op;
} offer_cand;

typedef struct {
    cd_dnnl_ctx *ctx;   // oneDNN's stream and scratchpad
    const float *in[2]; // source, residual
    float *dst;
    void *scratch; // ours
} offer_run;

// One run of c in ns, or NOT_BUILT when it failed.
static uint64_t time_one(offer_run *r, const offer_cand *c) {
    const uint64_t t0 = cd_now_ns();
    if (c->wg)
        cd_wino_run(c->wg, 1, r->in[0], r->in[1], r->dst, r->scratch);
    else if (cd_dnnl_op_run(c->op, r->ctx, 1, r->in[1] ? 2 : 1, r->in, r->dst))
        return NOT_BUILT;
    return cd_now_ns() - t0;
}

// Times the candidates built interleaved: best[i] the fastest run of
// cand[i], NOT_BUILT for those not built.
static void time_all(offer_run *r, const offer_cand *cand, uint64_t *best) {
    for (int i = 0; i < CAND_COUNT; i++) best[i] = NOT_BUILT;
    for (int round = 0; round <= OFFER_ROUNDS; round++)
        for (int i = 0; i < CAND_COUNT; i++) {
            if (!cand[i].wg && !cand[i].op) continue;
            uint64_t ns = time_one(r, &cand[i]);
            if (round > 0 && ns < best[i]) best[i] = ns; // round 0 warms up
        }
}

// Random floats in [-1, 1) (a fixed generator: the timing needs no quality).
static void fill(float *p, size_t n) {
    uint32_t s = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        p[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
    }
}

static int measure(const cd_conv_desc *d, cd_layout l, const offer_cand *cand, uint64_t *best) {
    offer_run r = {0};
    const size_t sn = cd_layout_numel(l, 1, d->c, d->h, d->w), dn = cd_layout_numel(l, 1, d->k, d->oh, d->ow);
    size_t scratch = 64;
    for (int i = 0; i < CAND_COUNT; i++) {
        size_t s = cand[i].wg ? cd_wino_scratch_bytes(cand[i].wg, 1) : 0;
        scratch = s > scratch ? s : scratch;
    }
    float *src = cd_dnnl_alloc(sn * sizeof(float)), *res = d->has_residual ? cd_dnnl_alloc(dn * sizeof(float)) : NULL;
    r.dst = cd_dnnl_alloc(dn * sizeof(float));
    r.scratch = cd_dnnl_alloc(scratch);
    int rc = CD_ENOMEM;
    if (!src || !r.dst || !r.scratch || (d->has_residual && !res) || cd_dnnl_ctx_create(&r.ctx)) goto out;
    fill(src, sn);
    if (res) fill(res, dn);
    r.in[0] = src;
    r.in[1] = res;
    cd_dnnl_apply_threads();
    time_all(&r, cand, best);
    rc = 0;
out:
    cd_dnnl_ctx_free(r.ctx);
    free(src);
    free(res);
    free(r.dst);
    free(r.scratch);
    return rc;
}

// 1 when auto and on may keep candidate i: not F6. Its relative L2 error is
// within the bound on ResNet's layers, but not after a clipping activation
// (1.1e-4, winograd.h), it widened the gap of two plans of one model
// (1.35e-5 in tests/models/test_sparse_models.py
// test_bias_on_dropped_filter_folds_or_stays, CD_TEST_SEED=349257758; F4
// fails that 1e-5 check too at other seeds, also on main), and it beat F4 on
// one of ResNet's shapes only (128@28, ~1.1x): it is only built when forced
// (bench/results/winograd.md).
static int offered(int i) { return i != CAND_F6; }

// The candidate to keep from the times ns[CAND_*] as the mode says (the
// forced tiles never reach here): the fastest built and offered, of all
// (auto) or of the Winograd ones (on), else oneDNN's direct conv.
static int pick(int mode, const uint64_t *ns) {
    int best = CAND_ONEDNN;
    for (int i = CAND_F2; i < CAND_COUNT; i++)
        if (offered(i) && ns[i] != NOT_BUILT &&
            (best == CAND_ONEDNN ? mode == 2 || ns[i] < ns[best] : ns[i] < ns[best]))
            best = i;
    return best;
}

// The one candidate a forced mode asks for: 3, 4, 5 our F2, F4, F6; 6
// oneDNN's Winograd; -1 for the others.
static int forced(int mode) { return mode >= 3 && mode <= 5 ? CAND_F2 + mode - 3 : mode == 6 ? CAND_ONEDNN_WINO : -1; }

// Builds candidate i into c (our tiles at isa). 0, CD_EUNSUPPORTED (oneDNN
// declines its Winograd here, or our tile's error is not within the bound
// after d's activation), CD_ENOMEM or another error.
static int build(int i, const cd_conv_desc *d, cd_layout l, int max_batch, cd_sparse_isa isa, const float *w,
                 const float *bias, offer_cand *c) {
    if (i == CAND_ONEDNN_WINO) return cd_dnnl_conv_create_wino(d, l, l, max_batch, w, bias, &c->op);
    const int m = 2 * (i - CAND_F2 + 1);
    if (!cd_wino_tile_offered(m, d)) return CD_EUNSUPPORTED;
    return cd_wino_create(d, l, m, isa, w, bias, &c->wg);
}

int cd_wino_offer(cd_dnnl_op *op, const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                  const float *bias, int mode, cd_wino **out, cd_dnnl_op **alt) {
    *out = NULL, *alt = NULL;
    if (mode == 1 || !cd_wino_qualifies(d, src, dst)) return 0;
    const cd_sparse_isa isa = offer_isa(src, mode >= 2);
    offer_cand cand[CAND_COUNT] = {{NULL, op}};
    int rc = 0, keep = forced(mode);
    if (keep < 0) {
        char key[512];
        uint64_t ns[CAND_COUNT];
        cd_dnnl_apply_threads();
        cd_wino_cache_key(d, src, isa, omp_get_max_threads(), key, sizeof key);
        if (!cd_wino_cache_get(key, ns, CAND_COUNT)) { // not timed before on this machine: build all, time, keep
            for (int i = CAND_F2; i < CAND_COUNT && rc != CD_ENOMEM; i++) // one that fails is no candidate
                if (offered(i) && (i == CAND_ONEDNN_WINO || isa != CD_SPARSE_ISA_AUTO))
                    rc = build(i, d, src, max_batch, isa, w, bias, &cand[i]);
            if (rc != CD_ENOMEM) rc = 0;
            if (!rc && !(rc = measure(d, src, cand, ns))) cd_wino_cache_put(key, ns, CAND_COUNT);
        }
        while (!rc && (keep = pick(mode, ns)) != CAND_ONEDNN && !cand[keep].wg && !cand[keep].op &&
               build(keep, d, src, max_batch, isa, w, bias, &cand[keep]))
            ns[keep] = NOT_BUILT; // cached, but not buildable now (another max_batch): the next fastest
    } else if ((keep != CAND_ONEDNN_WINO && isa == CD_SPARSE_ISA_AUTO) ||
               build(keep, d, src, max_batch, isa, w, bias, &cand[keep])) {
        keep = CAND_ONEDNN; // forced, but not on this CPU: oneDNN's direct conv
    }
    if (!rc && keep > CAND_ONEDNN) {
        *out = cand[keep].wg, *alt = cand[keep].op;
        cand[keep] = (offer_cand){NULL, NULL};
    }
    for (int i = CAND_F2; i < CAND_COUNT; i++) cd_wino_free(cand[i].wg), cd_dnnl_op_free(cand[i].op);
    return rc == CD_ENOMEM ? rc : 0;
}

// ---- the hook of dnnl-conv.c (winograd-hook.h) -------------------------------

int cd_wino_build(const cd_wino *wg, int batch, cd_dnnl_prim *p) {
    p->nprim = 0;
    p->scratch_bytes = cd_wino_scratch_bytes(wg, batch);
    return 0;
}

int cd_wino_exec(const cd_wino *wg, cd_dnnl_ctx *ctx, int batch, const float *const *src, float *dst) {
    void *scratch = cd_dnnl_ctx_scratch(ctx, cd_wino_scratch_bytes(wg, batch));
    if (!scratch) return CD_ENOMEM;
    cd_dnnl_apply_threads(); // the team oneDNN's primitives would get
    cd_wino_run(wg, batch, src[0], wg->d.has_residual ? src[1] : NULL, dst, scratch);
    return 0;
}

void cd_wino_adopt(cd_dnnl_op *op, const cd_wino *wg, cd_dnnl_weights *wts) {
    cd_dnnl_weights_fini(wts);
    op->weight_bytes = cd_wino_weight_bytes(wg);
}
