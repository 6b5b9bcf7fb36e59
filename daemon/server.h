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

#include "daemon/server-state.h"

// Runs the daemon until shutdown. Returns the process exit code: 0 after a
// clean shutdown, 1 when it cannot start (socket in use by a live daemon,
// bad device, cannot bind).
// argc/argv are the command line the settings came from (SIGHUP re-reads
// the config file and applies the command line over it again).
int cd_server_run(cd_settings *set, int argc, char **argv);

#endif // CD_DAEMON_SERVER_H
