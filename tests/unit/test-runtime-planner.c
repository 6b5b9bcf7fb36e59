// runtime/planner.c and the CPU backend's sparse path: sparse conv/FC ops
// prepared through the backend (cd_bop_desc.sparse = 1) against the
// reference kernels on random shapes and sparsities (0%..100%, an all-zero
// layer, batch 1..9); the cost model's choice (dense at 0-30% by the density
// gate, sparse at 90% on large layers); the tune cache on disk; the CONVD_PLAN
// modes.

#include "backends/backend.h"
#include "backends/cpu/backend-cpu.h"
#include "backends/cpu/winograd-impl.h"
#include "core/errors.h"
#include "core/host.h"
#include "kernels/cpu/ref.h"
#include "runtime/planner.h"
#include "runtime/runtime.h"
#include "sparse/sparse-conv.h"
#include "tests/unit/check.h"
#include "tests/unit/test-sparse-util.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const double k_sparsities[5] = {0.0, 0.5, 0.9, 0.99, 1.0};

// Runs prepared op d at batch n on src (and residual) into dst. Returns the op's status.
static int run_op(cd_backend_t be, const cd_bop_desc *d, int n, const float *src, const float *res, float *dst) {
    cd_op_state *st;
    int rc = cd_backend_op_init(be, d, &st);
    if (rc) return rc;
    cd_backend_ctx *ctx;
    CHECK_EQ(cd_backend_ctx_create(be, &ctx), 0);
    cd_btensor s0 = {(void *)src, CD_LAYOUT_NCHW, d->src[0].rank, {0}}, s1 = s0,
               o = {dst, CD_LAYOUT_NCHW, d->dst.rank, {0}};
    memcpy(s0.shape, d->src[0].shape, sizeof s0.shape);
    memcpy(o.shape, d->dst.shape, sizeof o.shape);
    s0.shape[0] = o.shape[0] = n;
    if (res) {
        s1 = o;
        s1.data = (void *)res;
    }
    const cd_btensor *srcs[2] = {&s0, &s1};
    rc = cd_backend_op_run(be, d->op, ctx, st, n, srcs, &o);
    cd_backend_ctx_free(be, ctx);
    cd_backend_op_state_free(be, st);
    return rc;
}

