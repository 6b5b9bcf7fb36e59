#include "daemon/server.h"

#include "core/bigbuf.h"
#include "core/errors.h"
#include "daemon/access.h"
#include "daemon/conn.h"
#include "daemon/methods.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/models.h"
#include "daemon/stats.h"
#include "daemon/systemd.h"
#include "daemon/version.h"

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

// ---- the socket file --------------------------------------------------------

// The directory of the socket must be one that nobody else can write to:
// otherwise another user could remove our socket file and put their own in
// its place, and clients would talk to them. Refused: a directory writable
// by others without the sticky bit, or owned by a user other than root and
// us. /run/convd (the default as root) is created 0755 when missing.
static int socket_dir_check(const char *path) {
    char dir[CD_SOCKET_PATH_MAX + 1];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (strcmp(path, CD_SYSTEM_SOCKET) == 0) {
        if (mkdir(dir, 0755) == 0) {
            (void)chmod(dir, 0755); // whatever the umask
            CD_INFO("created %s (mode 0755)", dir);
        } else if (errno != EEXIST) {
            CD_ERROR("cannot create the socket directory %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        CD_ERROR("cannot use socket path %s: directory %s: %s", path, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        CD_ERROR("cannot use socket path %s: %s is not a directory", path, dir);
        return -1;
    }
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
        CD_ERROR("refusing socket path %s: its directory %s is writable by every user "
                 "and not sticky (mode %04o), so anyone could replace the socket; "
                 "choose a directory only the daemon's user can write",
                 path, dir, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
        CD_ERROR("refusing socket path %s: its directory %s belongs to uid %u, who could "
                 "replace the socket; choose a directory of root or of uid %u",
                 path, dir, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    return 0;
}

// Makes `path` free for bind: nothing there, or a stale socket file of our
// own uid (nobody accepts on it: connect() is refused), which is removed with
// a log line. Returns 0, or -1 when the directory is unsafe, a live daemon
// listens there, the socket belongs to another user, or the path is unusable.
static int socket_prepare(const char *path) {
    if (!path[0]) {
        char why[256];
        char none[CD_SOCKET_PATH_MAX + 1];
        if (cd_settings_default_socket(none, sizeof none, why, sizeof why) != 0)
            CD_ERROR("%s", why);
        else
            CD_ERROR("no socket path");
        return -1;
    }
    if (socket_dir_check(path) != 0) return -1;
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 0;
        CD_ERROR("cannot use socket path %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        CD_ERROR("%s exists and is not a socket; not touching it", path);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        CD_ERROR("refusing socket path %s: a socket of uid %u is already there, not ours "
                 "(uid %u): another user's daemon, or one that would impersonate convd; "
                 "remove it or choose another --socket",
                 path, (unsigned)st.st_uid, (unsigned)geteuid());
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
                 "(choose another --socket or stop that daemon)",
                 path);
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
    if (e == ENOENT) return 0;
    CD_ERROR("cannot probe existing socket %s: %s", path, strerror(e));
    return -1;
}

// Binds the listener to path with the socket file's mode (--socket-mode,
// from the moment it exists: the umask is set for the bind) and group
// (--socket-group), both before listen(2): nobody connects before the file
// has its final permissions. Returns 0 or a libuv error.
static int socket_bind(cd_server *srv, const char *path) {
    mode_t mode = cd_access_socket_mode();
    mode_t old = umask(0777 & ~mode);
    int rc = uv_pipe_bind(&srv->listener, path);
    umask(old);
    if (rc != 0) return rc;
    if (chmod(path, mode) != 0) {
        rc = uv_translate_sys_error(errno);
        CD_ERROR("cannot set mode %04o on %s: %s", (unsigned)mode, path, strerror(errno));
        unlink(path);
        return rc;
    }
    gid_t gid;
    if (cd_access_socket_group(&gid) && chown(path, (uid_t)-1, gid) != 0) {
        rc = uv_translate_sys_error(errno);
        CD_ERROR("cannot give %s to group %u: %s", path, (unsigned)gid, strerror(errno));
        unlink(path);
        return rc;
    }
    return 0;
}

// Removes the socket file if it is still the one we created.
static void socket_remove(cd_server *srv) {
    if (srv->activated) return; // systemd's file: it stays for the next activation
    struct stat st;
    const char *path = srv->set->socket;
    if (stat(path, &st) == 0 && st.st_dev == srv->sock_dev && st.st_ino == srv->sock_ino) unlink(path);
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
            if (now - srv->hub.last_reject_log_ns > 1000000000ull) {
                srv->hub.last_reject_log_ns = now;
                CD_WARN("out of file descriptors (%s): shedding new connections", uv_strerror(status));
            }
        } else {
            CD_WARN("accept: %s", uv_strerror(status));
        }
        return;
    }
    cd_conn_accept(&srv->hub);
}

static void on_handle_closed(uv_handle_t *h) {}

// Shutdown is bounded: after SIGTERM/SIGINT the connections drain for at
// most --drain-timeout seconds; then (or as soon as they are all closed, if
// that comes first) the workers get --shutdown-grace seconds to finish what
// they run. When the grace runs out, or at a second SIGTERM/SIGINT, convd
// logs what it abandons and exits CD_EXIT_FORCED at once, through _exit:
// nothing a running thread may still use is freed.
#define CD_EXIT_FORCED 3

// Logs what is still in flight and exits at once (see above).
static void force_exit(cd_server *srv, const char *why) {
    CD_WARN("%s: exiting now (status %d), abandoning %zu connection(s) and %zu "
            "request(s) in flight",
            why, CD_EXIT_FORCED, srv->hub.nconns, cd_server_in_flight(srv));
    char desc[2048];
    if (srv->workers && cd_workers_describe(srv->workers, "worker", desc, sizeof desc)) CD_WARN("abandoned: %s", desc);
    if (srv->loader && cd_workers_describe(srv->loader, "loader", desc, sizeof desc)) CD_WARN("abandoned: %s", desc);
    if (srv->profiler && cd_workers_describe(srv->profiler, "profiler", desc, sizeof desc))
        CD_WARN("abandoned: %s", desc);
    if (srv->listening) socket_remove(srv);
    // Their threads are given up, not joined: detached, they are not
    // reported as leaked by a thread sanitizer's check at exit.
    if (srv->workers) cd_workers_abandon(srv->workers);
    if (srv->loader) cd_workers_abandon(srv->loader);
    if (srv->profiler) cd_workers_abandon(srv->profiler);
    fflush(stdout);
    fflush(stderr);
    _exit(CD_EXIT_FORCED);
}

static void on_grace_timeout(uv_timer_t *t) {
    cd_server *srv = t->data;
    char why[96];
    snprintf(why, sizeof why, "shutdown grace (%llds) is over", (long long)srv->set->shutdown_grace);
    force_exit(srv, why);
}

// Starts the --shutdown-grace clock (once).
static void start_grace(cd_server *srv) {
    if (srv->grace_started) return;
    srv->grace_started = true;
    uv_timer_start(&srv->grace_timer, on_grace_timeout, (uint64_t)srv->set->shutdown_grace * 1000, 0);
}

// Polls the worker pools while they finish (a bounded join: never blocks the
// loop, so a second signal or the grace timer still acts). Once every thread
// has returned, joins them and closes the last handles: the loop ends.
static void on_join_timer(uv_timer_t *t) {
    cd_server *srv = t->data;
    if (cd_workers_alive(srv->workers) > 0 || cd_workers_alive(srv->loader) > 0 || cd_workers_alive(srv->profiler) > 0)
        return;
    uv_timer_stop(t);
    cd_workers_stop_finish(srv->workers);
    srv->workers = NULL;
    cd_workers_stop_finish(srv->loader);
    srv->loader = NULL;
    cd_workers_stop_finish(srv->profiler);
    srv->profiler = NULL;
    srv->finished = true;
    uv_close((uv_handle_t *)&srv->join_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->grace_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sigint, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sigterm, on_handle_closed);
    CD_INFO("all connections closed");
}

// Once shutdown has begun and every connection is freed: stops the workers
// (bounded, see on_join_timer).
static void server_maybe_finish(cd_server *srv) {
    if (!srv->draining || srv->hub.nconns > 0 || srv->joining) return;
    srv->joining = true;
    uv_close((uv_handle_t *)&srv->drain_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->hub.backlog_idle, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sighup, on_handle_closed);
    if (srv->set->metrics_file[0]) cd_metrics_write_file(srv, srv->set->metrics_file); // the final counts
    uv_close((uv_handle_t *)&srv->metrics_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->conn_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->watchdog_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->reload_timer, on_handle_closed);
    cd_workers_stop_begin(srv->workers);
    cd_workers_stop_begin(srv->loader);
    cd_workers_stop_begin(srv->profiler);
    start_grace(srv);
    uv_timer_start(&srv->join_timer, on_join_timer, 0, 10);
}

// The hub calls it when a connection is freed (from its uv_close callback).
static void on_conn_freed(void *owner) { server_maybe_finish(owner); }

static void kill_all(cd_server *srv) { cd_conn_kill_all(&srv->hub); }

static void on_drain_timeout(uv_timer_t *t) {
    cd_server *srv = t->data;
    CD_WARN("drain timeout (%llds): closing %zu connections; work still running gets "
            "%llds more",
            (long long)srv->set->drain_timeout, srv->hub.nconns, (long long)srv->set->shutdown_grace);
    start_grace(srv);
    kill_all(srv);
}

static void begin_drain(cd_server *srv, const char *why) {
    CD_INFO("%s: shutting down (%zu connections, %zu requests in flight)", why, srv->hub.nactive,
            cd_server_in_flight(srv));
    srv->draining = true;
    cd_systemd_notifyf("STOPPING=1\nSTATUS=%s: draining %zu connection(s)", why, srv->hub.nactive);
    if (srv->listening) {
        uv_close((uv_handle_t *)&srv->listener, on_handle_closed);
        srv->listening = false;
        socket_remove(srv);
    }
    if (srv->set->drain_timeout > 0)
        uv_timer_start(&srv->drain_timer, on_drain_timeout, (uint64_t)srv->set->drain_timeout * 1000, 0);
    cd_conn_drain_all(&srv->hub);
    if (srv->set->drain_timeout == 0) {
        start_grace(srv);
        kill_all(srv);
    }
    server_maybe_finish(srv);
}

static void on_signal(uv_signal_t *s, int signum) {
    cd_server *srv = s->data;
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    if (!srv->draining) {
        begin_drain(srv, name);
    } else if (!srv->finished) {
        char why[32];
        snprintf(why, sizeof why, "%s again", name);
        force_exit(srv, why);
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
            if (d->type == CD_SET_ACTION) continue;
            size_t sz = d->type == CD_SET_STR || d->type == CD_SET_PATH ? (size_t)d->max + 1 : sizeof(int64_t);
            char *cur = (char *)srv->set + d->offset, *nw = (char *)&fresh + d->offset;
            bool differ =
                d->type == CD_SET_STR || d->type == CD_SET_PATH ? strcmp(cur, nw) != 0 : memcmp(cur, nw, sz) != 0;
            if (!differ) continue;
            if (d->flags & CD_SETF_RELOAD) {
                memcpy(cur, nw, sz);
                changed++;
                CD_INFO("SIGHUP: %s changed", d->name);
            } else {
                CD_WARN("SIGHUP: %s changed in the configuration; it takes effect at "
                        "restart",
                        d->name);
            }
        }
        cd_log_set_level((cd_log_level)srv->set->log_level);
        CD_INFO("SIGHUP: configuration re-read (%d setting(s) applied)", changed);
    }
    cd_models_rescan(srv);
}

