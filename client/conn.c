// libconvd connections: connect, the reader thread, pipelined calls, and the
// asynchronous calls with their deadlines and in-flight limit.
//
// Model. Each call takes a fresh msgid, registers a waiter in the
// connection's msgid table, writes its request under the write lock
// (vectored, straight from the caller's tensor memory), and then:
//  - a synchronous call sleeps on its condition variable until the reader
//    thread hands it the response with its msgid, its deadline passes (the
//    waiter is unlinked; a late response then finds nobody and is dropped) or
//    the connection dies (every waiter is woken with the connection's final
//    status);
//  - an asynchronous call returns at once; its waiter is completed exactly
//    once, always on the reader thread: by its response, by its deadline
//    (a min-heap the reader sleeps on) or, when the connection dies, by the
//    reader's final sweep. Whoever removes a waiter from the table owns its
//    completion, so a response racing a deadline is delivered once.
//
// Locks: `mu` guards the table, the heap, the state and the in-flight count;
// `wmu` serialises writes so requests never interleave on the stream. Lock
// order: `wmu` before `mu` (the writer peeks at the state); nothing takes
// `wmu` while holding `mu`. Completion callbacks run with no lock held.

#include "client/client-internal.h"
#include "client/conn-internal.h"
#include "core/clock.h"
#include "core/errors.h"
#include "core/limits.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

// Default bound on asynchronous requests in flight per connection.
#define CD_CLIENT_DEFAULT_INFLIGHT 1024

void convd_opts_init(convd_opts *opts) {
    opts->timeout_ms = 30000;
    opts->connect_timeout_ms = 5000;
    opts->max_message = (size_t)1 << 30;
}

int cd_client_timeout(const convd_conn *c, int timeout_ms) {
    return timeout_ms == CONVD_TIMEOUT_DEFAULT ? c->opts.timeout_ms : timeout_ms;
}

int cd_client_on_reader(const convd_conn *c) { return c->reader_started && pthread_equal(pthread_self(), c->reader); }

pthread_t cd_client_reader_thread(const convd_conn *c) { return c->reader; }

// Takes an async waiter out of the table and the heap and releases its
// in-flight slot; the caller now owns its completion. Caller holds mu.
static void async_detach_locked(convd_conn *c, cd_waiter *w) {
    cd_client_table_remove_locked(c, w);
    cd_client_heap_remove_locked(c, w);
    c->inflight--;
    pthread_cond_signal(&c->slot_cond);
}

// Calls an async waiter's completion and frees it. No lock held.
static void async_complete(cd_waiter *w, int status, cd_rpc_msg *resp, const char *msg) {
    if (status != 0) cd_client_fail(status, "%s", msg);
    w->fn(w->fn_ud, status, resp, msg);
    free(w);
}

// ---- breaking ---------------------------------------------------------------

// Marks the connection broken (first reason wins) and wakes every synchronous
// waiter with status; asynchronous ones are completed by the reader thread,
// which the shutdown wakes. Caller holds c->mu.
static void conn_break_locked(convd_conn *c, int status, const char *msg) {
    if (c->state == CONN_OPEN) {
        c->state = CONN_BROKEN;
        c->final_status = status;
        snprintf(c->final_msg, sizeof c->final_msg, "%s", msg);
        // Wakes the reader thread too (its recv sees end of stream).
        shutdown(c->fd, SHUT_RDWR);
        pthread_cond_broadcast(&c->slot_cond);
    }
    for (size_t b = 0; b <= c->table_mask; b++) {
        for (cd_waiter *w = c->table[b]; w; w = w->hnext) {
            if (w->kind == WAIT_SYNC && !w->done) {
                w->done = 1;
                w->status = status;
                pthread_cond_signal(&w->cond);
            }
        }
    }
}

static void conn_break(convd_conn *c, int status, const char *msg) {
    pthread_mutex_lock(&c->mu);
    conn_break_locked(c, status, msg);
    pthread_mutex_unlock(&c->mu);
}