CD_TEST(planner_sparse_conv_through_backend_matches_reference) {
    CHECK_EQ(cd_runtime_init(0), 0);
    cd_backend_t be;
    CHECK_EQ(cd_backend_cpu_init(&be), 0);
    for (int round = 0; round < 20; round++) {
        static const int ks[4] = {1, 3, 5, 7};
        int rs = ks[cd_test_randi(0, 3)], groups = 1, dw = cd_test_randi(0, 4) == 0;
        int c = cd_test_randi(1, 24), k = cd_test_randi(1, 24);
        if (dw)
            groups = k = c;
        else if (cd_test_randi(0, 3) == 0) {
            groups = cd_test_randi(2, 3);
            c = groups * cd_test_randi(1, 6);
            k = groups * cd_test_randi(1, 6);
        }
        cd_conv_desc cv = {.n = 1,
                           .c = c,
                           .h = cd_test_randi(rs, rs + 12),
                           .w = cd_test_randi(rs, rs + 13),
                           .k = k,
                           .r = rs,
                           .s = rs,
                           .stride_h = cd_test_randi(1, 2),
                           .stride_w = cd_test_randi(1, 2),
                           .pad_t = cd_test_randi(0, rs / 2),
                           .pad_l = cd_test_randi(0, rs / 2),
                           .pad_b = cd_test_randi(0, rs / 2),
                           .pad_r = cd_test_randi(0, rs / 2),
                           .dil_h = cd_test_randi(1, 2),
                           .dil_w = 1,
                           .groups = groups,
                           .act = {(cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_LEAKYRELU), 0.1f, 0.9f},
                           .has_residual = cd_test_randi(0, 1)};
        cd_conv_out_dims(&cv);
        if (cv.oh < 1 || cv.ow < 1) continue;
        double sp = k_sparsities[round % 5];
        int n = cd_test_randi(1, 9);
        size_t nw = (size_t)k * (c / groups) * rs * rs, nin = (size_t)n * c * cv.h * cv.w,
               nout = (size_t)n * k * cv.oh * cv.ow;
        float *w = malloc(nw * sizeof(float)), *b = malloc(k * sizeof(float)), *x = malloc(nin * sizeof(float)),
              *res = malloc(nout * sizeof(float)), *got = malloc(nout * sizeof(float)),
              *want = malloc(nout * sizeof(float));
        sp_fill_random(w, nw);
        sp_prune_unstructured(w, nw, sp);
        sp_fill_random(b, k);
        sp_fill_random(x, nin);
        sp_fill_random(res, nout);
        cd_bop_desc d;
        memset(&d, 0, sizeof d);
        d.op = CD_BOP_CONV2D;
        d.max_batch = 9;
        d.nsrc = cv.has_residual ? 2 : 1;
        d.u.conv = cv;
        d.src[0] = (cd_tdesc){4, {1, c, cv.h, cv.w}, CD_LAYOUT_NCHW, 0};
        d.dst = (cd_tdesc){4, {1, k, cv.oh, cv.ow}, CD_LAYOUT_NCHW, 0};
        d.src[1] = d.dst;
        d.w = w;
        d.bias = b;
        d.sparse = 1;
        d.sparse_format = cd_test_randi(0, 3);
        CHECK(cd_backend_supports_op(be, &d));
        CHECK_EQ(run_op(be, &d, n, x, cv.has_residual ? res : NULL, got), 0);
        cd_conv_desc rc = cv;
        rc.n = n;
        cd_ref_conv2d(&rc, x, w, b, cv.has_residual ? res : NULL, want);
        char what[160];
        snprintf(what, sizeof what, "conv c%d k%d %dx%d g%d s%d sparsity %.2f batch %d fmt %d", c, k, rs, rs, groups,
                 cv.stride_h, sp, n, d.sparse_format);
        sp_check_close(got, want, nout, what);
        // A blocked layout is not something the sparse kernels take.
        d.dst.layout = (cd_test_randi(0, 1) ? CD_LAYOUT_NCHW16C : CD_LAYOUT_NCHW8C);
        CHECK(!cd_backend_supports_op(be, &d));
        free(w), free(b), free(x), free(res), free(got), free(want);
    }
    cd_backend_free(be);
}

CD_TEST(planner_sparse_fc_through_backend_matches_reference) {
    CHECK_EQ(cd_runtime_init(0), 0);
    cd_backend_t be;
    CHECK_EQ(cd_backend_cpu_init(&be), 0);
    for (int round = 0; round < 10; round++) {
        // rows > 1 per item: a MatMul over [N, H, W, C] (n * rows rows in all,
        // folded 16 at a time by the sparse FC kernel)
        int kin = cd_test_randi(1, 300), nout = cd_test_randi(1, 200), n = cd_test_randi(1, 9);
        int rows = round % 2 ? 1 : cd_test_randi(2, 40);
        double sp = k_sparsities[round % 5];
        float *w = malloc(sizeof(float) * kin * nout), *b = malloc(sizeof(float) * nout),
              *x = malloc(sizeof(float) * kin * n * rows), *got = malloc(sizeof(float) * nout * n * rows),
              *want = malloc(sizeof(float) * nout * n * rows);
        sp_fill_random(w, (size_t)kin * nout);
        sp_prune_unstructured(w, (size_t)kin * nout, sp);
        sp_fill_random(b, nout);
        sp_fill_random(x, (size_t)kin * n * rows);
        cd_bop_desc d;
        memset(&d, 0, sizeof d);
        d.op = CD_BOP_GEMM;
        d.max_batch = 9;
        d.nsrc = 1;
        d.u.gemm.rows = rows;
        d.u.gemm.n = nout;
        d.u.gemm.k = kin;
        d.u.gemm.act = (cd_activation){(cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_RELU), 0, 0};
        d.src[0] =
            rows == 1 ? (cd_tdesc){2, {1, kin}, CD_LAYOUT_NCHW, 0} : (cd_tdesc){3, {1, rows, kin}, CD_LAYOUT_NCHW, 0};
        d.dst =
            rows == 1 ? (cd_tdesc){2, {1, nout}, CD_LAYOUT_NCHW, 0} : (cd_tdesc){3, {1, rows, nout}, CD_LAYOUT_NCHW, 0};
        d.w = w;
        d.bias = b;
        d.sparse = 1;
        CHECK(cd_backend_supports_op(be, &d));
        CHECK_EQ(run_op(be, &d, n, x, NULL, got), 0);
        cd_ref_gemm(n * rows, nout, kin, x, w, b, d.u.gemm.act, want);
        sp_check_close(got, want, (size_t)nout * n * rows, "fc");
        free(w), free(b), free(x), free(got), free(want);
    }
    cd_backend_free(be);
}

