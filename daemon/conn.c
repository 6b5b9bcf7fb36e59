#include "daemon/conn.h"
#include "daemon/conn-internal.h"

#include "core/errors.h"
#include "daemon/log.h"
#include "daemon/stats.h"
#include "daemon/workers.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

// One uv_write in progress: owns `data`, of which it writes `len` bytes (the
// tail that cd_conn_send could not write, or a worker's remainder), or the
// request `req` whose reply (daemon/reply.h) it writes: the request owns the
// output buffers that reply points into, so it is freed only once written.
typedef struct {
    uv_write_t req;
    cd_conn *conn;
    char *data;
    cd_request *owner;
    size_t len;
} conn_write;

// Frees what a write owned.
static void conn_write_free(conn_write *cw) {
    if (cw->owner)
        cd_request_free(cw->owner);
    else
        free(cw->data);
    free(cw);
}

static void on_write(uv_write_t *w, int status);
static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

bool cd_conn_can_handle(const cd_conn *c) {
    if (c->state != CD_CONN_OPEN && c->state != CD_CONN_HALF_CLOSED && c->state != CD_CONN_DRAINING) return false;
    return !c->out_paused && c->origin.inflight < (unsigned)c->hub->set->max_inflight;
}

// Starts or stops reading to match the connection's state and bounds.
void cd_conn_update_reading(cd_conn *c) {
    bool want = (c->state == CD_CONN_OPEN || c->state == CD_CONN_DRAINING) && !c->backlog && cd_conn_can_handle(c);
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->pipe, conn_alloc_cb, conn_read_cb) == 0) {
            c->reading = true;
            // While reads were paused by us, the client could not send: a
            // partly received message gets its read-timeout afresh.
            if (c->msg_start_ns) c->msg_start_ns = uv_hrtime();
        }
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->pipe);
        c->reading = false;
    }
}

// Removes c from the backlog list (before it is freed).
static void conn_backlog_remove(cd_conn *c) {
    if (!c->in_backlog_list) return;
    for (cd_conn **pp = &c->hub->backlog; *pp; pp = &(*pp)->backlog_next) {
        if (*pp == c) {
            *pp = c->backlog_next;
            break;
        }
    }
    c->in_backlog_list = false;
}

static void on_close(uv_handle_t *h) {
    cd_conn *c = h->data;
    cd_conn_hub *hub = c->hub;
    if (c->prev)
        c->prev->next = c->next;
    else
        hub->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    conn_backlog_remove(c);
    hub->nconns--;
    if (!c->refused) hub->nactive--;
    hub->budget.held -= c->rx_charge;
    if (c->reader) cd_rpc_reader_free(c->reader);
    msgpack_sbuffer_destroy(&c->out);
    cd_region_set_free(&c->regions); // nothing of c is in flight any more
    pthread_mutex_destroy(&c->wlock);
    free(c);
    if (hub->freed) hub->freed(hub->owner);
}

// Marks c closed for writers, under the write lock (loop thread).
static void conn_mark_closed(cd_conn *c) {
    pthread_mutex_lock(&c->wlock);
    c->wclosed = true;
    pthread_mutex_unlock(&c->wlock);
}

// Charges the hub's budget with what c's reader holds or has committed to.
static void conn_recharge(cd_conn *c) {
    size_t now = c->reader ? cd_rpc_reader_committed(c->reader) : 0;
    c->hub->budget.held = c->hub->budget.held - c->rx_charge + now;
    c->rx_charge = now;
}