// The reader's last act: completes every async waiter left with the final
// status (the state is already CONN_BROKEN, so none can be added after).
static void conn_sweep_async(convd_conn *c) {
    cd_waiter *list = NULL;
    pthread_mutex_lock(&c->mu);
    int status = c->final_status;
    char msg[256];
    memcpy(msg, c->final_msg, sizeof msg);
    for (size_t b = 0; b <= c->table_mask; b++) {
        cd_waiter **pp = &c->table[b];
        while (*pp) {
            cd_waiter *w = *pp;
            if (w->kind == WAIT_ASYNC) {
                async_detach_locked(c, w); // unlinks *pp
                w->hnext = list;
                list = w;
            } else {
                pp = &w->hnext;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    while (list) {
        cd_waiter *next = list->hnext;
        async_complete(list, status, NULL, msg);
        list = next;
    }
}

// ---- the reader thread ------------------------------------------------------

// Hands a response to its waiter; drops it when nobody waits (timed out).
static void conn_dispatch(convd_conn *c, cd_rpc_msg *msg) {
    pthread_mutex_lock(&c->mu);
    cd_waiter *w = cd_client_table_find_locked(c, msg->msgid);
    if (w && w->kind == WAIT_SYNC && !w->done) {
        w->resp = *msg;
        w->done = 1;
        w->status = 0;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (w && w->kind == WAIT_ASYNC) {
        async_detach_locked(c, w);
        pthread_mutex_unlock(&c->mu);
        async_complete(w, 0, msg, NULL); // the completion owns msg now
        return;
    }
    pthread_mutex_unlock(&c->mu);
    cd_rpc_msg_free(msg);
}

// Completes the async waiters whose deadline has passed with CD_ETIMEOUT.
// Returns the poll timeout until the next deadline (-1: none) and records it
// as the reader's wake-up time.
static int conn_expire(convd_conn *c) {
    cd_waiter *list = NULL;
    int64_t now = cd_now_ms_int();
    pthread_mutex_lock(&c->mu);
    while (c->heap_len && c->heap[0]->deadline <= now) {
        cd_waiter *w = c->heap[0];
        async_detach_locked(c, w);
        w->hnext = list;
        list = w;
    }
    int wait = -1;
    c->reader_wake_at = INT64_MAX;
    if (c->heap_len) {
        c->reader_wake_at = c->heap[0]->deadline;
        int64_t left = c->heap[0]->deadline - now;
        wait = left > 600000 ? 600000 : (int)left;
    }
    pthread_mutex_unlock(&c->mu);
    while (list) {
        cd_waiter *next = list->hnext;
        char msg[128];
        snprintf(msg, sizeof msg, "no answer to '%s' within %d ms", list->method, list->timeout_ms);
        async_complete(list, CD_ETIMEOUT, NULL, msg);
        list = next;
    }
    return wait;
}

// The reader thread: reads until the stream ends or breaks, dispatching each
// response by msgid and expiring async deadlines. Requests and notifications
// from the daemon are ignored.
static void *conn_reader_main(void *arg) {
    convd_conn *c = arg;
    cd_rpc_reader *rd = NULL;
    char err[200] = "";
    int status = CD_ECLOSED;
    char msg[256] = "connection closed by the daemon";
    enum { BUFSZ = 64 << 10 };
    char *buf = NULL;
    if (cd_rpc_reader_init(&rd, c->opts.max_message) != 0 || !(buf = malloc(BUFSZ))) {
        status = CD_ENOMEM;
        snprintf(msg, sizeof msg, "out of memory starting the reader");
        goto out;
    }
    for (;;) {
        int wait = conn_expire(c);
        // The rest of a big answer goes straight into the reader's buffer
        // (the kernel's copy only), as the daemon reads big requests.
        char *at = NULL;
        size_t room = cd_rpc_reader_space(rd, &at);
        char *dst = room > BUFSZ ? at : buf;
        ssize_t n = recv(c->fd, dst, room > BUFSZ ? room : BUFSZ, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->wake_fd, .events = POLLIN}};
                if (poll(p, 2, wait) > 0 && p[1].revents) {
                    uint64_t v;
                    if (read(c->wake_fd, &v, sizeof v) < 0) { /* drained by someone */
                    }
                }
                continue;
            }
            snprintf(msg, sizeof msg, "connection lost: %s", strerror(errno));
            break;
        }
        if (n == 0) break;
        int rc = dst == buf ? cd_rpc_reader_feed(rd, buf, (size_t)n) : cd_rpc_reader_feed_in_place(rd, (size_t)n);
        if (rc != 0) {
            status = rc;
            if (rc == CD_ETOO_LARGE)
                snprintf(msg, sizeof msg, "an answer is larger than max_message (%zu bytes)", c->opts.max_message);
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
    conn_sweep_async(c);
    return NULL;
}

// ---- connect / close --------------------------------------------------------

// Connects fd to addr within timeout_ms. Returns 0 or -errno.
static int connect_with_timeout(int fd, const struct sockaddr_un *addr, int timeout_ms) {
    int64_t deadline = cd_now_ms_int() + (timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0) return 0;
        int e = errno;
        if (e == EINTR) continue;
        if (e == EINPROGRESS) {
            int left = (int)(deadline - cd_now_ms_int());
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int pr = poll(&p, 1, timeout_ms < 0 ? -1 : (left > 0 ? left : 0));
            if (pr == 0) return -ETIMEDOUT;
            if (pr < 0) return -errno;
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            return soerr ? -soerr : 0;
        }
        if (e == EAGAIN) { // Unix sockets: the listen backlog is full
            if (timeout_ms >= 0 && cd_now_ms_int() >= deadline) return -ETIMEDOUT;
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        return -e;
    }
}

// Frees what convd_connect allocated after the socket was connected.
static void conn_free(convd_conn *c) {
    if (c->wake_fd >= 0) close(c->wake_fd);
    close(c->fd);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->wmu);
    pthread_cond_destroy(&c->slot_cond);
    free(c->table);
    free(c->heap);
    free(c);
}

int convd_default_socket(char *buf, size_t len) {
    const char *dir = NULL;
    int n;
    if (geteuid() == 0) {
        n = snprintf(buf, len, "%s", CONVD_SYSTEM_SOCKET);
    } else {
        dir = getenv("XDG_RUNTIME_DIR");
        if (!dir || !*dir) {
            if (len) buf[0] = '\0';
            return cd_client_fail(CD_ECONNECT,
                                  "no socket given and no default: XDG_RUNTIME_DIR is not "
                                  "set (set CONVD_SOCKET, e.g. to %s for the system daemon)",
                                  CONVD_SYSTEM_SOCKET);
        }
        n = snprintf(buf, len, "%s/%s", dir, CONVD_SOCKET_NAME);
    }
    if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        if (len) buf[0] = '\0';
        return cd_client_fail(CD_EPARAMS, "default socket path too long (%s/%s)", dir ? dir : "/run/convd",
                              CONVD_SOCKET_NAME);
    }
    return 0;
}

int convd_connect(const char *path, const convd_opts *opts, convd_conn **out) {
    *out = NULL;
    char defpath[sizeof(((struct sockaddr_un *)0)->sun_path)];
    if (!path || !*path) path = getenv("CONVD_SOCKET");
    if (!path || !*path) {
        int drc = convd_default_socket(defpath, sizeof defpath);
        if (drc != 0) return drc;
        path = defpath;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        return cd_client_fail(CD_EPARAMS, "socket path too long (%zu bytes, max %zu): %s", strlen(path),
                              sizeof addr.sun_path - 1, path);
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
        return cd_client_fail(CD_ECONNECT, "cannot connect to %s: socket: %s", path, strerror(e));
    }
    int rc = connect_with_timeout(c->fd, &addr, c->opts.connect_timeout_ms);
    if (rc != 0) {
        close(c->fd);
        free(c);
        return cd_client_fail(CD_ECONNECT, "cannot connect to %s: %s", path, strerror(-rc));
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->wmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->slot_cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&c->next_msgid, 1);
    c->state = CONN_OPEN;
    c->max_inflight = CD_CLIENT_DEFAULT_INFLIGHT;
    c->reader_wake_at = INT64_MAX;
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->table_mask = 63;
    c->table = calloc(c->table_mask + 1, sizeof *c->table);
    if (c->wake_fd < 0 || !c->table) {
        conn_free(c);
        return cd_client_fail(CD_ENOMEM, "out of memory (connection tables)");
    }

    // The reader thread takes no signals: the application's handlers run on
    // its own threads.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&c->reader, NULL, conn_reader_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        conn_free(c);
        return cd_client_fail(CD_ENOMEM, "cannot start the reader thread: %s", strerror(rc));
    }
    c->reader_started = 1;
    *out = c;
    return 0;
}

