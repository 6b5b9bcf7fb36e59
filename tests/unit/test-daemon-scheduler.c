// daemon/workers.c, the scheduler: dynamic batching per model queue (max
// items, max delay, arrival order, mixed batch sizes), the queue limit
// (CD_EOVERLOADED), cancellation of queued requests and deadlines checked at
// dequeue -- with a fake batch function on a real uv loop and worker threads.
#include "core/errors.h"
#include "daemon/workers.h"
#include "tests/unit/check.h"
#include "tests/unit/worker-gate.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define MAXREQ 512

typedef struct {
    int nbatches;
    int batch_items[MAXREQ]; // items per run
    int order[MAXREQ];       // request ids in the order they were run
    int nrun;
    int hold; // 1: each run waits for the test to open g_gate
    pthread_mutex_t lock;
} fake_log;

static fake_log g_log;
static int g_completed;
static cd_request *g_done[MAXREQ];

static void fake_run(cd_request **reqs, int n, int worker) {
    pthread_mutex_lock(&g_log.lock);
    int items = 0;
    for (int i = 0; i < n; i++) {
        items += reqs[i]->items;
        g_log.order[g_log.nrun++] = (int)reqs[i]->msgid;
        reqs[i]->status = 0;
    }
    g_log.batch_items[g_log.nbatches++] = items;
    pthread_mutex_unlock(&g_log.lock);
    gate_pass(g_log.hold);
}

static void on_complete(cd_request *req, void *ud) { g_done[g_completed++] = req; }

static cd_request *new_req(uint32_t id, int items) {
    cd_request *r = calloc(1, sizeof *r);
    r->msgid = id;
    r->items = items;
    atomic_init(&r->cancelled, false);
    r->t_received_ns = uv_hrtime();
    return r;
}

static void run_until(uv_loop_t *loop, int n) {
    uint64_t t0 = uv_hrtime();
    while (g_completed < n && uv_hrtime() - t0 < 10000000000ull) uv_run(loop, UV_RUN_ONCE);
    CHECK_EQ(g_completed, n);
}

static void reset(void) {
    memset(&g_log, 0, sizeof g_log);
    gate_reset();
    pthread_mutex_init(&g_log.lock, NULL);
    g_completed = 0;
}

static void finish(uv_loop_t *loop, cd_workers *w) {
    CHECK_EQ(cd_workers_stop(w, 60000), 0);
    uv_run(loop, UV_RUN_DEFAULT);
    for (int i = 0; i < g_completed; i++) free(g_done[i]);
    uv_loop_close(loop);
}

CD_TEST(daemon_sched_mixed_sizes_batched_in_order_within_max_batch) {
    reset();
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init(&w, &loop, 1, on_complete, NULL), 0);
    static cd_sched_queue q;
    int max_batch = cd_test_randi(2, 9);
    // A long delay: nothing runs before max_batch items are queued.
    const cd_model_conf conf = {max_batch, 2000000, 1000}; // 2 s
    cd_sched_queue_init(&q, fake_run, &conf);
    int n = cd_test_randi(20, 100), total = 0;
    for (int i = 0; i < n; i++) {
        int items = cd_test_randi(1, max_batch);
        total += items;
        CHECK_EQ(cd_workers_submit_batched(w, &q, new_req((uint32_t)i, items)), 0);
    }
    // The tail (< max_batch items) waits for the delay; stop flushes it.
    CHECK_EQ(cd_workers_stop(w, 60000), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(g_completed, n);
    int sum = 0, multi = 0;
    for (int b = 0; b < g_log.nbatches; b++) {
        CHECK(g_log.batch_items[b] >= 1 && g_log.batch_items[b] <= max_batch);
        sum += g_log.batch_items[b];
        multi += g_log.batch_items[b] > 1;
    }
    CHECK_EQ(sum, total);
    CHECK(multi > 0);
    for (int i = 0; i < n; i++) CHECK_EQ(g_log.order[i], i); // arrival order kept
    for (int i = 0; i < g_completed; i++) {
        CHECK_EQ(g_done[i]->status, 0);
        CHECK(g_done[i]->t_end_ns >= g_done[i]->t_start_ns);
        free(g_done[i]);
    }
    uv_loop_close(&loop);
}

