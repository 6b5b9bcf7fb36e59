// Magnitude pruning (sparse/prune.h) on random weights of random shapes:
// achieved sparsity within rounding, the structure of each mode really holds,
// the kept units are the largest, S=0 / S=1, ties, the global rule, bad input.

#include "core/errors.h"
#include "sparse/analysis.h"
#include "sparse/prune.h"
#include "tests/unit/test-sparse-util.h"

#define ITERS 40

// A random layer shape: groups 1..4, kernels 1x1 .. 7x7, FC-like too.
static cd_prune_shape rand_shape(void) {
    static const int ks[] = {1, 3, 9, 25, 49};
    const int groups = cd_test_randi(1, 4);
    cd_prune_shape s = {groups * cd_test_randi(1, 12), cd_test_randi(1, 10), ks[cd_test_randi(0, 4)], groups};
    return s;
}

static float *rand_weights(size_t n) {
    float *w = malloc(n * sizeof *w);
    CHECK(w);
    sp_fill_random(w, n);
    return w;
}

static float *copy_of(const float *w, size_t n) {
    float *c = malloc(n * sizeof *c);
    CHECK(c);
    memcpy(c, w, n * sizeof *c);
    return c;
}

static size_t zeros(const float *w, size_t n) {
    size_t z = 0;
    for (size_t i = 0; i < n; i++) z += w[i] == 0.0f;
    return z;
}

// The pruned weight count must be the one nearest to target among the counts
// reachable with whole units (ties: fewer): |got - T| <= unit/2.
static void check_amount(size_t got, double target, size_t unit, const char *what) {
    const double d = fabs((double)got - target);
    if (!(d <= (double)unit / 2 + 1e-9))
        CD_CHECK_FAIL_("%s: %zu weights zeroed, target %.3f (unit %zu)", what, got, target, unit);
}

// A unit (rectangle) is either all zero or bitwise equal to the original.
// Returns 1 when zero.
static int rect_state(const float *w, const float *orig, size_t cols, size_t r0, size_t nr, size_t c0, size_t nc) {
    size_t nz = 0, same = 0;
    for (size_t i = r0; i < r0 + nr; i++)
        for (size_t j = c0; j < c0 + nc; j++) {
            nz += w[i * cols + j] != 0.0f;
            same += w[i * cols + j] == orig[i * cols + j];
        }
    if (nz != 0 && same != nr * nc)
        CD_CHECK_FAIL_("unit at rows %zu+%zu cols %zu+%zu is partly pruned", r0, nr, c0, nc);
    return nz == 0;
}

static double rect_score(const float *w, size_t cols, size_t r0, size_t nr, size_t c0, size_t nc, int norm) {
    double acc = 0.0;
    for (size_t i = r0; i < r0 + nr; i++)
        for (size_t j = c0; j < c0 + nc; j++) {
            const double v = w[i * cols + j];
            acc += norm == 1 ? fabs(v) : v * v;
        }
    return norm == 1 ? acc / (double)(nr * nc) : sqrt(acc / (double)(nr * nc));
}

static cd_prune_mode mode_of(const char *s) {
    cd_prune_mode m;
    char err[256];
    if (cd_prune_parse_mode(s, &m, err, sizeof err) != 0) CD_CHECK_FAIL_("mode %s: %s", s, err);
    return m;
}

// ---- parsing ------------------------------------------------------------------

CD_TEST(sparse_prune_parse_mode_valid) {
    char buf[64];
    static const char *in[] = {"unstructured", "filter",    "filter:l1", "channel", "channel:L1",
                               "block:4x1",    "block:1X4", "block:8x8", "nm:2:4",  "nm:1:1024"};
    static const char *out[] = {"unstructured", "filter:l2", "filter:l1", "channel:l2", "channel:l1",
                                "block:4x1",    "block:1x4", "block:8x8", "nm:2:4",     "nm:1:1024"};
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        const cd_prune_mode m = mode_of(in[i]);
        CHECK_STREQ(cd_prune_mode_name(&m, buf, sizeof buf), out[i]);
    }
    cd_prune_mode m = mode_of("block:4x1");
    CHECK_EQ(m.kind, CD_PRUNE_BLOCK);
    CHECK_EQ(m.bh, 4);
    CHECK_EQ(m.bw, 1);
    m = mode_of("nm:2:4");
    CHECK_EQ(m.n, 2);
    CHECK_EQ(m.m, 4);
}

