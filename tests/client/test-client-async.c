// libconvd's asynchronous calls (convd_infer_async, futures, the in-flight
// limit) against the scripted server of tests/client/fake-server.c: its echo
// modes (answers out of order, holds answers, cuts the connection) and its
// error mode. No daemon needed.
//
// Every test counts completions per request: each must be exactly 1.

#include "client/convd.h"
#include "core/clock.h"
#include "tests/client/fake-server.h"
#include "tests/unit/check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static convd_conn *connect_to(const char *path) {
    convd_conn *c = NULL;
    if (convd_connect(path, NULL, &c) != 0) CD_CHECK_FAIL_("connect %s: %s", path, convd_errmsg(NULL));
    return c;
}

// One request of a test: its input, and what its completion reported.
typedef struct {
    int len;                // floats in x
    float *x;               // the input (random, both signs)
    atomic_int completions; // times the callback ran for it
    int status;             // the status it got
    int echoed_ok;          // 1: the outputs equal x exactly
    char errmsg[160];       // its message on failure
} req;

// Shared state of a test's requests.
typedef struct {
    req *reqs;
    int n;
    atomic_int completed; // sum of completions
    pthread_mutex_t mu;
    pthread_cond_t cond; // signalled on each completion
} batch;

static void batch_init(batch *b, int n) {
    b->reqs = calloc((size_t)n, sizeof *b->reqs);
    CHECK(b->reqs);
    b->n = n;
    atomic_init(&b->completed, 0);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cond, NULL);
    for (int i = 0; i < n; i++) {
        req *r = &b->reqs[i];
        r->len = cd_test_randi(1, 64);
        r->x = malloc((size_t)r->len * sizeof *r->x);
        for (int k = 0; k < r->len; k++) r->x[k] = cd_test_randf(-10.0f, 10.0f);
        r->x[0] = (float)i; // tells requests apart even with equal random data
        atomic_init(&r->completions, 0);
        r->status = 1; // "not completed"
    }
}

static void batch_free(batch *b) {
    for (int i = 0; i < b->n; i++) free(b->reqs[i].x);
    free(b->reqs);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cond);
}

static convd_tensor req_tensor(const req *r) {
    return (convd_tensor){.dtype = CONVD_DTYPE_F32,
                          .rank = 2,
                          .shape = {1, r->len},
                          .data = r->x,
                          .nbytes = (size_t)r->len * sizeof(float)};
}

// 1 when outs holds exactly one f32 tensor "x" equal to r's input.
static int echo_matches(const req *r, const convd_outputs *outs) {
    const convd_tensor *y = convd_outputs_get(outs, "x");
    if (!outs || outs->count != 1 || !y || y->dtype != CONVD_DTYPE_F32 || y->rank != 2 || y->shape[1] != r->len ||
        y->nbytes != (size_t)r->len * sizeof(float))
        return 0;
    return memcmp(y->data, r->x, y->nbytes) == 0;
}

// The user pointer of a callback: the batch and the request index.
typedef struct {
    batch *b;
    int i;
} cb_arg;

static void on_done(void *user, int status, convd_outputs *outs, const char *errmsg) {
    cb_arg *a = user;
    req *r = &a->b->reqs[a->i];
    r->status = status;
    r->echoed_ok = status == 0 && echo_matches(r, outs);
    snprintf(r->errmsg, sizeof r->errmsg, "%s", errmsg ? errmsg : "(null)");
    if (status != 0 && outs != NULL) r->echoed_ok = -1; // contract: outs NULL on failure
    convd_outputs_free(outs);
    atomic_fetch_add(&r->completions, 1);
    pthread_mutex_lock(&a->b->mu);
    atomic_fetch_add(&a->b->completed, 1);
    pthread_cond_broadcast(&a->b->cond);
    pthread_mutex_unlock(&a->b->mu);
}

// Submits request i of b through convd_infer_async.
static int submit(convd_conn *c, batch *b, cb_arg *args, int i, int timeout_ms) {
    args[i] = (cb_arg){b, i};
    convd_tensor t = req_tensor(&b->reqs[i]);
    const char *name = "x";
    return convd_infer_async(c, "echo", 1, &name, &t, 0, NULL, timeout_ms, on_done, &args[i]);
}

