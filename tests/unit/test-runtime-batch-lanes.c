// A split batch's images in lanes (runtime/batch-lanes.c): each image's
// outputs those of the image run alone (the same kernels at batch 1; bit for
// bit on our sparse kernels, within float rounding on oneDNN's, whose sums
// may split differently on the one thread of a lane), at every batch 2..17 (odd ones, fewer images than threads), with the
// inputs passed or staged, for a model of two outputs, all images in lanes
// or (auto) the last batch % threads wide after them; the first failing
// image's error reported; the lane execs made once and kept.

#include "core/errors.h"
#include "runtime/executor.h"
#include "runtime/model.h"
#include "runtime/options.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/onnx-builder.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BATCH 17

// x [N, c, h, h] -> Conv kxk (pad, bias) -> Relu (output "r") -> Conv 1x1
// (output "y"): two outputs of different sizes, one read again inside.
static const char *write_two_output_cnn(char *path, size_t len, int *c_out, int *h_out) {
    mb b = {0};
    const int c = cd_test_randi(1, 8), k1 = cd_test_randi(1, 24), k2 = cd_test_randi(1, 12);
    const int h = cd_test_randi(3, 20), r = cd_test_randi(0, 1) ? 3 : 1;
    int64_t xs[4] = {1, c, h, h}, w1[4] = {k1, c, r, r}, b1[1] = {k1}, w2[4] = {k2, k1, 1, 1};
    int64_t pads[4] = {r / 2, r / 2, r / 2, r / 2};
    Onnx__NodeProto *conv = mb_node(&b, "Conv", "x", "w1", "b1", "c1");
    mb_attr_ints(&b, conv, "pads", 4, pads);
    mb_node(&b, "Relu", "c1", NULL, NULL, "r");
    mb_node(&b, "Conv", "r", "w2", NULL, "y");
    mb_init_f(&b, "w1", 4, w1);
    mb_init_f(&b, "b1", 1, b1);
    mb_init_f(&b, "w2", 4, w2);
    mb_input(&b, "x", 4, xs);
    mb_output(&b, "r");
    mb_output(&b, "y");
    snprintf(path, len, "%s", mb_write(&b, 13));
    mb_free(&b);
    *c_out = c;
    *h_out = h;
    return path;
}

static void set_modes(int split, int lanes) {
    cd_runtime_options o = *cd_runtime_opts();
    o.batch_split = split;
    o.batch_lanes = lanes;
    cd_runtime_configure(&o);
}

static int64_t item_numel(const cd_io_desc *d) {
    int64_t n = 1;
    for (int i = 1; i < d->rank; i++) n *= d->shape[i];
    return n;
}

typedef struct {
    int exact; // plan 2 (our sparse kernels): bit for bit
    cd_model *m;
    int64_t ni, no[2];
    float *x, *ref[2], *y[2];
} lanes_case;

// Loads a split model (plan 2: sparse kernels; 1: oneDNN's, which in a lane
// run on its thread alone) of two outputs at MAX_BATCH with `threads`
// threads, and each of MAX_BATCH random images' outputs run alone.
static void case_init(lanes_case *k, int threads, int plan) {
    char path[64], err[512];
    int c, h;
    write_two_output_cnn(path, sizeof path, &c, &h);
    set_modes(2, 0);
    cd_model_opts opts = {.max_batch = MAX_BATCH, .plan = plan, .threads = threads};
    k->exact = plan == 2;
    int rc = cd_model_load(path, &opts, &k->m, err, sizeof err);
    set_modes(0, 0);
    unlink(path);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    k->ni = item_numel(cd_model_input(k->m, 0));
    k->x = malloc(sizeof(float) * (size_t)(k->ni * MAX_BATCH));
    for (int64_t i = 0; i < k->ni * MAX_BATCH; i++) k->x[i] = cd_test_randf(-1, 1);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(k->m, &ex), 0);
    for (int o = 0; o < 2; o++) {
        k->no[o] = item_numel(cd_model_output(k->m, o));
        k->ref[o] = malloc(sizeof(float) * (size_t)(k->no[o] * MAX_BATCH));
        k->y[o] = malloc(sizeof(float) * (size_t)(k->no[o] * MAX_BATCH));
    }
    for (int b = 0; b < MAX_BATCH; b++) {
        const void *in[1] = {k->x + b * k->ni};
        void *out[2] = {k->ref[0] + b * k->no[0], k->ref[1] + b * k->no[1]};
        CHECK_EQ(cd_model_run(ex, 1, in, out, err, sizeof err), 0);
    }
    cd_exec_free(ex);
}