CD_TEST(sparse_prune_parse_mode_invalid) {
    static const char *bad[] = {
        "",         "unstructured2", "filter:l3",   "filterx",    "channel:",     "block:",      "block:4", "block:4x",
        "block:x1", "block:0x1",     "block:4x1x2", "block:-4x1", "block:5000x1", "nm:4:4",      "nm:5:4",  "nm:0:4",
        "nm:2",     "nm:2:",         "nm::4",       "nm:2:4:8",   "nm:1:2000",    "Unstructured"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cd_prune_mode m;
        char err[256] = "";
        if (cd_prune_parse_mode(bad[i], &m, err, sizeof err) != CD_EPARAMS)
            CD_CHECK_FAIL_("mode '%s' accepted", bad[i]);
        CHECK(err[0] != 0);
    }
    cd_prune_mode m;
    CHECK_EQ(cd_prune_parse_mode(NULL, &m, NULL, 0), CD_EPARAMS);
}

CD_TEST(sparse_prune_parse_sparsity) {
    double v;
    char err[256];
    CHECK_EQ(cd_prune_parse_sparsity("0.5", &v, err, sizeof err), 0);
    CHECK(v == 0.5);
    CHECK_EQ(cd_prune_parse_sparsity("50%", &v, err, sizeof err), 0);
    CHECK(v == 0.5);
    CHECK_EQ(cd_prune_parse_sparsity("0", &v, err, sizeof err), 0);
    CHECK(v == 0.0);
    CHECK_EQ(cd_prune_parse_sparsity("1", &v, err, sizeof err), 0);
    CHECK(v == 1.0);
    CHECK_EQ(cd_prune_parse_sparsity("100%", &v, err, sizeof err), 0);
    CHECK(v == 1.0);
    CHECK_EQ(cd_prune_parse_sparsity("97.5%", &v, err, sizeof err), 0);
    CHECK(fabs(v - 0.975) < 1e-12);
    static const char *bad[] = {"", "abc", "1.5", "-0.1", "101%", "nan", "inf", "0.5x", "50%%", " 0.5", "%", "1e400"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (cd_prune_parse_sparsity(bad[i], &v, err, sizeof err) != CD_EPARAMS)
            CD_CHECK_FAIL_("sparsity '%s' accepted", bad[i]);
    // A bare percentage gets a hint.
    CHECK_EQ(cd_prune_parse_sparsity("50", &v, err, sizeof err), CD_EPARAMS);
    CHECK(strstr(err, "50%") != NULL);
}

// ---- units --------------------------------------------------------------------

// Every mode's units tile the weights exactly (cut edge blocks / runs included).
CD_TEST(sparse_prune_units_tile_weights) {
    static const char *modes[] = {"unstructured", "filter",    "channel", "block:4x1",
                                  "block:3x5",    "block:8x8", "nm:2:4",  "nm:3:7"};
    for (int it = 0; it < ITERS; it++) {
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s);
        for (size_t mi = 0; mi < sizeof modes / sizeof *modes; mi++) {
            const cd_prune_mode m = mode_of(modes[mi]);
            const size_t nu = cd_prune_units(&s, &m);
            size_t sum = 0;
            for (size_t u = 0; u < nu; u++) {
                const size_t z = cd_prune_unit_size(&s, &m, u);
                CHECK(z >= 1);
                sum += z;
            }
            CHECK_EQ(sum, n);
            CHECK_EQ(cd_prune_unit_size(&s, &m, nu), 0);
        }
    }
}

