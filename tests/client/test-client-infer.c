// libconvd inference and the model methods against the real daemon. The
// driver (tests/integration/test_client_c.py) starts it with --models DIR
// holding scale2.onnx (tests/integration/client_models.py: x [N,3,5,7] f32 ->
// y = max(0, 2x)) and passes $CONVD_TEST_MODEL (its registry name).

#include "client/convd.h"
#include "tests/client/daemon-env.h"
#include "tests/unit/check.h"

#include <stdint.h>
#include <unistd.h>

// A random x [batch, 3, 5, 7] with both signs.
static float *random_input(convd_tensor *t, int batch) {
    size_t n = (size_t)batch * 3 * 5 * 7;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = cd_test_randf(-4.0f, 4.0f);
    *t = (convd_tensor){
        .dtype = CONVD_DTYPE_F32, .rank = 4, .shape = {batch, 3, 5, 7}, .data = x, .nbytes = n * sizeof *x};
    return x;
}

// Runs model on a random batch and checks y = max(0, 2x).
static void check_scale2(convd_conn *c, const char *model, int batch) {
    convd_tensor t;
    float *x = random_input(&t, batch);
    const char *name = "x";
    convd_outputs *out;
    int rc = convd_infer(c, model, 1, &name, &t, 0, NULL, &out, 0);
    if (rc) CD_CHECK_FAIL_("infer %s: %s %s", model, convd_errname(rc), convd_errmsg(c));
    CHECK_EQ(out->count, 1);
    const convd_tensor *y = convd_outputs_get(out, "y");
    CHECK(y != NULL);
    CHECK_EQ(y->dtype, CONVD_DTYPE_F32);
    CHECK_EQ(y->rank, 4);
    CHECK_EQ(y->shape[0], batch);
    CHECK_EQ(y->shape[1], 3);
    CHECK_EQ(y->shape[2], 5);
    CHECK_EQ(y->shape[3], 7);
    size_t n = t.nbytes / sizeof(float);
    CHECK_EQ(y->nbytes, t.nbytes);
    CHECK_EQ((uintptr_t)y->data % 64, 0); // convd.h: copied or in place, aligned
    float *ref = malloc(t.nbytes);
    for (size_t i = 0; i < n; i++) ref[i] = x[i] > 0 ? 2 * x[i] : 0;
    CHECK_CLOSE_F32((const float *)y->data, ref, n, 1e-4);
    free(ref);
    free(x);
    convd_outputs_free(out);
}

CD_TEST(client_daemon_infer_unknown_model) {
    convd_conn *c = connect_daemon();
    convd_tensor t;
    float *x = random_input(&t, 1);
    const char *name = "x";
    convd_outputs *out = (convd_outputs *)1;
    CHECK_EQ(convd_infer(c, "no_such_model", 1, &name, &t, 0, NULL, &out, 0), CONVD_ENOT_FOUND);
    CHECK(out == NULL);
    CHECK(strstr(convd_errmsg(c), "no_such_model") != NULL);
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), 0);
    free(x);
    convd_close(c);
}

CD_TEST(client_daemon_infer_matches_reference) {
    convd_conn *c = connect_daemon();
    convd_model_list *l;
    CHECK_EQ(convd_models(c, &l), 0);
    const convd_model_info *m = NULL;
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->models[i].name, test_model()) == 0) m = &l->models[i];
    CHECK(m != NULL);
    CHECK_EQ(m->n_inputs, 1);
    CHECK_STREQ(m->inputs[0].name, "x");
    CHECK_EQ(m->inputs[0].dtype, CONVD_DTYPE_F32);
    CHECK_EQ(m->inputs[0].rank, 4);
    CHECK_EQ(m->n_outputs, 1);
    CHECK_STREQ(m->outputs[0].name, "y");
    int max_batch = m->max_batch > 0 ? (int)m->max_batch : 1;
    convd_model_list_free(l);
    check_scale2(c, test_model(), 1);
    check_scale2(c, test_model(), cd_test_randi(1, max_batch));
    check_scale2(c, test_model(), max_batch);
    convd_close(c);
}