static void case_free(lanes_case *k) {
    free(k->x);
    for (int o = 0; o < 2; o++) free(k->ref[o]), free(k->y[o]);
    cd_model_free(k->m);
}

// 1 when every y[i] is r[i] to float rounding of a sum in another order
// (an unwritten item stays NaN: not near).
static int near_all(const float *y, const float *r, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(y[i] - r[i]) <= 1e-5f * fmaxf(1.0f, fabsf(r[i])))) return 0;
    return 1;
}

// Runs images 0..batch-1 on ex (staged or passed) and checks every output
// item against the image run alone, bit for bit.
static void run_and_check(lanes_case *k, cd_exec *ex, int batch, int staged) {
    char err[512];
    for (int o = 0; o < 2; o++)
        for (int64_t i = 0; i < k->no[o] * batch; i++) k->y[o][i] = NAN; // every item must be written
    void *out[2] = {k->y[0], k->y[1]};
    if (staged) {
        void *host[1];
        CHECK_EQ(cd_exec_stage_inputs(ex, batch, host), 0);
        memcpy(host[0], k->x, sizeof(float) * (size_t)(k->ni * batch));
        CHECK_EQ(cd_model_submit_staged(ex, batch, out, err, sizeof err), 0);
        CHECK_EQ(cd_model_wait(ex, err, sizeof err), 0);
    } else {
        const void *in[1] = {k->x};
        CHECK_EQ(cd_model_run(ex, batch, in, out, err, sizeof err), 0);
    }
    for (int o = 0; o < 2; o++)
        for (int b = 0; b < batch; b++) {
            const float *y = k->y[o] + b * k->no[o], *r = k->ref[o] + b * k->no[o];
            if (k->exact ? !memcmp(y, r, sizeof(float) * (size_t)k->no[o]) : near_all(y, r, k->no[o])) continue;
            CD_CHECK_FAIL_("output %d, image %d of %d (%s) differs from its run alone", o, b, batch,
                           staged ? "staged" : "passed");
        }
}

CD_TEST(runtime_batch_lanes_match_images_alone) {
    const int threads = cd_test_randi(2, 3);
    CHECK_EQ(cd_runtime_init(threads), 0);
    lanes_case k;
    case_init(&k, threads, cd_test_randi(0, 1) ? 2 : 1);
    cd_model_summary s;
    cd_model_get_summary(k.m, &s);
    CHECK_EQ(s.batch_split, 1);
    CHECK(s.lane_activation_bytes > 0 && s.lane_activation_bytes <= s.activation_bytes);
    // on: every image in lanes; auto: the last batch % threads run wide.
    set_modes(0, cd_test_randi(0, 1) ? 2 : 0);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(k.m, &ex), 0);
    for (int batch = 2; batch <= MAX_BATCH; batch++) {
        run_and_check(&k, ex, batch, batch % 2);
        CHECK_EQ(ex->nlane, threads < batch ? threads : batch); // batch 2 < 3 threads: two lanes
    }
    // The lanes are kept: another round makes none.
    cd_exec *const first = ex->nlane > 1 ? ex->lane[1] : NULL;
    run_and_check(&k, ex, cd_test_randi(2, MAX_BATCH), cd_test_randi(0, 1));
    CHECK(ex->nlane < 2 || ex->lane[1] == first);
    cd_exec_free(ex);
    set_modes(0, 0);
    case_free(&k);
    cd_runtime_init(0);
}

