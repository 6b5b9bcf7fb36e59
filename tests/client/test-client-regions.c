// libconvd shared-memory regions: the local checks (a region is a sealed
// memfd), and inference through regions against the real daemon (the driver,
// tests/integration/test_client_c.py, loads scale2: y = max(0, 2x) on
// x [N, 3, 5, 7]), from several threads on one connection.

#include "client/convd.h"
#include "tests/client/daemon-env.h"
#include "tests/unit/check.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#define ITEM_BYTES (3 * 5 * 7 * sizeof(float))

CD_TEST(client_region_create_is_sealed) {
    convd_region *r = NULL;
    CHECK_EQ(convd_region_create(0, &r), CONVD_EPARAMS);
    CHECK(r == NULL);
    CHECK_EQ(convd_region_create(12345, &r), 0);
    CHECK_EQ(convd_region_size(r), 12345);
    int seals = fcntl(convd_region_fd(r), F_GET_SEALS);
    CHECK((seals & F_SEAL_SHRINK) && (seals & F_SEAL_GROW) && (seals & F_SEAL_SEAL));
    CHECK(ftruncate(convd_region_fd(r), 0) != 0); // the seal holds
    memset(convd_region_data(r), 0x5a, 12345);
    convd_region_free(r);
    convd_region_free(NULL);
}

CD_TEST(client_region_bad_names_are_eparams) {
    convd_region *r = NULL;
    CHECK_EQ(convd_region_create(64, &r), 0);
    // Checked before anything is sent: no connection needed for these.
    CHECK_EQ(convd_region_register(NULL, r, "a", 0), CONVD_EPARAMS);
    convd_region_free(r);
}

// Runs scale2 on `batch` items read from r at in_off, written at out_off.
static int infer_in_region(convd_conn *c, convd_region *r, const char *name, int batch, size_t in_off, size_t out_off) {
    const char *in_name = "x", *out_name = "y";
    convd_tensor t = {.dtype = CONVD_DTYPE_F32, .rank = 4, .shape = {batch, 3, 5, 7}, .nbytes = batch * ITEM_BYTES};
    convd_region_ref in = {name, in_off, t.nbytes}, out = {name, out_off, t.nbytes};
    convd_outputs *o = NULL;
    int rc = convd_infer_regions(c, test_model(), 1, &in_name, &t, &in, 1, &out_name, &out, &o, 0);
    if (rc == 0) {
        const convd_tensor *y = convd_outputs_get(o, "y");
        CHECK(y != NULL);
        CHECK(y->data == NULL); // in the region
        CHECK_EQ(y->shape[0], batch);
        CHECK_EQ(y->nbytes, t.nbytes);
    }
    convd_outputs_free(o);
    (void)r;
    return rc;
}

static void check_scale2(const float *x, const float *y, size_t n) {
    float *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = x[i] > 0 ? 2 * x[i] : 0;
    CHECK_CLOSE_F32(y, ref, n, 1e-4);
    free(ref);
}

CD_TEST(client_daemon_infer_regions_in_and_out) {
    convd_conn *c = connect_daemon();
    convd_region *r = NULL;
    CHECK_EQ(convd_region_create(1 << 16, &r), 0);
    CHECK_EQ(convd_region_register(c, r, "io", 0), 0);
    CHECK_EQ(convd_region_register(c, r, "io", 0), CONVD_EEXISTS);
    float *x = convd_region_data(r);
    size_t n = 2 * ITEM_BYTES / sizeof(float);
    for (size_t i = 0; i < n; i++) x[i] = cd_test_randf(-4.0f, 4.0f);
    CHECK_EQ(infer_in_region(c, r, "io", 2, 0, 4096), 0);
    check_scale2(x, (const float *)((char *)x + 4096), n);
    // Past the end, and overlapping its own input: refused, connection kept.
    CHECK_EQ(infer_in_region(c, r, "io", 2, (1 << 16) - ITEM_BYTES, 4096), CONVD_EREGION);
    CHECK_EQ(infer_in_region(c, r, "io", 2, 0, ITEM_BYTES), CONVD_EREGION);
    CHECK_EQ(infer_in_region(c, r, "nope", 1, 0, 4096), CONVD_ENOT_FOUND);
    CHECK_EQ(convd_region_unregister(c, "io", 0), 0);
    CHECK_EQ(convd_region_unregister(c, "io", 0), CONVD_ENOT_FOUND);
    CHECK_EQ(infer_in_region(c, r, "io", 1, 0, 4096), CONVD_ENOT_FOUND);
    convd_close(c);
    convd_region_free(r);
}

typedef struct {
    convd_conn *c;
    convd_region *r;
    int idx;
    int failures;
} thread_arg;

// Each thread its own part of the shared region: input at idx*8K, output at
// idx*8K + 4K.
static void *infer_thread(void *p) {
    thread_arg *a = p;
    float *x = (float *)((char *)convd_region_data(a->r) + (size_t)a->idx * 8192);
    size_t n = ITEM_BYTES / sizeof(float);
    for (int k = 0; k < 50; k++) {
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i + k + a->idx) % 7) - 3.0f;
        if (infer_in_region(a->c, a->r, "shared", 1, (size_t)a->idx * 8192, (size_t)a->idx * 8192 + 4096) != 0) {
            a->failures++;
            continue;
        }
        const float *y = (const float *)((char *)x + 4096);
        for (size_t i = 0; i < n; i++)
            if (y[i] != (x[i] > 0 ? 2 * x[i] : 0)) a->failures++;
    }
    return NULL;
}

CD_TEST(client_daemon_infer_regions_threads_share_one_connection) {
    convd_conn *c = connect_daemon();
    convd_region *r = NULL;
    enum { NT = 4 };
    CHECK_EQ(convd_region_create(NT * 8192, &r), 0);
    CHECK_EQ(convd_region_register(c, r, "shared", 0), 0);
    pthread_t th[NT];
    thread_arg args[NT];
    for (int i = 0; i < NT; i++) {
        args[i] = (thread_arg){c, r, i, 0};
        CHECK_EQ(pthread_create(&th[i], NULL, infer_thread, &args[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(args[i].failures, 0);
    }
    convd_close(c);
    convd_region_free(r);
}
