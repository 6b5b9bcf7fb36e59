#ifndef CD_DAEMON_ACCESS_H
#define CD_DAEMON_ACCESS_H

// Who may do what (docs/OPERATIONS.md, "Access control").
//
// Connecting at all is decided by the file system: the socket file's mode
// (--socket-mode, 0660 by default) and group (--socket-group). Every peer
// that can connect may call the read-only methods and `infer`. The admin
// methods -- those that change which models are loaded or their limits:
// `load` (also replacing a model, and its max_batch/max_delay_us/max_queue)
// and `unload` -- are allowed only to root, to the daemon's own uid, and to
// members of --admin-group (the peer's primary gid, or its user's groups as
// getgrouplist(3) lists them). Anyone else gets E_PERMISSION.
//
// The peer is identified once, at accept, with SO_PEERCRED (the credentials
// of the process that called connect(2)); group membership is looked up the
// first time the connection calls an admin method and kept for its life.

#include "daemon/settings.h"
#include "daemon/stats.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    bool known; // SO_PEERCRED answered
    uid_t uid;  // of the process that connected
    gid_t gid;  //   its primary group
    pid_t pid;  //   and its pid (for logs)
    int admin;  // -1 not decided yet, 0 no, 1 yes (cached per connection)
} cd_peer;

// Resolves --socket-mode, --socket-group and --admin-group (once, at start).
// Returns 0, or -1 with err naming the setting and the problem (exit 2).
int cd_access_init(const cd_settings *set, char *err, size_t errlen);

// Mode bits for the socket file (--socket-mode).
mode_t cd_access_socket_mode(void);
// The socket file's group: true and *gid when --socket-group was given.
bool cd_access_socket_group(gid_t *gid);

// Fills p from SO_PEERCRED of the connected socket fd (known = false when
// that fails: such a peer is never an admin).
void cd_peer_identify(int fd, cd_peer *p);

// Whether the peer may call admin methods (decided once per connection).
bool cd_peer_is_admin(cd_peer *p);

// Checks an admin method for the peer: 0 when allowed; otherwise counts the
// refusal (stats `access.refused`), logs it (at most once a second) and
// returns CD_EPERMISSION with err naming the method and the rule.
int cd_access_check(cd_peer *p, cd_method_id method, unsigned long long conn_id, char *err, size_t errlen);

#endif // CD_DAEMON_ACCESS_H