// The one way response bytes go out, from the loop (cd_conn_flush) and from
// workers (cd_conn_respond): data[0..len) is one or more whole messages.
// Under the write lock: when the connection is closed, nothing; when other
// bytes are pending (for a worker: anything the loop owns; for the loop: a
// worker's remainder not yet queued), CONN_HOLD; when the loop's queue is
// non-empty, the loop's bytes join it (CONN_QUEUE, nothing written);
// otherwise a non-blocking write(2) of as much as the socket takes: CONN_SENT
// when all of it went, else CONN_QUEUE with the tail counted as the loop's
// (so no other writer writes raw bytes until it is out), or CONN_FAILED.
// *written gets the bytes written (counted in bytes_out).
// Writes iov[0..niov) (len bytes together) with sendmsg until done or the
// socket is full; returns CONN_SENT, CONN_QUEUE or CONN_FAILED with *off the
// bytes written. iov is advanced in place.
static conn_send_result conn_writev(int fd, struct iovec *iov, int niov, size_t len, size_t *off) {
    int first = 0;
    while (*off < len) {
        struct msghdr mh = {.msg_iov = iov + first, .msg_iovlen = (size_t)(niov - first)};
        ssize_t n = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return CONN_QUEUE;
        if (n <= 0) return CONN_FAILED;
        *off += (size_t)n;
        for (size_t left = (size_t)n; left > 0 && first < niov;) { // skip what went
            size_t take = left < iov[first].iov_len ? left : iov[first].iov_len;
            iov[first].iov_base = (char *)iov[first].iov_base + take;
            iov[first].iov_len -= take;
            left -= take;
            if (iov[first].iov_len == 0) first++;
        }
    }
    return CONN_SENT;
}

conn_send_result cd_conn_send(cd_conn *c, const char *data, size_t len, bool worker, size_t *written) {
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    return cd_conn_sendv(c, &iov, 1, len, worker, written);
}

conn_send_result cd_conn_sendv(cd_conn *c, struct iovec *iov, int niov, size_t len, bool worker, size_t *written) {
    conn_send_result r;
    size_t off = 0;
    pthread_mutex_lock(&c->wlock);
    if (c->wclosed) {
        r = CONN_CLOSED;
    } else if (c->whandoffs > 0 || (worker && c->wowned > 0)) {
        r = CONN_HOLD;
    } else if (c->wowned > 0) {
        c->wowned += len;
        r = CONN_QUEUE;
    } else {
        r = conn_writev(c->fd, iov, niov, len, &off);
        if (r == CONN_QUEUE) {
            c->wowned += len - off;
            if (worker) c->whandoffs++;
        } else if (r == CONN_FAILED) {
            c->wclosed = true;
        }
    }
    pthread_mutex_unlock(&c->wlock);
    if (off) CD_STAT_ADD(bytes_out, off);
    *written = off;
    return r;
}

// Loop thread: hands iov[0..niov) (len bytes, counted in wowned by
// cd_conn_send) to uv_write, with what owns their memory: `data` (freed) or
// the request `owner` whose reply they are (freed); drops a client whose
// unsent bytes pass the cap. Returns 0, or -1 when the connection was dropped
// (what it owned is freed then).
static int conn_queue(cd_conn *c, char *data, cd_request *owner, size_t len, const struct iovec *iov, int niov) {
    // uv_buf_init takes an unsigned int length: a piece of 1 GiB or more
    // goes as several buffers of one write (libuv copies the array).
    enum { PIECE = 1u << 30, NPIECE = CD_REPLY_MAX_IOV + 16 };
    uv_buf_t bufs[NPIECE];
    unsigned nbuf = 0;
    size_t queued = 0;
    for (int i = 0; i < niov; i++) {
        for (size_t o = 0; o < iov[i].iov_len && nbuf < NPIECE; nbuf++) {
            size_t n = iov[i].iov_len - o > PIECE ? PIECE : iov[i].iov_len - o;
            bufs[nbuf] = uv_buf_init((char *)iov[i].iov_base + o, (unsigned)n);
            o += n;
            queued += n;
        }
    }
    conn_write *cw = calloc(1, sizeof *cw);
    int rc = !cw ? UV_ENOMEM : queued < len ? UV_E2BIG : 0;
    if (cw) *cw = (conn_write){.conn = c, .data = data, .owner = owner, .len = len};
    if (rc == 0) rc = uv_write(&cw->req, (uv_stream_t *)&c->pipe, bufs, nbuf, on_write);
    if (rc != 0) {
        CD_DEBUG("conn %llu: write failed: %s", (unsigned long long)c->id, uv_strerror(rc));
        CD_STAT_INC(conn_write_errors);
        pthread_mutex_lock(&c->wlock);
        c->wowned -= len;
        pthread_mutex_unlock(&c->wlock);
        if (cw) {
            conn_write_free(cw);
        } else if (owner) {
            cd_request_free(owner);
        } else {
            free(data);
        }
        cd_conn_kill(c);
        return -1;
    }
    size_t before = c->write_pending;
    c->write_pending += len;
    c->hub->unsent += len;
    if (before > 0 && c->write_pending > CD_CONN_OUT_MAX(c->hub->set->max_message)) {
        CD_STAT_INC(conn_slow_reader);
        CD_WARN("conn %llu: %zu response bytes unsent: client does not read; dropping it", (unsigned long long)c->id,
                c->write_pending);
        cd_conn_kill(c);
        return -1;
    }
    if (c->write_pending > CD_CONN_OUT_HIGH) c->out_paused = true;
    return 0;
}

