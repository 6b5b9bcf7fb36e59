#include "core/clock.h"
#include "daemon/workers.h"

#include "core/errors.h"
#include "daemon/log.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cd_workers {
    uv_async_t async;        // wakes the loop when `done` is non-empty
    pthread_mutex_t lock;    // guards every field below and the queues' lists
    struct worker_wait {     // one per thread:
        pthread_cond_t cond; //   signalled to wake that thread (work, stop)
        bool listed;         //   it is in `idle`
    } * waits;
    int *idle;              // threads waiting for work, the most recently idle
    int nidle;              //   last: the next request wakes it, so at low load
                            //   one thread (its arenas warm) serves them all
    cd_request *queue_head; // generic FIFO (load ...)
    cd_request *queue_tail;
    cd_sched_queue *active; // model queues with requests waiting (doubly linked)
    cd_request *done_head;  // FIFO of finished requests for the loop
    cd_request *done_tail;
    size_t busy;                  // queued + running + done-not-yet-delivered
    bool stopping;                // threads exit once every queue is empty
    int fill_running;             // batches of fill queues being computed
    atomic_uint_fast64_t submits; // bumped by every submit (read without the lock)
    uint64_t spin_ns;             // an idle worker polls `submits` this long before sleeping
    int nthreads;                 // threads started
    pthread_t *threads;
    cd_complete_fn complete; // loop-side completion callback
    void *ud;
    cd_respond_fn respond;   // worker-side hook before the hand-back (may be NULL)
    atomic_uint responding;  // workers between the respond hook and the done list
    int alive;               // threads that have not returned yet (stop is bounded:
                             //   the loop polls this instead of joining blindly)
    bool joined;             // cd_workers_stop_finish joined them
    struct worker_running {  // what each thread runs now, for the log of a forced
        bool busy;           //   exit (a copy: the request may be freed before
        cd_method_id method; //   the thread clears it)
        uint32_t msgid;
        int nreqs;
        uint64_t since_ns;
    } * running;
};

typedef struct {
    cd_workers *w;
    int index;
} worker_arg;

// Lock held. Wakes the thread that went idle last, if one is waiting.
static void wake_one(cd_workers *w) {
    if (w->nidle == 0) return;
    int i = w->idle[--w->nidle];
    w->waits[i].listed = false;
    pthread_cond_signal(&w->waits[i].cond);
}

// Lock held. Wakes every thread (stop).
static void wake_all(cd_workers *w) {
    while (w->nidle > 0) wake_one(w);
    for (int i = 0; i < w->nthreads; i++) pthread_cond_signal(&w->waits[i].cond);
}

// Lock held. Thread i waits for a wake-up, or until wake (CLOCK_MONOTONIC ns;
// UINT64_MAX: none), as the most recently idle thread.
static void wait_for_work(cd_workers *w, int i, uint64_t wake) {
    w->idle[w->nidle++] = i;
    w->waits[i].listed = true;
    if (wake == UINT64_MAX) {
        pthread_cond_wait(&w->waits[i].cond, &w->lock);
    } else {
        struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000ull), .tv_nsec = (long)(wake % 1000000000ull)};
        pthread_cond_timedwait(&w->waits[i].cond, &w->lock, &ts);
    }
    if (!w->waits[i].listed) return; // taken off the list by wake_one
    w->waits[i].listed = false;      // a time-out or a spurious wake-up
    for (int k = 0; k < w->nidle; k++)
        if (w->idle[k] == i) {
            memmove(&w->idle[k], &w->idle[k + 1], (size_t)(w->nidle - k - 1) * sizeof *w->idle);
            w->nidle--;
            break;
        }
}

// Same clock as uv_hrtime (CLOCK_MONOTONIC), usable from any thread.
static void push(cd_request **head, cd_request **tail, cd_request *req) {
    req->next = NULL;
    req->prev = *tail;
    if (*tail)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
}

static void unlink_req(cd_request **head, cd_request **tail, cd_request *req) {
    if (req->prev)
        req->prev->next = req->next;
    else
        *head = req->next;
    if (req->next)
        req->next->prev = req->prev;
    else
        *tail = req->prev;
    req->prev = req->next = NULL;
}