// Waits until n completions were counted (or timeout_ms passes).
static int wait_completed(batch *b, int n, int timeout_ms) {
    double end = cd_now_ms() + timeout_ms;
    pthread_mutex_lock(&b->mu);
    while (atomic_load(&b->completed) < n && cd_now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&b->cond, &b->mu, &ts);
    }
    pthread_mutex_unlock(&b->mu);
    return atomic_load(&b->completed);
}

// ---- many requests, many threads --------------------------------------------

typedef struct {
    convd_conn *c;
    batch *b;
    cb_arg *args;
    int from, to;    // request range of this thread
    int use_futures; // 0: callbacks; 1: submit + wait
} submitter;

static void *submit_thread(void *arg) {
    submitter *s = arg;
    if (!s->use_futures) {
        for (int i = s->from; i < s->to; i++) {
            int rc = submit(s->c, s->b, s->args, i, 20000);
            if (rc) CD_CHECK_FAIL_("submit %d: %s %s", i, convd_errname(rc), convd_errmsg(NULL));
        }
        return NULL;
    }
    // Futures: a window of 64 outstanding, waited for in submission order.
    enum { WINDOW = 64 };
    convd_future *f[WINDOW] = {0};
    for (int i = s->from; i < s->to + WINDOW; i++) {
        int slot = (i - s->from) % WINDOW;
        if (f[slot]) {
            int j = i - WINDOW;
            req *r = &s->b->reqs[j];
            CHECK_EQ(convd_future_wait(f[slot], CONVD_TIMEOUT_NONE), 0);
            CHECK_EQ(convd_future_done(f[slot]), 1);
            convd_outputs *outs;
            r->status = convd_future_result(f[slot], &outs);
            r->echoed_ok = r->status == 0 && echo_matches(r, outs);
            convd_outputs_free(outs);
            // The outputs move out once.
            CHECK_EQ(convd_future_result(f[slot], &outs), 0);
            CHECK(outs == NULL);
            atomic_fetch_add(&r->completions, 1);
            atomic_fetch_add(&s->b->completed, 1);
            convd_future_free(f[slot]);
            f[slot] = NULL;
        }
        if (i < s->to) {
            convd_tensor t = req_tensor(&s->b->reqs[i]);
            const char *name = "x";
            int rc = convd_infer_submit(s->c, "echo", 1, &name, &t, 0, NULL, 20000, &f[slot]);
            if (rc) CD_CHECK_FAIL_("submit %d: %s %s", i, convd_errname(rc), convd_errmsg(NULL));
        }
    }
    return NULL;
}

// Runs n requests from nthreads threads on one connection and checks that
// each completed exactly once with its own input echoed back.
static void run_many(int n, int nthreads, int use_futures) {
    fake_server *srv = fake_start(FAKE_ECHO_REVERSED, 0);
    convd_conn *c = connect_to(fake_path(srv));
    batch b;
    batch_init(&b, n);
    cb_arg *args = calloc((size_t)n, sizeof *args);
    submitter *st = calloc((size_t)nthreads, sizeof *st);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    for (int t = 0; t < nthreads; t++) {
        st[t] =
            (submitter){c, &b, args, n * t / nthreads, n * (t + 1) / nthreads, use_futures < 0 ? t % 2 : use_futures};
        CHECK_EQ(pthread_create(&th[t], NULL, submit_thread, &st[t]), 0);
    }
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    CHECK_EQ(wait_completed(&b, n, 30000), n);
    sleep_ms(20); // a chance for a duplicate completion to show (absence check)
    CHECK_EQ(atomic_load(&b.completed), n);
    for (int i = 0; i < n; i++) {
        req *r = &b.reqs[i];
        if (atomic_load(&r->completions) != 1 || r->status != 0 || r->echoed_ok != 1)
            CD_CHECK_FAIL_("request %d: %d completions, status %s, echo %d, '%s'", i, atomic_load(&r->completions),
                           convd_errname(r->status), r->echoed_ok, r->errmsg);
    }
    CHECK_EQ(convd_inflight(c), 0);
    CHECK_EQ(fake_requests(srv), n);
    CHECK_EQ(fake_answers(srv), n);
    convd_close(c);
    fake_stop(srv);
    free(th);
    free(st);
    free(args);
    batch_free(&b);
}

CD_TEST(client_async_thousands_of_callbacks_complete_once) { run_many(cd_test_randi(4000, 6000), 4, 0); }

