#include "daemon/server.h"

#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/models.h"
#include "daemon/stats.h"
#include "daemon/version.h"
#include "proto/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CD_FD_RESERVE 32 // descriptors kept free for models, logs, libuv

size_t cd_server_in_flight(cd_server *srv) {
    size_t n = srv->workers ? cd_workers_busy(srv->workers) : 0;
    n += srv->loader ? cd_workers_busy(srv->loader) : 0;
    return n + (srv->profiler ? cd_workers_busy(srv->profiler) : 0);
}

double cd_server_uptime(const cd_server *srv) {
    return (double)(uv_hrtime() - srv->start_ns) / 1e9;
}

// ---- the socket file --------------------------------------------------------

// Makes `path` free for bind: nothing there, or a stale socket file (nobody
// accepts on it: connect() is refused), which is removed with a log line.
// Returns 0, or -1 when a live daemon listens there or the path is unusable.
static int socket_prepare(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        CD_ERROR("cannot use socket path %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        CD_ERROR("%s exists and is not a socket; not touching it", path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        CD_ERROR("socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, path, strlen(path));
    int r = connect(fd, (struct sockaddr *)&a, sizeof a);
    int e = errno;
    close(fd);
    if (r == 0 || e == EAGAIN || e == EINPROGRESS) {
        CD_ERROR("another daemon is already listening on %s; leaving it alone "
                 "(choose another --socket or stop that daemon)", path);
        return -1;
    }
    if (e == ECONNREFUSED) {
        if (unlink(path) != 0 && errno != ENOENT) {
            CD_ERROR("cannot remove stale socket file %s: %s", path, strerror(errno));
            return -1;
        }
        CD_WARN("replaced stale socket file %s (nobody was listening on it)", path);
        return 0;
    }
    if (e == ENOENT)
        return 0;
    CD_ERROR("cannot probe existing socket %s: %s", path, strerror(e));
    return -1;
}

// Removes the socket file if it is still the one we created.
static void socket_remove(cd_server *srv) {
    struct stat st;
    const char *path = srv->set->socket;
    if (stat(path, &st) == 0 && st.st_dev == srv->sock_dev &&
        st.st_ino == srv->sock_ino)
        unlink(path);
}

// ---- connections and shutdown -----------------------------------------------

static void on_connection(uv_stream_t *listener, int status) {
    cd_server *srv = listener->data;
    if (status < 0) {
        if (status == UV_EMFILE || status == UV_ENFILE) {
            // libuv has already accepted and closed the pending connections
            // with its reserve descriptor; we count and log the event.
            CD_STAT_INC(conn_rejected_emfile);
            uint64_t now = uv_hrtime();
            if (now - srv->last_reject_log_ns > 1000000000ull) {
                srv->last_reject_log_ns = now;
                CD_WARN("out of file descriptors (%s): shedding new connections",
                        uv_strerror(status));
            }
        } else {
            CD_WARN("accept: %s", uv_strerror(status));
        }
        return;
    }
    cd_conn_accept(srv);
}

static void on_handle_closed(uv_handle_t *h) {}

// Ends the loop once shutdown has begun and every connection is freed.
static void server_maybe_finish(cd_server *srv) {
    if (!srv->draining || srv->nconns > 0 || srv->finished)
        return;
    srv->finished = true;
    uv_close((uv_handle_t *)&srv->drain_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->backlog_idle, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sigint, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sigterm, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sighup, on_handle_closed);
    if (srv->set->metrics_file[0])
        cd_metrics_write_file(srv, srv->set->metrics_file); // the final counts
    uv_close((uv_handle_t *)&srv->metrics_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->conn_timer, on_handle_closed);
    cd_workers_stop(srv->workers);
    srv->workers = NULL;
    cd_workers_stop(srv->loader);
    srv->loader = NULL;
    cd_workers_stop(srv->profiler);
    srv->profiler = NULL;
    CD_INFO("all connections closed");
}

void cd_server_conn_freed(cd_server *srv) {
    server_maybe_finish(srv);
}

