#ifndef CD_DAEMON_REQUEST_H
#define CD_DAEMON_REQUEST_H

// A request that runs on a worker thread. The event loop creates it (taking
// ownership of the decoded message, whose bytes tensor views point into),
// hands it to the worker pool, and gets it back through uv_async once `work`
// has run; the loop then packs the response (`pack`) and writes it.
//
// Lifetime: created and freed on the loop thread only. While a request is
// queued or running -- and until the loop has taken it back from the
// workers -- it counts in its connection's `inflight`, and the connection is
// not closed (uv_close) nor freed before that drops to zero: a worker that
// holds a request may therefore touch req->conn (cd_conn_respond).
//
// Direct responses: a request whose `pack_on_worker` is set is packed and
// written by the worker that ran it (cd_conn_respond, daemon/conn-respond.c),
// before it goes back to the loop; `sent` then tells the loop what is left to do.
//
// Bookkeeping (this file's cd_request_budget_check, cd_request_started,
// cd_request_finished): the handlers admit and count their requests here,
// through the request's origin, never through the connection itself; the
// connection is transport only (daemon/conn.h).

#include "daemon/access.h"
#include "daemon/regions.h"
#include "daemon/reply.h"
#include "daemon/settings.h"
#include "daemon/stats.h"
#include "proto/rpc.h"

#include <msgpack.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cd_conn cd_conn;
typedef struct cd_request cd_request;
typedef struct cd_server cd_server;
typedef struct cd_sched_queue cd_sched_queue;
typedef struct cd_workers cd_workers;

// The bytes of requests the daemon holds, against max-buffered: what the
// connections' readers hold or have committed to, plus accepted, unanswered
// requests. One per server (loop thread only).
typedef struct {
    size_t held;            // bytes held now
    const cd_settings *set; // max-buffered (SIGHUP may change it in place)
} cd_request_budget;

// Where requests come from: one per connection, embedded in it and filled
// by it. Handlers reach their client through this, not through the
// connection: its regions, its peer (access checks), its id (logs), and the
// list of what it has in flight (cancelled when it goes away).
typedef struct {
    cd_conn *conn;             // where answers go (opaque outside conn*.c)
    uint64_t id;               // the connection's id, for logs
    cd_peer *peer;             // who connected (access.h)
    cd_region_set *regions;    // its shared-memory regions (loop thread)
    cd_request_budget *budget; // the server's
    unsigned inflight;         // requests started and not yet finished
    cd_request *reqs;          // those requests (for cancellation)
} cd_request_origin;

// A dispatcher: the connection hands every request message to it (the
// server gives the connections one; daemon/methods.c's is the real one). It
// takes ownership of *msg and returns 0 with the packed result value in
// `result`, a negative CD_E* code with a reason in err, or CD_REQUEST_QUEUED
// when a request went to the workers (answered when it comes back).
typedef int (*cd_request_dispatch_fn)(void *ud, cd_request_origin *from, cd_rpc_msg *msg, msgpack_sbuffer *result,
                                      char *err, size_t errlen);
#define CD_REQUEST_QUEUED 1

// Runs on worker thread `worker` (0..workers-1). Returns 0 or a negative
// CD_E* code with req->err filled.
typedef int (*cd_work_fn)(cd_request *req, int worker);
// Runs after a successful `work`: packs the result value (exactly one msgpack
// object). Runs on the loop, or on the worker when req->pack_on_worker is set.
// Returns 0 or a negative code (then an error is sent).
typedef int (*cd_pack_fn)(cd_request *req, msgpack_packer *pk);
// Runs on the loop after `work`, whether or not the client is still there,
// before the response is packed: effects that must happen even for a client
// that went away (install a loaded model, count a batch).
typedef void (*cd_done_fn)(cd_request *req);
// Releases the method state (on the loop, always called once).
typedef void (*cd_release_fn)(cd_request *req);

// What a method does with its requests: one table per method, shared by all
// of them, so a method's parts are named together once.
typedef struct {
    cd_work_fn work;       // worker part (NULL: run by its model queue's batch function)
    cd_done_fn done;       // loop part after work (may be NULL)
    cd_pack_fn pack;       // loop part after success (NULL: nil result)
    cd_release_fn release; // frees `state` (may be NULL)
    // Runs once the response is packed, before any byte of it is written (on
    // the thread that writes it): lets go of what the client may reuse as
    // soon as it has the answer (its shared-memory regions). May be NULL;
    // must be safe to run again (a failed pack on a worker is retried).
    cd_release_fn answered;
} cd_request_ops;

