#ifndef CD_CLIENT_CONN_INTERNAL_H
#define CD_CLIENT_CONN_INTERNAL_H

// A connection of libconvd inside: the waiters, the connection struct, and
// the two structures that index the waiters (client/waiters.c): the msgid
// table and the deadline heap of the async calls. Internal to client/.

#include "client/client-internal.h"
#include "core/limits.h"
#include "proto/rpc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    WAIT_SYNC,  // a thread sleeps on `cond`
    WAIT_ASYNC, // `fn` is called on the reader thread
} waiter_kind;

// One call waiting for its response.
typedef struct cd_waiter {
    uint32_t msgid;          // the request's msgid
    waiter_kind kind;        // see waiter_kind
    int done;                // sync: 1 once resp or status is set
    int status;              // sync: 0: resp holds the response; <0: failure
    cd_rpc_msg resp;         // sync: the response (owned until handed over)
    pthread_cond_t cond;     // sync: signalled when done
    struct cd_waiter *hnext; // chain of the msgid table bucket
    // async only
    int64_t deadline;               // CLOCK_MONOTONIC ms; -1: none
    int timeout_ms;                 // the timeout the deadline came from (messages)
    size_t heap_idx;                // index in the deadline heap; SIZE_MAX: not in it
    cd_client_async_fn fn;          // completion
    void *fn_ud;                    // its argument
    char method[CD_MAX_METHOD + 1]; // for messages
} cd_waiter;

typedef enum {
    CONN_OPEN,   // usable
    CONN_BROKEN, // the stream is unusable (peer closed, garbage, half-written
                 // request); new calls fail with CD_ECLOSED and `final_msg`
} conn_state;

struct convd_conn {
    int fd;              // the socket (non-blocking)
    int wake_fd;         // eventfd: wakes the reader (earlier deadline)
    convd_opts opts;     // options in effect
    pthread_mutex_t mu;  // guards everything below up to `reader`
    pthread_mutex_t wmu; // serialises writes
    cd_waiter **table;   // msgid -> waiter, chained buckets
    size_t table_mask;   // buckets - 1 (a power of two)
    size_t nwaiters;     // waiters in the table
    cd_waiter **heap;    // async waiters with a deadline, min-heap
    size_t heap_len, heap_cap;
    int64_t reader_wake_at;   // when the sleeping reader wakes; INT64_MAX: never
    size_t inflight;          // async requests accepted and not completed
    size_t max_inflight;      // bound on `inflight`
    int inflight_fail;        // 1: at the bound fail with CD_EOVERLOADED; 0: wait
    pthread_cond_t slot_cond; // signalled when `inflight` drops or the conn breaks
    conn_state state;         // see conn_state
    int final_status;         // status given to waiters once broken
    char final_msg[256];      // why it broke (first reason wins)
    atomic_uint next_msgid;   // msgid of the next request
    pthread_t reader;         // the reader thread
    int reader_started;       // 1 once `reader` must be joined
};

// The msgid table and the deadline heap (client/waiters.c); the caller
// holds c->mu.
// Adds w; 0 or CD_ENOMEM (the table stays as it was).
int cd_client_table_add_locked(convd_conn *c, cd_waiter *w);
cd_waiter *cd_client_table_find_locked(convd_conn *c, uint32_t msgid);
// Unlinks w when it is in the table; returns 1 when it was.
int cd_client_table_remove_locked(convd_conn *c, cd_waiter *w);
// Adds an async waiter with a deadline; 0 or CD_ENOMEM.
int cd_client_heap_push_locked(convd_conn *c, cd_waiter *w);
// Removes w when it is in the heap.
void cd_client_heap_remove_locked(convd_conn *c, cd_waiter *w);

#endif // CD_CLIENT_CONN_INTERNAL_H