// The STATUS= line of a serving daemon.
static void notify_ready(cd_server *srv) {
    cd_systemd_notifyf("READY=1\nSTATUS=serving %lld model(s) on %s", (long long)cd_models_count(srv),
                       cd_server_socket_path(srv));
}

// After a reload: READY=1 once the loads the rescan queued (and any other
// load) have finished, so `systemctl reload` means "models rescanned".
static void on_reload_timer(uv_timer_t *t) {
    cd_server *srv = t->data;
    if (!srv->draining && srv->loader && cd_workers_busy(srv->loader) > 0) return;
    uv_timer_stop(t);
    if (!srv->draining) // after STOPPING=1, never READY=1 again
        notify_ready(srv);
}

static void on_sighup(uv_signal_t *s, int signum) {
    cd_server *srv = s->data;
    if (srv->draining) return;
    cd_systemd_notifyf("RELOADING=1\nSTATUS=reloading: configuration and models directory\n"
                       "MONOTONIC_USEC=%llu",
                       (unsigned long long)(uv_hrtime() / 1000));
    reload(srv);
    uv_timer_start(&srv->reload_timer, on_reload_timer, 0, 20);
}

static void on_watchdog_timer(uv_timer_t *t) { cd_systemd_notify("WATCHDOG=1"); }