// A conv desc of a large layer with weights at the given density (unstructured).
static float *big_layer(cd_bop_desc *d, int rs, int ch, int hw, double density, size_t *nnz) {
    memset(d, 0, sizeof *d);
    d->op = CD_BOP_CONV2D;
    d->max_batch = 1;
    d->nsrc = 1;
    d->u.conv = cd_conv_square(ch, hw, hw, ch, rs, 1, rs / 2);
    d->src[0] = (cd_tdesc){4, {1, ch, hw, hw}, CD_LAYOUT_NCHW, 0};
    d->dst = d->src[0];
    size_t nw = (size_t)ch * ch * rs * rs;
    float *w = malloc(nw * sizeof(float));
    sp_fill_random(w, nw);
    sp_prune_unstructured(w, nw, 1.0 - density);
    *nnz = 0;
    for (size_t i = 0; i < nw; i++) *nnz += w[i] != 0.0f;
    d->w = w;
    return w;
}

// Rates measured on a quiet run of this machine (1 thread): dense 1x1/kxk/FC,
// CSR, BSR4, BSR8 and 4x1-block rates, reorder rate and per-call offsets
// (the 16 figures of calib-v7.txt). Written as the cached calibration so the
// choice below tests the cost model, not how busy the machine is right now.
static const char k_quiet_rates[] =
    "1.85218e+08 1.8609e+08 1.48969e+07 7.76101e+07 3.68204e+07 2.01581e+06 1.106e+08 "
    "6.61366e+07 5.03632e+06 8.44208e+07 7.15134e+07 4.35097e+06 3.17043e+07 0.001238 0.000785 0.00079";