void convd_close(convd_conn *c) {
    if (!c) return;
    conn_break(c, CD_ECLOSED, "connection closed by the client");
    // The reader completes the async requests still in flight, then exits.
    if (c->reader_started) pthread_join(c->reader, NULL);
    conn_free(c);
}

void convd_free(void *p) { free(p); }

int convd_set_inflight_limit(convd_conn *c, int max_inflight, int flags) {
    if (!c || max_inflight < 1 || (flags & ~CONVD_INFLIGHT_FAIL))
        return cd_client_fail(CD_EPARAMS, "max_inflight must be >= 1 and flags 0 or "
                                          "CONVD_INFLIGHT_FAIL");
    pthread_mutex_lock(&c->mu);
    c->max_inflight = (size_t)max_inflight;
    c->inflight_fail = (flags & CONVD_INFLIGHT_FAIL) != 0;
    pthread_cond_broadcast(&c->slot_cond);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int convd_inflight(convd_conn *c) {
    if (!c) return 0;
    pthread_mutex_lock(&c->mu);
    int n = (int)c->inflight;
    pthread_mutex_unlock(&c->mu);
    return n;
}

// ---- sending ----------------------------------------------------------------

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
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } ctl;
        if (rb->send_fd >= 0 && sent == 0) { // the descriptor rides with the first bytes
            memset(&ctl, 0, sizeof ctl);
            mh.msg_control = ctl.buf;
            mh.msg_controllen = sizeof ctl.buf;
            struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(cm), &rb->send_fd, sizeof(int));
        }
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int wait = -1;
                if (deadline >= 0) {
                    int64_t left = deadline - cd_now_ms_int();
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
        if (sent == 0) return cd_client_fail(CD_ETIMEOUT, "timed out sending the request (daemon not reading)");
        conn_break(c, CD_ECLOSED, "a request was cut short by its timeout");
        return cd_client_fail(CD_ETIMEOUT, "timed out sending the request; the connection "
                                           "is closed (request cut short)");
    }
    if (status != 0) conn_break(c, CD_ECLOSED, "connection lost while sending");
    return status;
}