static void on_metrics_timer(uv_timer_t *t) {
    cd_server *srv = t->data;
    cd_metrics_write_file(srv, srv->set->metrics_file);
}

// ---- start-up ---------------------------------------------------------------

// The connection cap: max-connections, lowered so that connections plus a
// reserve fit in RLIMIT_NOFILE (whose soft limit is first raised to the hard).
static size_t connection_cap(const cd_settings *set) {
    struct rlimit rl;
    size_t cap = (size_t)set->max_connections;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return cap;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        if (want == RLIM_INFINITY || want > 1048576) want = 1048576;
        if (want > rl.rlim_cur) {
            struct rlimit nrl = {want, rl.rlim_max};
            if (setrlimit(RLIMIT_NOFILE, &nrl) == 0) rl.rlim_cur = want;
        }
    }
    if (rl.rlim_cur != RLIM_INFINITY) {
        size_t fit = rl.rlim_cur > 2 * CD_FD_RESERVE ? (size_t)rl.rlim_cur - CD_FD_RESERVE : (size_t)rl.rlim_cur / 2;
        if (fit < 1) fit = 1;
        if (fit < cap) {
            CD_WARN("max-connections %zu lowered to %zu to fit RLIMIT_NOFILE %llu", cap, fit,
                    (unsigned long long)rl.rlim_cur);
            cap = fit;
        }
    }
    return cap;
}

