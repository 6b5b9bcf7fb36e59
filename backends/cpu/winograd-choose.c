// The choice between our Winograd conv and oneDNN's direct conv, per layer,
// by measured time at create (backends/cpu/winograd.h cd_wino_offer). The
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

typedef struct {
    cd_dnnl_op *op;     // oneDNN's conv (candidate 0)
    cd_wino *wg;        // or this Winograd
    cd_dnnl_ctx *ctx;   // oneDNN's stream and scratchpad
    const float *in[2]; // source, residual
    float *dst;
    void *scratch; // Winograd's
} offer_run;

// One run of candidate wg (NULL: oneDNN) in ns, or UINT64_MAX when it failed.
static uint64_t time_one(offer_run *r, cd_wino *wg) {
    const uint64_t t0 = cd_now_ns();
    if (wg)
        cd_wino_run(wg, 1, r->in[0], r->in[1], r->dst, r->scratch);
    else if (cd_dnnl_op_run(r->op, r->ctx, 1, r->in[1] ? 2 : 1, r->in, r->dst))
        return UINT64_MAX;
    return cd_now_ns() - t0;
}

// Times oneDNN and the n candidates interleaved; best[i] the fastest run of
// candidate i (0: oneDNN, 1 + j: cand[j]).
static void time_all(offer_run *r, cd_wino **cand, int n, uint64_t *best) {
    for (int i = 0; i <= n; i++) best[i] = UINT64_MAX;
    for (int round = 0; round <= OFFER_ROUNDS; round++)
        for (int i = 0; i <= n; i++) {
            uint64_t ns = time_one(r, i ? cand[i - 1] : NULL);
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

static int measure(cd_dnnl_op *op, const cd_conv_desc *d, cd_layout l, cd_wino **cand, int n, uint64_t *best) {
    offer_run r = {.op = op};
    const size_t sn = cd_layout_numel(l, 1, d->c, d->h, d->w), dn = cd_layout_numel(l, 1, d->k, d->oh, d->ow);
    size_t scratch = 0;
    for (int i = 0; i < n; i++) {
        size_t s = cd_wino_scratch_bytes(cand[i], 1);
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
    time_all(&r, cand, n, best);
    rc = 0;
out:
    cd_dnnl_ctx_free(r.ctx);
    free(src);
    free(res);
    free(r.dst);
    free(r.scratch);
    return rc;
}

// Which candidate to keep from the times of oneDNN, F2 and F4 (ns[0..2]) as
// the mode says: 0 oneDNN, 1 F2, 2 F4.
static int pick(int mode, const uint64_t ns[3]) {
    if (mode == 3 || mode == 4) return mode - 2;
    const int wino = ns[2] < ns[1] ? 2 : 1;
    return mode == 2 || ns[wino] < ns[0] ? wino : 0;
}

int cd_wino_offer(cd_dnnl_op *op, const cd_conv_desc *d, cd_layout src, cd_layout dst, const float *w,
                  const float *bias, int mode, cd_wino **out) {
    *out = NULL;
    if (mode == 1 || !cd_wino_qualifies(d, src, dst)) return 0;
    const cd_sparse_isa isa = offer_isa(src, mode >= 2);
    if (isa == CD_SPARSE_ISA_AUTO) return 0;
    cd_wino *cand[2] = {NULL, NULL};
    char key[512];
    uint64_t ns[3];
    int rc = 0;
    cd_dnnl_apply_threads();
    cd_wino_cache_key(d, src, isa, omp_get_max_threads(), key, sizeof key);
    if (cd_wino_cache_get(key, ns)) { // timed before on this machine: only the one kept is made
        const int p = pick(mode, ns);
        if (p) rc = cd_wino_create(d, src, 2 * p, isa, w, bias, out);
        goto out;
    }
    rc = cd_wino_create(d, src, 2, isa, w, bias, &cand[0]);
    if (!rc) rc = cd_wino_create(d, src, 4, isa, w, bias, &cand[1]);
    if (rc) goto out;
    if ((rc = measure(op, d, src, cand, 2, ns))) goto out;
    cd_wino_cache_put(key, ns);
    const int p = pick(mode, ns);
    if (p) {
        *out = cand[p - 1];
        cand[p - 1] = NULL;
    }
out:
    for (int i = 0; i < 2; i++) cd_wino_free(cand[i]);
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