// Checks the method and packs [0, msgid, method, [params]] into rb.
// Returns 0 or a status with the thread's message set.
static int pack_request(cd_client_reqbuf *rb, uint32_t msgid, const char *method, cd_client_pack_fn pack, void *ud) {
    cd_client_reqbuf_init(rb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, rb, cd_client_reqbuf_write);
    int rc = cd_rpc_pack_request_begin(&pk, msgid, method);
    // begin opened the params array of one element: the params map.
    if (rc == 0) rc = pack ? pack(&pk, ud) : (msgpack_pack_map(&pk, 0) ? CD_ENOMEM : 0);
    if (rc == 0 && rb->oom) rc = CD_ENOMEM;
    if (rc != 0) {
        cd_client_reqbuf_free(rb);
        if (rc == CD_ENOMEM) return cd_client_fail(rc, "out of memory packing the request");
        return rc; // the pack callback set the message
    }
    return 0;
}

static int check_method(convd_conn *c, const char *method) {
    if (!c || !method) return cd_client_fail(CD_EPARAMS, "connection and method are required");
    size_t mlen = strlen(method);
    if (mlen == 0 || mlen > CD_MAX_METHOD)
        return cd_client_fail(CD_EPARAMS, "method name must be 1..%d bytes", CD_MAX_METHOD);
    return 0;
}

