#ifndef CD_TESTS_UNIT_TEST_SPARSE_UTIL_H
#define CD_TESTS_UNIT_TEST_SPARSE_UTIL_H

// Helpers shared by the sparse tests (tests/unit/test-sparse-*.c): random
// pruned weights, random shapes within a reference-cost budget, and the
// sparse-vs-reference comparison.

#include "kernels/cpu/ref.h"
#include "sparse/sparse-conv.h"
#include "tests/unit/check.h"

// Random floats in [-1, 1] that are never 0, so a "nonzero" really is one.
static inline void sp_fill_random(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = cd_test_randf(-1.0f, 1.0f);
        p[i] = v == 0.0f ? 0.5f : v;
    }
}

// Zeroes each weight with probability `sparsity` (1.0: all zero).
static inline void sp_prune_unstructured(float *w, size_t n, double sparsity) {
    for (size_t i = 0; i < n; i++)
        if (sparsity >= 1.0 || cd_test_randf(0.0f, 1.0f) < sparsity) w[i] = 0.0f;
}

// Zeroes whole blocks of `bh` consecutive filters (within each group) at one
// column with probability `sparsity`; rows = filters, cols per filter.
static inline void sp_prune_blocks(float *w, int k, int kpg, size_t cols, int bh, double sparsity) {
    for (int k0 = 0; k0 < k; k0 += bh) {
        const int g0 = k0 / kpg;
        for (size_t j = 0; j < cols; j++) {
            if (!(sparsity >= 1.0 || cd_test_randf(0.0f, 1.0f) < sparsity)) continue;
            for (int i = 0; i < bh && k0 + i < k && (k0 + i) / kpg == g0; i++) w[(size_t)(k0 + i) * cols + j] = 0.0f;
        }
    }
}

// Compares a sparse result to the reference: norm-relative error <= 1e-5 and
// elementwise |a-b| <= 1e-4 * max(1, |b|).
static inline void sp_check_close(const float *got, const float *ref, size_t n, const char *what) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = (double)got[i] - (double)ref[i];
        num += e * e;
        den += (double)ref[i] * ref[i];
    }
    const double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    if (!(rel <= 1e-5)) CD_CHECK_FAIL_("%s: norm-relative error %.3g > 1e-5", what, rel);
    CHECK_CLOSE_F32(got, ref, n, 1e-4);
}

// A random activation (any kind) with sensible parameters.
static inline cd_activation sp_random_act(void) {
    cd_activation a = {.kind = (cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_LEAKYRELU)};
    if (a.kind == CD_ACT_CLIP) {
        a.alpha = -0.5f;
        a.beta = 0.75f;
    } else if (a.kind == CD_ACT_HARDSIGMOID) {
        a.alpha = 0.2f;
        a.beta = 0.5f;
    } else if (a.kind == CD_ACT_LEAKYRELU) {
        a.alpha = 0.1f;
    }
    return a;
}

// One random layer's tensors for d (oh/ow filled) and `batch`: weights
// pruned at `sparsity` (in blocks of block_h filters when > 0), bias, input,
// residual, the reference output of cd_ref_conv2d, and an output buffer.
typedef struct {
    float *w, *bias, *x, *res, *ref, *y;
    size_t wn, xn, yn;
} sp_layer;

static inline void sp_layer_make(sp_layer *L, const cd_conv_desc *d, int batch, double sparsity, int block_h) {
    const int cpg = d->c / d->groups, kpg = d->k / d->groups;
    const size_t cols = (size_t)cpg * d->r * d->s;
    L->wn = (size_t)d->k * cols;
    L->xn = (size_t)batch * d->c * d->h * d->w;
    L->yn = (size_t)batch * d->k * d->oh * d->ow;
    L->w = malloc(L->wn * sizeof *L->w);
    L->bias = malloc(d->k * sizeof *L->bias);
    L->x = malloc(L->xn * sizeof *L->x);
    L->res = malloc(L->yn * sizeof *L->res);
    L->ref = malloc(L->yn * sizeof *L->ref);
    L->y = malloc(L->yn * sizeof *L->y);
    CHECK(L->w && L->bias && L->x && L->res && L->ref && L->y);
    sp_fill_random(L->w, L->wn);
    if (block_h > 0)
        sp_prune_blocks(L->w, d->k, kpg, cols, block_h, sparsity);
    else
        sp_prune_unstructured(L->w, L->wn, sparsity);
    sp_fill_random(L->bias, d->k);
    sp_fill_random(L->x, L->xn);
    sp_fill_random(L->res, L->yn);
    cd_conv_desc dd = *d;
    dd.n = batch;
    cd_ref_conv2d(&dd, L->x, L->w, L->bias, d->has_residual ? L->res : NULL, L->ref);
}

static inline void sp_layer_free(sp_layer *L) {
    free(L->w);
    free(L->bias);
    free(L->x);
    free(L->res);
    free(L->ref);
    free(L->y);
}

// Ends the running test as a named skip when this run cannot execute isa:
// the CPU lacks it, or CONVD_MAX_ISA caps the run below it.
static inline void sp_require_isa(cd_sparse_isa isa) {
    if (cd_sparse_isa_supported(isa)) return;
    CD_SKIP("%s not run: this CPU lacks it%s", cd_sparse_isa_name(isa),
            cd_sparse_isa_capped() ? " or CONVD_MAX_ISA caps this run below it" : "");
}

// Scalar instruction sets this CPU runs, best last.
static inline int sp_isas(cd_sparse_isa out[3]) {
    int n = 0;
    for (int i = CD_SPARSE_ISA_SCALAR; i <= CD_SPARSE_ISA_AVX512F; i++)
        if (cd_sparse_isa_supported((cd_sparse_isa)i)) out[n++] = (cd_sparse_isa)i;
    return n;
}

#endif // CD_TESTS_UNIT_TEST_SPARSE_UTIL_H