CD_TEST(client_async_futures_from_threads_complete_once) { run_many(cd_test_randi(2000, 3000), 3, 1); }

CD_TEST(client_async_callbacks_and_futures_mixed_with_sync_calls) {
    // Sync calls on the same connection while async traffic flows.
    fake_server *srv = fake_start(FAKE_ECHO_REVERSED, 0);
    convd_conn *c = connect_to(fake_path(srv));
    int n = 600;
    batch b;
    batch_init(&b, n);
    cb_arg *args = calloc((size_t)n, sizeof *args);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(submit(c, &b, args, i, 20000), 0);
        if (i % 50 == 0) {
            // A synchronous infer in between: its own answer, not another's.
            req *r = &b.reqs[cd_test_randi(0, i)];
            convd_tensor t = req_tensor(r);
            const char *name = "x";
            convd_outputs *outs;
            CHECK_EQ(convd_infer(c, "echo", 1, &name, &t, 0, NULL, &outs, 5000), 0);
            CHECK(echo_matches(r, outs));
            convd_outputs_free(outs);
        }
    }
    CHECK_EQ(wait_completed(&b, n, 20000), n);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(atomic_load(&b.reqs[i].completions), 1);
        CHECK_EQ(b.reqs[i].echoed_ok, 1);
    }
    convd_close(c);
    fake_stop(srv);
    free(args);
    batch_free(&b);
}

// ---- out of order -----------------------------------------------------------

CD_TEST(client_async_answers_out_of_order_reach_their_request) {
    // The server holds everything, then answers in reverse order.
    fake_server *srv = fake_start(FAKE_ECHO_HELD, 0);
    convd_conn *c = connect_to(fake_path(srv));
    int n = cd_test_randi(50, 200);
    batch b;
    batch_init(&b, n);
    cb_arg *args = calloc((size_t)n, sizeof *args);
    convd_future *f[8];
    const char *name = "x";
    convd_tensor ft = req_tensor(&b.reqs[0]);
    for (int k = 0; k < 8; k++) CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &ft, 0, NULL, 20000, &f[k]), 0);
    for (int i = 0; i < n; i++) CHECK_EQ(submit(c, &b, args, i, 20000), 0);
    CHECK_EQ(fake_wait_requests(srv, n + 8, 60000), n + 8);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&b.completed), 0); // nothing answered yet
    CHECK_EQ(convd_future_done(f[0]), 0);
    CHECK_EQ(convd_future_wait(f[0], 0), CONVD_ETIMEOUT); // 0: only checks
    CHECK_EQ(convd_inflight(c), n + 8);
    fake_release(srv);
    CHECK_EQ(wait_completed(&b, n, 10000), n);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(atomic_load(&b.reqs[i].completions), 1);
        CHECK_EQ(b.reqs[i].echoed_ok, 1);
    }
    for (int k = 0; k < 8; k++) {
        CHECK_EQ(convd_future_wait(f[k], 10000), 0);
        convd_outputs *outs;
        CHECK_EQ(convd_future_result(f[k], &outs), 0);
        CHECK(echo_matches(&b.reqs[0], outs));
        convd_outputs_free(outs);
        convd_future_free(f[k]);
    }
    convd_close(c);
    fake_stop(srv);
    free(args);
    batch_free(&b);
}

// ---- timeouts ---------------------------------------------------------------