CD_TEST(runtime_batch_lanes_first_error_wins) {
    CHECK_EQ(cd_runtime_init(2), 0);
    lanes_case k;
    case_init(&k, 2, 2);
    set_modes(0, 2);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(k.m, &ex), 0);
    const int batch = cd_test_randi(2, MAX_BATCH), bad = cd_test_randi(0, batch - 1);
    char err[512] = "", want[64];
    const void *in[1] = {k.x};
    void *out[2] = {k.y[0], k.y[1]};
    cd_batch_lanes_fail_at(bad);
    const int rc = cd_model_run(ex, batch, in, out, err, sizeof err);
    cd_batch_lanes_fail_at(-1);
    CHECK_EQ(rc, CD_EINTERNAL);
    snprintf(want, sizeof want, "image %d: image %d failed", bad, bad);
    if (!strstr(err, want)) CD_CHECK_FAIL_("error '%s' does not name image %d", err, bad);
    // The exec and its lanes run the next batch as if nothing happened.
    run_and_check(&k, ex, batch, cd_test_randi(0, 1));
    cd_exec_free(ex);
    set_modes(0, 0);
    case_free(&k);
    cd_runtime_init(0);
}

CD_TEST(runtime_batch_lanes_off_and_one_thread_run_wide) {
    CHECK_EQ(cd_runtime_init(2), 0);
    lanes_case k;
    case_init(&k, 2, 2);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(k.m, &ex), 0);
    set_modes(0, 1); // forced off: each image on both threads in turn
    run_and_check(&k, ex, MAX_BATCH, 0);
    CHECK_EQ(ex->nlane, 0);
    cd_exec_free(ex);
    set_modes(0, 0);
    case_free(&k);
    // One thread: nothing to run lanes on.
    CHECK_EQ(cd_runtime_init(1), 0);
    case_init(&k, 1, 2);
    CHECK_EQ(cd_exec_init(k.m, &ex), 0);
    set_modes(0, 2);
    run_and_check(&k, ex, MAX_BATCH, 1);
    CHECK_EQ(ex->nlane, 0);
    cd_exec_free(ex);
    set_modes(0, 0);
    case_free(&k);
    cd_runtime_init(0);
}

// Callers at once: the executor may run their batches wide (then in lanes
// of their own) or as its own lanes (then image by image, nothing nested);
// either way every image's outputs are its run alone's.
typedef struct {
    lanes_case *k;
    int failed;
} caller_arg;

static void *caller_main(void *p) {
    caller_arg *a = p;
    lanes_case *k = a->k;
    cd_exec *ex;
    if (cd_exec_init(k->m, &ex)) {
        a->failed = 1;
        return NULL;
    }
    float *y[2] = {malloc(sizeof(float) * (size_t)(k->no[0] * MAX_BATCH)),
                   malloc(sizeof(float) * (size_t)(k->no[1] * MAX_BATCH))};
    char err[512];
    for (int r = 0; r < 3 && !a->failed; r++) {
        const int batch = 2 + r * 7; // 2, 9, 16
        const void *in[1] = {k->x};
        void *out[2] = {y[0], y[1]};
        if (cd_model_run(ex, batch, in, out, err, sizeof err)) a->failed = 1;
        for (int o = 0; o < 2 && !a->failed; o++)
            if (memcmp(y[o], k->ref[o], sizeof(float) * (size_t)(k->no[o] * batch))) a->failed = 1;
    }
    free(y[0]);
    free(y[1]);
    cd_exec_free(ex);
    return NULL;
}

CD_TEST(runtime_batch_lanes_concurrent_callers) {
    CHECK_EQ(cd_runtime_init(2), 0);
    lanes_case k;
    case_init(&k, 2, 2);
    set_modes(0, 0);
    enum { CALLERS = 4 };
    caller_arg args[CALLERS];
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; i++) {
        args[i] = (caller_arg){.k = &k};
        CHECK_EQ(pthread_create(&t[i], NULL, caller_main, &args[i]), 0);
    }
    for (int i = 0; i < CALLERS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < CALLERS; i++) CHECK_EQ(args[i].failed, 0);
    case_free(&k);
    cd_runtime_init(0);
}