static void kill_all(cd_server *srv) {
    for (cd_conn *c = srv->conns; c; c = c->next)
        cd_conn_kill(c);
}

static void on_drain_timeout(uv_timer_t *t) {
    cd_server *srv = t->data;
    CD_WARN("drain timeout (%llds): closing %zu connections",
            (long long)srv->set->drain_timeout, srv->nconns);
    kill_all(srv);
}

static void begin_drain(cd_server *srv, const char *why) {
    CD_INFO("%s: shutting down (%zu connections, %zu requests in flight)", why,
            srv->nactive, cd_server_in_flight(srv));
    srv->draining = true;
    if (srv->listening) {
        uv_close((uv_handle_t *)&srv->listener, on_handle_closed);
        srv->listening = false;
        socket_remove(srv);
    }
    if (srv->set->drain_timeout > 0)
        uv_timer_start(&srv->drain_timer, on_drain_timeout,
                       (uint64_t)srv->set->drain_timeout * 1000, 0);
    for (cd_conn *c = srv->conns; c; c = c->next)
        cd_conn_drain(c);
    if (srv->set->drain_timeout == 0)
        kill_all(srv);
    server_maybe_finish(srv);
}

static void on_signal(uv_signal_t *s, int signum) {
    cd_server *srv = s->data;
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    if (!srv->draining) {
        begin_drain(srv, name);
    } else if (!srv->finished) {
        CD_WARN("%s again: closing %zu connections now", name, srv->nconns);
        kill_all(srv);
    }
}

// ---- SIGHUP: reload ---------------------------------------------------------

// Re-reads the config file (with the command line applied over it again),
// applies the settings marked CD_SETF_RELOAD, logs the others that changed
// (they need a restart), then rescans the models directory.
static void reload(cd_server *srv) {
    static cd_settings fresh; // loop thread only
    if (cd_settings_parse(&fresh, srv->argc, srv->argv) != CD_SETTINGS_RUN) {
        CD_WARN("SIGHUP: the configuration is invalid (see the line above); keeping "
                "the current settings");
    } else {
        int changed = 0;
        for (size_t i = 0; i < cd_setting_count; i++) {
            const cd_setting_desc *d = &cd_setting_table[i];
            if (d->type == CD_SET_ACTION)
                continue;
            size_t sz = d->type == CD_SET_STR || d->type == CD_SET_PATH
                            ? (size_t)d->max + 1 : sizeof(int64_t);
            char *cur = (char *)srv->set + d->offset, *nw = (char *)&fresh + d->offset;
            bool differ = d->type == CD_SET_STR || d->type == CD_SET_PATH
                              ? strcmp(cur, nw) != 0 : memcmp(cur, nw, sz) != 0;
            if (!differ)
                continue;
            if (d->flags & CD_SETF_RELOAD) {
                memcpy(cur, nw, sz);
                changed++;
                CD_INFO("SIGHUP: %s changed", d->name);
            } else {
                CD_WARN("SIGHUP: %s changed in the configuration; it takes effect at "
                        "restart", d->name);
            }
        }
        cd_log_set_level((cd_log_level)srv->set->log_level);
        CD_INFO("SIGHUP: configuration re-read (%d setting(s) applied)", changed);
    }
    cd_models_rescan(srv);
}

static void on_sighup(uv_signal_t *s, int signum) {
    cd_server *srv = s->data;
    if (srv->draining)
        return;
    reload(srv);
}

static void on_metrics_timer(uv_timer_t *t) {
    cd_server *srv = t->data;
    cd_metrics_write_file(srv, srv->set->metrics_file);
}

// ---- the backlog idle -------------------------------------------------------

static void on_backlog_idle(uv_idle_t *h);

void cd_server_backlog_add(cd_server *srv, cd_conn *c) {
    if (c->in_backlog_list || c->state == CD_CONN_CLOSING)
        return;
    c->in_backlog_list = true;
    c->backlog_next = srv->backlog;
    srv->backlog = c;
    uv_idle_start(&srv->backlog_idle, on_backlog_idle);
}