CD_TEST(client_async_timeout_completes_once_late_answer_dropped) {
    fake_server *srv = fake_start(FAKE_ECHO_HELD, 0);
    convd_conn *c = connect_to(fake_path(srv));
    int n = cd_test_randi(100, 300);
    int timeout = cd_test_randi(60, 150);
    batch b;
    batch_init(&b, n);
    cb_arg *args = calloc((size_t)n, sizeof *args);
    double t0 = cd_now_ms();
    for (int i = 0; i < n; i++) CHECK_EQ(submit(c, &b, args, i, timeout), 0);
    // A request without a local timeout is not expired with the others.
    convd_future *forever;
    const char *name = "x";
    convd_tensor t = req_tensor(&b.reqs[0]);
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t, 0, NULL, CONVD_TIMEOUT_NONE, &forever), 0);
    CHECK_EQ(wait_completed(&b, n, 10000), n);
    double dt = cd_now_ms() - t0;
    CHECK(dt >= timeout - 5); // not before the timeout; wait_completed guards a hang
    for (int i = 0; i < n; i++) {
        req *r = &b.reqs[i];
        CHECK_EQ(atomic_load(&r->completions), 1);
        CHECK_EQ(r->status, CONVD_ETIMEOUT);
        CHECK_EQ(r->echoed_ok, 0);
        CHECK(strstr(r->errmsg, "no answer to 'infer' within") != NULL);
    }
    CHECK_EQ(convd_future_wait(forever, 50), CONVD_ETIMEOUT);
    CHECK_EQ(convd_inflight(c), 1);
    // The late answers arrive now: dropped, never a second completion.
    fake_release(srv);
    CHECK_EQ(convd_future_wait(forever, 10000), 0);
    convd_outputs *outs;
    CHECK_EQ(convd_future_result(forever, &outs), 0);
    CHECK(echo_matches(&b.reqs[0], outs));
    convd_outputs_free(outs);
    convd_future_free(forever);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&b.completed), n);
    // The connection is still usable.
    CHECK_EQ(submit(c, &b, args, 0, 5000), 0);
    CHECK_EQ(wait_completed(&b, n + 1, 5000), n + 1);
    CHECK_EQ(b.reqs[0].status, 0);
    CHECK_EQ(b.reqs[0].echoed_ok, 1);
    convd_close(c);
    fake_stop(srv);
    free(args);
    batch_free(&b);
}

CD_TEST(client_async_earlier_deadline_wakes_the_reader) {
    // A long deadline first, then a short one: the short one must expire on
    // time, not when the long one does.
    fake_server *srv = fake_start(FAKE_ECHO_HELD, 0);
    convd_conn *c = connect_to(fake_path(srv));
    batch b;
    batch_init(&b, 2);
    cb_arg args[2];
    CHECK_EQ(submit(c, &b, args, 0, 5000), 0);
    // Give the reader time to go to sleep until the 5 s deadline (if it has
    // not, the test checks less, never fails wrongly).
    sleep_ms(30);
    double t0 = cd_now_ms();
    CHECK_EQ(submit(c, &b, args, 1, 80), 0);
    CHECK_EQ(wait_completed(&b, 1, 4500), 1);
    double dt = cd_now_ms() - t0;
    // Not before its own deadline; well before the long one (5 s), however
    // loaded the machine: that is what tells the two apart.
    CHECK(dt >= 75 && dt < 4500);
    CHECK_EQ(b.reqs[1].status, CONVD_ETIMEOUT);
    CHECK_EQ(atomic_load(&b.reqs[0].completions), 0);
    fake_release(srv);
    CHECK_EQ(wait_completed(&b, 2, 5000), 2);
    CHECK_EQ(b.reqs[0].status, 0);
    convd_close(c);
    fake_stop(srv);
    batch_free(&b);
}

// ---- connection loss --------------------------------------------------------

CD_TEST(client_async_server_closes_mid_flight) {
    fake_server *srv = fake_start(FAKE_ECHO_HELD, 0);
    convd_conn *c = connect_to(fake_path(srv));
    int n = cd_test_randi(100, 400), answered = cd_test_randi(1, 50);
    batch b;
    batch_init(&b, n);
    cb_arg *args = calloc((size_t)n, sizeof *args);
    convd_future *f;
    const char *name = "x";
    convd_tensor t = req_tensor(&b.reqs[0]);
    for (int i = 0; i < n; i++) CHECK_EQ(submit(c, &b, args, i, CONVD_TIMEOUT_NONE), 0);
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t, 0, NULL, CONVD_TIMEOUT_NONE, &f), 0);
    CHECK_EQ(fake_wait_requests(srv, n + 1, 60000), n + 1);
    // The first `answered` get their answer, then the server hangs up.
    fake_answer_then_close(srv, answered);
    CHECK_EQ(wait_completed(&b, n, 10000), n);
    for (int i = 0; i < n; i++) {
        req *r = &b.reqs[i];
        CHECK_EQ(atomic_load(&r->completions), 1);
        if (i < answered) {
            CHECK_EQ(r->status, 0);
            CHECK_EQ(r->echoed_ok, 1);
        } else {
            CHECK_EQ(r->status, CONVD_ECLOSED);
            CHECK_EQ(r->echoed_ok, 0);
            CHECK(strstr(r->errmsg, "closed") != NULL);
        }
    }
    CHECK_EQ(convd_future_wait(f, 5000), 0);
    CHECK_EQ(convd_future_result(f, NULL), CONVD_ECLOSED);
    CHECK(strstr(convd_errmsg(NULL), "closed") != NULL);
    convd_future_free(f);
    CHECK_EQ(convd_inflight(c), 0);
    // Later requests fail at once, with no completion.
    CHECK_EQ(submit(c, &b, args, 0, 1000), CONVD_ECLOSED);
    convd_future *g = (convd_future *)1;
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t, 0, NULL, 1000, &g), CONVD_ECLOSED);
    CHECK(g == NULL);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&b.completed), n);
    convd_close(c);
    fake_stop(srv);
    free(args);
    batch_free(&b);
}

