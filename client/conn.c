// libconvd connections: connect, the reader thread, pipelined calls.
//
// Model. Each call takes a fresh msgid, registers a waiter {msgid, cond,
// response} in the connection's list, writes its request under the write
// lock (vectored, straight from the caller's tensor memory), then sleeps on
// its condition variable until the reader thread hands it the response with
// its msgid, the deadline passes (the waiter is unlinked; a late response then
// finds nobody and is dropped) or the connection dies (every waiter is woken
// with the connection's final status).
//
// Locks: `mu` guards the waiter list and the state; `wmu` serialises writes
// so requests never interleave on the stream. Lock order: `wmu` before `mu`
// (the writer peeks at the state); nothing takes `wmu` while holding `mu`.

#include "client/client-internal.h"
#include "proto/errors.h"
#include "proto/limits.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

// One call waiting for its response.
typedef struct cd_waiter {
    uint32_t msgid;          // the request's msgid
    int done;                // 1 once resp or status is set
    int status;              // 0: resp holds the response; <0: failure
    cd_rpc_msg resp;         // the response (owned until handed over)
    pthread_cond_t cond;     // signalled when done
    struct cd_waiter *next;  // list link
} cd_waiter;

typedef enum {
    CONN_OPEN,    // usable
    CONN_BROKEN,  // the stream is unusable (peer closed, garbage, half-written
                  // request); new calls fail with CD_ECLOSED and `final_msg`
} conn_state;

struct convd_conn {
    int fd;                     // the socket (non-blocking)
    convd_opts opts;            // options in effect
    pthread_mutex_t mu;         // guards waiters, state, final_msg
    pthread_mutex_t wmu;        // serialises writes
    cd_waiter *waiters;         // calls waiting for an answer
    conn_state state;           // see conn_state
    char final_msg[256];        // why it broke (first reason wins)
    atomic_uint next_msgid;     // msgid of the next request
    pthread_t reader;           // the reader thread
    int reader_started;         // 1 once `reader` must be joined
};