// Writes the cached calibrations rates[0..2]: enough samples that none is
// measured.
static void write_calibrations(const char *dir, const char *const rates[3]) {
    char path[256];
    snprintf(path, sizeof path, "%s/calib-v7.txt", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    for (int i = 0; i < 3; i++) fprintf(f, "%s\t%d %s\n", cd_planner_cpu_name(), omp_get_max_threads(), rates[i]);
    fclose(f);
}

static void write_calibration(const char *dir) {
    const char *const quiet[3] = {k_quiet_rates, k_quiet_rates, k_quiet_rates};
    write_calibrations(dir, quiet);
}

CD_TEST(planner_picks_dense_at_low_sparsity_and_sparse_at_90) {
    CHECK_EQ(cd_runtime_init(0), 0);
    cd_backend_t be;
    CHECK_EQ(cd_backend_cpu_init(&be), 0);
    char dir[] = "/tmp/cd-planner-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    write_calibration(dir);
    cd_planner_opts po = {.mode = CD_PLAN_AUTO, .tune_cache = dir, .max_batch = 1};
    static const struct { int rs, ch, hw; } shapes[2] = {{1, 256, 14}, {3, 128, 14}};
    // With these rates: the 1x1 at 90% and the 3x3 at 95% are predicted
    // clearly faster sparse; 0-30% sparsity is dense whatever the rates.
    for (int i = 0; i < 2; i++) {
        const double dens[4] = {1.0, 0.85, 0.7, i ? 0.05 : 0.1};
        for (int j = 0; j < 4; j++) {
            cd_bop_desc d;
            size_t nnz;
            float *w = big_layer(&d, shapes[i].rs, shapes[i].ch, shapes[i].hw, dens[j], &nnz);
            size_t total = (size_t)shapes[i].ch * shapes[i].ch * shapes[i].rs * shapes[i].rs;
            cd_plan_choice c;
            CHECK_EQ(cd_planner_predict(be, &po, &d, nnz, total, -1, -1, &c), 0);
            CHECK(c.pred_dense_ms > 0 && c.pred_sparse_ms > 0);
            CHECK_EQ(c.sparse, dens[j] < 0.7);
            free(w);
        }
    }
    char path[256];
    snprintf(path, sizeof path, "%s/calib-v7.txt", dir);
    unlink(path);
    rmdir(dir);
    cd_backend_free(be);
}

// The planner's prediction for a 1x1 64->64 8x8 conv at 90% sparsity with
// the cache folder dir (calibrating there when it holds too few entries).
static void predict_small(cd_backend_t be, const char *dir, cd_plan_choice *c) {
    cd_planner_opts po = {.mode = CD_PLAN_AUTO, .tune_cache = dir, .max_batch = 1};
    cd_bop_desc d;
    size_t nnz;
    float *w = big_layer(&d, 1, 64, 8, 0.1, &nnz);
    CHECK_EQ(cd_planner_predict(be, &po, &d, nnz, (size_t)64 * 64, -1, -1, c), 0);
    free(w);
}

// Of the cached calibrations, the planner takes the least disturbed: a
// 2-thread calibration taken while other work held a core has rates as high
// as a quiet one's or higher (a burst can favour one micro-run) but fixed
// costs 30-50x higher (each call waits for its second thread); the quiet
// entry must win, wherever it lies in the file.
CD_TEST(planner_takes_the_calibration_with_the_lowest_fixed_costs) {
    CHECK_EQ(cd_runtime_init(0), 0);
    cd_backend_t be;
    CHECK_EQ(cd_backend_cpu_init(&be), 0);
    char dir[] = "/tmp/cd-planner-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    // Rates 1.3x the quiet ones, fixed costs 0.04 ms.
    static const char disturbed[] =
        "2.40783e+08 2.41917e+08 1.93660e+07 1.00893e+08 4.78665e+07 2.62055e+06 1.43780e+08 "
        "8.59776e+07 6.54722e+06 1.09747e+08 9.29674e+07 5.65626e+06 4.12156e+07 0.04 0.04 0.00079";
    const char *rates[3] = {disturbed, disturbed, disturbed};
    rates[cd_test_randi(0, 2)] = k_quiet_rates;
    write_calibrations(dir, rates);
    cd_plan_choice c;
    predict_small(be, dir, &c);
    // The quiet entry's fixed costs (0.0012 and 0.0008 ms) and not 0.04.
    CHECK(c.pred_dense_ms > 0.0012 && c.pred_dense_ms < 0.04);
    CHECK(c.pred_sparse_ms > 0.0007 && c.pred_sparse_ms < 0.04);
    char path[256];
    snprintf(path, sizeof path, "%s/calib-v7.txt", dir);
    unlink(path);
    rmdir(dir);
    cd_backend_free(be);
}

// Without a cache the planner measures the machine once and appends the
// result; the figures must be usable (positive), whatever their size.
CD_TEST(planner_calibration_is_measured_and_cached) {
    CHECK_EQ(cd_runtime_init(0), 0);
    cd_backend_t be;
    CHECK_EQ(cd_backend_cpu_init(&be), 0);
    char dir[] = "/tmp/cd-planner-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    cd_plan_choice c;
    predict_small(be, dir, &c);
    CHECK(c.pred_dense_ms > 0 && c.pred_sparse_ms > 0);
    CHECK_EQ(c.sparse, c.pred_sparse_ms * CD_PLANNER_MARGIN < c.pred_dense_ms);
    char path[256], line[1024];
    snprintf(path, sizeof path, "%s/calib-v7.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    int lines = 0;
    while (fgets(line, sizeof line, f)) lines++;
    fclose(f);
    CHECK_EQ(lines, 1);
    unlink(path);
    rmdir(dir);
    cd_backend_free(be);
}

// A sanitizer build keys its timings apart (core/host.h CD_HOST_BUILD_FLAVOR):
// its 10-100x slower rates must never plan a release build that shares the
// cache folder. Both flavours run this test (the CI's test and san steps).
CD_TEST(planner_cache_key_names_a_sanitizer_build) {
    CHECK_EQ(cd_runtime_init(0), 0);
    const char *cpu = cd_planner_cpu_name();
    const size_t n = strlen(cpu);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    CHECK(n > 4 && strcmp(cpu + n - 4, " san") == 0);
#else
    CHECK(n > 0 && strstr(cpu, " san") == NULL);
#endif
    char key[512];
    cd_conv_desc d = cd_conv_square(8, 6, 6, 8, 3, 1, 1);
    cd_wino_cache_key(&d, CD_LAYOUT_NCHW8C, CD_SPARSE_ISA_AVX2, 1, key, sizeof key);
    CHECK((strstr(key, "] san|") != NULL) == (CD_HOST_BUILD_FLAVOR[0] != '\0'));
}

CD_TEST(planner_tune_measures_once_then_reads_the_cache) {
    CHECK_EQ(cd_runtime_init(0), 0);
    cd_backend_t be;
    CHECK_EQ(cd_backend_cpu_init(&be), 0);
    char dir[] = "/tmp/cd-planner-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    cd_planner_opts po = {.mode = CD_PLAN_AUTO, .tune = 1, .tune_cache = dir, .max_batch = cd_test_randi(1, 3)};
    cd_bop_desc d;
    size_t nnz;
    float *w = big_layer(&d, 1, cd_test_randi(16, 64), cd_test_randi(4, 12), 0.1, &nnz);
    cd_plan_choice c1, c2;
    memset(&c1, 0, sizeof c1);
    memset(&c2, 0, sizeof c2);
    CHECK_EQ(cd_planner_tune(be, &po, &d, nnz, -1, &c1), 0);
    CHECK(c1.tuned_dense_ms > 0 && c1.tuned_sparse_ms > 0);
    CHECK_EQ(c1.from_cache, 0);
    CHECK_EQ(c1.tune_batch, po.max_batch);
    CHECK_EQ(cd_planner_tune(be, &po, &d, nnz, -1, &c2), 0);
    CHECK_EQ(c2.from_cache, 1);
    CHECK(fabs(c2.tuned_dense_ms - c1.tuned_dense_ms) <= 1e-5 * c1.tuned_dense_ms + 1e-9);
    // Another nonzero count is another key.
    w[0] = w[0] == 0.0f ? 1.0f : 0.0f;
    cd_plan_choice c3;
    memset(&c3, 0, sizeof c3);
    CHECK_EQ(cd_planner_tune(be, &po, &d, nnz + (w[0] != 0.0f ? 1 : -1), -1, &c3), 0);
    CHECK_EQ(c3.from_cache, 0);
    char path[256];
    snprintf(path, sizeof path, "%s/tune-v5.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    int lines = 0;
    for (int ch; (ch = fgetc(f)) != EOF;) lines += ch == '\n';
    fclose(f);
    CHECK_EQ(lines, 2);
    unlink(path);
    snprintf(path, sizeof path, "%s/calib-v7.txt", dir);
    unlink(path);
    rmdir(dir);
    free(w);
    cd_backend_free(be);
}

// CONVD_PLAN, read by cd_runtime_options_from_env, then made the process's.
static void plan_env(const char *value) {
    if (value)
        setenv("CONVD_PLAN", value, 1);
    else
        unsetenv("CONVD_PLAN");
    cd_runtime_options o;
    cd_runtime_options_from_env(&o);
    cd_runtime_configure(&o);
}

CD_TEST(planner_mode_from_options_then_environment) {
    cd_planner_opts po = {.mode = CD_PLAN_AUTO};
    plan_env("dense");
    CHECK_EQ(cd_planner_mode(&po), CD_PLAN_DENSE);
    plan_env("sparse");
    CHECK_EQ(cd_planner_mode(&po), CD_PLAN_SPARSE);
    plan_env("compact");
    CHECK_EQ(cd_planner_mode(&po), CD_PLAN_COMPACT);
    po.mode = CD_PLAN_DENSE; // the option wins
    CHECK_EQ(cd_planner_mode(&po), CD_PLAN_DENSE);
    plan_env(NULL);
    po.mode = CD_PLAN_AUTO;
    CHECK_EQ(cd_planner_mode(&po), CD_PLAN_AUTO);
}