CD_TEST(client_daemon_infer_bad_inputs) {
    convd_conn *c = connect_daemon();
    const char *model = test_model();
    convd_tensor t;
    float *x = random_input(&t, 1);
    convd_outputs *out;
    const char *wrong = "not_x";
    // Wrong input name: missing x and an extra one.
    CHECK_EQ(convd_infer(c, model, 1, &wrong, &t, 0, NULL, &out, 0), CONVD_EPARAMS);
    const char *name = "x";
    // Wrong rank: [3, 5, 7].
    convd_tensor r3 = t;
    r3.rank = 3;
    r3.shape[0] = 3, r3.shape[1] = 5, r3.shape[2] = 7;
    CHECK_EQ(convd_infer(c, model, 1, &name, &r3, 0, NULL, &out, 0), CONVD_ESHAPE);
    // Wrong spatial dims: [1, 3, 7, 5].
    convd_tensor sw = t;
    sw.shape[2] = 7, sw.shape[3] = 5;
    CHECK_EQ(convd_infer(c, model, 1, &name, &sw, 0, NULL, &out, 0), CONVD_ESHAPE);
    // Not f32: the same bytes as i32.
    convd_tensor i32 = t;
    i32.dtype = CONVD_DTYPE_I32;
    CHECK_EQ(convd_infer(c, model, 1, &name, &i32, 0, NULL, &out, 0), CONVD_EDTYPE);
    // The connection still serves.
    check_scale2(c, model, 1);
    free(x);
    convd_close(c);
}

CD_TEST(client_daemon_load_unload) {
    convd_conn *c = connect_daemon();
    const char *path = getenv("CONVD_TEST_MODEL_PATH");
    CHECK(path != NULL);
    char name[64];
    snprintf(name, sizeof name, "copy_%d", cd_test_randi(0, 1 << 20));
    convd_model_list *info;
    int rc = convd_load(c, name, path, 2, &info);
    if (rc) CD_CHECK_FAIL_("load: %s %s", convd_errname(rc), convd_errmsg(c));
    CHECK_EQ(info->count, 1);
    CHECK_STREQ(info->models[0].name, name);
    CHECK_EQ(info->models[0].max_batch, 2);
    CHECK_EQ(info->models[0].n_inputs, 1);
    convd_model_list_free(info);
    check_scale2(c, name, 2);
    // Batch over max_batch.
    convd_tensor t;
    float *x = random_input(&t, 3);
    const char *in = "x";
    convd_outputs *out;
    CHECK_EQ(convd_infer(c, name, 1, &in, &t, 0, NULL, &out, 0), CONVD_ESHAPE);
    free(x);
    CHECK_EQ(convd_unload(c, name), 0);
    x = random_input(&t, 1);
    CHECK_EQ(convd_infer(c, name, 1, &in, &t, 0, NULL, &out, 0), CONVD_ENOT_FOUND);
    free(x);
    CHECK_EQ(convd_unload(c, name), CONVD_ENOT_FOUND);
    // Paths outside the models directory are refused.
    CHECK_EQ(convd_load(c, name, "../escape.onnx", 0, NULL), CONVD_EACCESS);
    CHECK(convd_load(c, name, "no-such-file.onnx", 0, NULL) < 0);
    convd_close(c);
}

