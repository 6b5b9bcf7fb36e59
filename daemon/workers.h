#ifndef CD_DAEMON_WORKERS_H
#define CD_DAEMON_WORKERS_H

// The worker pool and the scheduler. N threads serve two kinds of queue:
//
//  - one generic FIFO (`load` and other one-off work): a request's `work`
//    runs alone;
//  - one queue per model version (cd_sched_queue, embedded in the model's
//    registry entry) for `infer`, with dynamic batching: a worker takes the
//    queued requests of one model, in arrival order, up to max_batch items
//    (requests of different batch sizes are combined), once the queue holds
//    max_batch items or its oldest request has waited max_delay_ns; the
//    queue's `run` callback computes them in one model run.
//
// Generic work goes first; among ready model queues the one whose oldest
// request arrived first is served (FIFO across models). Requests that were
// cancelled (their client went away) or whose deadline passed are taken out
// without compute (CD_ECANCELLED / CD_ETIMEOUT). Every request, run or not,
// goes back to the loop through uv_async_send and the completion callback,
// in completion order. A request a worker ran is first given to the respond
// hook on that worker (cd_workers_set_respond): the daemon writes its
// response there, so the hand-off to the loop is off the latency path. Only
// the loop thread calls these functions.

#include "daemon/model-conf.h"
#include "daemon/request.h"
#include "core/limits.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct cd_workers cd_workers;

// Called on the loop thread for every finished (or cancelled) request.
typedef void (*cd_complete_fn)(cd_request *req, void *ud);

// Computes reqs[0..n-1] (one model, sum of items <= max_batch) on worker
// `worker`; sets each request's status (0 or CD_E*, err filled). Runs on a
// worker thread without the pool lock.
typedef void (*cd_batch_fn)(cd_request **reqs, int n, int worker);

// Optional split of a cd_batch_fn into two halves, for double buffering
// within one worker: submit starts computing reqs[0..n-1] on the worker's
// buffer `slot` (0 or 1: e.g. an exec each) and may return before the results
// are ready; finish waits for them and sets each request's status. Both run
// on the worker thread without the pool lock; finish is called exactly once
// after each submit, with the same arguments.
typedef void (*cd_batch_submit_fn)(cd_request **reqs, int n, int worker, int slot);

// 1 when requests a and b may run in one batch (e.g. inputs of one size).
typedef bool (*cd_batch_same_fn)(const cd_request *a, const cd_request *b);

// The queue of one model version. Configure with cd_sched_queue_init; the
// pool owns the list fields. It must outlive the requests queued in it (the
// registry entry holding it is referenced by each of them).
struct cd_sched_queue {
    cd_batch_fn run;           // computes a batch
    const cd_model_conf *conf; // max_batch items per run, max_delay_us for more
                               // after the oldest arrived, max_queue waiting
    // Double buffering (both or neither; NULL after cd_sched_queue_init):
    // when set, a worker that has submitted a batch and finds this queue is
    // the one it would serve next anyway (no generic work waiting, this
    // queue ready and first in order) takes that next batch and submits it
    // on the other slot before it finishes the first, so the next batch's
    // upload overlaps the first one's compute. Otherwise `run` is used.
    cd_batch_submit_fn submit;
    cd_batch_submit_fn finish;
    // When set, a batch ends before the first request that may not join its
    // first one (requests of another input size); NULL: any may.
    cd_batch_same_fn same;
    // Fill batches (--fill-batches): while a batch of any fill queue runs,
    // a fill queue's requests wait until they make a full batch or no such
    // batch runs any more, instead of forming small batches that could only
    // wait behind it for the cores (the CPU executor runs one wide job at a
    // time). Requests that arrive meanwhile join one batch, run when the
    // compute frees.
    bool fill;
    // Guarded by the pool lock:
    cd_request *head, *tail; // requests waiting, oldest first
    size_t n;                // requests waiting
    int items;               // their items
    bool active;             // linked in the pool's list of non-empty queues
    cd_sched_queue *prev_active, *next_active;
};