// Loop thread: hands data[off..len) (counted in wowned by cd_conn_send) to
// uv_write, taking ownership of data; drops a client whose unsent bytes pass
// the cap. Returns 0, or -1 when the connection was dropped.
int cd_conn_queue_write(cd_conn *c, char *data, size_t off, size_t len) {
    struct iovec iov = {.iov_base = data + off, .iov_len = len - off};
    return conn_queue(c, data, NULL, len - off, &iov, 1);
}

int cd_conn_queue_reply(cd_conn *c, cd_request *req, size_t off) {
    struct iovec iov[CD_REPLY_MAX_IOV];
    int n = cd_reply_iov(&req->reply, off, iov);
    return conn_queue(c, NULL, req, req->reply.total - off, iov, n);
}

static void conn_close(cd_conn *c) {
    if (c->state == CD_CONN_CLOSING) return;
    if (c->reader && cd_rpc_reader_buffered(c->reader) > 0 && c->state == CD_CONN_HALF_CLOSED) {
        CD_STAT_INC(conn_eof_mid_message);
        CD_DEBUG("conn %llu: peer closed with %zu bytes of an unfinished message", (unsigned long long)c->id,
                 cd_rpc_reader_buffered(c->reader));
    }
    CD_DEBUG("conn %llu: closed", (unsigned long long)c->id);
    // No worker holds a request of c any more (so none can be about to
    // write), and none may write after this: the fd is closed by uv_close.
    assert(c->origin.inflight == 0);
    conn_mark_closed(c);
    c->state = CD_CONN_CLOSING;
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->pipe);
        c->reading = false;
    }
    uv_close((uv_handle_t *)&c->pipe, on_close);
}

// Bytes the kernel holds for us that we have not read yet.
static int conn_unread_bytes(cd_conn *c) {
    uv_os_fd_t fd;
    int n = 0;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0 || ioctl(fd, FIONREAD, &n) != 0) return 0;
    return n;
}

// Closes the connection when its state allows and nothing is pending.
void cd_conn_check(cd_conn *c) {
    bool quiet = c->origin.inflight == 0 && c->write_pending == 0 && c->out.size == 0;
    switch (c->state) {
    case CD_CONN_OPEN:
    case CD_CONN_CLOSING: return;
    case CD_CONN_HALF_CLOSED:
        if (quiet && !c->backlog) conn_close(c);
        return;
    case CD_CONN_FAILED:
        if (quiet) conn_close(c);
        return;
    case CD_CONN_DRAINING:
        if (quiet && !c->backlog && cd_rpc_reader_buffered(c->reader) == 0 && conn_unread_bytes(c) == 0) conn_close(c);
        return;
    case CD_CONN_DEAD:
        if (c->origin.inflight == 0) conn_close(c);
        return;
    }
}

