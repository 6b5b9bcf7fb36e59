// The cgroup's CPU quota (cpu-quota.h).

#include "runtime/cpu-quota.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One cgroup hierarchy that has the cpu controller: where it is mounted,
// the hierarchy path its mount shows at that point, and the process's
// cgroup in it.
typedef struct {
    char mnt[PATH_MAX];
    char root[PATH_MAX];
    char group[PATH_MAX];
} hierarchy;

// 1 when the comma-separated list holds word.
static int has_word(const char *list, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

// A line of mountinfo: the mount of the v2 hierarchy (v2) or of the v1 one
// with the cpu controller ("id parent dev root mountpoint opts ... - fstype
// source superopts"). 1 when it is, h filled.
static int mount_line(char *line, int v2, hierarchy *h) {
    char root[PATH_MAX], mnt[PATH_MAX], fstype[64], super[1024];
    const char *dash = strstr(line, " - ");
    if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2) return 0;
    if (sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2) return 0;
    if (v2 ? strcmp(fstype, "cgroup2") != 0 : strcmp(fstype, "cgroup") != 0 || !has_word(super, "cpu")) return 0;
    snprintf(h->mnt, sizeof h->mnt, "%s", mnt);
    snprintf(h->root, sizeof h->root, "%s", root);
    return 1;
}

// A line of the cgroup file: the process's cgroup in that hierarchy,
// "0::path" (v2) or "id:controllers:path" with cpu among the controllers
// (v1). 1 when it is, h filled.
static int group_line(char *line, int v2, hierarchy *h) {
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) return 0;
    *c1 = *c2 = '\0';
    if (v2 ? strcmp(line, "0") != 0 || c1[1] != '\0' : !has_word(c1 + 1, "cpu")) return 0;
    snprintf(h->group, sizeof h->group, "%s", c2 + 1);
    return 1;
}

// 1 when a line of proc_self/name is one `match` takes.
static int find_line(const char *proc_self, const char *name, int (*match)(char *, int, hierarchy *), int v2,
                     hierarchy *h) {
    char path[PATH_MAX], line[4096];
    snprintf(path, sizeof path, "%s/%s", proc_self, name);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = match(line, v2, h);
    fclose(f);
    return found;
}

// The quota in CPUs one folder's files set, or 0 for none.
static double folder_quota(const char *dir, int v2) {
    char path[2 * PATH_MAX + 64], a[64] = "", b[64] = "";
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        FILE *f = fopen(path, "r");
        if (!f) return 0;
        const int n = fscanf(f, "%63s %63s", a, b);
        fclose(f);
        if (n != 2 || strcmp(a, "max") == 0) return 0;
    } else {
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        FILE *f = fopen(path, "r");
        if (!f) return 0;
        const int n = fscanf(f, "%63s", a);
        fclose(f);
        snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
        if (n != 1 || !(f = fopen(path, "r"))) return 0;
        const int m = fscanf(f, "%63s", b);
        fclose(f);
        if (m != 1) return 0;
    }
    const double quota = strtod(a, NULL), period = strtod(b, NULL);
    return quota > 0 && period > 0 ? quota / period : 0;
}

// The smallest quota from the process's cgroup up to the mount's root.
static double hierarchy_quota(const char *proc_self, int v2) {
    hierarchy h;
    if (!find_line(proc_self, "mountinfo", mount_line, v2, &h) || !find_line(proc_self, "cgroup", group_line, v2, &h))
        return 0;
    // The part of the group below the mount's root ("/" or a container's
    // own cgroup, shown at the mount point inside a cgroup namespace).
    const char *rel = h.group;
    const size_t rl = strlen(h.root);
    if (strcmp(h.root, "/") != 0 && strncmp(h.group, h.root, rl) == 0 && (h.group[rl] == '/' || !h.group[rl]))
        rel = h.group + rl;
    char dir[2 * PATH_MAX + 2];
    snprintf(dir, sizeof dir, "%s%s", h.mnt, strcmp(rel, "/") == 0 ? "" : rel);
    const size_t top = strlen(h.mnt);
    double best = 0;
    for (;;) {
        const double q = folder_quota(dir, v2);
        if (q > 0 && (best == 0 || q < best)) best = q;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= top || !slash || (size_t)(slash - dir) < top) break;
        *slash = '\0';
    }
    return best;
}

double cd_cpu_quota(const char *proc_self) {
    if (!proc_self) proc_self = "/proc/self";
    const double v2 = hierarchy_quota(proc_self, 1), v1 = hierarchy_quota(proc_self, 0);
    return v2 > 0 && (v1 == 0 || v2 < v1) ? v2 : v1;
}