// conf must outlive q and hold values in the ranges of the settings rows (daemon/model-conf.h)
// (max_batch and max_queue >= 1).
void cd_sched_queue_init(cd_sched_queue *q, cd_batch_fn run, const cd_model_conf *conf);

// Starts n threads. Returns 0, CD_ENOMEM or CD_EINTERNAL.
int cd_workers_init(cd_workers **out, uv_loop_t *loop, int n, cd_complete_fn complete, void *ud);
// The same, with idle workers polling for new work for spin_ns before they
// sleep on the condition variable (0: sleep at once).
int cd_workers_init_spin(cd_workers **out, uv_loop_t *loop, int n, uint64_t spin_ns, cd_complete_fn complete, void *ud);
// Called on the worker thread, without the pool lock, for each request a
// worker ran (not for those cancelled or timed out in a queue), after its
// status is set and before it is handed back to the loop.
typedef void (*cd_respond_fn)(cd_request *req);

// Sets the respond hook (NULL: none, the default). Call before submitting.
void cd_workers_set_respond(cd_workers *w, cd_respond_fn respond);
// Queues req on the generic FIFO. Never blocks and never fails.
void cd_workers_submit(cd_workers *w, cd_request *req);
// Queues req (req->items set) on model queue q. Returns 0, or
// CD_EOVERLOADED when q already holds q->limit requests (req untouched).
int cd_workers_submit_batched(cd_workers *w, cd_sched_queue *q, cd_request *req);
// Takes a still-queued request out of its queue and completes it with
// CD_ECANCELLED (delivered through the completion callback like any other).
// Does nothing for a request that a worker has already taken.
void cd_workers_cancel(cd_workers *w, cd_request *req);
// Loop thread: delivers every finished request now, including those whose
// response a worker has already written but not yet handed back (waits for
// that short step). The stats methods call it first, so that a client that
// has its answer sees it counted.
void cd_workers_sync(cd_workers *w);
// Requests waiting in q.
size_t cd_workers_queue_len(cd_workers *w, const cd_sched_queue *q);
// Requests queued or running (and finished but not yet delivered).
size_t cd_workers_busy(const cd_workers *w);
// Number of worker threads.
int cd_workers_count(const cd_workers *w);
// Threads asleep waiting for work now: a thread counts once it has looked
// at the queues, found nothing to take and polled its spin_ns.
int cd_workers_idle(cd_workers *w);
// Stopping, bounded: no thread is ever joined while it may still be running
// (a long load or profile cannot hang the exit).
//
// Starts the stop: the threads finish the queues (without batching delays)
// and return.
void cd_workers_stop_begin(cd_workers *w);
// Threads that have not returned yet (0 once cd_workers_stop_begin's work is
// done).
int cd_workers_alive(cd_workers *w);
// When cd_workers_alive is 0: joins the threads, delivers the last
// completions and closes the async handle; w is freed in its close callback.
void cd_workers_stop_finish(cd_workers *w);
// The process is about to _exit with threads of w perhaps still running
// (the forced exit of a shutdown): detaches them, since nothing will join
// them, and frees nothing they may still use. Loop thread only.
void cd_workers_abandon(cd_workers *w);
// Both, waiting at most timeout_ms for the threads. Returns 0 (stopped; w
// goes in its close callback), or the number of threads still running: they
// are abandoned and w must not be freed (the process is to exit).
int cd_workers_stop(cd_workers *w, uint64_t timeout_ms);
// Describes what the threads run now ("worker 0: load (msgid 3) for 12.5 s;
// ..."; `pool` names them) into buf. Returns the number of busy threads.
size_t cd_workers_describe(cd_workers *w, const char *pool, char *buf, size_t len);

#endif // CD_DAEMON_WORKERS_H