CD_TEST(daemon_sched_delay_zero_runs_lone_request_at_once) {
    reset();
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init(&w, &loop, 2, on_complete, NULL), 0);
    static cd_sched_queue q;
    const cd_model_conf conf = {16, 0, 1000};
    cd_sched_queue_init(&q, fake_run, &conf);
    uint64_t t0 = uv_hrtime();
    CHECK_EQ(cd_workers_submit_batched(w, &q, new_req(1, 1)), 0);
    run_until(&loop, 1);
    CHECK(uv_hrtime() - t0 < 1000000000ull);
    CHECK_EQ(g_log.nbatches, 1);
    CHECK_EQ(g_log.batch_items[0], 1);
    finish(&loop, w);
}

CD_TEST(daemon_sched_delay_collects_a_batch) {
    reset();
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init(&w, &loop, 1, on_complete, NULL), 0);
    static cd_sched_queue q;
    const cd_model_conf conf = {64, 200000, 1000}; // 200 ms
    cd_sched_queue_init(&q, fake_run, &conf);
    int n = cd_test_randi(3, 10);
    uint64_t t0 = uv_hrtime();
    for (int i = 0; i < n; i++) CHECK_EQ(cd_workers_submit_batched(w, &q, new_req((uint32_t)i, 1)), 0);
    run_until(&loop, n);
    uint64_t dt = uv_hrtime() - t0;
    CHECK_EQ(g_log.nbatches, 1); // all n in one run, after the delay
    CHECK_EQ(g_log.batch_items[0], n);
    CHECK(dt >= 150000000ull);
    finish(&loop, w);
}

CD_TEST(daemon_sched_queue_limit_overloaded) {
    reset();
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init(&w, &loop, 1, on_complete, NULL), 0);
    static cd_sched_queue q;
    int limit = cd_test_randi(1, 8);
    const cd_model_conf conf = {1, 5000000, limit}; // nothing runs yet
    cd_sched_queue_init(&q, fake_run, &conf);
    // max_batch 1: each queued request is a full batch, so the worker takes
    // the first at once; hold it in its run until the queue has been checked.
    g_log.hold = 1;
    CHECK_EQ(cd_workers_submit_batched(w, &q, new_req(0, 1)), 0);
    gate_wait_started(1); // the worker has taken request 0
    for (int i = 1; i <= limit; i++) CHECK_EQ(cd_workers_submit_batched(w, &q, new_req((uint32_t)i, 1)), 0);
    CHECK_EQ(cd_workers_queue_len(w, &q), limit);
    cd_request *extra = new_req(99, 1);
    CHECK_EQ(cd_workers_submit_batched(w, &q, extra), CD_EOVERLOADED);
    free(extra);
    gate_open();
    run_until(&loop, limit + 1);
    finish(&loop, w);
}