void convd_opts_init(convd_opts *opts) {
    opts->timeout_ms = 30000;
    opts->connect_timeout_ms = 5000;
    opts->max_message = (size_t)1 << 30;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cd_client_timeout(const convd_conn *c, int timeout_ms) {
    return timeout_ms == CONVD_TIMEOUT_DEFAULT ? c->opts.timeout_ms : timeout_ms;
}

// Marks the connection broken (first reason wins) and wakes every waiter
// with status. Caller holds c->mu.
static void conn_break_locked(convd_conn *c, int status, const char *msg) {
    if (c->state == CONN_OPEN) {
        c->state = CONN_BROKEN;
        snprintf(c->final_msg, sizeof c->final_msg, "%s", msg);
        // Wakes the reader thread too (its recv sees end of stream).
        shutdown(c->fd, SHUT_RDWR);
    }
    for (cd_waiter *w = c->waiters; w; w = w->next) {
        if (!w->done) {
            w->done = 1;
            w->status = status;
            pthread_cond_signal(&w->cond);
        }
    }
}

static void conn_break(convd_conn *c, int status, const char *msg) {
    pthread_mutex_lock(&c->mu);
    conn_break_locked(c, status, msg);
    pthread_mutex_unlock(&c->mu);
}

// Hands a response to its waiter; drops it when nobody waits (timed out).
static void conn_dispatch(convd_conn *c, cd_rpc_msg *msg) {
    pthread_mutex_lock(&c->mu);
    for (cd_waiter *w = c->waiters; w; w = w->next) {
        if (w->msgid == msg->msgid && !w->done) {
            w->resp = *msg;
            w->done = 1;
            w->status = 0;
            pthread_cond_signal(&w->cond);
            pthread_mutex_unlock(&c->mu);
            return;
        }
    }
    pthread_mutex_unlock(&c->mu);
    cd_rpc_msg_free(msg);
}

// The reader thread: reads until the stream ends or breaks, dispatching each
// response by msgid. Requests and notifications from the daemon are ignored.
static void *conn_reader_main(void *arg) {
    convd_conn *c = arg;
    cd_rpc_reader *rd = NULL;
    char err[200] = "";
    int status = CD_ECLOSED;
    char msg[256] = "connection closed by the daemon";
    if (cd_rpc_reader_init(&rd, c->opts.max_message) != 0) {
        conn_break(c, CD_ENOMEM, "out of memory starting the reader");
        return NULL;
    }
    enum { BUFSZ = 64 << 10 };
    char *buf = malloc(BUFSZ);
    if (!buf) {
        cd_rpc_reader_free(rd);
        conn_break(c, CD_ENOMEM, "out of memory starting the reader");
        return NULL;
    }
    for (;;) {
        ssize_t n = recv(c->fd, buf, BUFSZ, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p = {.fd = c->fd, .events = POLLIN};
                poll(&p, 1, -1);
                continue;
            }
            snprintf(msg, sizeof msg, "connection lost: %s", strerror(errno));
            break;
        }
        if (n == 0) break;
        int rc = cd_rpc_reader_feed(rd, buf, (size_t)n);
        if (rc != 0) {
            status = rc;
            if (rc == CD_ETOO_LARGE)
                snprintf(msg, sizeof msg, "an answer is larger than max_message (%zu bytes)",
                         c->opts.max_message);
            else
                snprintf(msg, sizeof msg, "out of memory buffering an answer");
            break;
        }
        for (;;) {
            cd_rpc_msg m;
            uint32_t id = UINT32_MAX;
            rc = cd_rpc_reader_next(rd, &m, &id, err, sizeof err);
            if (rc == 0) break;
            if (rc < 0) {
                status = rc;
                snprintf(msg, sizeof msg, "malformed data from the daemon: %s", err);
                goto out;
            }
            if (m.kind == CD_MSG_RESPONSE)
                conn_dispatch(c, &m);
            else
                cd_rpc_msg_free(&m);
        }
    }
out:
    free(buf);
    cd_rpc_reader_free(rd);
    conn_break(c, status, msg);
    return NULL;
}

// Connects fd to addr within timeout_ms. Returns 0 or -errno.
static int connect_with_timeout(int fd, const struct sockaddr_un *addr,
                                int timeout_ms) {
    int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0) return 0;
        int e = errno;
        if (e == EINTR) continue;
        if (e == EINPROGRESS) {
            int left = (int)(deadline - now_ms());
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int pr = poll(&p, 1, timeout_ms < 0 ? -1 : (left > 0 ? left : 0));
            if (pr == 0) return -ETIMEDOUT;
            if (pr < 0) return -errno;
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            return soerr ? -soerr : 0;
        }
        if (e == EAGAIN) {  // Unix sockets: the listen backlog is full
            if (timeout_ms >= 0 && now_ms() >= deadline) return -ETIMEDOUT;
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        return -e;
    }
}

int convd_connect(const char *path, const convd_opts *opts, convd_conn **out) {
    *out = NULL;
    if (!path || !*path) path = getenv("CONVD_SOCKET");
    if (!path || !*path) path = CONVD_DEFAULT_SOCKET;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        return cd_client_fail(CD_EPARAMS, "socket path too long (%zu bytes, max %zu): %s",
                              strlen(path), sizeof addr.sun_path - 1, path);
    memcpy(addr.sun_path, path, strlen(path) + 1);

    convd_conn *c = calloc(1, sizeof *c);
    if (!c) return cd_client_fail(CD_ENOMEM, "out of memory");
    if (opts)
        c->opts = *opts;
    else
        convd_opts_init(&c->opts);
    // Zero fields (a zero-initialised convd_opts) mean the defaults.
    convd_opts def;
    convd_opts_init(&def);
    if (c->opts.timeout_ms == 0) c->opts.timeout_ms = def.timeout_ms;
    if (c->opts.connect_timeout_ms == 0) c->opts.connect_timeout_ms = def.connect_timeout_ms;
    if (c->opts.max_message == 0) c->opts.max_message = def.max_message;
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->fd < 0) {
        int e = errno;
        free(c);
        return cd_client_fail(CD_ECONNECT, "cannot connect to %s: socket: %s", path,
                              strerror(e));
    }
    int rc = connect_with_timeout(c->fd, &addr, c->opts.connect_timeout_ms);
    if (rc != 0) {
        close(c->fd);
        free(c);
        return cd_client_fail(CD_ECONNECT, "cannot connect to %s: %s", path,
                              strerror(-rc));
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->wmu, NULL);
    atomic_init(&c->next_msgid, 1);
    c->state = CONN_OPEN;

    // The reader thread takes no signals: the application's handlers run on
    // its own threads.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&c->reader, NULL, conn_reader_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(c->fd);
        pthread_mutex_destroy(&c->mu);
        pthread_mutex_destroy(&c->wmu);
        free(c);
        return cd_client_fail(CD_ENOMEM, "cannot start the reader thread: %s",
                              strerror(rc));
    }
    c->reader_started = 1;
    *out = c;
    return 0;
}

