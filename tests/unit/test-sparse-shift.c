// The aligned-shift CSR path for stride-1 and stride-2 k x k convs
// (sparse/spmm-shift.h), at every ISA level this machine runs that has the
// kernel (AVX-512 with 16-float vectors, AVX2 with 8; CONVD_MAX_ISA lowers the
// set): the shift pack's per-tap order and counts, the micro-kernel against
// a scalar sum (masked tails, accumulation in place, clamp), and whole
// layers that take the path against cd_ref_conv2d and against the same
// layer with the path off, on fresh random shapes (3x3, 2x2, 1x3, 3x2;
// pads; odd sizes; pitches of whole vectors of that ISA; batch 1..4;
// groups; residual + activations) at 0/50/90/99/100% sparsity.

#include "core/errors.h"
#include "sparse/sparse-pack.h"
#include "sparse/spmm-shift.h"
#include "tests/unit/test-sparse-util.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

static const double k_sparsities[] = {0.0, 0.5, 0.9, 0.99, 1.0};

typedef struct {
    cd_sparse_isa isa;
    int vec; // floats per vector: offsets and pitches are whole vectors
    cd_f32_spmm_shift_fn fn;
    const char *name; // what cd_sparse_conv_get_info reports
} shift_isa;

static const shift_isa k_shift_isas[] = {
    {CD_SPARSE_ISA_AVX512F, 16, cd_f32_spmm_shift__avx512f, "cd_f32_spmm_shift__avx512f"},
    {CD_SPARSE_ISA_AVX2, 8, cd_f32_spmm_shift__avx2, "cd_f32_spmm_shift__avx2"},
};

// One test per ISA with the kernel, NAME__avx512f and NAME__avx2: each runs
// the body at its ISA, or is a named skip where this run lacks that ISA.
#define SHIFT_TEST(name)                       \
    static void name##_at(const shift_isa *k); \
    CD_TEST(name##__avx512f) {                 \
        sp_require_isa(k_shift_isas[0].isa);   \
        name##_at(&k_shift_isas[0]);           \
    }                                          \
    CD_TEST(name##__avx2) {                    \
        sp_require_isa(k_shift_isas[1].isa);   \
        name##_at(&k_shift_isas[1]);           \
    }                                          \
    static void name##_at(const shift_isa *k)

// Shift pack: each row's entries ordered by tap s = j % S (then column),
// counted per tap; values/offsets follow that order; totals as a plain pack.
CD_TEST(sparse_shift_pack_orders_entries_by_tap) {
    const int S = cd_test_randi(1, 3), groups = cd_test_randi(1, 3), kpg = cd_test_randi(1, 9);
    const int cols = S * cd_test_randi(1, 12);
    const size_t wn = (size_t)groups * kpg * cols;
    float *w = malloc(wn * sizeof *w), *bias = malloc(groups * kpg * sizeof *bias);
    int32_t *tap = malloc(cols * sizeof *tap);
    CHECK(w && bias && tap);
    sp_fill_random(w, wn);
    sp_prune_unstructured(w, wn, 0.6);
    sp_fill_random(bias, groups * kpg);
    for (int j = 0; j < cols; j++) tap[j] = 16 * j;
    cd_sparse_pack p, q;
    CHECK_EQ(cd_sparse_pack_build_shift(w, bias, groups, kpg, cols, tap, S, &p), 0);
    CHECK_EQ(cd_sparse_pack_build(w, bias, groups, kpg, cols, tap, 1, &q), 0);
    CHECK_EQ(p.shifts, S);
    CHECK_EQ(p.entries, q.entries);
    CHECK_EQ(p.nnz, q.nnz);
    for (int k = 0; k < groups * kpg; k++) {
        const float *v = p.values + p.vfirst[k];
        const int32_t *o = p.offsets + p.first[k];
        CHECK_EQ(v[0], bias[k]);
        v++;
        uint32_t total = 0;
        for (int s = 0; s < S; s++) {
            uint32_t cnt = 0;
            for (int j = s; j < cols; j += S) {
                const float x = w[(size_t)k * cols + j];
                if (x == 0.0f) continue;
                CHECK_EQ(*o++, tap[j]);
                CHECK_EQ(*v++, x);
                cnt++;
            }
            CHECK_EQ(p.shift_nnz[k * S + s], cnt);
            total += cnt;
        }
        CHECK_EQ(p.nnz_map[k], total);
    }
    cd_sparse_pack_free(&p);
    cd_sparse_pack_free(&q);
    CHECK_EQ(cd_sparse_pack_build_shift(w, bias, 1, 1, 5, tap, 3, &p), CD_EPARAMS); // cols % S
    CHECK_EQ(cd_sparse_pack_build_shift(w, bias, 1, 1, 6, tap, 0, &p), CD_EPARAMS);
    free(w);
    free(bias);
    free(tap);
}