CD_TEST(daemon_sched_cancel_and_deadline_skip_compute) {
    reset();
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init(&w, &loop, 1, on_complete, NULL), 0);
    static cd_sched_queue q;
    const cd_model_conf conf = {1, 0, 100};
    cd_sched_queue_init(&q, fake_run, &conf);
    g_log.hold = 1;
    CHECK_EQ(cd_workers_submit_batched(w, &q, new_req(0, 1)), 0); // held in its run
    gate_wait_started(1);
    cd_request *gone = new_req(1, 1);
    cd_request *late = new_req(2, 1);
    late->deadline_ns = late->t_received_ns + 1000000; // 1 ms: missed behind request 0
    cd_request *fine = new_req(3, 1);
    CHECK_EQ(cd_workers_submit_batched(w, &q, gone), 0);
    CHECK_EQ(cd_workers_submit_batched(w, &q, late), 0);
    CHECK_EQ(cd_workers_submit_batched(w, &q, fine), 0);
    cd_workers_cancel(w, gone); // queued: leaves the queue now
    CHECK_EQ(cd_workers_queue_len(w, &q), 2);
    // Request 0 stays in its run until late's deadline has passed, however
    // slowly this thread got here.
    while (uv_hrtime() <= late->deadline_ns) sched_yield();
    gate_open();
    run_until(&loop, 4);
    int status[4] = {1, 1, 1, 1};
    for (int i = 0; i < 4; i++) status[g_done[i]->msgid] = g_done[i]->status;
    CHECK_EQ(status[0], 0);
    CHECK_EQ(status[1], CD_ECANCELLED);
    CHECK_EQ(status[2], CD_ETIMEOUT);
    CHECK_EQ(status[3], 0);
    CHECK_EQ(g_log.nrun, 2);    // only 0 and 3 were computed
    cd_workers_cancel(w, fine); // already finished: no effect
    finish(&loop, w);
}

// ---- double buffering (cd_sched_queue.submit/finish) ---------------------------

typedef struct {
    char kind; // 'S' submit, 'F' finish
    int slot;
    int first; // msgid of the batch's first request
    int n;     // requests
} db_event;

static db_event g_ev[MAXREQ];
static int g_nev;

static void db_log(char kind, cd_request **reqs, int n, int slot) {
    pthread_mutex_lock(&g_log.lock);
    g_ev[g_nev++] = (db_event){kind, slot, (int)reqs[0]->msgid, n};
    pthread_mutex_unlock(&g_log.lock);
}

static void db_submit(cd_request **reqs, int n, int worker, int slot) {
    // The first batch waits until every request is queued (the test opens
    // the gate then), so the next full batch is ready when the worker looks.
    gate_pass(1);
    db_log('S', reqs, n, slot);
    for (int i = 0; i < n; i++) reqs[i]->status = CD_EINTERNAL; // finish must set the real status
}

static void db_finish(cd_request **reqs, int n, int worker, int slot) {
    db_log('F', reqs, n, slot);
    for (int i = 0; i < n; i++) reqs[i]->status = 0;
}

CD_TEST(daemon_sched_double_buffer_submits_next_batch_before_finishing) {
    // k full batches are ready at once: batch j+1 is submitted on the other
    // slot before batch j is finished (S0 S1 F0 S2 F1 ... F(k-1)). A tail of
    // fewer than max_batch items is not ready (long delay): the worker
    // finishes the last full batch without waiting for it, and the stop
    // flushes it alone (slot 0 again).
    reset();
    g_nev = 0;
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init(&w, &loop, 1, on_complete, NULL), 0);
    static cd_sched_queue q;
    int max_batch = cd_test_randi(1, 4), k = cd_test_randi(2, 8);
    int tail = max_batch > 1 ? cd_test_randi(0, max_batch - 1) : 0;
    const cd_model_conf conf = {max_batch, 2000000, 1000}; // 2 s
    cd_sched_queue_init(&q, fake_run, &conf);
    q.submit = db_submit;
    q.finish = db_finish;
    int n = k * max_batch + tail;
    for (int i = 0; i < n; i++) CHECK_EQ(cd_workers_submit_batched(w, &q, new_req((uint32_t)i, 1)), 0);
    gate_open();
    run_until(&loop, k * max_batch);
    CHECK_EQ(cd_workers_stop(w, 60000), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(g_completed, n);
    CHECK_EQ(g_log.nbatches, 0); // `run` is never used
    db_event want[MAXREQ];
    int nw = 0;
    want[nw++] = (db_event){'S', 0, 0, max_batch};
    for (int j = 0; j < k; j++) {
        if (j + 1 < k) want[nw++] = (db_event){'S', (j + 1) % 2, (j + 1) * max_batch, max_batch};
        want[nw++] = (db_event){'F', j % 2, j * max_batch, max_batch};
    }
    if (tail) {
        want[nw++] = (db_event){'S', 0, k * max_batch, tail};
        want[nw++] = (db_event){'F', 0, k * max_batch, tail};
    }
    CHECK_EQ(g_nev, nw);
    for (int i = 0; i < nw; i++) {
        if (g_ev[i].kind != want[i].kind || g_ev[i].slot != want[i].slot || g_ev[i].first != want[i].first ||
            g_ev[i].n != want[i].n)
            CD_CHECK_FAIL_("event %d: %c slot %d first %d n %d, want %c slot %d first %d n %d", i, g_ev[i].kind,
                           g_ev[i].slot, g_ev[i].first, g_ev[i].n, want[i].kind, want[i].slot, want[i].first,
                           want[i].n);
    }
    for (int i = 0; i < g_completed; i++) {
        CHECK_EQ(g_done[i]->status, 0);
        CHECK_EQ((int)g_done[i]->msgid, i); // completions in order
        CHECK(g_done[i]->t_end_ns >= g_done[i]->t_start_ns);
        free(g_done[i]);
    }
    uv_loop_close(&loop);
}