// convd_plan: the daemon's plan of the loaded model as JSON, every layer
// measured; an unknown model and a batch over max_batch by their codes.
CD_TEST(client_daemon_plan_model) {
    convd_conn *c = connect_daemon();
    const char *model = test_model();
    char *json = NULL;
    CHECK_EQ(convd_plan(c, model, 2, 3, &json, 60000), 0);
    CHECK(json && json[0] == '{');
    CHECK(strstr(json, "\"layers\"") != NULL);
    CHECK(strstr(json, "\"kernel\"") != NULL);
    CHECK(strstr(json, "\"measured_ms\"") != NULL);
    CHECK(strstr(json, "\"batch\": 2") != NULL);
    CHECK(strstr(json, "\"runs\": 3") != NULL);
    CHECK(strstr(json, "\"cpu\"") != NULL);
    CHECK(strstr(json, "\"measured_ms\": null") == NULL); // every layer was timed
    convd_free(json);
    CHECK_EQ(convd_plan(c, model, 0, 0, &json, 0), 0); // the daemon's defaults
    CHECK(strstr(json, "\"batch\": 1") != NULL && strstr(json, "\"runs\": 10") != NULL);
    convd_free(json);
    json = (char *)1;
    CHECK_EQ(convd_plan(c, "no_such_model", 0, 1, &json, 0), CONVD_ENOT_FOUND);
    CHECK(json == NULL);
    CHECK_EQ(convd_plan(c, model, 100000, 1, &json, 0), CONVD_EPARAMS);
    CHECK_EQ(convd_plan(c, model, 1, 1001, &json, 0), CONVD_EPARAMS);
    CHECK_EQ(convd_plan(c, NULL, 1, 1, &json, 0), CONVD_EPARAMS); // local
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), 0);
    convd_close(c);
}

// An answer of ~1.7 MB (batch 4096: over the reader's 64 KiB buffer), read
// mostly in place into the reader's message buffer; every value checked.
CD_TEST(client_daemon_infer_big_answer) {
    convd_conn *c = connect_daemon();
    const char *path = getenv("CONVD_TEST_MODEL_PATH");
    if (!path) CD_CHECK_FAIL_("CONVD_TEST_MODEL_PATH is not set (run through pytest)");
    convd_model_list *l = NULL;
    int rc = convd_load(c, "scale2_big", path, 4096, &l);
    if (rc) CD_CHECK_FAIL_("load: %s %s", convd_errname(rc), convd_errmsg(c));
    convd_model_list_free(l);
    check_scale2(c, "scale2_big", 4096);
    check_scale2(c, "scale2_big", cd_test_randi(200, 4096));
    convd_close(c);
}

// Big answers are handed out in place (the answer's own buffer, not a copy):
// outputs held while more answers arrive keep their values, and freeing them
// in any order is clean (its buffer goes back to the cache once).
CD_TEST(client_daemon_infer_big_answers_held_across_calls) {
    convd_conn *c = connect_daemon();
    const char *path = getenv("CONVD_TEST_MODEL_PATH");
    if (!path) CD_CHECK_FAIL_("CONVD_TEST_MODEL_PATH is not set (run through pytest)");
    int rc = convd_load(c, "scale2_hold", path, 4096, NULL);
    if (rc) CD_CHECK_FAIL_("load: %s %s", convd_errname(rc), convd_errmsg(c));
    enum { N = 3 };
    convd_tensor t[N];
    float *x[N];
    convd_outputs *out[N];
    const char *name = "x";
    for (int i = 0; i < N; i++) {
        x[i] = random_input(&t[i], cd_test_randi(3000, 4096));
        rc = convd_infer(c, "scale2_hold", 1, &name, &t[i], 0, NULL, &out[i], 0);
        if (rc) CD_CHECK_FAIL_("infer: %s %s", convd_errname(rc), convd_errmsg(c));
    }
    for (int k = 0; k < N; k++) {
        int i = (k + 1) % N; // not in the order received
        const convd_tensor *y = convd_outputs_get(out[i], "y");
        CHECK(y != NULL && y->nbytes == t[i].nbytes);
        CHECK_EQ((uintptr_t)y->data % 64, 0);
        const float *yv = y->data;
        for (size_t j = 0; j < t[i].nbytes / sizeof(float); j++)
            if (yv[j] != (x[i][j] > 0 ? 2 * x[i][j] : 0)) CD_CHECK_FAIL_("output %d differs at %zu", i, j);
        convd_outputs_free(out[i]);
        free(x[i]);
    }
    convd_close(c);
}