CD_TEST(sparse_prune_bad_shape_and_sparsity) {
    float w[24];
    sp_fill_random(w, 24);
    float orig[24];
    memcpy(orig, w, sizeof w);
    const cd_prune_mode m = mode_of("filter");
    cd_prune_layer bad_groups = {w, {6, 2, 2, 4}}; // 6 filters, 4 groups
    CHECK_EQ(cd_prune_numel(&bad_groups.shape), 0);
    CHECK_EQ(cd_prune_run(&bad_groups, 1, &m, 0.5, 1), CD_EPARAMS);
    cd_prune_layer zero_dim = {w, {0, 2, 2, 1}};
    CHECK_EQ(cd_prune_run(&zero_dim, 1, &m, 0.5, 0), CD_EPARAMS);
    cd_prune_layer ok = {w, {6, 2, 2, 1}};
    CHECK_EQ(cd_prune_run(&ok, 1, &m, 1.5, 0), CD_EPARAMS);
    CHECK_EQ(cd_prune_run(&ok, 1, &m, -0.1, 0), CD_EPARAMS);
    CHECK_EQ(cd_prune_run(&ok, 1, &m, NAN, 0), CD_EPARAMS);
    cd_prune_layer null_w = {NULL, {6, 2, 2, 1}};
    CHECK_EQ(cd_prune_run(&null_w, 1, &m, 0.5, 0), CD_EPARAMS);
    // A bad layer anywhere: nothing changes in the good ones.
    cd_prune_layer two[2] = {ok, bad_groups};
    CHECK_EQ(cd_prune_run(two, 2, &m, 0.5, 1), CD_EPARAMS);
    CHECK(memcmp(w, orig, sizeof w) == 0);
    cd_prune_mode bad_mode = {CD_PRUNE_BLOCK, 2, 0, 1, 0, 0};
    CHECK_EQ(cd_prune_run(&ok, 1, &bad_mode, 0.5, 0), CD_EPARAMS);
    CHECK_EQ(cd_prune_run(NULL, 0, &m, 0.5, 0), 0);
}

// ---- unstructured ---------------------------------------------------------------

CD_TEST(sparse_prune_unstructured_amount_and_largest_kept) {
    const cd_prune_mode m = mode_of("unstructured");
    for (int it = 0; it < ITERS; it++) {
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s);
        float *w = rand_weights(n), *orig = copy_of(w, n);
        const double sp = cd_test_randf(0.0f, 1.0f);
        cd_prune_layer l = {w, s};
        CHECK_EQ(cd_prune_run(&l, 1, &m, sp, it & 1), 0);
        check_amount(zeros(w, n), sp * (double)n, 1, "unstructured");
        float max_pruned = 0.0f, min_kept = INFINITY;
        for (size_t i = 0; i < n; i++) {
            if (w[i] == 0.0f)
                max_pruned = fmaxf(max_pruned, fabsf(orig[i]));
            else {
                CHECK(w[i] == orig[i]);
                min_kept = fminf(min_kept, fabsf(orig[i]));
            }
        }
        CHECK(max_pruned <= min_kept);
        free(w);
        free(orig);
    }
}

// Zeros already present count as the smallest weights: S below the existing
// sparsity changes nothing, S above it adds only the missing ones.
CD_TEST(sparse_prune_unstructured_existing_zeros) {
    const cd_prune_mode m = mode_of("unstructured");
    for (int it = 0; it < ITERS; it++) {
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s);
        float *w = rand_weights(n);
        sp_prune_unstructured(w, n, 0.3);
        float *orig = copy_of(w, n);
        const size_t z0 = zeros(w, n);
        cd_prune_layer l = {w, s};
        const double lo = (double)z0 / (double)n * 0.5;
        CHECK_EQ(cd_prune_run(&l, 1, &m, lo, 0), 0);
        CHECK(memcmp(w, orig, n * sizeof *w) == 0);
        CHECK_EQ(cd_prune_run(&l, 1, &m, 0.6, 0), 0);
        if ((double)z0 <= 0.6 * (double)n)
            check_amount(zeros(w, n), 0.6 * (double)n, 1, "0.6");
        else
            CHECK_EQ(zeros(w, n), z0); // more zeros than asked: nothing to do
        for (size_t i = 0; i < n; i++)
            if (orig[i] == 0.0f) CHECK(w[i] == 0.0f);
        free(w);
        free(orig);
    }
}

