#ifndef CD_DAEMON_CONN_H
#define CD_DAEMON_CONN_H

// One client connection. Reads go through proto's cd_rpc_reader; at most
// CD_CONN_BATCH messages are handled per read callback or idle turn (the rest
// wait in the reader, with reads paused, so one busy client cannot starve the
// others nor make us buffer without bound). The loop's replies are appended
// to `out` and sent once per batch. A worker that finishes a request writes
// its response to the socket itself (cd_conn_respond) when nothing else of
// the connection is queued; otherwise the bytes go through the loop's write
// queue (uv_write). Both go through one function (conn_send in conn.c) under
// the connection's write lock. A connection is freed only in its uv_close
// callback, and uv_close is called only once no request of it is queued,
// running on a worker, or finished and not yet taken back by the loop
// (`origin.inflight` is the reference count that keeps it alive for the
// workers).
//
// Transport only: a connection knows its hub (daemon/conn-hub.h), not the
// server. Each request message goes to the hub's dispatcher, which answers
// at once or queues work; the request bookkeeping (budget, in-flight list)
// is daemon/request.c's, through the connection's `origin`. Only the
// connection's own files (conn.c, conn-respond.c, conn-internal.h) and its
// owner (server.c) include this header.

#include "daemon/access.h"
#include "daemon/conn-hub.h"
#include "daemon/regions.h"
#include "daemon/request.h"
#include "proto/rpc.h"

#include <msgpack.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define CD_CONN_BATCH 64            // messages handled per callback
#define CD_CONN_OUT_HIGH (4u << 20) // unsent response bytes that pause reads
#define CD_CONN_OUT_LOW (1u << 20)  // ... and resume them
// Unsent bytes beyond which a client that does not read is dropped: twice
// max-message, at least 64 MiB (requests already in flight when reads pause
// can still add their responses; this bounds that too).
#define CD_CONN_OUT_MAX(max_message) ((size_t)(max_message)*2 > (64u << 20) ? (size_t)(max_message)*2 : (64u << 20))

typedef enum {
    // Reading requests and answering them.
    CD_CONN_OPEN,
    // The peer shut down its sending side (EOF): no more reads; the complete
    // messages already received are answered, then the connection closes.
    CD_CONN_HALF_CLOSED,
    // A protocol error (or a refusal) was answered: nothing more is read or
    // handled; closes once that reply is flushed and nothing is in flight.
    CD_CONN_FAILED,
    // The server is shutting down: requests still read are answered (work
    // that would start new computation gets E_SHUTDOWN); closes as soon as it
    // is idle (nothing in flight, buffered, unsent, or unread in the kernel).
    CD_CONN_DRAINING,
    // The peer is gone (read/write error) or the drain timed out: nothing is
    // written any more; queued work is cancelled; uv_close follows once the
    // requests still on workers have come back.
    CD_CONN_DEAD,
    // uv_close was called; the struct is freed in the close callback.
    CD_CONN_CLOSING,
} cd_conn_state;

struct cd_conn {
    cd_conn_hub *hub;         // what the connections share (the server's)
    cd_request_origin origin; // its requests: in flight, budget, regions, peer
    uv_pipe_t pipe;           // the socket (pipe.data == this)
    cd_conn_state state;      // lifecycle, see above
    uint64_t id;              // for logs
    bool refused;             // over max-connections: refused with E_OVERLOADED
    cd_rpc_reader *reader;    // streaming msgpack-RPC reader
    msgpack_sbuffer out;      // packed responses not yet handed to uv_write
    size_t write_pending;     // bytes handed to uv_write and not yet written
    bool reading;             // uv_read_start is active
    bool backlog;             // the reader may hold complete, unhandled messages
    bool in_backlog_list;     // linked in hub->backlog
    bool out_paused;          // write_pending went over CD_CONN_OUT_HIGH
    int fd;                   // the socket's descriptor (set at accept, then fixed)
    cd_peer peer;             // who connected (SO_PEERCRED at accept; access.h)
    // The write lock exists because two kinds of thread write response bytes
    // to this socket: the loop (its own replies, and everything queued) and
    // the workers (a finished request's response, written directly to save
    // the hand-off through the loop). Under it, "may raw bytes go out now"
    // and the non-blocking write(2) are one step, so two messages never
    // interleave; and the loop marks the connection closed under it before
    // uv_close, so a worker never writes to a closed or reused descriptor.
    // Held only around one non-blocking write(2) and a few field updates;
    // never held while taking another lock.
    pthread_mutex_t wlock;
    bool wclosed;       // [wlock] no more bytes go out (dead, closing, write failed)
    size_t wowned;      // [wlock] bytes only the loop may write: in its uv_write
                        //   queue, or a worker's remainder on its way to it;
                        //   raw writes happen only while this is 0
    unsigned whandoffs; // [wlock] worker remainders not yet queued by the loop:
                        //   the loop holds its own bytes back until 0
    // Limits (loop thread): idle-timeout, read-timeout, the memory budget.
    uint64_t last_active_ns;  // last byte received, or last request answered
    uint64_t msg_start_ns;    // a message is partly received since (0: none)
    size_t rx_charge;         // bytes of hub->budget charged for the reader
    size_t skip_bytes;        // size of the message being skipped (over budget)
    unsigned char sample[16]; // first bytes of the last read (protocol-error logs)
    size_t nsample;
    cd_region_set regions; // shared-memory regions (loop thread; daemon/regions.c)
    cd_conn *prev, *next;  // hub->conns
    cd_conn *backlog_next; // hub->backlog
};

// Starts the hub's own handle (the backlog idle) on hub->loop; the owner
// closes hub->backlog_idle when it stops.
void cd_conn_hub_init(cd_conn_hub *hub);

// Accepts a pending connection from the hub's listener (or refuses it when
// at the connection cap). Returns 0 or a negative code.
int cd_conn_accept(cd_conn_hub *hub);

// A request came back from the workers: answers it (unless the peer is gone),
// frees it, and resumes reading/closing as needed.
void cd_conn_request_done(cd_request *req);

// Worker thread (the pool's respond hook): packs and writes the response of
// a finished request whose pack_on_worker is set, when nothing else of its
// connection is queued; sets req->sent to what the loop still has to do
// (see cd_sent). Leaves other requests alone (CD_SENT_NONE).
void cd_conn_respond(cd_request *req);

// The idle-timeout and read-timeout checks over every connection (the
// server's timer calls it): a connection with nothing in flight or pending
// that has received nothing for idle-timeout is closed; one whose partly
// received message has not completed within read-timeout of its first byte
// is answered E_TIMEOUT and closed. Reads paused by the daemon itself do not
// count against the client (the message clock restarts when they resume).
void cd_conn_sweep(cd_conn_hub *hub);

// Server shutdown: OPEN connections start draining, and so will new ones.
void cd_conn_drain_all(cd_conn_hub *hub);
// Drain timeout / forced stop: drops every connection (see CD_CONN_DEAD).
void cd_conn_kill_all(cd_conn_hub *hub);

#endif // CD_DAEMON_CONN_H
