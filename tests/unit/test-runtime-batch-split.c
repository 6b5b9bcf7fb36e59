// Batches run image by image (runtime/batch-split.c): the same outputs as
// the whole batch at once, with inputs passed or staged in the exec's own
// buffers (cd_exec_stage_inputs), at every batch up to max_batch; the automatic choice
// takes mostly sparse models on host memory only, and never max_batch 1.

#include "core/errors.h"
#include "runtime/options.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/onnx-builder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Makes CONVD_BATCH_SPLIT-equivalent option `mode` (0 auto, 1 off, 2 on)
// the process's for the models loaded next.
static void split_option(int mode) {
    cd_runtime_options o = *cd_runtime_opts();
    o.batch_split = mode;
    cd_runtime_configure(&o);
}

static cd_model *load(const char *path, int split, int max_batch, int plan, const char *device) {
    char err[512];
    split_option(split);
    cd_model_opts opts = {.max_batch = max_batch, .plan = plan, .device = device};
    cd_model *m = NULL;
    if (cd_model_load(path, &opts, &m, err, sizeof err)) CD_CHECK_FAIL_("load: %s", err);
    split_option(0);
    return m;
}

static int64_t item_numel(const cd_io_desc *d) {
    int64_t n = 1;
    for (int i = 1; i < d->rank; i++) n *= d->shape[i];
    return n;
}

static int summary_split(const cd_model *m) {
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    return s.batch_split;
}

CD_TEST(runtime_batch_split_matches_whole_batch) {
    char path[64], err[512];
    mb_write_small_cnn(path, sizeof path, 2, NULL, NULL);
    const int max_batch = cd_test_randi(2, 6), plan = cd_test_randi(0, 1) ? 2 : 0;
    cd_model *on = load(path, 2, max_batch, plan, NULL), *off = load(path, 1, max_batch, plan, NULL);
    unlink(path);
    CHECK_EQ(summary_split(on), 1);
    CHECK_EQ(summary_split(off), 0);
    const int64_t ni = item_numel(cd_model_input(on, 0)), no = item_numel(cd_model_output(on, 0));
    cd_exec *eon, *eoff;
    CHECK_EQ(cd_exec_init(on, &eon), 0);
    CHECK_EQ(cd_exec_init(off, &eoff), 0);
    float *x = malloc(sizeof(float) * ni * max_batch), *keep = malloc(sizeof(float) * ni * max_batch);
    float *y = malloc(sizeof(float) * no * max_batch), *ref = malloc(sizeof(float) * no * max_batch);
    for (int round = 0; round < 4; round++) {
        const int batch = round == 0 ? max_batch : cd_test_randi(1, max_batch);
        for (int64_t i = 0; i < ni * batch; i++) x[i] = keep[i] = cd_test_randf(-1, 1);
        for (int64_t i = 0; i < no * batch; i++) y[i] = NAN; // every item must be written
        const void *in[1] = {x};
        void *out[1] = {ref};
        CHECK_EQ(cd_model_run(eoff, batch, in, out, err, sizeof err), 0);
        out[0] = y;
        CHECK_EQ(cd_model_run(eon, batch, in, out, err, sizeof err), 0);
        CHECK_EQ(memcmp(x, keep, sizeof(float) * ni * batch), 0); // the caller's input untouched
        for (int64_t i = 0; i < no * batch; i++)
            if (!(fabsf(y[i] - ref[i]) <= 1e-4f * (1 + fabsf(ref[i]))))
                CD_CHECK_FAIL_("item %lld: %g vs %g (batch %d)", (long long)(i / no), y[i], ref[i], batch);
        // The same batch written into the buffers the backend hands out
        // (cd_exec_stage_inputs: the arena itself on the cpu), as the daemon does.
        void *host[1];
        CHECK_EQ(cd_exec_stage_inputs(eon, batch, host), 0);
        memcpy(host[0], keep, sizeof(float) * ni * batch);
        for (int64_t i = 0; i < no * batch; i++) y[i] = NAN;
        CHECK_EQ(cd_model_submit_staged(eon, batch, out, err, sizeof err), 0);
        CHECK_EQ(cd_model_wait(eon, err, sizeof err), 0);
        for (int64_t i = 0; i < no * batch; i++)
            if (!(fabsf(y[i] - ref[i]) <= 1e-4f * (1 + fabsf(ref[i]))))
                CD_CHECK_FAIL_("staged, item %lld: %g vs %g", (long long)(i / no), y[i], ref[i]);
    }
    free(x);
    free(keep);
    free(y);
    free(ref);
    cd_exec_free(eon);
    cd_exec_free(eoff);
    cd_model_free(on);
    cd_model_free(off);
}

CD_TEST(runtime_batch_split_auto_choice) {
    char path[64];
    mb_write_small_cnn(path, sizeof path, 1, NULL, NULL);
    cd_model *sparse = load(path, 0, 4, 2, NULL), *dense = load(path, 0, 4, 1, NULL);
    cd_model *single = load(path, 0, 1, 2, NULL), *forced_off = load(path, 1, 4, 2, NULL);
    cd_model *device = load(path, 2, 4, 0, "hip-emu");
    unlink(path);
    CHECK_EQ(summary_split(sparse), 1);     // every conv on the sparse kernels
    CHECK_EQ(summary_split(dense), 0);      // no sparse kernel
    CHECK_EQ(summary_split(single), 0);     // nothing to split
    CHECK_EQ(summary_split(forced_off), 0); // off wins
    CHECK_EQ(summary_split(device), 0);     // device memory: never, even forced
    cd_model_free(sparse);
    cd_model_free(dense);
    cd_model_free(single);
    cd_model_free(forced_off);
    cd_model_free(device);
}