// The micro-kernel alone: random aligned offsets, S = 1..3 at column stride
// 1 or (S >= 2) 2, mc 1..200 (full tiles, the merged or balanced remainder,
// masked last vector), residual or in-place accumulation, with and without
// clamp, taps with no entries (a whole block empty at times), against a
// double-precision sum. The input buffer ends where the contract's reads
// end (ASan).
static void shift_ukernel_case(const shift_isa *k) {
    {
        const int V = k->vec;
        const int S = cd_test_randi(1, 3), nblk = cd_test_randi(1, 5);
        const int stride = S >= 2 ? cd_test_randi(1, 2) : 1;
        const size_t mc = (size_t)cd_test_randi(1, 200);
        const int nvec_in = 24; // input positions: V-float aligned offsets 0..nvec_in-1
        const size_t in_n = (size_t)V * nvec_in + (mc + V - 1) / V * V + V;
        float *in = aligned_alloc(64, (in_n * sizeof(float) + 63) & ~(size_t)63);
        const size_t ostride = mc + (size_t)cd_test_randi(0, 20);
        float *out = malloc(nblk * ostride * sizeof *out), *res = malloc(nblk * ostride * sizeof *res);
        float *w = malloc((size_t)nblk * (1 + 3 * 12) * sizeof *w);
        int32_t *off = malloc((size_t)nblk * 3 * 12 * sizeof *off);
        uint32_t *snnz = malloc((size_t)nblk * S * sizeof *snnz);
        double *ref = malloc(nblk * mc * sizeof *ref);
        CHECK(in && out && res && w && off && snnz && ref);
        sp_fill_random(in, in_n);
        sp_fill_random(res, nblk * ostride);
        const int mode = cd_test_randi(0, 2); // 0: residual, 1: in place, 2: neither
        const int clamp = mode != 1 && cd_test_randi(0, 1);
        const cd_spmm_params prm = {clamp ? -0.5f : -INFINITY, clamp ? 0.75f : INFINITY};
        for (size_t i = 0; i < nblk * ostride; i++) out[i] = mode == 1 ? res[i] : NAN;
        float *wp = w;
        int32_t *op = off;
        for (int b = 0; b < nblk; b++) {
            const float bias = cd_test_randf(-1, 1);
            *wp++ = bias;
            for (size_t m = 0; m < mc; m++) ref[b * mc + m] = bias + (mode != 2 ? res[b * ostride + m] : 0.0);
            const int empty = cd_test_randi(0, 5) == 0; // a block of bias alone
            for (int s = 0; s < S; s++) {
                const uint32_t n = empty ? 0 : (uint32_t)cd_test_randi(0, 12);
                snnz[b * S + s] = n;
                for (uint32_t j = 0; j < n; j++) {
                    const int32_t o = V * cd_test_randi(0, nvec_in - 1);
                    const float v = cd_test_randf(-1, 1);
                    *op++ = o;
                    *wp++ = v;
                    for (size_t m = 0; m < mc; m++) ref[b * mc + m] += (double)v * in[o + s / stride + m];
                }
            }
            for (size_t m = 0; m < mc; m++) {
                double r = ref[b * mc + m];
                if (clamp) r = r < -0.5 ? -0.5 : r > 0.75 ? 0.75 : r;
                ref[b * mc + m] = r;
            }
        }
        k->fn(mc, nblk, S, stride, in, w, off, snnz,
              mode == 0   ? res
              : mode == 1 ? out
                          : NULL,
              ostride, out, ostride, &prm);
        for (int b = 0; b < nblk; b++) {
            for (size_t m = 0; m < mc; m++) {
                const double e = fabs(out[b * ostride + m] - ref[b * mc + m]);
                if (!(e <= 1e-5 * fmax(1.0, fabs(ref[b * mc + m]))))
                    CD_CHECK_FAIL_("%s S%d/%d mc%zu mode%d b%d m%zu: %g vs %g", cd_sparse_isa_name(k->isa), S, stride,
                                   mc, mode, b, m, out[b * ostride + m], ref[b * mc + m]);
            }
            // Nothing written past mc (masked tail).
            for (size_t m = mc; m < ostride; m++)
                if (mode == 1)
                    CHECK_EQ(out[b * ostride + m], res[b * ostride + m]);
                else
                    CHECK(isnan(out[b * ostride + m]));
        }
        free(in);
        free(out);
        free(res);
        free(w);
        free(off);
        free(snnz);
        free(ref);
    }
}