CD_TEST(client_async_close_completes_everything_in_flight) {
    fake_server *srv = fake_start(FAKE_ECHO_HELD, 0);
    convd_conn *c = connect_to(fake_path(srv));
    int n = cd_test_randi(50, 300);
    batch b;
    batch_init(&b, n);
    cb_arg *args = calloc((size_t)n, sizeof *args);
    for (int i = 0; i < n; i++) CHECK_EQ(submit(c, &b, args, i, CONVD_TIMEOUT_NONE), 0);
    convd_future *f, *dropped;
    const char *name = "x";
    convd_tensor t = req_tensor(&b.reqs[0]);
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t, 0, NULL, CONVD_TIMEOUT_NONE, &f), 0);
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t, 0, NULL, CONVD_TIMEOUT_NONE, &dropped), 0);
    convd_future_free(dropped); // freed before completion: the completion frees it
    CHECK_EQ(fake_wait_requests(srv, n + 2, 60000), n + 2);
    convd_close(c);
    // Every completion was delivered before convd_close returned.
    CHECK_EQ(atomic_load(&b.completed), n);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(atomic_load(&b.reqs[i].completions), 1);
        CHECK_EQ(b.reqs[i].status, CONVD_ECLOSED);
        CHECK(strstr(b.reqs[i].errmsg, "closed by the client") != NULL);
    }
    CHECK_EQ(convd_future_done(f), 1);
    CHECK_EQ(convd_future_result(f, NULL), CONVD_ECLOSED);
    convd_future_free(f);
    fake_stop(srv);
    free(args);
    batch_free(&b);
}

// ---- errors -----------------------------------------------------------------

CD_TEST(client_async_error_answer_reaches_callback) {
    fake_server *s = fake_start(FAKE_ERROR, 0);
    fake_set_error(s, "E_SHAPE", "input 'x' has rank 2, expected 4");
    convd_conn *c = connect_to(fake_path(s));
    batch b;
    batch_init(&b, 3);
    cb_arg args[3];
    for (int i = 0; i < 3; i++) CHECK_EQ(submit(c, &b, args, i, 5000), 0);
    CHECK_EQ(wait_completed(&b, 3, 5000), 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(atomic_load(&b.reqs[i].completions), 1);
        CHECK_EQ(b.reqs[i].status, CONVD_ESHAPE);
        CHECK_STREQ(b.reqs[i].errmsg, "input 'x' has rank 2, expected 4");
        CHECK_EQ(b.reqs[i].echoed_ok, 0);
    }
    convd_future *f;
    const char *name = "x";
    convd_tensor t = req_tensor(&b.reqs[0]);
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t, 0, NULL, 5000, &f), 0);
    CHECK_EQ(convd_future_wait(f, 5000), 0);
    convd_outputs *outs = (convd_outputs *)1;
    CHECK_EQ(convd_future_result(f, &outs), CONVD_ESHAPE);
    CHECK(outs == NULL);
    CHECK_STREQ(convd_errmsg(NULL), "input 'x' has rank 2, expected 4");
    convd_future_free(f);
    convd_close(c);
    fake_stop(s);
    batch_free(&b);
}