static void on_write(uv_write_t *w, int status) {
    conn_write *cw = (conn_write *)w;
    cd_conn *c = cw->conn;
    c->write_pending -= cw->len;
    c->hub->unsent -= cw->len;
    pthread_mutex_lock(&c->wlock);
    c->wowned -= cw->len;
    pthread_mutex_unlock(&c->wlock);
    if (status == 0) {
        CD_STAT_ADD(bytes_out, cw->len);
    } else if (status != UV_ECANCELED && c->state != CD_CONN_CLOSING && c->state != CD_CONN_DEAD) {
        CD_STAT_INC(conn_write_errors);
        CD_DEBUG("conn %llu: write failed: %s", (unsigned long long)c->id, uv_strerror(status));
        conn_write_free(cw);
        cd_conn_kill(c);
        return;
    }
    conn_write_free(cw);
    if (c->state == CD_CONN_CLOSING) return;
    if (c->out_paused && c->write_pending <= CD_CONN_OUT_LOW) {
        c->out_paused = false;
        if (c->backlog) cd_conn_backlog_add(c);
    }
    cd_conn_update_reading(c);
    cd_conn_check(c);
}

// Sends everything in `out` (cd_conn_send), queueing with uv_write what the
// socket does not take; keeps it while a worker's remainder is on its way to
// the loop (cd_conn_request_done flushes again once that is queued).
void cd_conn_flush(cd_conn *c) {
    if (c->out.size == 0) return;
    if (c->state == CD_CONN_DEAD || c->state == CD_CONN_CLOSING) {
        msgpack_sbuffer_clear(&c->out);
        return;
    }
    size_t written, len = c->out.size;
    switch (cd_conn_send(c, c->out.data, len, false, &written)) {
    case CONN_HOLD: return;
    case CONN_SENT:
    case CONN_CLOSED: // a worker's write failed: its request, on its way, drops c
        msgpack_sbuffer_clear(&c->out);
        return;
    case CONN_FAILED:
        msgpack_sbuffer_clear(&c->out);
        CD_STAT_INC(conn_write_errors);
        CD_DEBUG("conn %llu: write failed: %s", (unsigned long long)c->id, strerror(errno));
        cd_conn_kill(c);
        return;
    case CONN_QUEUE: cd_conn_queue_write(c, msgpack_sbuffer_release(&c->out), written, len); return;
    }
}

bool cd_conn_writable(const cd_conn *c) { return c->state != CD_CONN_DEAD && c->state != CD_CONN_CLOSING; }

void cd_conn_reply_ok(cd_conn *c, uint32_t msgid, const char *result, size_t len) {
    if (!cd_conn_writable(c)) return;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &c->out, msgpack_sbuffer_write);
    if (cd_rpc_pack_response_ok_begin(&pk, msgid) != 0 || msgpack_sbuffer_write(&c->out, result, len) != 0)
        cd_conn_kill(c);
}

// Packs an error response without counting it (refusals count elsewhere).
static void conn_reply_error_raw(cd_conn *c, uint32_t msgid, int status, const char *message) {
    if (!cd_conn_writable(c)) return;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &c->out, msgpack_sbuffer_write);
    if (cd_rpc_pack_response_error(&pk, msgid, status, message ? message : cd_strerror(status)) != 0) cd_conn_kill(c);
}

void cd_conn_reply_error(cd_conn *c, uint32_t msgid, int status, const char *message) {
    cd_stats_error(status);
    conn_reply_error_raw(c, msgid, status, message);
}