int cd_client_response_status(cd_rpc_msg *resp) {
    if (resp->error.type == MSGPACK_OBJECT_NIL) return 0;
    char emsg[1024] = "";
    int st = cd_rpc_error_decode(&resp->error, emsg, sizeof emsg);
    if (st >= 0) st = CD_EINTERNAL;
    const msgpack_object *code = cd_client_get(&resp->error, "code");
    char cname[64] = "";
    if (code) cd_client_strcpy(cname, sizeof cname, code);
    cd_rpc_msg_free(resp);
    // A code this build does not know keeps its name in the message.
    if (cname[0] && strcmp(cname, cd_err_name(st)) != 0) return cd_client_fail(st, "%s: %s", cname, emsg);
    return cd_client_fail(st, "%s", emsg[0] ? emsg : cd_strerror(st));
}

int cd_client_call(convd_conn *c, const char *method, cd_client_pack_fn pack, void *ud, int timeout_ms,
                   cd_rpc_msg *resp) {
    return cd_client_call_fd(c, method, pack, ud, -1, timeout_ms, resp);
}

int cd_client_call_fd(convd_conn *c, const char *method, cd_client_pack_fn pack, void *ud, int fd, int timeout_ms,
                      cd_rpc_msg *resp) {
    memset(resp, 0, sizeof *resp);
    int rc = check_method(c, method);
    if (rc) return rc;
    if (cd_client_on_reader(c))
        return cd_client_fail(CD_EBUSY, "synchronous call made from a completion callback "
                                        "of the same connection (it would wait for itself)");
    timeout_ms = cd_client_timeout(c, timeout_ms);
    int64_t deadline = timeout_ms < 0 ? -1 : cd_now_ms_int() + timeout_ms;

    uint32_t msgid = atomic_fetch_add(&c->next_msgid, 1);
    cd_client_reqbuf rb;
    rc = pack_request(&rb, msgid, method, pack, ud);
    if (rc) return rc;
    rb.send_fd = fd;

    cd_waiter w = {.msgid = msgid, .kind = WAIT_SYNC, .heap_idx = SIZE_MAX};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w.cond, &ca);
    pthread_condattr_destroy(&ca);

    pthread_mutex_lock(&c->mu);
    rc = cd_client_table_add_locked(c, &w);
    pthread_mutex_unlock(&c->mu);
    if (rc != 0) {
        cd_client_reqbuf_free(&rb);
        pthread_cond_destroy(&w.cond);
        return cd_client_fail(rc, "out of memory registering the call");
    }

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
            int e = deadline >= 0 ? pthread_cond_timedwait(&w.cond, &c->mu, &ts) : pthread_cond_wait(&w.cond, &c->mu);
            if (e == ETIMEDOUT && !w.done) break;
        }
    }
    // Unlink the waiter: a response arriving later is dropped.
    cd_client_table_remove_locked(c, &w);
    int done = w.done, wst = w.status;
    char fmsg[256];
    memcpy(fmsg, c->final_msg, sizeof fmsg);
    pthread_mutex_unlock(&c->mu);
    pthread_cond_destroy(&w.cond);

    if (rc != 0) {
        if (done && wst == 0) cd_rpc_msg_free(&w.resp);
        return rc;
    }
    if (!done) return cd_client_fail(CD_ETIMEOUT, "no answer to '%s' within %d ms", method, timeout_ms);
    if (wst != 0) return cd_client_fail(wst, "%s", fmsg);
    rc = cd_client_response_status(&w.resp);
    if (rc != 0) return rc;
    *resp = w.resp;
    return 0;
}

