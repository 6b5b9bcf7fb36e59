#ifndef CD_DAEMON_SYSTEMD_H
#define CD_DAEMON_SYSTEMD_H

// convd under systemd, without libsystemd: the two small protocols a
// service needs, written out here (sd_notify(3), sd_listen_fds(3)).
//
//  - Readiness and status: when $NOTIFY_SOCKET names a Unix datagram socket
//    (a path, or "@name" for the abstract namespace), each state change is
//    one datagram of "KEY=VALUE" lines to it: READY=1 once the listener is
//    up and the models of --models are loaded, STATUS=... lines, RELOADING=1
//    and READY=1 around a SIGHUP rescan, STOPPING=1 at shutdown, WATCHDOG=1
//    every half $WATCHDOG_USEC. Without $NOTIFY_SOCKET every call is a no-op.
//  - Socket activation: when $LISTEN_PID is this process and $LISTEN_FDS is
//    1, descriptor 3 is the listening socket (systemd bound it; convd neither
//    binds nor removes the socket file then).
//
// Everything here runs on the loop thread (or before it starts).

#include <stddef.h>
#include <stdint.h>

#define CD_LISTEN_FDS_START 3 // SD_LISTEN_FDS_START

// The listening socket passed by socket activation: CD_LISTEN_FDS_START when
// $LISTEN_PID is our pid and $LISTEN_FDS is 1 and that descriptor is a
// listening Unix stream socket (it is made close-on-exec); -1 when nothing
// was passed; -2 (with err) when the variables are set for us but wrong
// (several sockets, not a Unix stream socket). The LISTEN_* variables are
// removed from the environment in every case, so nothing convd starts
// believes they are meant for it.
int cd_systemd_listen_fd(char *err, size_t errlen);

// Sends one notification (newline-separated "KEY=VALUE" lines) to
// $NOTIFY_SOCKET. Returns 1 sent, 0 no $NOTIFY_SOCKET, -1 failed (logged once).
int cd_systemd_notify(const char *state);
// The same with a printf format.
int cd_systemd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The watchdog interval systemd expects pings within, in microseconds:
// $WATCHDOG_USEC when set and $WATCHDOG_PID is unset or our pid; 0 when the
// watchdog is off.
uint64_t cd_systemd_watchdog_usec(void);

#endif // CD_DAEMON_SYSTEMD_H
