// libconvd against a scripted fake server: timeouts, a late answer, the
// server closing, garbage, error objects, big requests (no daemon needed).

#include "client/convd.h"
#include "core/clock.h"
#include "tests/client/fake-server.h"
#include "tests/unit/check.h"

#include <msgpack.h>
#include <time.h>

// The "msgid" the fake server echoes in its answer to a call.
static long long answered_msgid(const void *res, size_t len) {
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    CHECK_EQ(msgpack_unpack_next(&up, res, len, &(size_t){0}), MSGPACK_UNPACK_SUCCESS);
    long long id = -1;
    const msgpack_object *o = &up.data;
    CHECK_EQ(o->type, MSGPACK_OBJECT_MAP);
    for (uint32_t i = 0; i < o->via.map.size; i++)
        if (o->via.map.ptr[i].key.via.str.size == 5 && memcmp(o->via.map.ptr[i].key.via.str.ptr, "msgid", 5) == 0)
            id = (long long)o->via.map.ptr[i].val.via.u64;
    msgpack_unpacked_destroy(&up);
    return id;
}

CD_TEST(client_timeout_then_late_answer_discarded) {
    int delay = cd_test_randi(250, 400);
    fake_server *s = fake_start(FAKE_ANSWER, delay);
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    void *res;
    size_t len;
    double t0 = cd_now_ms();
    CHECK_EQ(convd_call(c, "hello", NULL, 0, &res, &len, 100), CONVD_ETIMEOUT);
    double dt = cd_now_ms() - t0;
    CHECK(dt >= 95); // not before the timeout (ETIMEOUT itself says it beat the answer)
    CHECK(strstr(convd_errmsg(c), "within 100 ms") != NULL);
    CHECK(res == NULL);
    // The late answer to the first call (msgid 1) must not be taken as the
    // answer to the second one (msgid 2).
    CHECK_EQ(convd_call(c, "hello", NULL, 0, &res, &len, 5000), 0);
    CHECK_EQ(answered_msgid(res, len), 2);
    convd_free(res);
    CHECK_EQ(fake_requests(s), 2);
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_timeout_none_and_default) {
    fake_server *s = fake_start(FAKE_ANSWER, 150);
    convd_opts o;
    convd_opts_init(&o);
    CHECK_EQ(o.timeout_ms, 30000);
    o.timeout_ms = 50; // the connection default
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), &o, &c), 0);
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), CONVD_ETIMEOUT); // uses the 50 ms default
    void *res;
    size_t len;
    CHECK_EQ(convd_call(c, "hello", NULL, 0, &res, &len, CONVD_TIMEOUT_NONE), 0);
    convd_free(res);
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_server_closes_mid_call) {
    fake_server *s = fake_start(FAKE_CLOSE, 0);
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    convd_hello_info h;
    CHECK_EQ(convd_hello(c, &h), CONVD_ECLOSED);
    CHECK(strstr(convd_errmsg(c), "closed") != NULL);
    // Later calls fail at once with the same status.
    double t0 = cd_now_ms();
    CHECK_EQ(convd_hello(c, &h), CONVD_ECLOSED);
    CHECK(cd_now_ms() - t0 < 1000);
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_server_sends_garbage) {
    fake_server *s = fake_start(FAKE_GARBAGE, 0);
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), CONVD_EPROTOCOL);
    CHECK(strstr(convd_errmsg(c), "malformed") != NULL);
    CHECK_EQ(convd_health(c, &h), CONVD_ECLOSED);
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_error_object_code_and_message) {
    fake_server *s = fake_start(FAKE_ERROR, 0);
    fake_set_error(s, "E_SHAPE", "input 'x' has rank 3, expected 4");
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    convd_hello_info h;
    CHECK_EQ(convd_hello(c, &h), CONVD_ESHAPE);
    CHECK_STREQ(convd_errmsg(c), "input 'x' has rank 3, expected 4");
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_error_object_unknown_code) {
    // A code from a newer server maps to E_INTERNAL and keeps its name.
    fake_server *s = fake_start(FAKE_ERROR, 0);
    fake_set_error(s, "E_FROM_THE_FUTURE", "something new");
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    convd_hello_info h;
    CHECK_EQ(convd_hello(c, &h), CONVD_EINTERNAL);
    CHECK(strstr(convd_errmsg(c), "E_FROM_THE_FUTURE") != NULL);
    CHECK(strstr(convd_errmsg(c), "something new") != NULL);
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_send_timeout_breaks_connection) {
    // The server never reads: a 32 MiB request cannot be sent within the
    // timeout. Part of it was written, so the stream is unusable afterwards.
    fake_server *s = fake_start(FAKE_NO_READ, 0);
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    size_t n = 8u << 20;
    float *x = calloc(n, sizeof *x);
    CHECK(x);
    for (size_t i = 0; i < n; i += 4096) x[i] = cd_test_randf(-1, 1);
    convd_tensor t = {
        .dtype = CONVD_DTYPE_F32, .rank = 2, .shape = {8, (int64_t)n / 8}, .data = x, .nbytes = n * sizeof *x};
    const char *name = "x";
    convd_outputs *out;
    double t0 = cd_now_ms();
    CHECK_EQ(convd_infer(c, "m", 1, &name, &t, 0, NULL, &out, 200), CONVD_ETIMEOUT);
    CHECK(cd_now_ms() - t0 < 2000);
    CHECK(strstr(convd_errmsg(c), "sending") != NULL);
    convd_health_info h;
    CHECK_EQ(convd_health(c, &h), CONVD_ECLOSED);
    free(x);
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_infer_big_tensors_round_trip) {
    // The fake server echoes the inputs as outputs: several tensors of
    // random shapes and dtypes, one over the zero-copy threshold, come back
    // equal and 64-byte aligned.
    fake_server *s = fake_start(FAKE_ECHO_INPUTS, 0);
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    enum { N = 3 };
    const char *names[N] = {"big", "small", "ints"};
    convd_tensor t[N];
    void *bufs[N];
    convd_dtype dts[N] = {CONVD_DTYPE_F32, CONVD_DTYPE_F16, CONVD_DTYPE_I64};
    for (int k = 0; k < N; k++) {
        memset(&t[k], 0, sizeof t[k]);
        t[k].dtype = dts[k];
        t[k].rank = cd_test_randi(1, k == 0 ? 3 : 4);
        size_t numel = 1;
        for (int d = 0; d < t[k].rank; d++) {
            t[k].shape[d] = cd_test_randi(1, k == 0 ? 16 : 5);
            numel *= (size_t)t[k].shape[d];
        }
        if (k == 0) { // over the 64 KiB zero-copy threshold of the sender
            numel = numel / (size_t)t[k].shape[0];
            t[k].shape[0] = cd_test_randi(20000, 60000);
            numel *= (size_t)t[k].shape[0];
        }
        t[k].nbytes = numel * convd_dtype_size(dts[k]);
        bufs[k] = malloc(t[k].nbytes);
        for (size_t i = 0; i < t[k].nbytes; i++) ((unsigned char *)bufs[k])[i] = (unsigned char)cd_test_rand();
        t[k].data = bufs[k];
    }
    convd_outputs *out;
    CHECK_EQ(convd_infer(c, "echo", N, names, t, 0, NULL, &out, 10000), 0);
    CHECK_EQ(out->count, N);
    for (int k = 0; k < N; k++) {
        const convd_tensor *o = convd_outputs_get(out, names[k]);
        CHECK(o != NULL);
        CHECK_EQ(o->dtype, t[k].dtype);
        CHECK_EQ(o->rank, t[k].rank);
        for (int d = 0; d < o->rank; d++) CHECK_EQ(o->shape[d], t[k].shape[d]);
        CHECK_EQ(o->nbytes, t[k].nbytes);
        CHECK_EQ((uintptr_t)o->data % 64, 0);
        CHECK(memcmp(o->data, t[k].data, t[k].nbytes) == 0);
        free(bufs[k]);
    }
    CHECK(convd_outputs_get(out, "nope") == NULL);
    convd_outputs_free(out);
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_infer_rejects_bad_tensor_locally) {
    // Checked before anything is sent: the server sees no request.
    fake_server *s = fake_start(FAKE_ANSWER, 0);
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    float x[6] = {1, 2, 3, 4, 5, 6};
    const char *name = "x";
    convd_outputs *out;
    convd_tensor t = {.dtype = CONVD_DTYPE_F32, .rank = 2, .shape = {2, 3}, .data = x, .nbytes = 20}; // needs 24
    CHECK_EQ(convd_infer(c, "m", 1, &name, &t, 0, NULL, &out, 0), CONVD_EPARAMS);
    CHECK(strstr(convd_errmsg(c), "24 bytes") != NULL);
    t.nbytes = 24;
    t.shape[1] = 0;
    CHECK_EQ(convd_infer(c, "m", 1, &name, &t, 0, NULL, &out, 0), CONVD_EPARAMS);
    t.shape[1] = 3;
    t.rank = 9;
    CHECK_EQ(convd_infer(c, "m", 1, &name, &t, 0, NULL, &out, 0), CONVD_EPARAMS);
    t.rank = 2;
    t.dtype = (convd_dtype)99;
    CHECK_EQ(convd_infer(c, "m", 1, &name, &t, 0, NULL, &out, 0), CONVD_EPARAMS);
    CHECK_EQ(fake_requests(s), 0);
    convd_close(c);
    fake_stop(s);
}

CD_TEST(client_call_rejects_bad_params_locally) {
    fake_server *s = fake_start(FAKE_ANSWER, 0);
    convd_conn *c;
    CHECK_EQ(convd_connect(fake_path(s), NULL, &c), 0);
    void *res;
    size_t len;
    // Two values, a truncated value, and an over-long method name.
    CHECK_EQ(convd_call(c, "hello", "\x80\x80", 2, &res, &len, 0), CONVD_EPARAMS);
    CHECK_EQ(convd_call(c, "hello", "\x81\xa1", 2, &res, &len, 0), CONVD_EPARAMS);
    char longname[80];
    memset(longname, 'm', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK_EQ(convd_call(c, longname, NULL, 0, &res, &len, 0), CONVD_EPARAMS);
    CHECK_EQ(fake_requests(s), 0);
    // The connection is fine afterwards.
    CHECK_EQ(convd_call(c, "hello", "\x80", 1, &res, &len, 0), 0);
    convd_free(res);
    convd_close(c);
    fake_stop(s);
}
