// libconvd's asynchronous inference against the real daemon (driven by
// tests/integration/test_client_c.py like the other client_daemon_infer_*
// tests: $CONVD_SOCKET, $CONVD_TEST_MODEL = scale2, y = max(0, 2x) on
// x [N, 3, 5, 7]). Results of async calls must equal the synchronous ones
// and the reference, every request must complete exactly once.

#include "client/convd.h"
#include "tests/client/daemon-env.h"
#include "tests/unit/check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

// One request: input, the synchronous answer, what the async one gave.
typedef struct {
    int batch;
    float *x;
    convd_outputs *sync_out; // convd_infer's answer for the same x
    atomic_int completions;
    int status;
    int equal_sync; // 1: async output bytes == sync output bytes
    char errmsg[200];
} req;

static atomic_int g_completed;

static convd_tensor req_tensor(const req *r) {
    size_t n = (size_t)r->batch * 3 * 5 * 7;
    return (convd_tensor){
        .dtype = CONVD_DTYPE_F32, .rank = 4, .shape = {r->batch, 3, 5, 7}, .data = r->x, .nbytes = n * sizeof(float)};
}

static int same_outputs(const convd_outputs *a, const convd_outputs *b) {
    const convd_tensor *ya = convd_outputs_get(a, "y"), *yb = convd_outputs_get(b, "y");
    if (!ya || !yb || a->count != 1 || b->count != 1 || ya->rank != yb->rank || ya->nbytes != yb->nbytes) return 0;
    for (int d = 0; d < ya->rank; d++)
        if (ya->shape[d] != yb->shape[d]) return 0;
    return memcmp(ya->data, yb->data, ya->nbytes) == 0;
}

static void on_done(void *user, int status, convd_outputs *outs, const char *errmsg) {
    req *r = user;
    r->status = status;
    r->equal_sync = status == 0 && same_outputs(outs, r->sync_out);
    snprintf(r->errmsg, sizeof r->errmsg, "%s", errmsg);
    convd_outputs_free(outs);
    atomic_fetch_add(&r->completions, 1);
    atomic_fetch_add(&g_completed, 1);
}