CD_TEST(client_async_answer_without_outputs_is_protocol_error) {
    // FAKE_ANSWER answers a hello-like map: not an infer result.
    fake_server *s = fake_start(FAKE_ANSWER, 0);
    convd_conn *c = connect_to(fake_path(s));
    batch b;
    batch_init(&b, 1);
    cb_arg args[1];
    CHECK_EQ(submit(c, &b, args, 0, 5000), 0);
    CHECK_EQ(wait_completed(&b, 1, 5000), 1);
    CHECK_EQ(b.reqs[0].status, CONVD_EPROTOCOL);
    CHECK(strstr(b.reqs[0].errmsg, "no outputs map") != NULL);
    convd_close(c);
    fake_stop(s);
    batch_free(&b);
}

CD_TEST(client_async_rejects_bad_arguments_without_completion) {
    fake_server *srv = fake_start(FAKE_ECHO_REVERSED, 0);
    convd_conn *c = connect_to(fake_path(srv));
    batch b;
    batch_init(&b, 1);
    cb_arg a = {&b, 0};
    float x[6] = {1, 2, 3, 4, 5, 6};
    const char *name = "x";
    convd_tensor bad = {.dtype = CONVD_DTYPE_F32,
                        .rank = 2,
                        .shape = {2, 3},
                        .data = x,
                        .nbytes = 5 * sizeof(float)}; // shape says 24 bytes
    CHECK_EQ(convd_infer_async(c, "echo", 1, &name, &bad, 0, NULL, 1000, on_done, &a), CONVD_EPARAMS);
    CHECK(strstr(convd_errmsg(NULL), "nbytes") != NULL);
    convd_tensor good = bad;
    good.nbytes = sizeof x;
    CHECK_EQ(convd_infer_async(c, "echo", 1, &name, &good, 0, NULL, 1000, NULL, &a),
             CONVD_EPARAMS); // no callback
    CHECK_EQ(convd_infer_async(NULL, "echo", 1, &name, &good, 0, NULL, 1000, on_done, &a), CONVD_EPARAMS);
    convd_future *f = (convd_future *)1;
    CHECK_EQ(convd_infer_submit(c, NULL, 1, &name, &good, 0, NULL, 1000, &f), CONVD_EPARAMS);
    CHECK(f == NULL);
    CHECK_EQ(convd_future_wait(NULL, 0), CONVD_EPARAMS);
    CHECK_EQ(convd_future_result(NULL, NULL), CONVD_EPARAMS);
    convd_future_free(NULL);
    CHECK_EQ(convd_set_inflight_limit(c, 0, 0), CONVD_EPARAMS);
    CHECK_EQ(convd_set_inflight_limit(c, 4, 2), CONVD_EPARAMS);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&b.completed), 0);
    CHECK_EQ(fake_requests(srv), 0); // nothing was sent
    CHECK_EQ(convd_inflight(c), 0);
    convd_close(c);
    fake_stop(srv);
    batch_free(&b);
}

// ---- the in-flight limit ----------------------------------------------------

CD_TEST(client_async_inflight_limit_fail_mode_overloaded) {
    fake_server *srv = fake_start(FAKE_ECHO_HELD, 0);
    convd_conn *c = connect_to(fake_path(srv));
    int limit = cd_test_randi(2, 16);
    CHECK_EQ(convd_set_inflight_limit(c, limit, CONVD_INFLIGHT_FAIL), 0);
    batch b;
    batch_init(&b, limit + 3);
    cb_arg *args = calloc((size_t)limit + 3, sizeof *args);
    for (int i = 0; i < limit; i++) CHECK_EQ(submit(c, &b, args, i, 10000), 0);
    CHECK_EQ(convd_inflight(c), limit);
    double t0 = cd_now_ms();
    CHECK_EQ(submit(c, &b, args, limit, 10000), CONVD_EOVERLOADED);
    CHECK(cd_now_ms() - t0 < 5000); // at once, not after the 10 s timeout
    CHECK(strstr(convd_errmsg(NULL), "in flight") != NULL);
    convd_future *f = (convd_future *)1;
    const char *name = "x";
    convd_tensor t = req_tensor(&b.reqs[0]);
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t, 0, NULL, 1000, &f), CONVD_EOVERLOADED);
    CHECK(f == NULL);
    // Synchronous calls are not limited.
    convd_outputs *outs;
    CHECK_EQ(fake_wait_requests(srv, limit, 60000), limit);
    fake_release(srv);
    CHECK_EQ(wait_completed(&b, limit, 5000), limit);
    CHECK_EQ(convd_infer(c, "echo", 1, &name, &t, 0, NULL, &outs, 5000), 0);
    convd_outputs_free(outs);
    // Slots are free again.
    CHECK_EQ(convd_inflight(c), 0);
    CHECK_EQ(submit(c, &b, args, limit + 1, 5000), 0);
    CHECK_EQ(wait_completed(&b, limit + 1, 5000), limit + 1);
    CHECK_EQ(atomic_load(&b.reqs[limit].completions), 0); // the refused one
    CHECK_EQ(b.reqs[limit + 1].echoed_ok, 1);
    convd_close(c);
    fake_stop(srv);
    free(args);
    batch_free(&b);
}