SHIFT_TEST(sparse_shift_ukernel_vs_scalar_sum_masked_tails_inplace) {
    for (int it = 0; it < 80; it++) shift_ukernel_case(k);
}

// A random conv at column stride 1 or 2 (row stride 1 or 2 with it) whose
// padded row pitch wph = OW + (S - 1) / stride pads to a whole number of
// vectors of vec floats, up to 32 floats, by at most 1/8 (so the path
// applies; at 48 one call per row can win over MODE_JUNK, and at 30..32
// with 8-float vectors): kernel R x S
// from 3x3, 2x2, 1x3, 3x2; pads 0..2; groups 1, 2..3 or depthwise (gmode).
static cd_conv_desc shift_desc(int gmode, int vec, int *batch) {
    static const int kr[] = {3, 2, 1, 3}, ks[] = {3, 2, 3, 2};
    const int t = cd_test_randi(0, 3);
    const int sw = cd_test_randi(1, 2), sh = sw == 2 ? cd_test_randi(1, 2) : 1;
    cd_conv_desc d = {.r = kr[t], .s = ks[t], .stride_h = sh, .stride_w = sw, .dil_h = 1, .dil_w = 1};
    const int pitch = vec * cd_test_randi(1, 32 / vec);
    // (8-float vectors at pitch 32: rows of 30..32 columns fill 4 vectors,
    // where one call per row wins by the cost model of sparse-conv.c.)
    const int wph = cd_test_randi((pitch * 8 + 8) / 9, vec == 8 && pitch == 32 ? 29 : pitch);
    d.pad_l = cd_test_randi(0, d.s - 1);
    d.pad_r = cd_test_randi(0, d.s - 1);
    d.pad_t = cd_test_randi(0, 2);
    d.pad_b = cd_test_randi(0, 2);
    // OW = (W + pl + pr - S) / sw + 1 = wph - (S - 1) / sw (stride 2: W one
    // longer or not, the same OW).
    const int ow = wph - (d.s - 1) / sw;
    d.w = sw * (ow - 1) + d.s - d.pad_l - d.pad_r + (sw == 2 ? cd_test_randi(0, 1) : 0);
    d.h = cd_test_randi(sh * 2 + d.r + 2, 17 * sh); // OH >= 3: one output row may go MODE_ROWS
    int cpg = cd_test_randi(1, 12), kpg = cd_test_randi(1, 12);
    d.groups = 1;
    if (gmode == 1) d.groups = cd_test_randi(2, 3);
    if (gmode == 2) {
        d.groups = cd_test_randi(2, 8);
        cpg = 1;
        kpg = cd_test_randi(1, 2);
    }
    d.c = cpg * d.groups;
    d.k = kpg * d.groups;
    d.act = sp_random_act();
    d.has_residual = cd_test_randi(0, 1);
    *batch = cd_test_randi(1, 4);
    cd_conv_out_dims(&d);
    return d;
}