static void queue_activate(cd_workers *w, cd_sched_queue *q) {
    if (q->active) return;
    q->active = true;
    q->prev_active = NULL;
    q->next_active = w->active;
    if (w->active) w->active->prev_active = q;
    w->active = q;
}

static void queue_deactivate(cd_workers *w, cd_sched_queue *q) {
    if (!q->active) return;
    if (q->prev_active)
        q->prev_active->next_active = q->next_active;
    else
        w->active = q->next_active;
    if (q->next_active) q->next_active->prev_active = q->prev_active;
    q->prev_active = q->next_active = NULL;
    q->active = false;
}

// Removes req from its model queue (lock held).
static void queue_remove(cd_workers *w, cd_request *req) {
    cd_sched_queue *q = req->queue;
    unlink_req(&q->head, &q->tail, req);
    q->n--;
    q->items -= req->items;
    req->queued = false;
    if (!q->head) queue_deactivate(w, q);
}

// Hands a finished request to the loop (lock held; the caller sends the async).
static void finish_locked(cd_workers *w, cd_request *req) { push(&w->done_head, &w->done_tail, req); }

// The ready model queue whose oldest request is oldest, or NULL; *wake gets
// the earliest time a waiting queue becomes ready (UINT64_MAX: none).
// A fill queue held back by a running batch has no wake time: the worker
// that ran it wakes one when it returns.
static cd_sched_queue *pick_queue(cd_workers *w, uint64_t now, uint64_t *wake) {
    cd_sched_queue *best = NULL;
    *wake = UINT64_MAX;
    for (cd_sched_queue *q = w->active; q; q = q->next_active) {
        uint64_t since = q->head->t_received_ns;
        uint64_t ready_at = since + (uint64_t)q->conf->max_delay_us * 1000u;
        bool full = q->items >= q->conf->max_batch || w->stopping;
        bool ready = full || (now >= ready_at && (!q->fill || w->fill_running == 0));
        if (ready) {
            if (!best || since < best->head->t_received_ns) best = q;
        } else if (now < ready_at && ready_at < *wake) {
            *wake = ready_at;
        }
    }
    return best;
}

// Takes up to max_batch items from q in arrival order (lock held). Requests
// that were cancelled or missed their deadline go straight to `done`.
// Returns the number of requests put in batch[].
static int take_batch(cd_workers *w, cd_sched_queue *q, cd_request **batch, uint64_t now) {
    int n = 0, items = 0;
    while (q->head) {
        cd_request *r = q->head;
        if (atomic_load(&r->cancelled)) {
            queue_remove(w, r);
            r->status = CD_ECANCELLED;
            snprintf(r->err, sizeof r->err, "client went away");
            finish_locked(w, r);
            continue;
        }
        if (r->deadline_ns && now > r->deadline_ns) {
            queue_remove(w, r);
            r->status = CD_ETIMEOUT;
            snprintf(r->err, sizeof r->err, "could not start within its timeout_ms (waited %llu ms)",
                     (unsigned long long)((now - r->t_received_ns) / 1000000));
            finish_locked(w, r);
            continue;
        }
        if (items + r->items > q->conf->max_batch) break;
        if (n > 0 && q->same && !q->same(batch[0], r)) break; // arrival order kept
        queue_remove(w, r);
        items += r->items;
        batch[n++] = r;
        if (items == q->conf->max_batch) break;
    }
    return n;
}

// Notes what worker `index` starts to run (lock held).
static void note_running(cd_workers *w, int index, cd_request **reqs, int n) {
    struct worker_running *r = &w->running[index];
    r->busy = true;
    r->method = reqs[0]->method;
    r->msgid = reqs[0]->msgid;
    r->nreqs = n;
    r->since_ns = cd_now_ns();
}