// What happened to a request's response before the loop got it back.
typedef enum {
    CD_SENT_NONE,    // nothing: the loop packs and sends it (the default)
    CD_SENT_WRITTEN, // the worker wrote the whole response to the socket
    CD_SENT_PARTIAL, // the worker wrote reply[0..resp_off): the loop must queue the
                     // rest before any other byte of the connection
    CD_SENT_BEHIND,  // other bytes were queued: reply holds the whole response,
                     // for the loop to queue after them
    CD_SENT_CLOSED,  // the connection took no more bytes: response dropped
    CD_SENT_FAILED,  // write(2) failed (peer gone): the loop drops the connection
} cd_sent;

struct cd_request {
    cd_request_origin *from;   // where it came from (NULL: internal work, e.g. SIGHUP loads)
    cd_conn *conn;             // connection that will get the response (from->conn)
    uint32_t msgid;            // msgid of the request
    cd_method_id method;       // which method (for stats and logs)
    cd_rpc_msg msg;            // the request message, owned by the request
    const cd_request_ops *ops; // the method's parts (never NULL)
    void *state;               // method-specific state
    cd_server *srv;            // the server (for done/pack)
    atomic_bool cancelled;     // set by the loop when the peer is gone: skip work
    int status;                // result of work (0 or CD_E*)
    char err[256];             // reason when status < 0
    uint64_t t_received_ns;    // uv_hrtime() when decoded
    size_t charge;             // bytes of the budget it holds until finished (its
                               // message), set by cd_request_started
    uint64_t deadline_ns;      // must start by then (uv_hrtime), 0 = no limit
    bool pack_on_worker;       // `pack` may run on the worker: it reads only the
                               // request's state and immutable model data, and
                               // needs nothing `done` does
    cd_sent sent;              // set by cd_conn_respond on the worker
    cd_reply reply;            // packed response (CD_SENT_PARTIAL/BEHIND); may point
                               // into the state's output buffers (daemon/reply.h)
    size_t resp_off;           // bytes of it already written (CD_SENT_PARTIAL)
    uint64_t t_sent_ns;        // when the worker wrote the response (0: not by it)
    // Scheduling (daemon/workers.c; fields guarded by the pool lock while the
    // request is queued, then owned by the worker that took it):
    cd_workers *pool;      // the pool it was submitted to (cd_workers_cancel)
    cd_sched_queue *queue; // the model queue it waits in (NULL: generic FIFO)
    int items;             // batch items it carries (shape[0])
    bool queued;           // still in a queue (cancellable without compute)
    uint64_t t_start_ns;   // when its run began (0: never ran)
    uint64_t t_end_ns;     // when its run ended
    int batch_items;       // items of the model run it was part of
    bool batch_leader;     // the first request of that run (counts the batch once)
    cd_request *prev;      // links in the worker queues
    cd_request *next;
    cd_request *conn_prev; // links in the connection's in-flight list
    cd_request *conn_next;
};

// Allocates a request of method `method`, run by `ops` (static), that takes
// ownership of *msg (msg is zeroed); `from` may be NULL (internal work).
// Returns NULL when out of memory (msg is left untouched then).
cd_request *cd_request_new(cd_request_origin *from, cd_rpc_msg *msg, cd_method_id method, const cd_request_ops *ops);
// Releases the method state, the message and the request.
void cd_request_free(cd_request *req);

// The memory budget for work that is queued (infer, load, plan): returns 0
// when the server may hold msg until it is answered, or CD_EOVERLOADED with
// a reason when the bytes held plus msg's would pass max-buffered (counted
// in budget_refused).
int cd_request_budget_check(const cd_request_budget *b, const cd_rpc_msg *msg, char *err, size_t errlen);
// A request was handed to the workers: charges its message to the budget
// and counts it in its origin's in-flight list (a no-op without an origin).
void cd_request_started(cd_request *req);
// A request came back from the workers (loop thread): the reverse of
// cd_request_started.
void cd_request_finished(cd_request *req);

#endif // CD_DAEMON_REQUEST_H