// Releases the server after a delay (from another thread).
static void *release_later(void *arg) {
    sleep_ms(150); // the time the submit below must wait at least
    fake_release(arg);
    return NULL;
}

CD_TEST(client_async_inflight_limit_blocks_until_a_slot_frees) {
    fake_server *srv = fake_start(FAKE_ECHO_HELD, 0);
    convd_conn *c = connect_to(fake_path(srv));
    CHECK_EQ(convd_set_inflight_limit(c, 2, 0), 0);
    batch b;
    batch_init(&b, 6);
    cb_arg args[6];
    CHECK_EQ(submit(c, &b, args, 0, 10000), 0);
    CHECK_EQ(submit(c, &b, args, 1, 10000), 0);
    // Full: a short timeout expires while waiting for a slot (no completion).
    double t0 = cd_now_ms();
    CHECK_EQ(submit(c, &b, args, 2, 60), CONVD_ETIMEOUT);
    double dt = cd_now_ms() - t0;
    CHECK(dt >= 55); // not before its timeout
    CHECK(strstr(convd_errmsg(NULL), "slot") != NULL);
    // A longer one waits until the server answers.
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, release_later, srv), 0);
    t0 = cd_now_ms();
    CHECK_EQ(submit(c, &b, args, 3, 10000), 0);
    CHECK(cd_now_ms() - t0 >= 100);
    CHECK(convd_inflight(c) <= 2);
    CHECK_EQ(submit(c, &b, args, 4, 10000), 0);
    CHECK_EQ(submit(c, &b, args, 5, 10000), 0);
    pthread_join(th, NULL);
    CHECK_EQ(wait_completed(&b, 5, 5000), 5);
    CHECK_EQ(atomic_load(&b.reqs[2].completions), 0);
    for (int i = 0; i < 6; i++)
        if (i != 2) CHECK_EQ(b.reqs[i].echoed_ok, 1);
    convd_close(c);
    fake_stop(srv);
    batch_free(&b);
}

// ---- what a callback may do -------------------------------------------------

typedef struct {
    convd_conn *c;
    batch *b;
    cb_arg *args;
    int chain_left;        // resubmissions still to make from callbacks
    int sync_status;       // what a sync call from the callback returned
    int wait_status;       // what waiting for a future of this conn returned
    int limit_status;      // a submit at the limit from the callback
    convd_future *pending; // a future of this connection still in flight
} cb_probe;

static cb_probe g_probe;

static void on_done_probe(void *user, int status, convd_outputs *outs, const char *errmsg) {
    cb_probe *p = &g_probe;
    int first = p->sync_status == 1;
    on_done(user, status, outs, errmsg);
    // Resubmit from inside the callback (a closed loop): this request's slot
    // was released before the callback ran, so this never hits the limit.
    if (p->chain_left > 0) {
        int i = p->b->n - 1 - p->chain_left;
        p->chain_left--;
        p->args[i] = (cb_arg){p->b, i};
        convd_tensor t = req_tensor(&p->b->reqs[i]);
        const char *name = "x";
        int rc = convd_infer_async(p->c, "echo", 1, &name, &t, 0, NULL, 5000, on_done_probe, &p->args[i]);
        if (rc) CD_CHECK_FAIL_("resubmit from callback: %s", convd_errname(rc));
    }
    if (first) {
        convd_health_info h;
        p->sync_status = convd_health(p->c, &h);
        p->wait_status = convd_future_wait(p->pending, 1000);
        // Fill the limit (blocking mode): inside a callback the submit at the
        // limit fails at once instead of waiting for itself.
        const char *name = "x";
        convd_tensor t = req_tensor(&p->b->reqs[0]);
        convd_future *f[3];
        int k = 0;
        for (; k < 3; k++) {
            p->limit_status = convd_infer_submit(p->c, "echo", 1, &name, &t, 0, NULL, 5000, &f[k]);
            if (p->limit_status != 0) break;
        }
        for (int j = 0; j < k; j++) convd_future_free(f[j]); // results dropped
    }
}

