#ifndef CD_DAEMON_SERVER_STATE_H
#define CD_DAEMON_SERVER_STATE_H

// What the daemon's parts share: the server's state, which the handlers
// (methods, models, infer, plan), the metrics and the server's own loop
// (daemon/server.c, which creates it and wires the parts) read. Handlers
// include this, never server.h, so that server.c may call them without a
// circle.

#include "daemon/conn-hub.h"
#include "daemon/settings.h"
#include "daemon/workers.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

typedef struct cd_registry cd_registry;

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
    uv_timer_t drain_timer;      // --drain-timeout at shutdown
    uv_timer_t grace_timer;      // --shutdown-grace after it: then a forced exit
    uv_timer_t join_timer;       // polls the worker threads while they stop
    bool grace_started;          // grace_timer runs
    bool joining;                // every connection freed; workers stopping
    cd_workers *workers;         // inference worker pool
    cd_workers *profiler;        // one thread for `plan` profiles: a profile never
                                 //   holds an inference worker
    cd_registry *registry;       // loaded models (NULL until the runtime is built in)
    cd_conn_hub hub;             // the connections: their list, counts, budget
                                 //   (hub.budget.held: bytes of requests held)
    uint64_t start_ns;           // uv_hrtime() at start
    bool draining;               // shutdown begun
    bool finished;               // workers joined, handles closed, loop about to end
    dev_t sock_dev;              // identity of the socket file we created,
    ino_t sock_ino;              //   so that only our own file is removed
    // -- limits: connection timeouts, the request-memory budget, loads --
    uv_timer_t conn_timer;  // checks idle-timeout and read-timeout (cd_conn_sweep)
    uint64_t conn_timer_ms; // its period
    cd_workers *loader;     // one thread for `load`: loads never hold an
                            //   inference worker nor wait behind inference
    size_t pending_loads;   // client `load`s queued or running on it
    // -- systemd (daemon/systemd.c) --
    bool activated;                              // the listener came from socket activation (fd 3):
                                                 //   systemd owns the socket file
    char activated_path[CD_SOCKET_PATH_MAX + 1]; // its path (or "fd 3"), for logs
    uv_timer_t watchdog_timer;                   // WATCHDOG=1 every half $WATCHDOG_USEC (when set)
    uv_timer_t reload_timer;                     // after a SIGHUP rescan: READY=1 once the loader is idle
} cd_server;

// Requests queued or running on the workers and the profiler thread.
size_t cd_server_in_flight(cd_server *srv);

// The path the daemon listens on: --socket, or the one systemd bound when
// socket-activated.
const char *cd_server_socket_path(const cd_server *srv);

// Seconds since start.
double cd_server_uptime(const cd_server *srv);

#endif // CD_DAEMON_SERVER_STATE_H