// Requests carry a size tag in state; a batch must hold one tag only.
static int g_mixed_batches;

static bool same_tag(const cd_request *a, const cd_request *b) { return a->state == b->state; }

static void tag_run(cd_request **reqs, int n, int worker) {
    for (int i = 1; i < n; i++)
        if (reqs[i]->state != reqs[0]->state) g_mixed_batches++;
    fake_run(reqs, n, worker);
}

CD_TEST(daemon_sched_same_fn_batches_one_size_in_arrival_order) {
    reset();
    g_mixed_batches = 0;
    uv_loop_t loop;
    uv_loop_init(&loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init(&w, &loop, 1, on_complete, NULL), 0);
    static cd_sched_queue q;
    static int sizes[3];
    int max_batch = cd_test_randi(2, 9);
    const cd_model_conf conf = {.max_batch = max_batch, .max_delay_us = 2000000, .max_queue = 1000};
    cd_sched_queue_init(&q, tag_run, &conf);
    q.same = same_tag;
    int n = cd_test_randi(20, 100), total = 0, runs_of_one_tag = 0;
    void *prev = NULL;
    for (int i = 0; i < n; i++) {
        int items = cd_test_randi(1, max_batch);
        total += items;
        cd_request *r = new_req((uint32_t)i, items);
        r->state = &sizes[cd_test_randi(0, 2)]; // interleaved sizes
        runs_of_one_tag += r->state != prev;
        prev = r->state;
        CHECK_EQ(cd_workers_submit_batched(w, &q, r), 0);
    }
    CHECK_EQ(cd_workers_stop(w, 60000), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(g_completed, n);
    CHECK_EQ(g_mixed_batches, 0);
    CHECK(g_log.nbatches >= runs_of_one_tag); // a batch ends where the size changes
    int sum = 0;
    for (int b = 0; b < g_log.nbatches; b++) sum += g_log.batch_items[b];
    CHECK_EQ(sum, total);
    for (int i = 0; i < n; i++) CHECK_EQ(g_log.order[i], i); // arrival order kept
    for (int i = 0; i < g_completed; i++) free(g_done[i]);
    uv_loop_close(&loop);
}

// Fill batches: a pool of `workers` (polling spin_ns) on fill queue q of
// max_batch, delay 0, whose first request (id 0, one item) a worker runs and
// holds in fake_run until gate_open.
static cd_workers *start_fill(uv_loop_t *loop, cd_sched_queue *q, cd_model_conf *conf, int workers, uint64_t spin_ns) {
    reset();
    uv_loop_init(loop);
    cd_workers *w;
    CHECK_EQ(cd_workers_init_spin(&w, loop, workers, spin_ns, on_complete, NULL), 0);
    cd_sched_queue_init(q, fake_run, conf);
    q->fill = true;
    g_log.hold = 1;
    CHECK_EQ(cd_workers_submit_batched(w, q, new_req(0, 1)), 0);
    gate_wait_started(1); // a worker runs request 0 and holds
    return w;
}

// While it runs, requests that do not make a full batch wait, with idle
// workers beside it (polling or asleep), and run together once it returns.
CD_TEST(daemon_sched_fill_waits_for_the_running_batch_then_runs_one) {
    uv_loop_t loop;
    static cd_sched_queue q;
    static cd_model_conf conf = {0, 0, 1000};
    conf.max_batch = cd_test_randi(4, 16);
    cd_workers *w = start_fill(&loop, &q, &conf, cd_test_randi(2, 4), cd_test_randi(0, 1) ? 200000 : 0);
    const int n = cd_test_randi(2, (int)conf.max_batch - 1);
    for (int i = 1; i <= n; i++) CHECK_EQ(cd_workers_submit_batched(w, &q, new_req((uint32_t)i, 1)), 0);
    // The last submit woke a worker; wait until every other worker has
    // looked and gone back to sleep, or has started a batch (the failure).
    const int others = cd_workers_count(w) - 1;
    const uint64_t guard = uv_hrtime() + GATE_HANG_GUARD_S * 1000000000ull;
    while (cd_workers_idle(w) < others && gate_started() < 2 && uv_hrtime() < guard) sched_yield();
    CHECK_EQ(gate_started(), 1);
    CHECK_EQ(cd_workers_queue_len(w, &q), (size_t)n); // none taken beside the running batch
    gate_open();
    run_until(&loop, n + 1);
    CHECK_EQ(g_log.nbatches, 2);
    CHECK_EQ(g_log.batch_items[0], 1);
    CHECK_EQ(g_log.batch_items[1], n); // all of them, in one batch
    for (int i = 0; i <= n; i++) CHECK_EQ(g_log.order[i], i);
    finish(&loop, w);
}

// A full batch does not wait: it runs beside the held one (the compute may
// run them side by side, in lanes).
CD_TEST(daemon_sched_fill_lets_a_full_batch_start_beside_a_running_one) {
    uv_loop_t loop;
    static cd_sched_queue q;
    static cd_model_conf conf = {0, 0, 1000};
    conf.max_batch = cd_test_randi(2, 8);
    cd_workers *w = start_fill(&loop, &q, &conf, 2, 0);
    CHECK_EQ(cd_workers_submit_batched(w, &q, new_req(1, (int)conf.max_batch)), 0);
    gate_wait_started(2); // the second worker took the full batch while the first holds
    CHECK_EQ(cd_workers_queue_len(w, &q), (size_t)0);
    gate_open();
    run_until(&loop, 2);
    CHECK_EQ(g_log.nbatches, 2);
    CHECK_EQ(g_log.batch_items[1], conf.max_batch);
    finish(&loop, w);
}

// A queue held back by fill still ends when the pool stops (nothing hangs).
CD_TEST(daemon_sched_fill_stop_runs_what_was_held_back) {
    uv_loop_t loop;
    static cd_sched_queue q;
    static cd_model_conf conf = {8, 0, 1000};
    cd_workers *w = start_fill(&loop, &q, &conf, 2, 0);
    for (int i = 1; i <= 3; i++) CHECK_EQ(cd_workers_submit_batched(w, &q, new_req((uint32_t)i, 1)), 0);
    cd_workers_stop_begin(w);
    gate_wait_started(2); // stopping: the other worker takes them without waiting
    gate_open();
    run_until(&loop, 4);
    CHECK_EQ(g_log.batch_items[1], 3);
    finish(&loop, w);
}