CD_TEST(client_async_callback_can_resubmit_not_block) {
    fake_server *srv = fake_start(FAKE_ECHO_REVERSED, 0);
    convd_conn *c = connect_to(fake_path(srv));
    CHECK_EQ(convd_set_inflight_limit(c, 3, 0), 0); // blocking mode
    int n = 100;
    batch b;
    batch_init(&b, n + 1);
    cb_arg *args = calloc((size_t)n + 1, sizeof *args);
    g_probe = (cb_probe){c, &b, args, n - 1, 1, 1, 1, NULL};
    const char *name = "x";
    convd_tensor t0 = req_tensor(&b.reqs[n]);
    args[0] = (cb_arg){&b, 0};
    convd_tensor t = req_tensor(&b.reqs[0]);
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t0, 0, NULL, 5000, &g_probe.pending), 0);
    // pending may or may not be answered when request 0's callback runs;
    // either way waiting for it there must not block.
    CHECK_EQ(convd_infer_async(c, "echo", 1, &name, &t, 0, NULL, 5000, on_done_probe, &args[0]), 0);
    CHECK_EQ(wait_completed(&b, n, 10000), n);
    CHECK_EQ(g_probe.sync_status, CONVD_EBUSY);
    CHECK(g_probe.wait_status == CONVD_EBUSY || g_probe.wait_status == 0);
    // Never blocks on the limit inside a callback: fails instead.
    CHECK_EQ(g_probe.limit_status, CONVD_EOVERLOADED);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(atomic_load(&b.reqs[i].completions), 1);
        CHECK_EQ(b.reqs[i].echoed_ok, 1);
    }
    CHECK_EQ(convd_future_wait(g_probe.pending, 5000), 0);
    CHECK_EQ(convd_future_result(g_probe.pending, NULL), 0);
    convd_future_free(g_probe.pending);
    // Sync calls from the application's threads still work.
    convd_outputs *outs;
    CHECK_EQ(convd_infer(c, "echo", 1, &name, &t, 0, NULL, &outs, 5000), 0);
    convd_outputs_free(outs);
    convd_close(c);
    fake_stop(srv);
    free(args);
    batch_free(&b);
}

// The callback tries to wait for a future that cannot complete before it
// returns (the server holds it): that must fail with EBUSY, not hang.
static convd_future *g_held;
static atomic_int g_held_wait = 1;

static void on_done_wait_held(void *user, int status, convd_outputs *outs, const char *errmsg) {
    atomic_store(&g_held_wait, convd_future_wait(g_held, CONVD_TIMEOUT_NONE));
    convd_outputs_free(outs);
}

CD_TEST(client_async_callback_wait_on_own_connection_is_ebusy) {
    fake_server *srv = fake_start(FAKE_ECHO_HELD, 0);
    convd_conn *c = connect_to(fake_path(srv));
    float x[3] = {1, 2, 3};
    const char *name = "x";
    convd_tensor t = {.dtype = CONVD_DTYPE_F32, .rank = 1, .shape = {3}, .data = x, .nbytes = sizeof x};
    // The held future times out late; the callback request times out early,
    // so its completion (ETIMEOUT) runs while the held one is in flight.
    CHECK_EQ(convd_infer_submit(c, "echo", 1, &name, &t, 0, NULL, 10000, &g_held), 0);
    CHECK_EQ(convd_infer_async(c, "echo", 1, &name, &t, 0, NULL, 50, on_done_wait_held, NULL), 0);
    for (int i = 0; i < 2000 && atomic_load(&g_held_wait) == 1; i++) sleep_ms(1);
    CHECK_EQ(atomic_load(&g_held_wait), CONVD_EBUSY);
    CHECK_EQ(convd_future_done(g_held), 0);
    fake_release(srv);
    CHECK_EQ(convd_future_wait(g_held, 5000), 0);
    CHECK_EQ(convd_future_result(g_held, NULL), 0);
    convd_future_free(g_held);
    convd_close(c);
    fake_stop(srv);
}
