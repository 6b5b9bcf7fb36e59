// libconvd against the real daemon at $CONVD_SOCKET (started by
// tests/integration/test_client_c.py): the status methods, the generic call,
// errors that keep the connection open, many threads on one connection.

#include "client/convd.h"
#include "proto/params.h"
#include "tests/unit/check.h"

#include <msgpack.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static convd_conn *connect_daemon(void) {
    const char *path = getenv("CONVD_SOCKET");
    if (!path) CD_CHECK_FAIL_("CONVD_SOCKET is not set (run through pytest)");
    convd_conn *c = NULL;
    int rc = convd_connect(path, NULL, &c);
    if (rc != 0) CD_CHECK_FAIL_("connect %s: %s", path, convd_errmsg(NULL));
    return c;
}

CD_TEST(client_daemon_hello) {
    convd_conn *c = connect_daemon();
    convd_hello_info h;
    CHECK_EQ(convd_hello(c, &h), 0);
    CHECK_STREQ(h.server, "convd");
    CHECK_EQ(h.protocol, CONVD_PROTOCOL);
    CHECK(h.version[0] != 0);
    CHECK(h.device[0] != 0);
    CHECK(convd_has_feature(&h, "cpu"));
    CHECK(!convd_has_feature(&h, "cp"));
    CHECK(!convd_has_feature(&h, "no-such-feature"));
    convd_close(c);
}

CD_TEST(client_daemon_health) {
    convd_conn *c = connect_daemon();
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), 0);
    CHECK_STREQ(h.status, "ok");
    CHECK(h.uptime_s >= 0 && h.uptime_s < 3600);
    CHECK(h.models >= 0);
    convd_close(c);
}

CD_TEST(client_daemon_models) {
    convd_conn *c = connect_daemon();
    convd_model_list *l;
    CHECK_EQ(convd_models(c, &l), 0);
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), 0);
    CHECK_EQ((long long)l->count, h.models);
    for (size_t i = 0; i < l->count; i++) {
        CHECK(l->models[i].name != NULL);
        CHECK(l->models[i].n_inputs >= 1);
        // The daemon reports the int8 pick of every model: "none" for these float32 ones.
        CHECK(l->models[i].int8_pick != NULL);
        CHECK(strcmp(l->models[i].int8_pick, "dense") == 0 || strcmp(l->models[i].int8_pick, "sparse") == 0 ||
              strcmp(l->models[i].int8_pick, "none") == 0);
    }
    convd_model_list_free(l);
    convd_close(c);
}

CD_TEST(client_daemon_stats_counts_requests) {
    convd_conn *c = connect_daemon();
    char *json;
    CHECK_EQ(convd_stats(c, &json), 0);
    CHECK(json[0] == '{');
    CHECK(strstr(json, "\"uptime_s\"") != NULL);
    CHECK(strstr(json, "\"requests\"") != NULL);
    convd_free(json);

    // requests.total grows by at least the calls made in between.
    long long before = -1, after = -1;
    for (int pass = 0; pass < 2; pass++) {
        void *res;
        size_t len;
        CHECK_EQ(convd_call(c, "stats", NULL, 0, &res, &len, 0), 0);
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        CHECK_EQ(msgpack_unpack_next(&up, res, len, &(size_t){0}), MSGPACK_UNPACK_SUCCESS);
        const msgpack_object *t = cd_map_get(cd_map_get(&up.data, "requests"), "total");
        CHECK(t && t->type == MSGPACK_OBJECT_POSITIVE_INTEGER);
        *(pass ? &after : &before) = (long long)t->via.u64;
        msgpack_unpacked_destroy(&up);
        convd_free(res);
        if (pass == 0) {
            convd_hello_info h;
            for (int i = 0; i < 5; i++) CHECK_EQ(convd_hello(c, &h), 0);
        }
    }
    CHECK(after >= before + 6);
    convd_close(c);
}

CD_TEST(client_daemon_unknown_method_keeps_connection) {
    convd_conn *c = connect_daemon();
    void *res = (void *)1;
    size_t len = 1;
    CHECK_EQ(convd_call(c, "no_such_method", NULL, 0, &res, &len, 0), CONVD_EMETHOD);
    CHECK(res == NULL && len == 0);
    CHECK(strlen(convd_errmsg(c)) > 0);
    CHECK_STREQ(convd_errname(CONVD_EMETHOD), "E_METHOD");
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), 0);
    CHECK_STREQ(h.status, "ok");
    convd_close(c);
}