// Runs layer d at one sparsity with the path forced on (and checks it is
// taken), against the reference and the same layer with the path off; the
// second round forces small column blocks.
static void run_shift_case(const shift_isa *k, cd_conv_desc d, int batch, double sparsity) {
    d.n = batch;
    cd_conv_out_dims(&d);
    const int cpg = d.c / d.groups;
    sp_layer L;
    sp_layer_make(&L, &d, batch, sparsity, 0);
    const float *w = L.w, *bias = L.bias, *x = L.x, *res = L.res, *ref = L.ref;
    float *y = L.y, *y0 = malloc(L.yn * sizeof *y0);
    const size_t yn = L.yn;
    CHECK(y0);
    for (int round = 0; round < 2; round++) {
        const int cb = round ? cd_test_randi(1, cpg > 1 ? cpg - 1 : 1) : 0;
        char what[256];
        snprintf(what, sizeof what, "%s cb%d n%d c%d k%d g%d %dx%d k%dx%d s%d,%d p%d,%d,%d,%d act%d res%d sp%.2f",
                 cd_sparse_isa_name(k->isa), cb, batch, d.c, d.k, d.groups, d.h, d.w, d.r, d.s, d.stride_h, d.stride_w,
                 d.pad_t, d.pad_l, d.pad_b, d.pad_r, d.act.kind, d.has_residual, sparsity);
        for (int on = 1; on >= -1; on -= 2) {
            cd_sparse_conv_options opt = {.format = CD_SPARSE_FMT_CSR, .isa = k->isa, .cin_block = cb, .shift = on};
            cd_sparse_conv *h = NULL;
            CHECK_EQ(cd_sparse_conv_create(&d, w, bias, &opt, &h), 0);
            cd_sparse_conv_info info;
            cd_sparse_conv_get_info(h, &info);
            if (on > 0) {
                if (info.shift != d.s) CD_CHECK_FAIL_("%s: path not taken (mode %s)", what, info.mode);
                // Junk columns, or none when the pitch is OW itself (stride
                // 2 with S = 2 on an OW that is a whole number of vectors).
                if (strcmp(info.mode, "junk") && !(strcmp(info.mode, "plane") == 0 && d.ow % k->vec == 0))
                    CD_CHECK_FAIL_("%s: mode %s", what, info.mode);
                CHECK_STREQ(info.kernel, k->name);
                CHECK_EQ(info.isa, k->isa);
            } else {
                CHECK_EQ(info.shift, 0);
            }
            float *out = on > 0 ? y : y0;
            for (size_t j = 0; j < yn; j++) out[j] = NAN; // every output must be written
            CHECK_EQ(cd_sparse_conv_run(h, x, d.has_residual ? res : NULL, out, batch), 0);
            sp_check_close(out, ref, yn, what);
            cd_sparse_conv_free(h);
        }
        sp_check_close(y, y0, yn, what); // path on vs off on the same weights
    }
    free(y0);
    sp_layer_free(&L);
}

static void run_shift_random(const shift_isa *k, int iters, int gmode) {
    for (int it = 0; it < iters; it++) {
        omp_set_num_threads(cd_test_randi(1, 2)); // 2: at least two bands per image
        int batch;
        const cd_conv_desc d = shift_desc(gmode, k->vec, &batch);
        for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++)
            run_shift_case(k, d, batch, k_sparsities[s]);
    }
}

SHIFT_TEST(sparse_shift_conv_random_dense_groups) { run_shift_random(k, 8, 0); }
SHIFT_TEST(sparse_shift_conv_random_grouped) { run_shift_random(k, 5, 1); }
SHIFT_TEST(sparse_shift_conv_random_depthwise) { run_shift_random(k, 5, 2); }

