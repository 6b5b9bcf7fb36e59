#ifndef CD_DAEMON_SERVER_H
#define CD_DAEMON_SERVER_H

// The convd server: one libuv loop that owns the listening Unix socket, the
// connections, the signal handlers and the worker pool.
//
// Under systemd (daemon/systemd.h) the listener may come from socket
// activation, and readiness, reloads, shutdown and watchdog pings are
// notified to $NOTIFY_SOCKET.
//
// Shutdown (SIGINT/SIGTERM): the listener is closed and the socket file
// (unless systemd made it) removed at once; every connection enters CD_CONN_DRAINING and closes when
// it has nothing in flight, nothing buffered and nothing unsent; after
// --drain-timeout seconds the rest are closed. When the last connection is
// freed the workers are joined and cd_server_run returns 0. The whole is
// bounded: --shutdown-grace seconds after the drain ends (by its timeout, or
// when the connections are gone) whatever still runs is abandoned and the
// process exits 3 at once; so does a second SIGTERM/SIGINT.

#include "daemon/settings.h"
#include "daemon/workers.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

typedef struct cd_conn cd_conn;
typedef struct cd_registry cd_registry;

#define CD_READ_CHUNK (64u << 10) // bytes per read callback

typedef struct cd_server {
    uv_loop_t *loop;             // the one event loop
    cd_settings *set;            // settings (SIGHUP may change the reloadable ones)
    uv_pipe_t listener;          // listening socket
    bool listening;              // listener open (closed at drain start)
    uv_signal_t sigint, sigterm; // shutdown signals
    uv_signal_t sighup;          // reload: config file and models directory
    uv_timer_t metrics_timer;    // --metrics-file writes
    int argc;                    // the command line (SIGHUP re-applies it over
    char **argv;                 //   the re-read config file)
    uv_idle_t backlog_idle;      // runs while connections have unprocessed messages
    uv_timer_t drain_timer;      // --drain-timeout at shutdown
    uv_timer_t grace_timer;      // --shutdown-grace after it: then a forced exit
    uv_timer_t join_timer;       // polls the worker threads while they stop
    bool grace_started;          // grace_timer runs
    bool joining;                // every connection freed; workers stopping
    cd_workers *workers;         // inference worker pool
    cd_workers *profiler;        // one thread for `plan` profiles: a profile never
                                 //   holds an inference worker
    cd_registry *registry;       // loaded models (NULL until the runtime is built in)
    cd_conn *conns;              // every connection not yet freed (doubly linked)
    cd_conn *backlog;            // connections to process in backlog_idle (singly linked)
    size_t nconns;               // connections not yet freed (incl. refused ones)
    size_t nactive;              // accepted, not refused, not yet freed
    size_t conn_cap;             // max-connections, lowered to fit RLIMIT_NOFILE
    uint64_t next_conn_id;       // id for logs
    uint64_t start_ns;           // uv_hrtime() at start
    bool draining;               // shutdown begun
    bool finished;               // workers joined, handles closed, loop about to end
    dev_t sock_dev;              // identity of the socket file we created,
    ino_t sock_ino;              //   so that only our own file is removed
    uint64_t last_reject_log_ns; // rate limit for refused-connection lines
    // -- limits: connection timeouts, the request-memory budget, loads --
    uv_timer_t conn_timer;  // checks idle-timeout and read-timeout (cd_conn_sweep)
    uint64_t conn_timer_ms; // its period
    size_t buffered;        // bytes of requests held: what readers hold or have
                            //   committed to, plus accepted, unanswered requests
    cd_workers *loader;     // one thread for `load`: loads never hold an
                            //   inference worker nor wait behind inference
    size_t pending_loads;   // client `load`s queued or running on it
    // -- systemd (daemon/systemd.c) --
    bool activated;                              // the listener came from socket activation (fd 3):
                                                 //   systemd owns the socket file
    char activated_path[CD_SOCKET_PATH_MAX + 1]; // its path (or "fd 3"), for logs
    uv_timer_t watchdog_timer;                   // WATCHDOG=1 every half $WATCHDOG_USEC (when set)
    uv_timer_t reload_timer;                     // after a SIGHUP rescan: READY=1 once the loader is idle
    char readbuf[CD_READ_CHUNK];                 // shared read buffer (consumed synchronously)
} cd_server;

// Runs the daemon until shutdown. Returns the process exit code: 0 after a
// clean shutdown, 1 when it cannot start (socket in use by a live daemon,
// bad device, cannot bind).
// argc/argv are the command line the settings came from (SIGHUP re-reads
// the config file and applies the command line over it again).
int cd_server_run(cd_settings *set, int argc, char **argv);

// Requests queued or running on the workers and the profiler thread.
size_t cd_server_in_flight(cd_server *srv);

// The path the daemon listens on: --socket, or the one systemd bound when
// socket-activated.
const char *cd_server_socket_path(const cd_server *srv);

// Seconds since start.
double cd_server_uptime(const cd_server *srv);

// Called when a connection is freed (from its uv_close callback).
void cd_server_conn_freed(cd_server *srv);

// Adds c to the backlog list and starts the idle handle.
void cd_server_backlog_add(cd_server *srv, cd_conn *c);
// Removes c from the backlog list (before c is freed).
void cd_server_backlog_remove(cd_server *srv, cd_conn *c);

#endif // CD_DAEMON_SERVER_H