// Removes c from the backlog list (before it is freed).
void cd_server_backlog_remove(cd_server *srv, cd_conn *c) {
    if (!c->in_backlog_list)
        return;
    for (cd_conn **pp = &srv->backlog; *pp; pp = &(*pp)->backlog_next) {
        if (*pp == c) {
            *pp = c->backlog_next;
            break;
        }
    }
    c->in_backlog_list = false;
}

static void on_backlog_idle(uv_idle_t *h) {
    cd_server *srv = h->data;
    // Each connection handles at most CD_CONN_BATCH messages per turn; one
    // that still has more re-adds itself, after the others.
    cd_conn *list = srv->backlog;
    srv->backlog = NULL;
    while (list) {
        cd_conn *c = list;
        list = c->backlog_next;
        c->in_backlog_list = false;
        if (c->state != CD_CONN_CLOSING)
            cd_conn_process(c);
    }
    if (!srv->backlog)
        uv_idle_stop(&srv->backlog_idle);
}

// ---- start-up ---------------------------------------------------------------

// The connection cap: max-connections, lowered so that connections plus a
// reserve fit in RLIMIT_NOFILE (whose soft limit is first raised to the hard).
static size_t connection_cap(const cd_settings *set) {
    struct rlimit rl;
    size_t cap = (size_t)set->max_connections;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return cap;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        if (want == RLIM_INFINITY || want > 1048576)
            want = 1048576;
        if (want > rl.rlim_cur) {
            struct rlimit nrl = {want, rl.rlim_max};
            if (setrlimit(RLIMIT_NOFILE, &nrl) == 0)
                rl.rlim_cur = want;
        }
    }
    if (rl.rlim_cur != RLIM_INFINITY) {
        size_t fit = rl.rlim_cur > 2 * CD_FD_RESERVE ? (size_t)rl.rlim_cur - CD_FD_RESERVE
                                                     : (size_t)rl.rlim_cur / 2;
        if (fit < 1)
            fit = 1;
        if (fit < cap) {
            CD_WARN("max-connections %zu lowered to %zu to fit RLIMIT_NOFILE %llu",
                    cap, fit, (unsigned long long)rl.rlim_cur);
            cap = fit;
        }
    }
    return cap;
}

static void on_request_complete(cd_request *req, void *ud) {
    cd_conn_request_done(req);
}

// Period of the idle/read-timeout checks: a quarter of the shorter timeout,
// 50 ms to 1 s (a connection is closed at most that late).
static uint64_t conn_timer_period(const cd_settings *set) {
    int64_t t = 0;
    if (set->idle_timeout > 0)
        t = set->idle_timeout;
    if (set->read_timeout > 0 && (t == 0 || set->read_timeout < t))
        t = set->read_timeout;
    uint64_t ms = t > 0 ? (uint64_t)t * 1000 / 4 : 1000;
    return ms < 50 ? 50 : ms > 1000 ? 1000 : ms;
}

static void on_conn_timer(uv_timer_t *t) {
    cd_server *srv = t->data;
    cd_conn_sweep(srv);
    uint64_t ms = conn_timer_period(srv->set); // SIGHUP may change the timeouts
    if (ms != srv->conn_timer_ms) {
        srv->conn_timer_ms = ms;
        uv_timer_set_repeat(t, ms);
    }
}