static void on_request_complete(cd_request *req, void *ud) { cd_conn_request_done(req); }

// Period of the idle/read-timeout checks: a quarter of the shorter timeout,
// 50 ms to 1 s (a connection is closed at most that late).
static uint64_t conn_timer_period(const cd_settings *set) {
    int64_t t = 0;
    if (set->idle_timeout > 0) t = set->idle_timeout;
    if (set->read_timeout > 0 && (t == 0 || set->read_timeout < t)) t = set->read_timeout;
    uint64_t ms = t > 0 ? (uint64_t)t * 1000 / 4 : 1000;
    return ms < 50 ? 50 : ms > 1000 ? 1000 : ms;
}

static void on_conn_timer(uv_timer_t *t) {
    cd_server *srv = t->data;
    cd_conn_sweep(&srv->hub);
    uint64_t ms = conn_timer_period(srv->set); // SIGHUP may change the timeouts
    if (ms != srv->conn_timer_ms) {
        srv->conn_timer_ms = ms;
        uv_timer_set_repeat(t, ms);
    }
}

// Starts the inference workers, the profiler and the loader. Returns 0,
// -1 when no thread started, 1 when some did (they must be stopped).
static int start_threads(cd_server *srv) {
    cd_settings *set = srv->set;
    // Freed big buffers kept for reuse stay a small part of the request
    // budget (with --max-buffered 96M, six 40 MiB requests otherwise left
    // 160 MiB kept beside it).
    cd_bigbuf_set_limit((size_t)cd_settings_max_buffered(set) / 4);
    if (cd_workers_init_spin(&srv->workers, srv->loop, (int)set->workers, (uint64_t)set->worker_spin_us * 1000,
                             on_request_complete, srv) != 0) {
        CD_ERROR("cannot start the worker threads");
        return -1;
    }
    // Workers write finished responses themselves when they can (conn-respond.c).
    cd_workers_set_respond(srv->workers, cd_conn_respond);
    // `plan` profiles run on their own thread (answered by the loop).
    if (cd_workers_init(&srv->profiler, srv->loop, 1, on_request_complete, srv) != 0) {
        CD_ERROR("cannot start the profiler thread");
        return 1;
    }
    // `load` runs on its own thread: never on an inference worker, never
    // queued ahead of inference.
    if (cd_workers_init(&srv->loader, srv->loop, 1, on_request_complete, srv) != 0) {
        CD_ERROR("cannot start the loader thread");
        return 1;
    }
    return 0;
}