void convd_close(convd_conn *c) {
    if (!c) return;
    conn_break(c, CD_ECLOSED, "connection closed by the client");
    if (c->reader_started) pthread_join(c->reader, NULL);
    close(c->fd);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->wmu);
    free(c);
}

void convd_free(void *p) { free(p); }

// Writes the whole request within the deadline (deadline < 0: none).
// Returns 0, CD_ETIMEOUT (nothing written, connection intact), or a status
// after which the connection is broken (a partly written request).
static int conn_write(convd_conn *c, const cd_client_reqbuf *rb, int64_t deadline) {
    pthread_mutex_lock(&c->wmu);
    pthread_mutex_lock(&c->mu);
    int broken = c->state != CONN_OPEN;
    char fmsg[256];
    memcpy(fmsg, c->final_msg, sizeof fmsg);
    pthread_mutex_unlock(&c->mu);
    if (broken) {
        pthread_mutex_unlock(&c->wmu);
        return cd_client_fail(CD_ECLOSED, "connection is closed: %s", fmsg);
    }

    enum { MAXIOV = 64 };
    size_t seg = 0, segoff = 0, sent = 0;
    int status = 0;
    while (sent < rb->total) {
        struct iovec iov[MAXIOV];
        int n = 0;
        for (size_t s = seg, off = segoff; s < rb->nsegs && n < MAXIOV; s++, off = 0) {
            const struct cd_client_seg *sg = &rb->segs[s];
            const char *base = sg->external ? sg->ptr : rb->buf + sg->off;
            iov[n].iov_base = (void *)(base + off);
            iov[n].iov_len = sg->len - off;
            n++;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int wait = -1;
                if (deadline >= 0) {
                    int64_t left = deadline - now_ms();
                    if (left <= 0) {
                        status = CD_ETIMEOUT;
                        break;
                    }
                    wait = (int)left;
                }
                struct pollfd p = {.fd = c->fd, .events = POLLOUT};
                poll(&p, 1, wait);
                continue;
            }
            status = CD_ECLOSED;
            cd_client_fail(CD_ECLOSED, "connection lost while sending: %s", strerror(errno));
            break;
        }
        sent += (size_t)w;
        size_t adv = (size_t)w;
        while (adv > 0) {
            size_t left = rb->segs[seg].len - segoff;
            if (adv >= left) {
                adv -= left;
                seg++;
                segoff = 0;
            } else {
                segoff += adv;
                adv = 0;
            }
        }
    }
    pthread_mutex_unlock(&c->wmu);
    if (status == CD_ETIMEOUT) {
        if (sent == 0)
            return cd_client_fail(CD_ETIMEOUT, "timed out sending the request (daemon not reading)");
        conn_break(c, CD_ECLOSED, "a request was cut short by its timeout");
        return cd_client_fail(CD_ETIMEOUT, "timed out sending the request; the connection "
                              "is closed (request cut short)");
    }
    if (status != 0) conn_break(c, CD_ECLOSED, "connection lost while sending");
    return status;
}