// Answers a protocol error, logs it with a hex sample, and stops handling.
static void conn_protocol_error(cd_conn *c, int status, uint32_t msgid, const char *reason) {
    char hex[64];
    cd_log_hex(hex, sizeof hex, c->sample, c->nsample, 16);
    // No readable msgid: answer with msgid 0. The spec's msgid is a uint32,
    // so a nil would break strict clients; docs/PROTOCOL.md tells clients
    // that an error with msgid 0 they did not send is a connection error.
    uint32_t id = msgid == UINT32_MAX ? 0 : msgid;
    CD_WARN("conn %llu: %s: %s (msgid %u; last read began: %s); closing", (unsigned long long)c->id,
            cd_err_name(status), reason, id, hex);
    cd_conn_reply_error(c, id, status, reason);
    c->state = CD_CONN_FAILED;
    c->backlog = false;
    cd_conn_flush(c);
    cd_conn_update_reading(c);
    cd_conn_check(c);
}

// A message skipped because it did not fit max-buffered has passed: a
// request is answered E_OVERLOADED (the connection stays open), a
// notification is counted as ever.
static void conn_skipped(cd_conn *c, const cd_rpc_msg *msg, uint32_t msgid) {
    if (msg->kind == CD_MSG_NOTIFY) {
        CD_STAT_INC(notifications);
        return;
    }
    char why[200];
    snprintf(why, sizeof why,
             "a message of %zu bytes does not fit: the daemon holds %zu bytes of "
             "requests (max-buffered %lld); retry later",
             c->skip_bytes, c->hub->budget.held, (long long)cd_settings_max_buffered(c->hub->set));
    CD_DEBUG("conn %llu: msgid %u: E_OVERLOADED: %s", (unsigned long long)c->id, msgid == UINT32_MAX ? 0 : msgid, why);
    cd_conn_reply_error(c, msgid == UINT32_MAX ? 0 : msgid, CD_EOVERLOADED, why);
}

// Read-timeout bookkeeping after messages were taken from the reader: the
// clock of a partly received message starts when its first bytes are seen
// (approximately: at the end of the read or turn that began it), and stops
// when none is partly received. Handled complete messages restart it.
static void conn_track_partial(cd_conn *c, int handled) {
    bool partial = !c->backlog && c->reader && cd_rpc_reader_partial(c->reader);
    if (!partial)
        c->msg_start_ns = 0;
    else if (handled > 0 || c->msg_start_ns == 0)
        c->msg_start_ns = uv_hrtime();
}

// Hands one request message to the hub's dispatcher, and answers it when
// the dispatcher did not queue work for it.
static void conn_dispatch(cd_conn *c, cd_rpc_msg *msg) {
    uint32_t msgid = msg->msgid;
    msgpack_sbuffer result;
    msgpack_sbuffer_init(&result);
    char err[256] = "";
    int rc = c->hub->dispatch(c->hub->dispatch_ud, &c->origin, msg, &result, err, sizeof err);
    if (rc == 0)
        cd_conn_reply_ok(c, msgid, result.data, result.size);
    else if (rc < 0)
        cd_conn_reply_error(c, msgid, rc, err[0] ? err : NULL);
    msgpack_sbuffer_destroy(&result);
}

