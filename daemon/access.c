#include "daemon/access.h"

#include "core/errors.h"
#include "daemon/log.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

// Resolved once at start (loop thread only afterwards).
static struct {
    uid_t self;          // the daemon's effective uid
    mode_t socket_mode;  // --socket-mode
    bool has_socket_gid; // --socket-group given
    gid_t socket_gid;
    bool has_admin_gid; // --admin-group given
    gid_t admin_gid;
    char admin_name[64];  // its name, for messages
    uint64_t last_log_ns; // refusals are logged at most once a second
} g = {.socket_mode = 0660};

// A group given by name or number. Returns 0 or -1 with err.
static int resolve_group(const char *setting, const char *text, gid_t *gid, char *name, size_t namelen, char *err,
                         size_t errlen) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    struct group *gr;
    if (text[0] >= '0' && text[0] <= '9' && *end == '\0' && errno == 0 && v < (unsigned long)(gid_t)-1) {
        *gid = (gid_t)v;
        gr = getgrgid(*gid);
        snprintf(name, namelen, "%s", gr ? gr->gr_name : text);
        return 0;
    }
    gr = getgrnam(text);
    if (!gr) {
        snprintf(err, errlen, "%s: no group named '%.64s' on this system", setting, text);
        return -1;
    }
    *gid = gr->gr_gid;
    snprintf(name, namelen, "%s", gr->gr_name);
    return 0;
}

int cd_access_init(const cd_settings *set, char *err, size_t errlen) {
    g.self = geteuid();
    char *end;
    errno = 0;
    long mode = strtol(set->socket_mode, &end, 8);
    if (!set->socket_mode[0] || *end != '\0' || errno != 0 || mode < 0 || mode > 0777) {
        snprintf(err, errlen,
                 "socket-mode: '%.16s' is not an octal mode 0..0777 "
                 "(e.g. 0660)",
                 set->socket_mode);
        return -1;
    }
    if ((mode & 0600) != 0600) {
        snprintf(err, errlen,
                 "socket-mode: %04lo leaves the daemon's own user without "
                 "read and write (at least 0600)",
                 mode);
        return -1;
    }
    g.socket_mode = (mode_t)mode;
    char name[64];
    g.has_socket_gid = false;
    if (set->socket_group[0]) {
        if (resolve_group("socket-group", set->socket_group, &g.socket_gid, name, sizeof name, err, errlen) != 0)
            return -1;
        g.has_socket_gid = true;
    }
    g.has_admin_gid = false;
    g.admin_name[0] = '\0';
    if (set->admin_group[0]) {
        if (resolve_group("admin-group", set->admin_group, &g.admin_gid, g.admin_name, sizeof g.admin_name, err,
                          errlen) != 0)
            return -1;
        g.has_admin_gid = true;
    }
    return 0;
}

mode_t cd_access_socket_mode(void) { return g.socket_mode; }

bool cd_access_socket_group(gid_t *gid) {
    if (g.has_socket_gid) *gid = g.socket_gid;
    return g.has_socket_gid;
}

void cd_peer_identify(int fd, cd_peer *p) {
    memset(p, 0, sizeof *p);
    p->admin = -1;
    struct ucred uc;
    socklen_t len = sizeof uc;
    if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0 && len == sizeof uc) {
        p->known = true;
        p->uid = uc.uid;
        p->gid = uc.gid;
        p->pid = uc.pid;
    }
}

// Whether the user of uid is in group `want` by the group database
// (getgrouplist: the groups a login of that user gets).
static bool user_in_group(uid_t uid, gid_t want) {
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || !res)
        return false; // a uid without a user has no supplementary groups
    int n = 64;
    gid_t *groups = malloc((size_t)n * sizeof *groups);
    if (!groups) return false;
    if (getgrouplist(res->pw_name, res->pw_gid, groups, &n) < 0) {
        gid_t *more = realloc(groups, (size_t)n * sizeof *groups);
        if (!more) {
            free(groups);
            return false;
        }
        groups = more;
        if (getgrouplist(res->pw_name, res->pw_gid, groups, &n) < 0) n = 0;
    }
    bool found = false;
    for (int i = 0; i < n && !found; i++) found = groups[i] == want;
    free(groups);
    return found;
}

bool cd_peer_is_admin(cd_peer *p) {
    if (p->admin < 0) {
        bool yes = false;
        if (p->known)
            yes = p->uid == 0 || p->uid == g.self ||
                  (g.has_admin_gid && (p->gid == g.admin_gid || user_in_group(p->uid, g.admin_gid)));
        p->admin = yes;
    }
    return p->admin == 1;
}

// Counts one refusal of method (one counter per refused method class).
static void count_refusal(cd_method_id method) {
    switch (method) {
    case CD_M_load: CD_STAT_INC(refused_load); break;
    case CD_M_unload: CD_STAT_INC(refused_unload); break;
    default: break; // no other method is an admin method
    }
}

int cd_access_check(cd_peer *p, cd_method_id method, unsigned long long conn_id, char *err, size_t errlen) {
    if (cd_peer_is_admin(p)) return 0;
    count_refusal(method);
    char rule[160];
    if (g.has_admin_gid)
        snprintf(rule, sizeof rule,
                 "root, uid %u (the daemon's) and members of group "
                 "'%s' (--admin-group)",
                 (unsigned)g.self, g.admin_name);
    else
        snprintf(rule, sizeof rule,
                 "root and uid %u (the daemon's); no --admin-group "
                 "is set",
                 (unsigned)g.self);
    char who[64];
    if (p->known)
        snprintf(who, sizeof who, "uid %u gid %u", (unsigned)p->uid, (unsigned)p->gid);
    else
        snprintf(who, sizeof who, "a peer of unknown identity");
    snprintf(err, errlen, "%s is an admin method, allowed to %s; this peer is %s", cd_method_name(method), rule, who);
    uint64_t now = uv_hrtime();
    if (now - g.last_log_ns > 1000000000ull) {
        g.last_log_ns = now;
        CD_WARN("conn %llu: %s refused (E_PERMISSION) to %s pid %d: not an admin", conn_id, cd_method_name(method), who,
                p->known ? (int)p->pid : -1);
    }
    return CD_EPERMISSION;
}