static void run_generic(cd_request *req, int worker) {
    uint64_t now = cd_now_ns();
    if (atomic_load(&req->cancelled)) {
        req->status = CD_ECANCELLED;
        snprintf(req->err, sizeof req->err, "client went away");
    } else if (req->deadline_ns && now > req->deadline_ns) {
        req->status = CD_ETIMEOUT;
        snprintf(req->err, sizeof req->err, "could not start within its timeout_ms");
    } else {
        req->t_start_ns = now;
        req->status = req->ops->work(req, worker);
        req->t_end_ns = cd_now_ns();
    }
}

// Stamps a taken batch as started at t0 (no lock needed: the worker owns it).
static void stamp_batch(cd_request **batch, int n, uint64_t t0) {
    int items = 0;
    for (int i = 0; i < n; i++) items += batch[i]->items;
    for (int i = 0; i < n; i++) {
        batch[i]->t_start_ns = t0;
        batch[i]->batch_items = items;
        batch[i]->batch_leader = i == 0;
    }
}

// Hands one request a worker ran back to the loop: the respond hook first
// (without the pool lock: it writes to a socket), then at once the done list,
// so that cd_workers_sync waits for at most this short window. Called and
// returns without the lock; the caller sends the async.
static void respond_and_post(cd_workers *w, cd_request *req) {
    if (w->respond) {
        atomic_fetch_add(&w->responding, 1);
        w->respond(req);
    }
    pthread_mutex_lock(&w->lock);
    finish_locked(w, req);
    if (w->respond) atomic_fetch_sub(&w->responding, 1);
    pthread_mutex_unlock(&w->lock);
}

// Hands a computed batch to the loop. Called without the lock; returns with
// it held.
static void post_batch(cd_workers *w, cd_request **batch, int n, uint64_t t1) {
    for (int i = 0; i < n; i++) {
        batch[i]->t_end_ns = t1;
        respond_and_post(w, batch[i]);
    }
    uv_async_send(&w->async);
    pthread_mutex_lock(&w->lock);
}

// Serves q with double buffering (q->submit/finish set; lock held on entry
// and on return). bufs[0][0..n) was just taken. Submits it on slot 0; then,
// as long as q is the queue this worker would serve next anyway (nothing on
// the generic FIFO, pick_queue chooses q), takes the next batch into the
// other array and submits it on the other slot before finishing the current
// one; otherwise finishes the current one and returns to the main loop.
static void run_double_buffered(cd_workers *w, cd_sched_queue *q, cd_request **bufs[2], int n, int worker) {
    int slot = 0;
    cd_request **cur = bufs[0];
    pthread_mutex_unlock(&w->lock);
    stamp_batch(cur, n, cd_now_ns());
    q->submit(cur, n, worker, slot);
    pthread_mutex_lock(&w->lock);
    for (;;) {
        cd_request **next = bufs[1 - slot];
        int m = 0;
        uint64_t now = cd_now_ns(), wake;
        if (!w->queue_head && pick_queue(w, now, &wake) == q) {
            m = take_batch(w, q, next, now);
            if (w->active || w->queue_head) wake_one(w);
        }
        pthread_mutex_unlock(&w->lock);
        if (m) {
            stamp_batch(next, m, cd_now_ns());
            q->submit(next, m, worker, 1 - slot);
        }
        q->finish(cur, n, worker, slot);
        post_batch(w, cur, n, cd_now_ns()); // also wakes the loop for requests take_batch skipped
        if (m == 0) return;
        cur = next;
        n = m;
        slot = 1 - slot;
    }
}