// NaN weights score +inf: they survive every S < 1.
CD_TEST(sparse_prune_unstructured_nan_kept) {
    float w[16];
    sp_fill_random(w, 16);
    w[3] = NAN;
    w[9] = -NAN;
    const cd_prune_mode m = mode_of("unstructured");
    cd_prune_layer l = {w, {4, 4, 1, 1}};
    CHECK_EQ(cd_prune_run(&l, 1, &m, 14.0 / 16, 0), 0);
    CHECK(isnan(w[3]) && isnan(w[9]));
    CHECK_EQ(zeros(w, 16), 14);
}

// ---- filter / channel -------------------------------------------------------------

static void check_filter_mode(int norm, int global) {
    cd_prune_mode m = mode_of(norm == 1 ? "filter:l1" : "filter:l2");
    for (int it = 0; it < ITERS; it++) {
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s), cols = (size_t)s.cpg * s.ksize;
        float *w = rand_weights(n), *orig = copy_of(w, n);
        const double sp = cd_test_randf(0.0f, 1.0f);
        cd_prune_layer l = {w, s};
        CHECK_EQ(cd_prune_run(&l, 1, &m, sp, global), 0);
        check_amount(zeros(w, n), sp * (double)n, cols, "filter");
        double max_pruned = 0.0, min_kept = INFINITY;
        unsigned char *zo = malloc((size_t)s.k);
        CHECK_EQ(cd_sparse_zero_masks(w, s.k, s.cpg, s.ksize, 1, s.groups, zo, NULL), 0);
        size_t nzero = 0;
        for (int f = 0; f < s.k; f++) {
            const int z = rect_state(w, orig, cols, (size_t)f, 1, 0, cols);
            CHECK_EQ(z, zo[f]);
            nzero += (size_t)z;
            const double sc = rect_score(orig, cols, (size_t)f, 1, 0, cols, norm);
            if (z)
                max_pruned = fmax(max_pruned, sc);
            else
                min_kept = fmin(min_kept, sc);
        }
        CHECK_EQ(nzero * cols, zeros(w, n));
        CHECK(max_pruned <= min_kept);
        free(zo);
        free(w);
        free(orig);
    }
}

CD_TEST(sparse_prune_filter_l2) { check_filter_mode(2, 0); }
CD_TEST(sparse_prune_filter_l1_global_one_layer) { check_filter_mode(1, 1); }

// Channel units are per group: zeroing (g, c) makes input channel g*cpg+c
// unused by every filter, and nothing else changes.
CD_TEST(sparse_prune_channel_grouped) {
    for (int it = 0; it < ITERS; it++) {
        const int norm = 1 + (it & 1);
        const cd_prune_mode m = mode_of(norm == 1 ? "channel:l1" : "channel");
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s), cols = (size_t)s.cpg * s.ksize;
        const size_t kpg = (size_t)(s.k / s.groups);
        float *w = rand_weights(n), *orig = copy_of(w, n);
        const double sp = cd_test_randf(0.0f, 1.0f);
        cd_prune_layer l = {w, s};
        CHECK_EQ(cd_prune_run(&l, 1, &m, sp, 0), 0);
        check_amount(zeros(w, n), sp * (double)n, kpg * s.ksize, "channel");
        unsigned char *zi = malloc((size_t)(s.groups * s.cpg));
        CHECK_EQ(cd_sparse_zero_masks(w, s.k, s.cpg, s.ksize, 1, s.groups, NULL, zi), 0);
        double max_pruned = 0.0, min_kept = INFINITY;
        size_t nzero = 0;
        for (int g = 0; g < s.groups; g++)
            for (int c = 0; c < s.cpg; c++) {
                const int z = rect_state(w, orig, cols, g * kpg, kpg, (size_t)c * s.ksize, (size_t)s.ksize);
                CHECK_EQ(z, zi[g * s.cpg + c]);
                nzero += (size_t)z;
                const double sc = rect_score(orig, cols, g * kpg, kpg, (size_t)c * s.ksize, (size_t)s.ksize, norm);
                if (z)
                    max_pruned = fmax(max_pruned, sc);
                else
                    min_kept = fmin(min_kept, sc);
            }
        CHECK_EQ(nzero * kpg * s.ksize, zeros(w, n));
        CHECK(max_pruned <= min_kept);
        free(zi);
        free(w);
        free(orig);
    }
}

