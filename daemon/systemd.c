#include "daemon/systemd.h"

#include "daemon/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

// Parses a decimal unsigned number that fills the whole string. 0 or -1.
static int parse_u64(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') return -1;
    *out = v;
    return 0;
}

// True when the variable holds our pid (LISTEN_PID, WATCHDOG_PID).
static bool env_is_our_pid(const char *name) {
    uint64_t pid;
    return parse_u64(getenv(name), &pid) == 0 && pid == (uint64_t)getpid();
}

int cd_systemd_listen_fd(char *err, size_t errlen) {
    const char *fds_env = getenv("LISTEN_FDS");
    bool ours = fds_env && env_is_our_pid("LISTEN_PID");
    uint64_t nfds = 0;
    int rc = -1;
    if (ours && (parse_u64(fds_env, &nfds) != 0 || nfds != 1)) {
        snprintf(err, errlen,
                 "socket activation passed LISTEN_FDS=%.32s; convd takes "
                 "exactly one listening socket (one ListenStream= in convd.socket)",
                 fds_env);
        rc = -2;
    } else if (ours) {
        int fd = CD_LISTEN_FDS_START, type = 0, listening = 0;
        socklen_t len = sizeof type;
        struct sockaddr_un a;
        socklen_t alen = sizeof a;
        memset(&a, 0, sizeof a);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
            getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
            snprintf(err, errlen, "socket activation: descriptor %d is not a socket: %s", fd, strerror(errno));
            rc = -2;
        } else if (a.sun_family != AF_UNIX || type != SOCK_STREAM) {
            snprintf(err, errlen,
                     "socket activation: descriptor %d is not a Unix stream "
                     "socket (convd.socket needs ListenStream=/path)",
                     fd);
            rc = -2;
        } else {
            len = sizeof listening;
            if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) {
                snprintf(err, errlen,
                         "socket activation: descriptor %d is not listening "
                         "(convd.socket must not set Accept=yes)",
                         fd);
                rc = -2;
            } else {
                (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
                rc = fd;
            }
        }
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return rc;
}

int cd_systemd_notify(const char *state) {
    static bool warned; // loop thread only
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path) return 0;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof a.sun_path) {
        if (!warned) CD_WARN("NOTIFY_SOCKET '%.64s' is not a Unix socket path; not notifying", path);
        warned = true;
        return -1;
    }
    memcpy(a.sun_path, path, n);
    if (path[0] == '@') a.sun_path[0] = '\0'; // abstract namespace
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ssize_t sent = -1;
    if (fd >= 0) {
        sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&a, alen);
        int e = errno;
        close(fd);
        errno = e;
    }
    if (sent < 0) {
        if (!warned) CD_WARN("cannot notify %s: %s", path, strerror(errno));
        warned = true;
        return -1;
    }
    return 1;
}

int cd_systemd_notifyf(const char *fmt, ...) {
    if (!getenv("NOTIFY_SOCKET")) return 0;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cd_systemd_notify(buf);
}

uint64_t cd_systemd_watchdog_usec(void) {
    uint64_t usec;
    if (parse_u64(getenv("WATCHDOG_USEC"), &usec) != 0 || usec == 0) return 0;
    if (getenv("WATCHDOG_PID") && !env_is_our_pid("WATCHDOG_PID")) return 0;
    return usec;
}