CD_TEST(client_daemon_call_with_params_map) {
    convd_conn *c = connect_daemon();
    // health with an explicit empty map, as raw msgpack.
    void *res;
    size_t len;
    CHECK_EQ(convd_call(c, "health", "\x80", 1, &res, &len, 0), 0);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    CHECK_EQ(msgpack_unpack_next(&up, res, len, &(size_t){0}), MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *st = cd_map_get(&up.data, "status");
    CHECK(st && st->type == MSGPACK_OBJECT_STR);
    msgpack_unpacked_destroy(&up);
    convd_free(res);
    // unload with params that are not a map: E_PARAMS (or E_METHOD from a
    // daemon without model methods); the connection stays usable.
    int rc = convd_call(c, "unload", "\x05", 1, &res, &len, 0);
    CHECK(rc == CONVD_EPARAMS || rc == CONVD_EMETHOD);
    convd_hello_info h;
    CHECK_EQ(convd_hello(c, &h), 0);
    convd_close(c);
}

// ---- many threads, one connection -------------------------------------------

enum { N_THREADS = 8, N_CALLS = 200 };

typedef struct {
    convd_conn *c;
    int id;
    atomic_int *ok;
    char fail[256];
} thread_ctx;

static void *hammer(void *arg) {
    thread_ctx *t = arg;
    for (int i = 0; i < N_CALLS; i++) {
        int kind = (t->id + i) % 4;
        int rc;
        if (kind == 0) {
            convd_hello_info h;
            rc = convd_hello(t->c, &h);
            if (rc == 0 && strcmp(h.server, "convd") != 0) rc = -100;
        } else if (kind == 1) {
            convd_health_info h;
            rc = convd_health(t->c, &h);
            if (rc == 0 && strcmp(h.status, "ok") != 0) rc = -101;
        } else if (kind == 2) {
            // Each thread asks for a method named after itself: the error
            // message must name this thread's method, not another's.
            char m[32], want[32];
            snprintf(m, sizeof m, "nope_%d_%d", t->id, i);
            void *res;
            size_t len;
            rc = convd_call(t->c, m, NULL, 0, &res, &len, 0);
            snprintf(want, sizeof want, "%s", m);
            if (rc == CONVD_EMETHOD && strstr(convd_errmsg(t->c), want))
                rc = 0;
            else if (rc == CONVD_EMETHOD)
                rc = -102;
            else if (rc == 0)
                rc = -103;
        } else {
            convd_model_list *l;
            rc = convd_models(t->c, &l);
            if (rc == 0) convd_model_list_free(l);
        }
        if (rc != 0) {
            snprintf(t->fail, sizeof t->fail, "thread %d call %d kind %d: %d %s", t->id, i, kind, rc,
                     convd_errmsg(t->c));
            return NULL;
        }
        atomic_fetch_add(t->ok, 1);
    }
    return NULL;
}

CD_TEST(client_daemon_threads_share_one_connection) {
    convd_conn *c = connect_daemon();
    atomic_int ok = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th[N_THREADS];
    thread_ctx ctx[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        ctx[i] = (thread_ctx){.c = c, .id = i, .ok = &ok};
        CHECK_EQ(pthread_create(&th[i], NULL, hammer, &ctx[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("%d threads x %d calls on one connection: %.3f s, %.0f calls/s\n", N_THREADS, N_CALLS, dt,
           N_THREADS * N_CALLS / dt);
    for (int i = 0; i < N_THREADS; i++)
        if (ctx[i].fail[0]) CD_CHECK_FAIL_("%s", ctx[i].fail);
    CHECK_EQ(atomic_load(&ok), N_THREADS * N_CALLS);
    convd_close(c);
}

CD_TEST(client_daemon_stopped_gives_closed) {
    // The pytest driver stops the daemon after "ready": calls then fail with
    // CONVD_ECLOSED (never hang, never another code), and a new connect fails
    // with CONVD_ECONNECT.
    convd_conn *c = connect_daemon();
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), 0);
    printf("ready\n");
    fflush(stdout);
    int rc = 0;
    // Polls for the close; 2400 x 25 ms only guards against a hang.
    for (int i = 0; i < 2400 && (rc == 0 || rc == CONVD_ESHUTDOWN); i++) {
        rc = convd_health(c, &h); // ok or draining until the daemon closes
        if (rc == 0 || rc == CONVD_ESHUTDOWN) usleep(25 * 1000);
    }
    CHECK_EQ(rc, CONVD_ECLOSED);
    CHECK_EQ(convd_health(c, &h), CONVD_ECLOSED);
    convd_close(c);
    for (int i = 0; i < 2400; i++) { // the socket file goes away as it exits (polled)
        convd_conn *c2;
        rc = convd_connect(getenv("CONVD_SOCKET"), NULL, &c2);
        if (rc != 0) break;
        convd_close(c2);
        usleep(25 * 1000);
    }
    CHECK_EQ(rc, CONVD_ECONNECT);
}