// ---- blocks ---------------------------------------------------------------------

// Every R x C block (tiled per group from (0,0), edges cut) is all zero or
// untouched; kept blocks have the larger RMS; 4x1 / 8x1 / 4x4 results are
// seen by the analysis with fill 1.
CD_TEST(sparse_prune_block_structure) {
    static const int shapes[][2] = {{4, 1}, {8, 1}, {1, 4}, {4, 4}, {3, 5}, {2, 7}};
    for (int it = 0; it < ITERS; it++) {
        const int bi = it % 6, bh = shapes[bi][0], bw = shapes[bi][1];
        cd_prune_mode m = {CD_PRUNE_BLOCK, 2, bh, bw, 0, 0};
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s), cols = (size_t)s.cpg * s.ksize;
        const size_t kpg = (size_t)(s.k / s.groups);
        float *w = rand_weights(n), *orig = copy_of(w, n);
        const double sp = cd_test_randf(0.0f, 1.0f);
        cd_prune_layer l = {w, s};
        CHECK_EQ(cd_prune_run(&l, 1, &m, sp, it & 1), 0);
        check_amount(zeros(w, n), sp * (double)n, (size_t)(bh * bw), "block");
        double max_pruned = 0.0, min_kept = INFINITY;
        size_t zb = 0;
        for (int g = 0; g < s.groups; g++)
            for (size_t r0 = 0; r0 < kpg; r0 += (size_t)bh)
                for (size_t c0 = 0; c0 < cols; c0 += (size_t)bw) {
                    const size_t nr = r0 + bh <= kpg ? (size_t)bh : kpg - r0;
                    const size_t nc = c0 + bw <= cols ? (size_t)bw : cols - c0;
                    const int z = rect_state(w, orig, cols, g * kpg + r0, nr, c0, nc);
                    zb += (size_t)z;
                    const double sc = rect_score(orig, cols, g * kpg + r0, nr, c0, nc, 2);
                    if (z)
                        max_pruned = fmax(max_pruned, sc);
                    else
                        min_kept = fmin(min_kept, sc);
                }
        CHECK(max_pruned <= min_kept);
        cd_prune_stat st;
        CHECK_EQ(cd_prune_count(w, &s, &m, &st), 0);
        CHECK_EQ(st.zero_units, zb);
        CHECK_EQ(st.zeros, zeros(w, n));
        for (int a = 0; a < CD_SPARSE_NBLOCK_SHAPES; a++)
            if (cd_sparse_block_shapes[a][0] == bh && cd_sparse_block_shapes[a][1] == bw) {
                cd_sparse_analysis an;
                CHECK_EQ(cd_sparse_analyze(w, s.k, s.cpg, s.ksize, 1, s.groups, &an), 0);
                CHECK(an.blocks[a].fill == 1.0);
            }
        free(w);
        free(orig);
    }
}

// ---- N:M --------------------------------------------------------------------------

