// cd_model_run_traced (runtime.h, runtime/trace.c): the callback sees every
// planned layer once, in order, with its name and its output's NCHW shape at
// the run's batch; the outputs are cd_model_run's; the last layer's traced
// values are the model's output (converted from a blocked layout when the
// plan had one); misuse is refused. On the cpu and hip-emu backends.

#include "core/errors.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/onnx-builder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const cd_model *m;
    int batch;
    int calls, in_order, names_ok, shapes_ok, finite;
    float *last; // the last layer's values
    size_t nlast;
} trace_seen;

static void on_layer(void *ud, int layer, const char *name, const char *label, const float *x, int rank,
                     const int64_t *shape) {
    trace_seen *s = ud;
    cd_layer_info li;
    cd_model_layer(s->m, layer, &li);
    s->in_order &= layer == s->calls;
    s->calls++;
    s->names_ok &= strcmp(name, li.name) == 0 && strcmp(label, li.op) == 0;
    int ok = rank == li.out_rank && shape[0] == s->batch;
    size_t n = 1;
    for (int k = 0; k < rank; k++) {
        if (k > 0) ok &= shape[k] == li.out_shape[k];
        n *= (size_t)shape[k];
    }
    s->shapes_ok &= ok;
    for (size_t i = 0; i < n; i++) s->finite &= isfinite(x[i]) != 0;
    free(s->last);
    s->last = malloc(n * sizeof(float));
    if (s->last) memcpy(s->last, x, n * sizeof(float));
    s->nlast = s->last ? n : 0;
}

static void check_trace(const char *device) {
    char path[64], err[512];
    mb_write_small_cnn(path, sizeof path, 2, NULL, NULL);
    cd_model_opts opts = {.max_batch = cd_test_randi(1, 3), .device = device, .plan = 1};
    cd_model *m;
    if (cd_model_load(path, &opts, &m, err, sizeof err)) CD_CHECK_FAIL_("load on %s: %s", device, err);
    unlink(path);
    const cd_io_desc *id = cd_model_input(m, 0), *od = cd_model_output(m, 0);
    size_t ni = 1, no = 1;
    for (int k = 1; k < id->rank; k++) ni *= (size_t)id->shape[k];
    for (int k = 1; k < od->rank; k++) no *= (size_t)od->shape[k];
    int batch = cd_test_randi(1, opts.max_batch);
    float *x = malloc(ni * batch * sizeof(float)), *y = malloc(no * batch * sizeof(float)),
          *ref = malloc(no * batch * sizeof(float));
    for (size_t i = 0; i < ni * batch; i++) x[i] = cd_test_randf(-1, 1);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(m, &ex), 0);
    const void *in[1] = {x};
    void *out[1] = {y}, *rout[1] = {ref};
    trace_seen s = {m, batch, 0, 1, 1, 1, 1, NULL, 0};
    CHECK_EQ(cd_model_run_traced(ex, batch, in, out, on_layer, &s, err, sizeof err), 0);
    CHECK_EQ(s.calls, cd_model_num_layers(m));
    CHECK(s.in_order);
    CHECK(s.names_ok);
    CHECK(s.shapes_ok);
    CHECK(s.finite);
    CHECK_EQ(cd_model_run(ex, batch, in, rout, err, sizeof err), 0);
    CHECK_CLOSE_F32(y, ref, no * batch, 1e-6);
    CHECK_EQ(s.nlast, no * batch);
    if (s.nlast == no * batch) CHECK_CLOSE_F32(s.last, ref, no * batch, 1e-6);
    // Misuse.
    CHECK_EQ(cd_model_run_traced(ex, batch, in, out, NULL, NULL, err, sizeof err), CD_EPARAMS);
    CHECK_EQ(cd_model_run_traced(ex, opts.max_batch + 1, in, out, on_layer, &s, err, sizeof err), CD_ESHAPE);
    free(s.last);
    cd_exec_free(ex);
    cd_model_free(m);
    free(x);
    free(y);
    free(ref);
}

CD_TEST(runtime_trace_every_layer_cpu) { check_trace("cpu"); }

CD_TEST(runtime_trace_every_layer_hip_emu) { check_trace("hip-emu"); }