// Handles up to CD_CONN_BATCH buffered messages (also from the backlog idle).
static void conn_process(cd_conn *c) {
    int handled = 0;
    while (cd_conn_can_handle(c)) {
        if (handled == CD_CONN_BATCH) {
            c->backlog = true;
            cd_conn_backlog_add(c);
            break;
        }
        cd_rpc_msg msg;
        uint32_t msgid = UINT32_MAX;
        char err[256] = "";
        int rc = cd_rpc_reader_next(c->reader, &msg, &msgid, err, sizeof err);
        conn_recharge(c);
        if (rc == 0) {
            c->backlog = false;
            break;
        }
        if (rc < 0) {
            conn_protocol_error(c, rc, msgid, err[0] ? err : cd_strerror(rc));
            return;
        }
        handled++;
        c->backlog = true; // until the reader says it is empty
        if (rc == CD_RPC_SKIPPED) {
            conn_skipped(c, &msg, msgid);
            continue;
        }
        switch (msg.kind) {
        case CD_MSG_REQUEST: conn_dispatch(c, &msg); break;
        case CD_MSG_NOTIFY:
            CD_STAT_INC(notifications);
            CD_DEBUG("conn %llu: ignored notification '%.*s'", (unsigned long long)c->id,
                     (int)(msg.method_len > 64 ? 64 : msg.method_len), msg.method ? msg.method : "");
            cd_rpc_msg_free(&msg);
            break;
        case CD_MSG_RESPONSE:
        default: {
            uint32_t id = msg.msgid;
            cd_rpc_msg_free(&msg);
            conn_protocol_error(c, CD_EPROTOCOL, id, "a client sends requests or notifications, not responses");
            return;
        }
        }
    }
    conn_track_partial(c, handled);
    cd_conn_flush(c);
    cd_conn_update_reading(c);
    cd_conn_check(c);
}

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    cd_conn *c = h->data;
    // The rest of a big message goes straight into the reader's buffer: one
    // copy (the kernel's) instead of two, and reads as large as it is.
    char *at = NULL;
    size_t n = c->reader && (c->state == CD_CONN_OPEN || c->state == CD_CONN_DRAINING)
                   ? cd_rpc_reader_space(c->reader, &at)
                   : 0;
    if (n > sizeof c->hub->readbuf) {
        buf->base = at;
        buf->len = n;
        return;
    }
    buf->base = c->hub->readbuf;
    buf->len = sizeof c->hub->readbuf;
}

// After EOF: true when the peer closed the socket entirely (POLLHUP: both
// directions are shut), false when it only shut down its sending side and
// still reads answers.
static bool conn_peer_gone(cd_conn *c) {
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    cd_conn *c = s->data;
    if (nread > 0) {
        CD_STAT_ADD(bytes_in, (uint64_t)nread);
        cd_region_set_take_fds(&c->regions, &c->pipe); // before the message they came with is handled
        c->nsample = (size_t)nread < sizeof c->sample ? (size_t)nread : sizeof c->sample;
        memcpy(c->sample, buf->base, c->nsample);
        if (c->state != CD_CONN_OPEN && c->state != CD_CONN_DRAINING) return;
        c->last_active_ns = uv_hrtime();
        int rc = buf->base == c->hub->readbuf ? cd_rpc_reader_feed(c->reader, buf->base, (size_t)nread)
                                              : cd_rpc_reader_feed_in_place(c->reader, (size_t)nread);
        if (rc < 0 && rc != CD_ETOO_LARGE) {
            conn_protocol_error(c, rc, UINT32_MAX, "cannot buffer the message");
            return;
        }
        conn_recharge(c);
        // The memory budget: a message being received whose size (declared
        // by its headers) takes the bytes held past max-buffered is given up
        // at once, skipped as the rest of it arrives and answered
        // E_OVERLOADED; the connection stays in sync. Messages of at most one
        // read are always taken (stats and health keep working under load):
        // queued work is checked again when it is accepted.
        size_t budget = (size_t)cd_settings_max_buffered(c->hub->set);
        if (rc == 0 && c->hub->budget.held > budget && c->rx_charge > CD_READ_CHUNK &&
            cd_rpc_reader_partial(c->reader)) {
            c->skip_bytes = c->rx_charge;
            CD_STAT_INC(budget_refused);
            CD_DEBUG("conn %llu: skipping a message of %zu bytes: %zu bytes held, "
                     "max-buffered %zu",
                     (unsigned long long)c->id, c->skip_bytes, c->hub->budget.held, budget);
            cd_rpc_reader_skip(c->reader);
            conn_recharge(c);
        }
        // An over-limit message (CD_ETOO_LARGE) is sticky in the reader:
        // the complete messages before it are answered first, then
        // cd_rpc_reader_next reports it and the connection fails.
        if (rc == CD_ETOO_LARGE) c->backlog = true;
        conn_process(c);
    } else if (nread == UV_EOF) {
        if (conn_peer_gone(c)) {
            // Closed, not just shut down for writing: nobody will read the
            // answers, so queued work is cancelled now rather than after
            // the first failed write.
            CD_DEBUG("conn %llu: peer closed; cancelling its %u request(s)", (unsigned long long)c->id,
                     c->origin.inflight);
            if (c->reader && cd_rpc_reader_buffered(c->reader) > 0 &&
                (c->state == CD_CONN_OPEN || c->state == CD_CONN_DRAINING))
                CD_STAT_INC(conn_eof_mid_message);
            cd_conn_kill(c);
            return;
        }
        if (c->state == CD_CONN_OPEN || c->state == CD_CONN_DRAINING) c->state = CD_CONN_HALF_CLOSED;
        cd_conn_update_reading(c);
        cd_conn_check(c);
    } else if (nread < 0) {
        CD_DEBUG("conn %llu: read failed: %s", (unsigned long long)c->id, uv_strerror((int)nread));
        cd_conn_kill(c);
    }
}

