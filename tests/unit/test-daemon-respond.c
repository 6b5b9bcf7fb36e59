// daemon/workers.c, the respond hook (cd_workers_set_respond) that lets the
// daemon write an answer on the worker: it runs on a worker thread (never on
// the loop), once per request a worker ran, after the status is final and
// before the request is handed back; never for requests cancelled or timed
// out in a queue; and cd_workers_sync delivers every request whose hook has
// run, without waiting for the uv_async round.
#include "core/errors.h"
#include "daemon/workers.h"
#include "tests/unit/check.h"
#include "tests/unit/worker-gate.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define NREQ 256

static pthread_t g_loop_thread;
static atomic_int g_responded;  // hook calls
static atomic_int g_bad_thread; // hook calls on the loop thread
static atomic_int g_bad_status; // hook calls before the status was final
static atomic_int g_seen[NREQ]; // hook calls per msgid
static int g_completed;
static int g_completed_after_hook; // completions whose hook had run first
static cd_request *g_done[NREQ];

static void run_batch(cd_request **reqs, int n, int worker) {
    for (int i = 0; i < n; i++) reqs[i]->status = (int)reqs[i]->msgid % 5 == 4 ? CD_EINTERNAL : 0;
}

static void respond(cd_request *req) {
    atomic_fetch_add(&g_responded, 1);
    if (pthread_equal(pthread_self(), g_loop_thread)) atomic_fetch_add(&g_bad_thread, 1);
    int want = (int)req->msgid % 5 == 4 ? CD_EINTERNAL : 0;
    if (req->status != want) atomic_fetch_add(&g_bad_status, 1);
    atomic_fetch_add(&g_seen[req->msgid], 1);
    req->sent = CD_SENT_WRITTEN; // what the daemon's hook records
}

static void on_complete(cd_request *req, void *ud) {
    if (req->sent == CD_SENT_WRITTEN) g_completed_after_hook++;
    g_done[g_completed++] = req;
}

static cd_request *new_req(uint32_t id) {
    cd_request *r = calloc(1, sizeof *r);
    r->msgid = id;
    r->items = 1;
    atomic_init(&r->cancelled, false);
    r->t_received_ns = uv_hrtime();
    return r;
}

static void reset(void) {
    g_loop_thread = pthread_self();
    atomic_store(&g_responded, 0);
    atomic_store(&g_bad_thread, 0);
    atomic_store(&g_bad_status, 0);
    for (int i = 0; i < NREQ; i++) atomic_store(&g_seen[i], 0);
    g_completed = g_completed_after_hook = 0;
}

static void finish(uv_loop_t *loop, cd_workers *w) {
    CHECK_EQ(cd_workers_stop(w, 60000), 0);
    uv_run(loop, UV_RUN_DEFAULT);
    for (int i = 0; i < g_completed; i++) free(g_done[i]);
    uv_loop_close(loop);
}

CD_TEST(daemon_respond_hook_once_per_run_request_on_a_worker_then_sync_delivers) {
    reset();
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    int nworkers = cd_test_randi(1, 3), n = cd_test_randi(40, NREQ - 1);
    CHECK_EQ(cd_workers_init(&w, &loop, nworkers, on_complete, NULL), 0);
    cd_workers_set_respond(w, respond);
    static cd_sched_queue q;
    const cd_model_conf conf = {cd_test_randi(1, 8), 0, NREQ};
    cd_sched_queue_init(&q, run_batch, &conf);
    for (int i = 0; i < n; i++) CHECK_EQ(cd_workers_submit_batched(w, &q, new_req((uint32_t)i)), 0);
    // Without running the loop: wait for every hook, then sync delivers them
    // all at once (no uv_async round needed).
    for (int i = 0; i < 60000 && atomic_load(&g_responded) < n; i++) usleep(1000); // polled; hang guard
    CHECK_EQ(atomic_load(&g_responded), n);
    cd_workers_sync(w);
    CHECK_EQ(g_completed, n);
    CHECK_EQ(g_completed_after_hook, n);
    CHECK_EQ(atomic_load(&g_bad_thread), 0);
    CHECK_EQ(atomic_load(&g_bad_status), 0);
    for (int i = 0; i < n; i++) CHECK_EQ(atomic_load(&g_seen[i]), 1);
    finish(&loop, w);
}

// Held at the gate until the test has queued and cancelled the others.
static void slow_batch(cd_request **reqs, int n, int worker) {
    gate_pass(1);
    run_batch(reqs, n, worker);
}

CD_TEST(daemon_respond_hook_not_called_for_cancelled_or_late_requests) {
    reset();
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init(&w, &loop, 1, on_complete, NULL), 0);
    cd_workers_set_respond(w, respond);
    static cd_sched_queue q;
    const cd_model_conf conf = {1, 0, 100};
    cd_sched_queue_init(&q, slow_batch, &conf);
    gate_reset();
    CHECK_EQ(cd_workers_submit_batched(w, &q, new_req(0)), 0); // held in its run
    gate_wait_started(1);
    cd_request *gone = new_req(1), *late = new_req(2), *flagged = new_req(3);
    late->deadline_ns = late->t_received_ns + 1000000; // missed behind request 0
    CHECK_EQ(cd_workers_submit_batched(w, &q, gone), 0);
    CHECK_EQ(cd_workers_submit_batched(w, &q, late), 0);
    CHECK_EQ(cd_workers_submit_batched(w, &q, flagged), 0);
    cd_workers_cancel(w, gone);                             // leaves the queue at once
    atomic_store(&flagged->cancelled, true);                // skipped at dequeue
    while (uv_hrtime() <= late->deadline_ns) sched_yield(); // late's deadline has passed
    gate_open();
    uint64_t t0 = uv_hrtime();
    while (g_completed < 4 && uv_hrtime() - t0 < 10000000000ull) uv_run(&loop, UV_RUN_ONCE);
    CHECK_EQ(g_completed, 4);
    CHECK_EQ(atomic_load(&g_responded), 1); // only request 0 ran
    CHECK_EQ(atomic_load(&g_seen[0]), 1);
    for (int i = 0; i < 4; i++)
        if (g_done[i]->msgid != 0) CHECK_EQ(g_done[i]->sent, CD_SENT_NONE);
    finish(&loop, w);
}
