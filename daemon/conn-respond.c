// A request's way back to its connection: the worker packs the response and
// writes it itself when nothing else of the connection is queued, else hands
// the bytes to the loop, which then takes the request back (see conn.h).

#include "daemon/conn-internal.h"

#include "daemon/log.h"
#include "daemon/stats.h"
#include "core/errors.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

// Packs the whole response message of a finished request into r (empty on
// entry): [1, msgid, nil, result], or [1, msgid, {code, message}, nil] when
// it failed or its result cannot be packed (req->status becomes that code).
// Big tensors of the result are referenced, not copied (daemon/reply.h).
// Runs on the loop, or on a worker for pack_on_worker requests. Returns 0,
// or CD_ENOMEM when not even the error fits (r is then empty).
static int conn_pack_message(cd_request *req, cd_reply *r) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, r, cd_reply_write);
    const char *message = req->err[0] ? req->err : NULL;
    if (req->status == 0) {
        int rc = cd_rpc_pack_response_ok_begin(&pk, req->msgid);
        if (rc == 0) rc = req->ops->pack ? req->ops->pack(req, &pk) : msgpack_pack_nil(&pk);
        if (rc == 0) return 0;
        cd_reply_clear(r);
        req->status = rc < 0 ? rc : CD_ENOMEM;
        message = "cannot pack the result";
    }
    if (cd_rpc_pack_response_error(&pk, req->msgid, req->status, message ? message : cd_strerror(req->status)) != 0) {
        cd_reply_clear(r);
        return CD_ENOMEM;
    }
    return 0;
}

// conn_pack_message into req->reply, then the request's `answered` part: the
// answer is whole, so what the client may reuse once it reads it is let go
// now, before any byte of it can reach the client.
static int conn_pack_response(cd_request *req) {
    cd_reply_clear(&req->reply);
    int rc = conn_pack_message(req, &req->reply);
    if (rc == 0 && req->ops->answered) req->ops->answered(req);
    return rc;
}

void cd_conn_respond(cd_request *req) {
    cd_conn *c = req->conn;
    if (!c || !req->pack_on_worker || req->status == CD_ECANCELLED || atomic_load(&req->cancelled))
        return;                               // the loop answers (or counts the drop) as for any request
    if (conn_pack_response(req) != 0) return; // the loop tries again, and drops the connection if it fails too
    size_t written;
    struct iovec iov[CD_REPLY_MAX_IOV];
    int niov = cd_reply_iov(&req->reply, 0, iov);
    switch (cd_conn_sendv(c, iov, niov, req->reply.total, true, &written)) {
    case CONN_SENT:
        req->sent = CD_SENT_WRITTEN;
        req->t_sent_ns = uv_hrtime(); // the clock of t_received_ns (thread-safe)
        CD_STAT_INC(resp_direct);
        break;
    case CONN_QUEUE:
        req->sent = CD_SENT_PARTIAL;
        req->resp_off = written;
        CD_STAT_INC(resp_partial);
        break;
    case CONN_HOLD:
        req->sent = CD_SENT_BEHIND;
        CD_STAT_INC(resp_queued);
        break;
    case CONN_CLOSED: req->sent = CD_SENT_CLOSED; break;
    case CONN_FAILED: req->sent = CD_SENT_FAILED; break;
    }
    // An error answer counts when it goes out (the loop counts BEHIND ones
    // when it queues them: the client may be gone by then).
    if (req->status != 0 &&
        (req->sent == CD_SENT_WRITTEN || req->sent == CD_SENT_PARTIAL || req->sent == CD_SENT_FAILED))
        cd_stats_error(req->status);
    if (req->sent != CD_SENT_PARTIAL && req->sent != CD_SENT_BEHIND) cd_reply_destroy(&req->reply);
}

// Queues req->reply from byte off on (counted in wowned) behind what is
// queued: a reply without references as a buffer of its own, one that points
// into req's outputs with req riding along (freed once written). Returns
// true when req was taken.
static bool conn_queue_reply(cd_conn *c, cd_request *req, size_t off) {
    if (req->reply.nref == 0) {
        size_t len = req->reply.head.size;
        cd_conn_queue_write(c, msgpack_sbuffer_release(&req->reply.head), off, len);
        return false;
    }
    // Only the reply is needed from here on: the request's message (its input
    // bytes) goes now, not when the last byte of the answer does.
    cd_rpc_msg_free(&req->msg);
    cd_conn_queue_reply(c, req, off);
    return true;
}