CD_TEST(sparse_prune_nm_holds) {
    static const int nm[][2] = {{2, 4}, {4, 8}, {1, 4}, {3, 7}, {1, 2}};
    for (int it = 0; it < ITERS; it++) {
        const int N = nm[it % 5][0], M = nm[it % 5][1];
        cd_prune_mode m = {CD_PRUNE_NM, 0, 0, 0, N, M};
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s), cols = (size_t)s.cpg * s.ksize;
        float *w = rand_weights(n), *orig = copy_of(w, n);
        cd_prune_layer l = {w, s};
        CHECK_EQ(cd_prune_run(&l, 1, &m, 0.123 /* ignored */, it & 1), 0);
        size_t expect_zero = 0;
        for (int f = 0; f < s.k; f++)
            for (size_t c0 = 0; c0 < cols; c0 += (size_t)M) {
                const size_t L = c0 + M <= cols ? (size_t)M : cols - c0;
                const size_t keep = L < (size_t)N ? L : (size_t)N;
                const float *run = w + (size_t)f * cols + c0, *o = orig + (size_t)f * cols + c0;
                size_t nz = 0;
                float max_pruned = 0.0f, min_kept = INFINITY;
                for (size_t j = 0; j < L; j++) {
                    if (run[j] != 0.0f) {
                        nz++;
                        CHECK(run[j] == o[j]);
                        min_kept = fminf(min_kept, fabsf(o[j]));
                    } else {
                        max_pruned = fmaxf(max_pruned, fabsf(o[j]));
                    }
                }
                CHECK_EQ(nz, keep);
                CHECK(max_pruned <= min_kept);
                expect_zero += L - keep;
            }
        CHECK_EQ(zeros(w, n), expect_zero);
        cd_prune_stat st;
        CHECK_EQ(cd_prune_count(w, &s, &m, &st), 0);
        CHECK_EQ(st.zero_units, st.units); // every run conforms
        if (N == 2 && M == 4) {
            cd_sparse_analysis an;
            CHECK_EQ(cd_sparse_analyze(w, s.k, s.cpg, s.ksize, 1, s.groups, &an), 0);
            CHECK(an.is_2_4);
        }
        free(w);
        free(orig);
    }
}

// ---- S = 0, S = 1 ---------------------------------------------------------------

CD_TEST(sparse_prune_zero_sparsity_changes_nothing) {
    static const char *modes[] = {"unstructured", "filter", "channel:l1", "block:4x1", "block:2x3"};
    for (int it = 0; it < ITERS; it++) {
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s);
        float *w = rand_weights(n);
        if (it & 1) sp_prune_unstructured(w, n, 0.4); // zeros present already
        float *orig = copy_of(w, n);
        const cd_prune_mode m = mode_of(modes[it % 5]);
        cd_prune_layer l = {w, s};
        CHECK_EQ(cd_prune_run(&l, 1, &m, 0.0, (it >> 1) & 1), 0);
        CHECK(memcmp(w, orig, n * sizeof *w) == 0);
        free(w);
        free(orig);
    }
}

CD_TEST(sparse_prune_full_sparsity_zeros_all) {
    static const char *modes[] = {"unstructured", "filter", "channel", "block:4x1", "block:3x3"};
    for (int it = 0; it < ITERS; it++) {
        cd_prune_layer l[2];
        size_t n[2];
        for (int i = 0; i < 2; i++) {
            l[i].shape = rand_shape();
            n[i] = cd_prune_numel(&l[i].shape);
            l[i].w = rand_weights(n[i]);
        }
        const cd_prune_mode m = mode_of(modes[it % 5]);
        CHECK_EQ(cd_prune_run(l, 2, &m, 1.0, it & 1), 0);
        for (int i = 0; i < 2; i++) {
            CHECK_EQ(zeros(l[i].w, n[i]), n[i]);
            free(l[i].w);
        }
    }
}

// ---- ties --------------------------------------------------------------------------