// ResNet-50-like 3x3 geometry at 28x28 (pitch 30 -> 32) with enough input
// channels for several column blocks by the L1 rule, a residual and ReLU.
SHIFT_TEST(sparse_shift_conv_28x28_column_blocks) {
    cd_conv_desc d = cd_conv_square(cd_test_randi(40, 70), 28, 28, cd_test_randi(3, 9), 3, 1, 1);
    d.has_residual = 1;
    d.act.kind = CD_ACT_RELU;
    for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++)
        run_shift_case(k, d, cd_test_randi(1, 2), k_sparsities[s]);
}

// Where the path must not be taken even when forced: 7x7 (pitch 9 -> 16 is
// too much padding), column stride 3 (on a 46-wide input: OW 16, a pitch
// that would fit), dilation 2 in W, BSR, a 5x5 (S > 3), the portable code.
CD_TEST(sparse_shift_conv_not_taken_outside_its_geometry) {
    const cd_conv_desc base = cd_conv_square(8, 14, 14, 8, 3, 1, 1);
    cd_conv_desc v[6];
    for (int i = 0; i < 6; i++) v[i] = base;
    v[0].h = v[0].w = 7;
    v[1].stride_h = v[1].stride_w = 3;
    v[1].w = 46;
    v[2].dil_w = 2;
    v[4].r = v[4].s = 5;
    v[4].pad_t = v[4].pad_l = v[4].pad_b = v[4].pad_r = 2;
    float *w = malloc(8 * 8 * 25 * sizeof *w);
    CHECK(w);
    sp_fill_random(w, 8 * 8 * 25);
    sp_prune_unstructured(w, 8 * 8 * 25, 0.5);
    for (int i = 0; i < 6; i++) {
        cd_sparse_conv_options opt = {.format = i == 3 ? CD_SPARSE_FMT_BSR4 : CD_SPARSE_FMT_CSR,
                                      .isa = i == 5 ? CD_SPARSE_ISA_SCALAR : CD_SPARSE_ISA_AUTO,
                                      .shift = 1};
        cd_sparse_conv *h = NULL;
        CHECK_EQ(cd_sparse_conv_create(&v[i], w, NULL, &opt, &h), 0);
        cd_sparse_conv_info info;
        cd_sparse_conv_get_info(h, &info);
        if (info.shift != 0) CD_CHECK_FAIL_("case %d took the shift path", i);
        cd_sparse_conv_free(h);
    }
    free(w);
}

// The 14x14 3x3 CSR layer of the test above takes it on each ISA with the
// kernel, forced or by the measured rule (shift 0: 3x3 only); off (-1)
// never; a 2x2 only forced.
SHIFT_TEST(sparse_shift_conv_taken_by_rule_or_forced) {
    const cd_conv_desc base = cd_conv_square(8, 14, 14, 8, 3, 1, 1);
    float *w = malloc(8 * 8 * 25 * sizeof *w);
    CHECK(w);
    sp_fill_random(w, 8 * 8 * 25);
    sp_prune_unstructured(w, 8 * 8 * 25, 0.5);
    cd_conv_desc k2 = base;
    k2.r = k2.s = 2;
    k2.pad_b = k2.pad_r = 0;
    const struct {
        const cd_conv_desc *d;
        int opt, want;
    } c[] = {{&base, 1, 3}, {&base, 0, 3}, {&base, -1, 0}, {&k2, 0, 0}, {&k2, 1, 2}};
    for (int i = 0; i < 5; i++) {
        cd_sparse_conv_options opt = {.format = CD_SPARSE_FMT_CSR, .isa = k->isa, .shift = c[i].opt};
        cd_sparse_conv *h = NULL;
        CHECK_EQ(cd_sparse_conv_create(c[i].d, w, NULL, &opt, &h), 0);
        cd_sparse_conv_info info;
        cd_sparse_conv_get_info(h, &info);
        if (info.shift != c[i].want)
            CD_CHECK_FAIL_("%s rule case %d: shift %d", cd_sparse_isa_name(k->isa), i, info.shift);
        cd_sparse_conv_free(h);
    }
    free(w);
}