int cd_client_call(convd_conn *c, const char *method, cd_client_pack_fn pack, void *ud,
                   int timeout_ms, cd_rpc_msg *resp) {
    memset(resp, 0, sizeof *resp);
    if (!c || !method) return cd_client_fail(CD_EPARAMS, "connection and method are required");
    size_t mlen = strlen(method);
    if (mlen == 0 || mlen > CD_MAX_METHOD)
        return cd_client_fail(CD_EPARAMS, "method name must be 1..%d bytes", CD_MAX_METHOD);
    timeout_ms = cd_client_timeout(c, timeout_ms);
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;

    uint32_t msgid = atomic_fetch_add(&c->next_msgid, 1);
    cd_client_reqbuf rb;
    cd_client_reqbuf_init(&rb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &rb, cd_client_reqbuf_write);
    int rc = cd_rpc_pack_request_begin(&pk, msgid, method);
    // begin opened the params array of one element: the params map.
    if (rc == 0) rc = pack ? pack(&pk, ud) : (msgpack_pack_map(&pk, 0) ? CD_ENOMEM : 0);
    if (rc == 0 && rb.oom) rc = CD_ENOMEM;
    if (rc != 0) {
        cd_client_reqbuf_free(&rb);
        if (rc == CD_ENOMEM) return cd_client_fail(rc, "out of memory packing the request");
        return rc;  // the pack callback set the message
    }

    cd_waiter w = {.msgid = msgid};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w.cond, &ca);
    pthread_condattr_destroy(&ca);

    pthread_mutex_lock(&c->mu);
    w.next = c->waiters;
    c->waiters = &w;
    pthread_mutex_unlock(&c->mu);

    rc = conn_write(c, &rb, deadline);
    cd_client_reqbuf_free(&rb);

    pthread_mutex_lock(&c->mu);
    if (rc == 0) {
        struct timespec ts;
        if (deadline >= 0) {
            ts.tv_sec = deadline / 1000;
            ts.tv_nsec = (long)(deadline % 1000) * 1000000;
        }
        while (!w.done) {
            int e = deadline >= 0 ? pthread_cond_timedwait(&w.cond, &c->mu, &ts)
                                  : pthread_cond_wait(&w.cond, &c->mu);
            if (e == ETIMEDOUT && !w.done) break;
        }
    }
    // Unlink the waiter: a response arriving later is dropped.
    for (cd_waiter **pp = &c->waiters; *pp; pp = &(*pp)->next) {
        if (*pp == &w) {
            *pp = w.next;
            break;
        }
    }
    int done = w.done, wst = w.status;
    char fmsg[256];
    memcpy(fmsg, c->final_msg, sizeof fmsg);
    pthread_mutex_unlock(&c->mu);
    pthread_cond_destroy(&w.cond);

    if (rc != 0) {
        if (done && wst == 0) cd_rpc_msg_free(&w.resp);
        return rc;
    }
    if (!done)
        return cd_client_fail(CD_ETIMEOUT, "no answer to '%s' within %d ms", method, timeout_ms);
    if (wst != 0) return cd_client_fail(wst, "%s", fmsg);

    if (w.resp.error.type != MSGPACK_OBJECT_NIL) {
        char emsg[1024] = "";
        int st = cd_rpc_error_decode(&w.resp.error, emsg, sizeof emsg);
        if (st >= 0) st = CD_EINTERNAL;
        const msgpack_object *code = cd_client_get(&w.resp.error, "code");
        char cname[64] = "";
        if (code) cd_client_strcpy(cname, sizeof cname, code);
        cd_rpc_msg_free(&w.resp);
        // A code this build does not know keeps its name in the message.
        if (cname[0] && strcmp(cname, cd_err_name(st)) != 0)
            return cd_client_fail(st, "%s: %s", cname, emsg);
        return cd_client_fail(st, "%s", emsg[0] ? emsg : cd_strerror(st));
    }
    *resp = w.resp;
    return 0;
}
