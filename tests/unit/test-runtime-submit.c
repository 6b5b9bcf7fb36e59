// cd_model_submit / cd_model_wait (runtime.h): two execs of one model used
// alternately as a double buffer (batch i+1 submitted before batch i is
// waited for) give the outputs of cd_model_run, on the cpu and the hip-emu
// backends; the caller's inputs are free once submit returns; misuse (two
// submits, a wait with nothing pending, a failed submit) leaves the exec
// usable; freeing an exec with a run pending is clean.

#include "core/errors.h"
#include "onnx.pb-c.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/onnx-builder.h"

#include <unistd.h>

static int64_t item_numel(const cd_io_desc *d) {
    int64_t n = 1;
    for (int i = 1; i < d->rank; i++) n *= d->shape[i];
    return n;
}

// Loads a random model on `device`, then runs `nb` random batches through two
// execs alternately, each submitted before the previous one is waited for,
// and compares every output with cd_model_run on a third exec.
static void check_double_buffer(const char *device) {
    char path[64], err[512];
    mb_write_small_cnn(path, sizeof path, 1, NULL, NULL);
    int max_batch = cd_test_randi(1, 5);
    cd_model_opts opts = {.max_batch = max_batch, .device = device};
    cd_model *m;
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load on %s: %s", device, err);
    unlink(path);
    int64_t ni = item_numel(cd_model_input(m, 0)), no = item_numel(cd_model_output(m, 0));
    enum { NB = 7 };
    int batch[NB];
    float *x[NB], *xkeep[NB], *y[NB], *ref = malloc((size_t)(no * max_batch) * sizeof(float));
    for (int i = 0; i < NB; i++) {
        batch[i] = cd_test_randi(1, max_batch);
        size_t nx = (size_t)(ni * batch[i]);
        x[i] = malloc(nx * sizeof(float));
        xkeep[i] = malloc(nx * sizeof(float));
        for (size_t j = 0; j < nx; j++) x[i][j] = xkeep[i][j] = cd_test_randf(-1, 1);
        y[i] = malloc((size_t)(no * batch[i]) * sizeof(float));
        for (int64_t j = 0; j < no * batch[i]; j++) y[i][j] = NAN; // must all be written
    }
    cd_exec *ex[2], *rex;
    CHECK_EQ(cd_exec_init(m, &ex[0]), 0);
    CHECK_EQ(cd_exec_init(m, &ex[1]), 0);
    CHECK_EQ(cd_exec_init(m, &rex), 0);
    const void *in0[1] = {x[0]};
    void *out0[1] = {y[0]};
    CHECK_EQ(cd_model_submit(ex[0], batch[0], in0, out0, err, sizeof err), 0);
    memset(x[0], 0xff, (size_t)(ni * batch[0]) * sizeof(float)); // the input is the caller's again
    for (int i = 0; i < NB; i++) {
        if (i + 1 < NB) {
            const void *in[1] = {x[i + 1]};
            void *out[1] = {y[i + 1]};
            CHECK_EQ(cd_model_submit(ex[(i + 1) % 2], batch[i + 1], in, out, err, sizeof err), 0);
            memset(x[i + 1], 0xff, (size_t)(ni * batch[i + 1]) * sizeof(float));
        }
        CHECK_EQ(cd_model_wait(ex[i % 2], err, sizeof err), 0);
        const void *rin[1] = {xkeep[i]};
        void *rout[1] = {ref};
        CHECK_EQ(cd_model_run(rex, batch[i], rin, rout, err, sizeof err), 0);
        CHECK_CLOSE_F32(y[i], ref, (size_t)(no * batch[i]), 1e-5);
    }
    // Misuse: a second submit while one is pending, a wait with nothing
    // pending, a failing submit (bad batch) leaves nothing pending.
    CHECK_EQ(cd_model_submit(ex[0], batch[0], (const void *const *)&xkeep[0], (void *const *)&y[0], err, sizeof err),
             0);
    CHECK_EQ(cd_model_submit(ex[0], batch[0], (const void *const *)&xkeep[0], (void *const *)&y[0], err, sizeof err),
             CD_EPARAMS);
    CHECK_EQ(cd_model_run(ex[0], batch[0], (const void *const *)&xkeep[0], (void *const *)&y[0], err, sizeof err),
             CD_EPARAMS);
    CHECK_EQ(cd_model_wait(ex[0], err, sizeof err), 0);
    CHECK_EQ(cd_model_wait(ex[0], err, sizeof err), CD_EPARAMS);
    CHECK(strstr(err, "nothing") != NULL || strstr(err, "no submitted") != NULL);
    CHECK_EQ(
        cd_model_submit(ex[1], max_batch + 1, (const void *const *)&xkeep[0], (void *const *)&y[0], err, sizeof err),
        CD_ESHAPE);
    CHECK_EQ(cd_model_wait(ex[1], err, sizeof err), CD_EPARAMS);
    const void *none[1] = {NULL};
    CHECK_EQ(cd_model_submit(ex[1], 1, none, (void *const *)&y[0], err, sizeof err), CD_EPARAMS);
    CHECK_EQ(cd_model_wait(ex[1], err, sizeof err), CD_EPARAMS);
    // Both execs still work, and one is freed with a run pending.
    CHECK_EQ(cd_model_run(ex[1], batch[1], (const void *const *)&xkeep[1], (void *const *)&y[1], err, sizeof err), 0);
    CHECK_EQ(cd_model_run(rex, batch[1], (const void *const *)&xkeep[1], (void *const *)&ref, err, sizeof err), 0);
    CHECK_CLOSE_F32(y[1], ref, (size_t)(no * batch[1]), 1e-5);
    CHECK_EQ(cd_model_submit(ex[0], batch[2], (const void *const *)&xkeep[2], (void *const *)&y[2], err, sizeof err),
             0);
    cd_exec_free(ex[0]);
    cd_exec_free(ex[1]);
    cd_exec_free(rex);
    cd_model_free(m);
    for (int i = 0; i < NB; i++) free(x[i]), free(xkeep[i]), free(y[i]);
    free(ref);
}

CD_TEST(runtime_submit_wait_double_buffer_cpu) { check_double_buffer("cpu"); }

CD_TEST(runtime_submit_wait_double_buffer_hip_emu) { check_double_buffer("hip-emu"); }