static void *worker_main(void *p) {
    worker_arg arg = *(worker_arg *)p;
    free(p);
    cd_workers *w = arg.w;
    // max_batch is at most CD_MAX_BATCH requests of >= 1 item each; the
    // second array holds the next batch while double buffering.
    cd_request *batch[CD_MAX_BATCH], *batch2[CD_MAX_BATCH];
    cd_request **bufs[2] = {batch, batch2};
    pthread_mutex_lock(&w->lock);
    for (;;) {
        if (w->queue_head) {
            cd_request *req = w->queue_head;
            unlink_req(&w->queue_head, &w->queue_tail, req);
            req->queued = false;
            note_running(w, arg.index, &req, 1);
            pthread_mutex_unlock(&w->lock);
            run_generic(req, arg.index);
            respond_and_post(w, req);
            uv_async_send(&w->async);
            pthread_mutex_lock(&w->lock);
            w->running[arg.index].busy = false;
            continue;
        }
        uint64_t now = cd_now_ns(), wake;
        cd_sched_queue *q = pick_queue(w, now, &wake);
        if (q) {
            int n = take_batch(w, q, batch, now);
            // Let another worker look at what is left while this one computes.
            if (w->active || w->queue_head) wake_one(w);
            if (n == 0) { // everything taken was cancelled or late
                pthread_mutex_unlock(&w->lock);
                uv_async_send(&w->async);
                pthread_mutex_lock(&w->lock);
                continue;
            }
            note_running(w, arg.index, batch, n);
            if (q->submit && q->finish) {
                run_double_buffered(w, q, bufs, n, arg.index);
                w->running[arg.index].busy = false;
                continue;
            }
            cd_batch_fn run = q->run;
            const bool fill = q->fill;
            w->fill_running += fill;
            pthread_mutex_unlock(&w->lock);
            stamp_batch(batch, n, cd_now_ns());
            run(batch, n, arg.index);
            const uint64_t t1 = cd_now_ns();
            if (fill) { // the held-back requests' turn, while this worker responds
                pthread_mutex_lock(&w->lock);
                if (--w->fill_running == 0 && w->active) {
                    atomic_fetch_add(&w->submits, 1); // a polling worker looks again
                    wake_one(w);
                }
                pthread_mutex_unlock(&w->lock);
            }
            post_batch(w, batch, n, t1);
            w->running[arg.index].busy = false;
            continue;
        }
        if (w->stopping && !w->active && !w->queue_head) break;
        if (w->done_head) {
            // Completions of skipped requests wait for the loop.
            pthread_mutex_unlock(&w->lock);
            uv_async_send(&w->async);
            pthread_mutex_lock(&w->lock);
            // The lock was released: a request or a stop that came meanwhile
            // found no thread waiting to wake. Look again before sleeping.
            if (w->queue_head || w->stopping || pick_queue(w, cd_now_ns(), &wake)) continue;
        }
        if (wake == UINT64_MAX && w->spin_ns) {
            // Poll briefly before sleeping: a request that arrives meanwhile
            // starts without the futex wake-up (a few us per request at low
            // load; costs CPU only while idle, bounded by spin_ns).
            uint64_t seen = atomic_load(&w->submits);
            pthread_mutex_unlock(&w->lock);
            uint64_t until = cd_now_ns() + w->spin_ns;
            bool arrived = false;
            // sched_yield between polls: on a machine with fewer free
            // cores than runnable threads, the loop thread that is to
            // submit the next request may be queued on this very core.
            while (!arrived && cd_now_ns() < until) {
                sched_yield();
                arrived = atomic_load_explicit(&w->submits, memory_order_relaxed) != seen;
            }
            pthread_mutex_lock(&w->lock);
            // (An active fill queue held back by a running batch is no reason to poll again.)
            if (arrived || w->queue_head || w->stopping || pick_queue(w, cd_now_ns(), &wake)) continue;
        }
        wait_for_work(w, arg.index, wake);
    }
    w->alive--;
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

// Delivers every finished request to the completion callback (loop thread).
static void deliver(cd_workers *w) {
    pthread_mutex_lock(&w->lock);
    cd_request *list = w->done_head;
    size_t n = 0;
    for (cd_request *r = list; r; r = r->next) n++;
    w->done_head = w->done_tail = NULL;
    w->busy -= n;
    pthread_mutex_unlock(&w->lock);
    while (list) {
        cd_request *next = list->next;
        list->next = list->prev = NULL;
        w->complete(list, w->ud);
        list = next;
    }
}

void cd_workers_sync(cd_workers *w) {
    if (!w) return;
    deliver(w);
    // A worker in respond_and_post is packing or writing a response, or has
    // written one whose request is not on the done list yet (one lock away).
    // Yield to it rather than report stats without it: bounded by one
    // pack and one non-blocking write.
    while (atomic_load(&w->responding) != 0) sched_yield();
    deliver(w);
}

static void on_async(uv_async_t *a) { deliver(a->data); }

void cd_sched_queue_init(cd_sched_queue *q, cd_batch_fn run, const cd_model_conf *conf) {
    assert(conf->max_batch >= 1 && conf->max_queue >= 1);
    memset(q, 0, sizeof *q);
    q->run = run;
    q->conf = conf;
}

int cd_workers_init(cd_workers **out, uv_loop_t *loop, int n, cd_complete_fn complete, void *ud) {
    return cd_workers_init_spin(out, loop, n, 0, complete, ud);
}

int cd_workers_init_spin(cd_workers **out, uv_loop_t *loop, int n, uint64_t spin_ns, cd_complete_fn complete,
                         void *ud) {
    cd_workers *w = calloc(1, sizeof *w);
    if (!w) return CD_ENOMEM;
    w->threads = calloc((size_t)n, sizeof *w->threads);
    w->running = calloc((size_t)n, sizeof *w->running);
    w->waits = calloc((size_t)n, sizeof *w->waits);
    w->idle = calloc((size_t)n, sizeof *w->idle);
    if (!w->threads || !w->running || !w->waits || !w->idle) {
        free(w->threads);
        free(w->running);
        free(w->waits);
        free(w->idle);
        free(w);
        return CD_ENOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    for (int i = 0; i < n; i++) pthread_cond_init(&w->waits[i].cond, &ca);
    pthread_condattr_destroy(&ca);
    w->complete = complete;
    w->ud = ud;
    w->spin_ns = spin_ns;
    if (uv_async_init(loop, &w->async, on_async) != 0) {
        for (int i = 0; i < n; i++) pthread_cond_destroy(&w->waits[i].cond);
        free(w->threads);
        free(w->running);
        free(w->waits);
        free(w->idle);
        free(w);
        return CD_EINTERNAL;
    }
    w->async.data = w;
    for (int i = 0; i < n; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (!arg) break;
        arg->w = w;
        arg->index = i;
        pthread_mutex_lock(&w->lock);
        w->alive++;
        pthread_mutex_unlock(&w->lock);
        if (pthread_create(&w->threads[i], NULL, worker_main, arg) != 0) {
            free(arg);
            pthread_mutex_lock(&w->lock);
            w->alive--;
            pthread_mutex_unlock(&w->lock);
            break;
        }
        w->nthreads++;
    }
    if (w->nthreads == 0) {
        CD_ERROR("cannot start any worker thread");
        cd_workers_stop(w, 0); // no thread started: nothing to wait for
        return CD_EINTERNAL;
    }
    if (w->nthreads < n) CD_WARN("started %d of %d worker threads", w->nthreads, n);
    *out = w;
    return 0;
}

void cd_workers_set_respond(cd_workers *w, cd_respond_fn respond) {
    pthread_mutex_lock(&w->lock);
    w->respond = respond;
    pthread_mutex_unlock(&w->lock);
}

void cd_workers_submit(cd_workers *w, cd_request *req) {
    pthread_mutex_lock(&w->lock);
    req->pool = w;
    req->queue = NULL;
    req->queued = true;
    push(&w->queue_head, &w->queue_tail, req);
    w->busy++;
    atomic_fetch_add(&w->submits, 1);
    wake_one(w);
    pthread_mutex_unlock(&w->lock);
}

int cd_workers_submit_batched(cd_workers *w, cd_sched_queue *q, cd_request *req) {
    pthread_mutex_lock(&w->lock);
    if (q->n >= (size_t)q->conf->max_queue) {
        pthread_mutex_unlock(&w->lock);
        return CD_EOVERLOADED;
    }
    req->pool = w;
    req->queue = q;
    req->queued = true;
    push(&q->head, &q->tail, req);
    q->n++;
    q->items += req->items;
    queue_activate(w, q);
    w->busy++;
    atomic_fetch_add(&w->submits, 1);
    wake_one(w);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

void cd_workers_cancel(cd_workers *w, cd_request *req) {
    pthread_mutex_lock(&w->lock);
    if (!req->queued) {
        pthread_mutex_unlock(&w->lock);
        return;
    }
    if (req->queue) {
        queue_remove(w, req);
    } else {
        unlink_req(&w->queue_head, &w->queue_tail, req);
        req->queued = false;
    }
    req->status = CD_ECANCELLED;
    snprintf(req->err, sizeof req->err, "client went away");
    finish_locked(w, req);
    pthread_mutex_unlock(&w->lock);
    uv_async_send(&w->async);
}

size_t cd_workers_queue_len(cd_workers *w, const cd_sched_queue *q) {
    pthread_mutex_lock(&w->lock);
    size_t n = q->n;
    pthread_mutex_unlock(&w->lock);
    return n;
}

size_t cd_workers_busy(const cd_workers *w) {
    cd_workers *mw = (cd_workers *)w;
    pthread_mutex_lock(&mw->lock);
    size_t b = mw->busy;
    pthread_mutex_unlock(&mw->lock);
    return b;
}

int cd_workers_count(const cd_workers *w) { return w->nthreads; }

int cd_workers_idle(cd_workers *w) {
    pthread_mutex_lock(&w->lock);
    int n = w->nidle;
    pthread_mutex_unlock(&w->lock);
    return n;
}

static void on_async_closed(uv_handle_t *h) {
    cd_workers *w = h->data;
    pthread_mutex_destroy(&w->lock);
    // Every thread started was joined (or none was: the conds exist for all).
    int n = w->nthreads > 0 ? w->nthreads : 0;
    for (int i = 0; i < n; i++) pthread_cond_destroy(&w->waits[i].cond);
    free(w->threads);
    free(w->running);
    free(w->waits);
    free(w->idle);
    free(w);
}

void cd_workers_stop_begin(cd_workers *w) {
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    wake_all(w);
    pthread_mutex_unlock(&w->lock);
}

int cd_workers_alive(cd_workers *w) {
    pthread_mutex_lock(&w->lock);
    int n = w->alive;
    pthread_mutex_unlock(&w->lock);
    return n;
}

void cd_workers_stop_finish(cd_workers *w) {
    // Every thread has returned from worker_main (alive == 0): these joins
    // only reap them.
    for (int i = 0; i < w->nthreads; i++) pthread_join(w->threads[i], NULL);
    w->joined = true;
    deliver(w);
    uv_close((uv_handle_t *)&w->async, on_async_closed);
}

void cd_workers_abandon(cd_workers *w) {
    if (w->joined) return;
    for (int i = 0; i < w->nthreads; i++) pthread_detach(w->threads[i]);
    w->joined = true; // nor joined later
}

int cd_workers_stop(cd_workers *w, uint64_t timeout_ms) {
    cd_workers_stop_begin(w);
    if (timeout_ms > 86400000ull) timeout_ms = 86400000ull;
    uint64_t deadline = cd_now_ns() + timeout_ms * 1000000ull;
    int alive;
    while ((alive = cd_workers_alive(w)) > 0 && cd_now_ns() < deadline) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (alive > 0) return alive;
    cd_workers_stop_finish(w);
    return 0;
}

size_t cd_workers_describe(cd_workers *w, const char *pool, char *buf, size_t len) {
    size_t off = 0, busy = 0;
    uint64_t now = cd_now_ns();
    buf[0] = '\0';
    pthread_mutex_lock(&w->lock);
    for (int i = 0; i < w->nthreads; i++) {
        const struct worker_running *r = &w->running[i];
        if (!r->busy) continue;
        busy++;
        int n = snprintf(buf + off, len - off, "%s%s %d: %s (msgid %u%s) for %.1f s", off ? "; " : "", pool, i,
                         cd_method_name(r->method), (unsigned)r->msgid, r->nreqs > 1 ? " and others" : "",
                         (double)(now - r->since_ns) / 1e9);
        if (n < 0 || (size_t)n >= len - off) break;
        off += (size_t)n;
    }
    pthread_mutex_unlock(&w->lock);
    return busy;
}