// Loop side of a response a worker left partly written: its remainder goes
// to the write queue first (it is counted in wowned already), then the
// bytes the loop held back meanwhile may follow. Returns true when req was
// taken (conn_queue_reply).
static bool conn_take_remainder(cd_conn *c, cd_request *req) {
    size_t rest = req->reply.total - req->resp_off;
    pthread_mutex_lock(&c->wlock);
    c->whandoffs--;
    bool closed = c->wclosed;
    if (closed) c->wowned -= rest;
    pthread_mutex_unlock(&c->wlock);
    if (closed || !cd_conn_writable(c)) {
        CD_STAT_INC(req_dropped);
        return false;
    }
    return conn_queue_reply(c, req, req->resp_off);
}

// The loop sends a whole packed reply: appended to `out` (copied) when it
// has no references or other bytes wait there; else written from where it
// lies, the rest queued with req riding along. Returns true when req was
// taken; kills the connection when out of memory.
static bool conn_send_reply(cd_conn *c, cd_request *req) {
    if (req->reply.nref > 0) cd_conn_flush(c);
    if (!cd_conn_writable(c)) return false; // the flush found the peer gone
    if (req->reply.nref == 0 || c->out.size > 0) {
        if (cd_reply_copy_to(&req->reply, &c->out) != 0) cd_conn_kill(c);
        return false;
    }
    size_t written;
    struct iovec iov[CD_REPLY_MAX_IOV];
    int niov = cd_reply_iov(&req->reply, 0, iov);
    switch (cd_conn_sendv(c, iov, niov, req->reply.total, false, &written)) {
    case CONN_SENT:
    case CONN_CLOSED: return false;
    case CONN_HOLD: // a worker's remainder goes first: behind it, in `out`
        if (cd_reply_copy_to(&req->reply, &c->out) != 0) cd_conn_kill(c);
        return false;
    case CONN_FAILED:
        CD_STAT_INC(conn_write_errors);
        cd_conn_kill(c);
        return false;
    case CONN_QUEUE: return conn_queue_reply(c, req, written);
    }
    return false;
}

void cd_conn_request_done(cd_request *req) {
    cd_conn *c = req->conn;
    if (!c) { // internal work (SIGHUP loads): effects only, nobody to answer
        if (req->ops->done) req->ops->done(req);
        cd_request_free(req);
        return;
    }
    cd_request_finished(req);
    c->last_active_ns = uv_hrtime(); // the idle clock starts at the last answer
    if (req->ops->done) req->ops->done(req);

    bool taken = false; // req went with its reply's write (freed once written)
    switch (req->sent) {
    case CD_SENT_NONE:
        if (cd_conn_writable(c)) {
            if (conn_pack_response(req) != 0) {
                cd_conn_kill(c);
            } else {
                if (req->status != 0) cd_stats_error(req->status);
                taken = conn_send_reply(c, req);
            }
        } else if (req->status == CD_ECANCELLED) {
            CD_STAT_INC(req_cancelled);
        } else {
            CD_STAT_INC(req_dropped);
        }
        break;
    case CD_SENT_WRITTEN: break;
    case CD_SENT_PARTIAL: taken = conn_take_remainder(c, req); break;
    case CD_SENT_BEHIND:
        if (!cd_conn_writable(c)) {
            CD_STAT_INC(req_dropped);
        } else {
            if (req->status != 0) cd_stats_error(req->status);
            taken = conn_send_reply(c, req);
        }
        break;
    case CD_SENT_CLOSED: CD_STAT_INC(req_dropped); break;
    case CD_SENT_FAILED:
        if (cd_conn_writable(c)) {
            CD_STAT_INC(conn_write_errors);
            CD_DEBUG("conn %llu: a worker's write failed: peer gone", (unsigned long long)c->id);
            cd_conn_kill(c);
        }
        break;
    }
    if (!taken) cd_request_free(req);
    if (c->state == CD_CONN_CLOSING) return;
    cd_conn_flush(c);
    if (c->backlog && cd_conn_can_handle(c)) cd_conn_backlog_add(c);
    cd_conn_update_reading(c);
    cd_conn_check(c);
}