// Waits (bounded by deadline, unless the limit says fail) for an in-flight
// slot and takes it. Caller holds mu. Returns 0, CD_EOVERLOADED, CD_ETIMEOUT,
// CD_ECLOSED.
static int take_slot_locked(convd_conn *c, int64_t deadline, int timeout_ms) {
    struct timespec ts;
    if (deadline >= 0) {
        ts.tv_sec = deadline / 1000;
        ts.tv_nsec = (long)(deadline % 1000) * 1000000;
    }
    for (;;) {
        if (c->state != CONN_OPEN) return cd_client_fail(CD_ECLOSED, "connection is closed: %s", c->final_msg);
        if (c->inflight < c->max_inflight) break;
        if (c->inflight_fail || cd_client_on_reader(c))
            return cd_client_fail(CD_EOVERLOADED,
                                  "%zu requests already in flight on this "
                                  "connection (the limit)",
                                  c->inflight);
        int e = deadline >= 0 ? pthread_cond_timedwait(&c->slot_cond, &c->mu, &ts)
                              : pthread_cond_wait(&c->slot_cond, &c->mu);
        if (e == ETIMEDOUT && c->inflight >= c->max_inflight && c->state == CONN_OPEN)
            return cd_client_fail(CD_ETIMEOUT,
                                  "no in-flight slot free within %d ms "
                                  "(%zu requests in flight)",
                                  timeout_ms, c->inflight);
    }
    c->inflight++;
    return 0;
}

int cd_client_call_async(convd_conn *c, const char *method, cd_client_pack_fn pack, void *ud, int timeout_ms,
                         cd_client_async_fn fn, void *fn_ud) {
    int rc = check_method(c, method);
    if (rc) return rc;
    timeout_ms = cd_client_timeout(c, timeout_ms);
    int64_t deadline = timeout_ms < 0 ? -1 : cd_now_ms_int() + timeout_ms;

    cd_waiter *w = malloc(sizeof *w);
    if (!w) return cd_client_fail(CD_ENOMEM, "out of memory");
    *w = (cd_waiter){.msgid = atomic_fetch_add(&c->next_msgid, 1),
                     .kind = WAIT_ASYNC,
                     .deadline = deadline,
                     .timeout_ms = timeout_ms,
                     .heap_idx = SIZE_MAX,
                     .fn = fn,
                     .fn_ud = fn_ud};
    snprintf(w->method, sizeof w->method, "%s", method);

    cd_client_reqbuf rb;
    rc = pack_request(&rb, w->msgid, method, pack, ud);
    if (rc) {
        free(w);
        return rc;
    }

    int wake = 0;
    pthread_mutex_lock(&c->mu);
    rc = take_slot_locked(c, deadline, timeout_ms);
    if (rc == 0 && cd_client_table_add_locked(c, w) != 0) rc = CD_ENOMEM;
    if (rc == 0 && deadline >= 0 && cd_client_heap_push_locked(c, w) != 0) {
        cd_client_table_remove_locked(c, w);
        rc = CD_ENOMEM;
    }
    if (rc == CD_ENOMEM) {
        c->inflight--;
        pthread_cond_signal(&c->slot_cond);
        cd_client_fail(rc, "out of memory registering the call");
    }
    if (rc == 0 && deadline >= 0 && deadline < c->reader_wake_at) {
        c->reader_wake_at = deadline;
        wake = 1;
    }
    pthread_mutex_unlock(&c->mu);
    if (rc != 0) {
        cd_client_reqbuf_free(&rb);
        free(w);
        return rc;
    }
    if (wake) {
        uint64_t one = 1;
        if (write(c->wake_fd, &one, sizeof one) < 0) { /* already signalled */
        }
    }

    uint32_t msgid = w->msgid; // w may be completed and freed once written
    rc = conn_write(c, &rb, deadline);
    cd_client_reqbuf_free(&rb);
    if (rc == 0) return 0;
    // Not sent: withdraw the request unless the reader already completed it
    // (the connection broke meanwhile); then its completion reports it.
    pthread_mutex_lock(&c->mu);
    cd_waiter *mine = cd_client_table_find_locked(c, msgid);
    if (mine) async_detach_locked(c, mine);
    pthread_mutex_unlock(&c->mu);
    if (!mine) return 0;
    free(mine);
    return rc;
}