// Equal scores: the unit that comes first is pruned first (layer order, then
// unit order); in N:M runs the later equal weights are kept.
CD_TEST(sparse_prune_ties_deterministic) {
    float w[64], w2[64];
    for (int i = 0; i < 64; i++) w[i] = i & 1 ? -0.5f : 0.5f;
    cd_prune_layer l = {w, {8, 8, 1, 1}};
    const cd_prune_mode un = mode_of("unstructured");
    CHECK_EQ(cd_prune_run(&l, 1, &un, 0.25, 0), 0);
    for (int i = 0; i < 64; i++) CHECK_EQ(w[i] == 0.0f, i < 16);

    for (int i = 0; i < 64; i++) w[i] = i & 1 ? -0.5f : 0.5f;
    const cd_prune_mode fi = mode_of("filter");
    CHECK_EQ(cd_prune_run(&l, 1, &fi, 0.5, 0), 0);
    for (int i = 0; i < 64; i++) CHECK_EQ(w[i] == 0.0f, i < 32); // filters 0..3

    for (int i = 0; i < 64; i++) w[i] = 0.5f;
    const cd_prune_mode ch = mode_of("channel");
    CHECK_EQ(cd_prune_run(&l, 1, &ch, 0.25, 0), 0);
    for (int i = 0; i < 64; i++) CHECK_EQ(w[i] == 0.0f, i % 8 < 2); // channels 0, 1

    for (int i = 0; i < 64; i++) w[i] = 0.5f;
    const cd_prune_mode nm = mode_of("nm:2:4");
    CHECK_EQ(cd_prune_run(&l, 1, &nm, 0, 0), 0);
    for (int i = 0; i < 64; i++) CHECK_EQ(w[i] == 0.0f, i % 4 < 2);

    // Global across two identical layers: the first layer goes first.
    for (int i = 0; i < 64; i++) w[i] = w2[i] = 0.25f;
    cd_prune_layer two[2] = {{w, {8, 8, 1, 1}}, {w2, {8, 8, 1, 1}}};
    CHECK_EQ(cd_prune_run(two, 2, &un, 0.25, 1), 0);
    CHECK_EQ(zeros(w, 64), 32);
    CHECK_EQ(zeros(w2, 64), 0);

    // The same input gives the same output, run after run.
    float a[300], b[300];
    for (int i = 0; i < 300; i++) a[i] = b[i] = (float)(cd_test_randi(1, 3)) * (i % 3 ? 1.0f : -1.0f);
    cd_prune_layer la = {a, {10, 6, 5, 2}}, lb = {b, {10, 6, 5, 2}};
    const cd_prune_mode bl = mode_of("block:2x3");
    CHECK_EQ(cd_prune_run(&la, 1, &bl, 0.5, 0), 0);
    CHECK_EQ(cd_prune_run(&lb, 1, &bl, 0.5, 0), 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
}

// ---- global ------------------------------------------------------------------------

// Unstructured global: one |w| threshold over all layers; total amount within
// rounding. A layer of small weights is pruned more.
CD_TEST(sparse_prune_global_unstructured_one_threshold) {
    for (int it = 0; it < ITERS; it++) {
        const int nl = cd_test_randi(2, 5);
        cd_prune_layer l[5];
        float *orig[5];
        size_t n[5], total = 0;
        for (int i = 0; i < nl; i++) {
            l[i].shape = rand_shape();
            n[i] = cd_prune_numel(&l[i].shape);
            l[i].w = rand_weights(n[i]);
            const float scale = cd_test_randf(0.1f, 4.0f);
            for (size_t j = 0; j < n[i]; j++) l[i].w[j] *= scale;
            orig[i] = copy_of(l[i].w, n[i]);
            total += n[i];
        }
        const double sp = cd_test_randf(0.0f, 1.0f);
        const cd_prune_mode m = mode_of("unstructured");
        CHECK_EQ(cd_prune_run(l, nl, &m, sp, 1), 0);
        size_t z = 0;
        float max_pruned = 0.0f, min_kept = INFINITY;
        for (int i = 0; i < nl; i++) {
            z += zeros(l[i].w, n[i]);
            for (size_t j = 0; j < n[i]; j++) {
                if (l[i].w[j] == 0.0f)
                    max_pruned = fmaxf(max_pruned, fabsf(orig[i][j]));
                else
                    min_kept = fminf(min_kept, fabsf(orig[i][j]));
            }
            free(l[i].w);
            free(orig[i]);
        }
        check_amount(z, sp * (double)total, 1, "global");
        CHECK(max_pruned <= min_kept);
    }
}

// Structured global: scores are relative to the layer's own RMS, so scaling
// a layer does not move pruning onto it. Two layers with the same weights,
// one scaled by 100: each loses the same filters (within one).
CD_TEST(sparse_prune_global_structured_scale_invariant) {
    for (int it = 0; it < ITERS; it++) {
        const cd_prune_shape s = rand_shape();
        const size_t n = cd_prune_numel(&s), cols = (size_t)s.cpg * s.ksize;
        float *a = rand_weights(n), *b = copy_of(a, n);
        for (size_t j = 0; j < n; j++) b[j] *= 100.0f;
        cd_prune_layer l[2] = {{a, s}, {b, s}};
        const double sp = cd_test_randf(0.0f, 1.0f);
        const cd_prune_mode m = mode_of(it & 1 ? "filter:l1" : "filter");
        CHECK_EQ(cd_prune_run(l, 2, &m, sp, 1), 0);
        const long za = (long)(zeros(a, n) / cols), zb = (long)(zeros(b, n) / cols);
        CHECK(labs(za - zb) <= 1); // the same filters, but for the boundary pair
        check_amount((size_t)(za + zb) * cols, sp * 2.0 * (double)n, cols, "global filter");
        // Unstructured global is not scale invariant: the small layer goes first.
        float *c = rand_weights(n), *d = copy_of(c, n);
        for (size_t j = 0; j < n; j++) d[j] *= 100.0f;
        cd_prune_layer u[2] = {{c, s}, {d, s}};
        const cd_prune_mode un = mode_of("unstructured");
        CHECK_EQ(cd_prune_run(u, 2, &un, 0.4, 1), 0);
        CHECK(zeros(c, n) >= zeros(d, n));
        free(a);
        free(b);
        free(c);
        free(d);
    }
}

// Per-layer: every layer reaches S on its own whatever the scales.
CD_TEST(sparse_prune_per_layer_each_reaches_s) {
    for (int it = 0; it < ITERS; it++) {
        cd_prune_layer l[3];
        size_t n[3];
        for (int i = 0; i < 3; i++) {
            l[i].shape = rand_shape();
            n[i] = cd_prune_numel(&l[i].shape);
            l[i].w = rand_weights(n[i]);
            for (size_t j = 0; j < n[i]; j++) l[i].w[j] *= (float)(i * 10 + 1);
        }
        const double sp = cd_test_randf(0.0f, 1.0f);
        const cd_prune_mode m = mode_of(it & 1 ? "unstructured" : "block:4x1");
        CHECK_EQ(cd_prune_run(l, 3, &m, sp, 0), 0);
        for (int i = 0; i < 3; i++) {
            check_amount(zeros(l[i].w, n[i]), sp * (double)n[i], it & 1 ? 1 : 4, "per-layer");
            free(l[i].w);
        }
    }
}

// A large layer goes through the radix selection quickly and exactly.
CD_TEST(sparse_prune_large_layer_exact_count) {
    const cd_prune_shape s = {512, 256, 9, 1}; // 1.18M weights
    const size_t n = cd_prune_numel(&s);
    float *w = rand_weights(n);
    const cd_prune_mode m = mode_of("unstructured");
    cd_prune_layer l = {w, s};
    CHECK_EQ(cd_prune_run(&l, 1, &m, 0.9, 1), 0);
    check_amount(zeros(w, n), 0.9 * (double)n, 1, "large");
    free(w);
}
