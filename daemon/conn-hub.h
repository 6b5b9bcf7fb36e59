#ifndef CD_DAEMON_CONN_HUB_H
#define CD_DAEMON_CONN_HUB_H

// What the connections share: the server owns one hub (cd_server.hub),
// fills in its wiring before the first accept and reads its counters; the
// connections (daemon/conn.c) keep the rest. A connection sees only its
// hub, never the server: the server hands it the dispatcher and the hooks
// it calls back, so the transport depends on nothing above it.
// Loop thread only.

#include "daemon/request.h"
#include "daemon/settings.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct cd_conn cd_conn;
typedef struct cd_workers cd_workers;

#define CD_READ_CHUNK (64u << 10) // bytes per read callback

typedef struct cd_conn_hub {
    // -- wiring, set by the owner --
    uv_loop_t *loop;                 // the one event loop
    uv_stream_t *listener;           // where connections are accepted from
    const cd_settings *set;          // limits (SIGHUP may change them in place)
    cd_workers *workers;             // takes back cancelled requests that name no pool
    cd_request_dispatch_fn dispatch; // every request message goes to it
    void *dispatch_ud;               //   with this
    void (*freed)(void *owner);      // a connection was freed (the owner may finish)
    void *owner;                     //   with this
    // -- state, kept by the connections --
    cd_request_budget budget;    // bytes of requests held (max-buffered)
    cd_conn *conns;              // every connection not yet freed (doubly linked)
    cd_conn *backlog;            // connections with unprocessed messages (singly linked)
    uv_idle_t backlog_idle;      // runs while the backlog is not empty
    size_t nconns;               // connections not yet freed (incl. refused ones)
    size_t nactive;              // accepted, not refused, not yet freed
    size_t unsent;               // answer bytes handed to uv_write, not yet written (all connections)
    size_t conn_cap;             // max-connections, lowered to fit RLIMIT_NOFILE (owner)
    bool draining;               // shutdown begun: new connections drain at once
    uint64_t next_conn_id;       // id for logs
    uint64_t last_reject_log_ns; // rate limit for refused-connection lines
    char readbuf[CD_READ_CHUNK]; // shared read buffer (consumed synchronously)
} cd_conn_hub;

#endif // CD_DAEMON_CONN_HUB_H