// Listens on the activated socket (listen_fd >= 0) or binds --socket;
// *st is the socket file's stat (zero when activated). Returns 0 or -1.
static int start_listening(cd_server *srv, int listen_fd, struct stat *st) {
    uv_pipe_init(srv->loop, &srv->listener, 0);
    srv->listener.data = srv;
    cd_settings *set = srv->set;
    int rc;
    if (srv->activated) {
        // systemd bound the socket (convd.socket): its path, mode and group
        // are the unit's; --socket only names it in logs and STATUS=.
        char path[CD_SOCKET_PATH_MAX + 2];
        size_t plen = sizeof path;
        rc = uv_pipe_open(&srv->listener, listen_fd);
        if (rc == 0 && uv_pipe_getsockname(&srv->listener, path, &plen) == 0 && plen > 0 && plen <= CD_SOCKET_PATH_MAX)
            snprintf(srv->activated_path, sizeof srv->activated_path, "%.*s", (int)plen, path);
        else
            snprintf(srv->activated_path, sizeof srv->activated_path, "fd %d", listen_fd);
    } else {
        rc = socket_bind(srv, set->socket);
    }
    if (rc == 0) rc = uv_listen((uv_stream_t *)&srv->listener, 4096, on_connection);
    if (rc != 0) {
        CD_ERROR("cannot listen on %s: %s", srv->activated ? "the activated socket (fd 3)" : set->socket,
                 uv_strerror(rc));
        uv_close((uv_handle_t *)&srv->listener, on_handle_closed);
        return -1;
    }
    srv->listening = true;
    srv->hub.listener = (uv_stream_t *)&srv->listener;
    if (stat(cd_server_socket_path(srv), st) == 0 && !srv->activated) {
        srv->sock_dev = st->st_dev;
        srv->sock_ino = st->st_ino;
    }
    return 0;
}