int cd_conn_accept(cd_conn_hub *hub) {
    cd_conn *c = calloc(1, sizeof *c);
    if (!c) return CD_ENOMEM;
    c->hub = hub;
    c->id = ++hub->next_conn_id;
    c->state = CD_CONN_OPEN;
    c->fd = -1;
    pthread_mutex_init(&c->wlock, NULL);
    msgpack_sbuffer_init(&c->out);
    // ipc: libuv reads with recvmsg and keeps the descriptors a client sends
    // (SCM_RIGHTS) with region_register (daemon/regions.c).
    uv_pipe_init(hub->loop, &c->pipe, 1);
    cd_region_set_init(&c->regions);
    c->origin =
        (cd_request_origin){.conn = c, .id = c->id, .peer = &c->peer, .regions = &c->regions, .budget = &hub->budget};
    c->pipe.data = c;
    c->next = hub->conns;
    if (hub->conns) hub->conns->prev = c;
    hub->conns = c;
    hub->nconns++;
    int rc = uv_accept(hub->listener, (uv_stream_t *)&c->pipe);
    if (rc != 0) {
        CD_WARN("accept failed: %s", uv_strerror(rc));
        c->refused = true;
        conn_close(c);
        return CD_EIO;
    }
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0) c->fd = fd;
    cd_peer_identify(c->fd, &c->peer);
    if (hub->nactive >= hub->conn_cap) {
        c->refused = true;
        CD_STAT_INC(conn_rejected_limit);
        uint64_t now = uv_hrtime();
        if (now - hub->last_reject_log_ns > 1000000000ull) {
            hub->last_reject_log_ns = now;
            CD_WARN("refusing connections: %zu open, max-connections %zu", hub->nactive, hub->conn_cap);
        }
        char why[96];
        snprintf(why, sizeof why, "too many connections (max %zu)", hub->conn_cap);
        conn_reply_error_raw(c, 0, CD_EOVERLOADED, why);
        c->state = CD_CONN_FAILED;
        cd_conn_flush(c);
        cd_conn_check(c);
        return CD_EOVERLOADED;
    }
    hub->nactive++;
    rc = cd_rpc_reader_init(&c->reader, (size_t)hub->set->max_message);
    if (rc != 0) {
        CD_WARN("conn %llu: cannot allocate a reader", (unsigned long long)c->id);
        c->state = CD_CONN_DEAD;
        conn_close(c);
        return rc;
    }
    CD_STAT_INC(conn_total);
    c->last_active_ns = uv_hrtime();
    CD_DEBUG("conn %llu: accepted (%zu open)", (unsigned long long)c->id, hub->nactive);
    if (hub->draining) c->state = CD_CONN_DRAINING;
    cd_conn_update_reading(c);
    return 0;
}