CD_TEST(client_daemon_infer_async_equals_sync_and_reference) {
    convd_conn *c = connect_daemon();
    const char *model = test_model();
    convd_model_list *l;
    CHECK_EQ(convd_models(c, &l), 0);
    int64_t max_batch = 1;
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->models[i].name, model) == 0) max_batch = l->models[i].max_batch;
    convd_model_list_free(l);
    if (max_batch < 1) max_batch = 1;

    int n = cd_test_randi(300, 600);
    req *reqs = calloc((size_t)n, sizeof *reqs);
    const char *name = "x";
    for (int i = 0; i < n; i++) {
        req *r = &reqs[i];
        r->batch = cd_test_randi(1, (int)(max_batch < 4 ? max_batch : 4));
        size_t len = (size_t)r->batch * 3 * 5 * 7;
        r->x = malloc(len * sizeof *r->x);
        for (size_t k = 0; k < len; k++) r->x[k] = cd_test_randf(-4.0f, 4.0f);
        convd_tensor t = req_tensor(r);
        int rc = convd_infer(c, model, 1, &name, &t, 0, NULL, &r->sync_out, 10000);
        if (rc) CD_CHECK_FAIL_("sync infer: %s %s", convd_errname(rc), convd_errmsg(NULL));
        // The synchronous answer is the reference: y = max(0, 2x).
        const convd_tensor *y = convd_outputs_get(r->sync_out, "y");
        CHECK(y != NULL);
        CHECK_EQ(y->nbytes, t.nbytes);
        for (size_t k = 0; k < len; k++) {
            float ref = r->x[k] > 0 ? 2 * r->x[k] : 0;
            CHECK_CLOSE_F32(&((const float *)y->data)[k], &ref, 1, 1e-4);
        }
    }
    // Half by callbacks, half by futures, all in flight together.
    convd_future **f = calloc((size_t)n, sizeof *f);
    for (int i = 0; i < n; i++) {
        convd_tensor t = req_tensor(&reqs[i]);
        int rc = i % 2 ? convd_infer_submit(c, model, 1, &name, &t, 0, NULL, 20000, &f[i])
                       : convd_infer_async(c, model, 1, &name, &t, 0, NULL, 20000, on_done, &reqs[i]);
        if (rc) CD_CHECK_FAIL_("submit %d: %s %s", i, convd_errname(rc), convd_errmsg(NULL));
    }
    for (int i = 1; i < n; i += 2) {
        CHECK_EQ(convd_future_wait(f[i], 20000), 0);
        convd_outputs *outs;
        int rc = convd_future_result(f[i], &outs);
        if (rc) CD_CHECK_FAIL_("future %d: %s %s", i, convd_errname(rc), convd_errmsg(NULL));
        CHECK(same_outputs(outs, reqs[i].sync_out));
        convd_outputs_free(outs);
        convd_future_free(f[i]);
    }
    int want = (n + 1) / 2;
    for (int k = 0; k < 60000 && atomic_load(&g_completed) < want; k++) usleep(1000); // polled; hang guard
    CHECK_EQ(atomic_load(&g_completed), want);
    for (int i = 0; i < n; i += 2) {
        req *r = &reqs[i];
        if (atomic_load(&r->completions) != 1 || r->status != 0 || r->equal_sync != 1)
            CD_CHECK_FAIL_("request %d: %d completions, %s, equal %d, '%s'", i, atomic_load(&r->completions),
                           convd_errname(r->status), r->equal_sync, r->errmsg);
    }
    CHECK_EQ(convd_inflight(c), 0);
    for (int i = 0; i < n; i++) {
        free(reqs[i].x);
        convd_outputs_free(reqs[i].sync_out);
    }
    free(reqs);
    free(f);
    convd_close(c);
}

CD_TEST(client_daemon_infer_async_errors_by_code) {
    convd_conn *c = connect_daemon();
    const char *model = test_model();
    float x[2 * 3 * 5 * 7];
    for (size_t k = 0; k < sizeof x / sizeof *x; k++) x[k] = cd_test_randf(-1, 1);
    const char *name = "x";
    convd_tensor t = {
        .dtype = CONVD_DTYPE_F32, .rank = 4, .shape = {1, 3, 5, 7}, .data = x, .nbytes = 105 * sizeof(float)};
    convd_tensor bad_shape = {
        .dtype = CONVD_DTYPE_F32, .rank = 4, .shape = {1, 3, 7, 5}, .data = x, .nbytes = 105 * sizeof(float)};
    const char *wrong = "nope";
    struct {
        const char *model;
        const char *name;
        const convd_tensor *t;
        int want;
    } cases[] = {
        {"no_such_model", name, &t, CONVD_ENOT_FOUND},
        {model, name, &bad_shape, CONVD_ESHAPE},
        {model, wrong, &t, CONVD_EPARAMS},
        {model, name, &t, 0},
    };
    int nc = (int)(sizeof cases / sizeof *cases);
    convd_future *f[4];
    for (int i = 0; i < nc; i++)
        CHECK_EQ(convd_infer_submit(c, cases[i].model, 1, &cases[i].name, cases[i].t, 0, NULL, 10000, &f[i]), 0);
    for (int i = 0; i < nc; i++) {
        CHECK_EQ(convd_future_wait(f[i], 10000), 0);
        convd_outputs *outs;
        int rc = convd_future_result(f[i], &outs);
        if (rc != cases[i].want)
            CD_CHECK_FAIL_("case %d: %s (%s), want %s", i, convd_errname(rc), convd_errmsg(NULL),
                           convd_errname(cases[i].want));
        CHECK((outs != NULL) == (cases[i].want == 0));
        convd_outputs_free(outs);
        convd_future_free(f[i]);
    }
    convd_close(c);
}