// The signals, the timers of drain, shutdown, connections, metrics, reload
// and the systemd watchdog.
static void start_handles(cd_server *srv) {
    cd_settings *set = srv->set;
    uv_signal_init(srv->loop, &srv->sigint);
    uv_signal_init(srv->loop, &srv->sigterm);
    srv->sigint.data = srv->sigterm.data = srv;
    uv_signal_start(&srv->sigint, on_signal, SIGINT);
    uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
    cd_conn_hub_init(&srv->hub);
    uv_timer_init(srv->loop, &srv->drain_timer);
    srv->drain_timer.data = srv;
    uv_timer_init(srv->loop, &srv->grace_timer);
    srv->grace_timer.data = srv;
    uv_timer_init(srv->loop, &srv->join_timer);
    srv->join_timer.data = srv;
    uv_signal_init(srv->loop, &srv->sighup);
    srv->sighup.data = srv;
    uv_signal_start(&srv->sighup, on_sighup, SIGHUP);
    uv_timer_init(srv->loop, &srv->metrics_timer);
    srv->metrics_timer.data = srv;
    uv_timer_init(srv->loop, &srv->conn_timer);
    srv->conn_timer.data = srv;
    srv->conn_timer_ms = conn_timer_period(set);
    uv_timer_start(&srv->conn_timer, on_conn_timer, srv->conn_timer_ms, srv->conn_timer_ms);
    uv_timer_init(srv->loop, &srv->reload_timer);
    srv->reload_timer.data = srv;
    uv_timer_init(srv->loop, &srv->watchdog_timer);
    srv->watchdog_timer.data = srv;
    uint64_t wd_usec = cd_systemd_watchdog_usec();
    if (wd_usec > 0) { // ping twice per interval, from the loop: a stuck loop misses it
        uint64_t ms = wd_usec / 2000 ? wd_usec / 2000 : 1;
        uv_timer_start(&srv->watchdog_timer, on_watchdog_timer, ms, ms);
        CD_INFO("systemd watchdog: %llu ms; pinging every %llu ms", (unsigned long long)(wd_usec / 1000),
                (unsigned long long)ms);
    }
    if (set->metrics_file[0]) { // the first file was written before listening (cd_server_run)
        uint64_t ms = (uint64_t)set->metrics_interval * 1000;
        uv_timer_start(&srv->metrics_timer, on_metrics_timer, ms, ms);
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
    // The connections' hub: they see only this, and answer through the
    // dispatcher (daemon/methods.c) and the hooks given here.
    srv->hub = (cd_conn_hub){.loop = srv->loop,
                             .set = set,
                             .dispatch = cd_methods_dispatch,
                             .dispatch_ud = srv,
                             .freed = on_conn_freed,
                             .owner = srv,
                             .budget = {.set = set},
                             .conn_cap = connection_cap(set)};

    char why[512];
    int listen_fd = cd_systemd_listen_fd(why, sizeof why);
    if (listen_fd == -2) {
        CD_ERROR("%s", why);
        goto out_loop;
    }
    srv->activated = listen_fd >= 0;
    if (!srv->activated && socket_prepare(set->socket) != 0) goto out_loop;
    int threads = start_threads(srv);
    if (threads < 0) goto out_loop;
    if (threads > 0) goto out_workers;
    srv->hub.workers = srv->workers;
    if (cd_models_init(srv) != 0) goto out_workers;

    // The metrics file's first version, before anyone can connect: a scraper
    // (or a test) that reaches the daemon finds the file there.
    if (set->metrics_file[0]) cd_metrics_write_file(srv, set->metrics_file);
    struct stat st = {0};
    if (start_listening(srv, listen_fd, &st) != 0) goto out_models;

    start_handles(srv);

    CD_INFO("%s %s: device %s, %d workers, max-connections %zu, max-message %lld", CD_DAEMON_NAME, CD_DAEMON_VERSION,
            set->device, cd_workers_count(srv->workers), srv->hub.conn_cap, (long long)set->max_message);
    CD_INFO("listening on %s%s", cd_server_socket_path(srv), srv->activated ? " (socket activation: fd 3)" : "");
    CD_INFO("socket mode %04o, group %u; admin methods allowed to root, uid %u%s%s", (unsigned)(st.st_mode & 07777),
            (unsigned)st.st_gid, (unsigned)geteuid(), set->admin_group[0] ? " and group " : "", set->admin_group);
    // Listening, and the models of --models are loaded (cd_models_init
    // loads them before returning): ready.
    notify_ready(srv);
    uv_run(srv->loop, UV_RUN_DEFAULT);
    cd_models_free(srv);
    CD_INFO("exiting");
    exit_code = 0;
    goto out_loop;

out_models:
    cd_models_free(srv);
out_workers:
    // Start-up failed: nothing was submitted, the threads return at once.
    if (srv->loader) cd_workers_stop(srv->loader, 10000);
    if (srv->profiler) cd_workers_stop(srv->profiler, 10000);
    cd_workers_stop(srv->workers, 10000);
out_loop:
    uv_run(srv->loop, UV_RUN_DEFAULT); // let close callbacks run
    if (uv_loop_close(srv->loop) != 0) CD_WARN("event loop closed with handles still open");
    free(srv->loop);
    free(srv);
    return exit_code;
}