void cd_conn_drain_all(cd_conn_hub *hub) {
    hub->draining = true;
    for (cd_conn *c = hub->conns; c; c = c->next) {
        if (c->state == CD_CONN_OPEN) c->state = CD_CONN_DRAINING;
        cd_conn_check(c);
    }
}

void cd_conn_kill_all(cd_conn_hub *hub) {
    for (cd_conn *c = hub->conns; c; c = c->next) cd_conn_kill(c);
}

void cd_conn_kill(cd_conn *c) {
    if (c->state == CD_CONN_CLOSING || c->state == CD_CONN_DEAD) return;
    c->state = CD_CONN_DEAD;
    conn_mark_closed(c);
    c->backlog = false;
    msgpack_sbuffer_clear(&c->out);
    // Work not started yet leaves the queues now (answered E_CANCELLED
    // internally, counted as cancelled); running work is skipped if it has
    // not begun computing.
    for (cd_request *r = c->origin.reqs; r; r = r->conn_next) {
        atomic_store(&r->cancelled, true);
        cd_workers_cancel(r->pool ? r->pool : c->hub->workers, r);
    }
    cd_conn_update_reading(c);
    cd_conn_check(c);
}

void cd_conn_sweep(cd_conn_hub *hub) {
    const cd_settings *set = hub->set;
    uint64_t now = uv_hrtime();
    uint64_t idle_ns = (uint64_t)set->idle_timeout * 1000000000ull;
    uint64_t read_ns = (uint64_t)set->read_timeout * 1000000000ull;
    cd_conn *next;
    for (cd_conn *c = hub->conns; c; c = next) {
        next = c->next; // c may be closed below (freed later, in its close callback)
        if (c->refused || !c->reader || (c->state != CD_CONN_OPEN && c->state != CD_CONN_DRAINING)) continue;
        if (read_ns && c->msg_start_ns && c->reading && now - c->msg_start_ns >= read_ns) {
            CD_STAT_INC(conn_read_timeouts);
            char why[160];
            snprintf(why, sizeof why,
                     "a message was not received whole within read-timeout (%llds; "
                     "%zu bytes of it arrived)",
                     (long long)set->read_timeout, cd_rpc_reader_buffered(c->reader));
            conn_protocol_error(c, CD_ETIMEOUT, UINT32_MAX, why);
            continue;
        }
        bool idle = c->state == CD_CONN_OPEN && c->origin.inflight == 0 && !c->backlog && c->out.size == 0 &&
                    c->write_pending == 0;
        if (idle_ns && idle && now - c->last_active_ns >= idle_ns) {
            CD_STAT_INC(conn_idle_timeouts);
            CD_DEBUG("conn %llu: idle for %llds (idle-timeout); closing", (unsigned long long)c->id,
                     (long long)set->idle_timeout);
            conn_close(c);
        }
    }
}

// ---- the backlog: connections with messages left over from their batch -----

static void on_backlog_idle(uv_idle_t *h) {
    cd_conn_hub *hub = h->data;
    // Each connection handles at most CD_CONN_BATCH messages per turn; one
    // that still has more re-adds itself, after the others.
    cd_conn *list = hub->backlog;
    hub->backlog = NULL;
    while (list) {
        cd_conn *c = list;
        list = c->backlog_next;
        c->in_backlog_list = false;
        if (c->state != CD_CONN_CLOSING) conn_process(c);
    }
    if (!hub->backlog) uv_idle_stop(&hub->backlog_idle);
}

void cd_conn_backlog_add(cd_conn *c) {
    if (c->in_backlog_list || c->state == CD_CONN_CLOSING) return;
    c->in_backlog_list = true;
    c->backlog_next = c->hub->backlog;
    c->hub->backlog = c;
    uv_idle_start(&c->hub->backlog_idle, on_backlog_idle);
}

void cd_conn_hub_init(cd_conn_hub *hub) {
    uv_idle_init(hub->loop, &hub->backlog_idle);
    hub->backlog_idle.data = hub;
}