int cd_server_run(cd_settings *set, int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    cd_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        CD_ERROR("out of memory");
        return 1;
    }
    srv->set = set;
    srv->argc = argc;
    srv->argv = argv;
    srv->start_ns = uv_hrtime();
    srv->loop = malloc(sizeof *srv->loop);
    if (!srv->loop || uv_loop_init(srv->loop) != 0) {
        CD_ERROR("cannot create the event loop");
        free(srv->loop);
        free(srv);
        return 1;
    }
    int exit_code = 1;
    srv->conn_cap = connection_cap(set);

    if (socket_prepare(set->socket) != 0)
        goto out_loop;
    if (cd_workers_init_spin(&srv->workers, srv->loop, (int)set->workers,
                             (uint64_t)set->worker_spin_us * 1000, on_request_complete,
                             srv) != 0) {
        CD_ERROR("cannot start the worker threads");
        goto out_loop;
    }
    // Workers write finished responses themselves when they can (conn.c).
    cd_workers_set_respond(srv->workers, cd_conn_respond);
    // `plan` profiles run on their own thread (answered by the loop).
    if (cd_workers_init(&srv->profiler, srv->loop, 1, on_request_complete, srv) != 0) {
        CD_ERROR("cannot start the profiler thread");
        goto out_workers;
    }
    // `load` runs on its own thread: never on an inference worker, never
    // queued ahead of inference.
    if (cd_workers_init(&srv->loader, srv->loop, 1, on_request_complete,
                        srv) != 0) {
        CD_ERROR("cannot start the loader thread");
        goto out_workers;
    }
    if (cd_models_init(srv) != 0)
        goto out_workers;

    uv_pipe_init(srv->loop, &srv->listener, 0);
    srv->listener.data = srv;
    int rc = uv_pipe_bind(&srv->listener, set->socket);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 4096, on_connection);
    if (rc != 0) {
        CD_ERROR("cannot listen on %s: %s", set->socket, uv_strerror(rc));
        uv_close((uv_handle_t *)&srv->listener, on_handle_closed);
        goto out_models;
    }
    srv->listening = true;
    struct stat st;
    if (stat(set->socket, &st) == 0) {
        srv->sock_dev = st.st_dev;
        srv->sock_ino = st.st_ino;
    }

    uv_signal_init(srv->loop, &srv->sigint);
    uv_signal_init(srv->loop, &srv->sigterm);
    srv->sigint.data = srv->sigterm.data = srv;
    uv_signal_start(&srv->sigint, on_signal, SIGINT);
    uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
    uv_idle_init(srv->loop, &srv->backlog_idle);
    srv->backlog_idle.data = srv;
    uv_timer_init(srv->loop, &srv->drain_timer);
    srv->drain_timer.data = srv;
    uv_signal_init(srv->loop, &srv->sighup);
    srv->sighup.data = srv;
    uv_signal_start(&srv->sighup, on_sighup, SIGHUP);
    uv_timer_init(srv->loop, &srv->metrics_timer);
    srv->metrics_timer.data = srv;
    uv_timer_init(srv->loop, &srv->conn_timer);
    srv->conn_timer.data = srv;
    srv->conn_timer_ms = conn_timer_period(set);
    uv_timer_start(&srv->conn_timer, on_conn_timer, srv->conn_timer_ms, srv->conn_timer_ms);
    if (set->metrics_file[0]) {
        uint64_t ms = (uint64_t)set->metrics_interval * 1000;
        cd_metrics_write_file(srv, set->metrics_file);
        uv_timer_start(&srv->metrics_timer, on_metrics_timer, ms, ms);
    }

    CD_INFO("%s %s: device %s, %d workers, max-connections %zu, max-message %lld",
            CD_DAEMON_NAME, CD_DAEMON_VERSION, set->device,
            cd_workers_count(srv->workers), srv->conn_cap,
            (long long)set->max_message);
    CD_INFO("listening on %s", set->socket);
    uv_run(srv->loop, UV_RUN_DEFAULT);
    cd_models_free(srv);
    CD_INFO("exiting");
    exit_code = 0;
    goto out_loop;

out_models:
    cd_models_free(srv);
out_workers:
    if (srv->loader)
        cd_workers_stop(srv->loader);
    if (srv->profiler)
        cd_workers_stop(srv->profiler);
    cd_workers_stop(srv->workers);
out_loop:
    uv_run(srv->loop, UV_RUN_DEFAULT); // let close callbacks run
    if (uv_loop_close(srv->loop) != 0)
        CD_WARN("event loop closed with handles still open");
    free(srv->loop);
    free(srv);
    return exit_code;
}
