// The cgroup CPU quota reader (runtime/cpu-quota.h) on made-up /proc/self
// folders whose mountinfo points into a temporary tree: cgroup v2 and v1,
// a limit on an ancestor, a cgroup namespace's mount root, no limit, and
// broken files.

#include "runtime/cpu-quota.h"
#include "tests/unit/check.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char dir[64];  // the tree's root (mkdtemp)
    char proc[96]; // dir/proc: mountinfo, cgroup
    char files[32][PATH_MAX];
    int nfiles;
    char mountinfo[2048]; // its lines so far (put_mount)
} tree;

static void tree_init(tree *t) {
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/cd-quota-XXXXXX");
    CHECK(mkdtemp(t->dir) != NULL);
    snprintf(t->proc, sizeof t->proc, "%s/proc", t->dir);
    CHECK_EQ(mkdir(t->proc, 0700), 0);
}

// Writes text to dir/rel, making its folders.
static void put(tree *t, const char *rel, const char *text) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", t->dir, rel);
    for (char *p = path + strlen(t->dir) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    for (int i = 0; i < t->nfiles; i++)
        if (strcmp(t->files[i], path) == 0) return; // written again (put_mount)
    CHECK(t->nfiles < 32);
    snprintf(t->files[t->nfiles++], PATH_MAX, "%s", path);
}

// Adds a mountinfo line mounting hierarchy root `root` at dir/mnt.
static void put_mount(tree *t, const char *root, const char *mnt, const char *fstype, const char *super) {
    const size_t used = strlen(t->mountinfo);
    snprintf(t->mountinfo + used, sizeof t->mountinfo - used, "30 20 0:26 %s %s/%s rw,nosuid - %s %s %s\n", root,
             t->dir, mnt, fstype, fstype, super);
    put(t, "proc/mountinfo", t->mountinfo);
}

static void tree_free(tree *t) {
    for (int i = t->nfiles - 1; i >= 0; i--) unlink(t->files[i]);
    // Folders, deepest first: rmdir fails harmlessly on the non-empty ones
    // until their children are gone.
    for (int pass = 0; pass < 6; pass++)
        for (int i = 0; i < t->nfiles; i++) {
            char d[PATH_MAX];
            snprintf(d, sizeof d, "%s", t->files[i]);
            for (char *s; (s = strrchr(d, '/')) && strlen(d) > strlen(t->dir);) {
                *s = '\0';
                rmdir(d);
            }
        }
    rmdir(t->dir);
}

CD_TEST(cpu_quota_v2_smallest_limit_up_to_the_root) {
    tree t;
    tree_init(&t);
    put_mount(&t, "/", "cg", "cgroup2", "rw");
    put(&t, "proc/cgroup", "0::/a/b\n");
    put(&t, "cg/a/b/cpu.max", "max 100000\n");
    put(&t, "cg/a/cpu.max", "150000 100000\n");
    put(&t, "cg/cpu.max", "400000 100000\n");
    CHECK(fabs(cd_cpu_quota(t.proc) - 1.5) < 1e-9);
    tree_free(&t);
}

CD_TEST(cpu_quota_v2_namespace_mount_root) {
    // Inside a cgroup namespace the mount shows the container's own cgroup
    // (mount root /kubepods/pod1) at the mount point; /proc/self/cgroup may
    // still name the full path.
    tree t;
    tree_init(&t);
    put_mount(&t, "/kubepods/pod1", "cg", "cgroup2", "rw");
    put(&t, "proc/cgroup", "0::/kubepods/pod1/app\n");
    put(&t, "cg/app/cpu.max", "250000 100000\n");
    put(&t, "cg/cpu.max", "max 100000\n");
    CHECK(fabs(cd_cpu_quota(t.proc) - 2.5) < 1e-9);
    tree_free(&t);
}

CD_TEST(cpu_quota_v1_cpu_controller_among_others) {
    tree t;
    tree_init(&t);
    put_mount(&t, "/", "mem", "cgroup", "rw,memory");
    put_mount(&t, "/", "cpu", "cgroup", "rw,cpu,cpuacct");
    put(&t, "proc/cgroup", "5:memory:/x\n4:cpu,cpuacct:/x\n0::/\n");
    put(&t, "cpu/x/cpu.cfs_quota_us", "50000\n");
    put(&t, "cpu/x/cpu.cfs_period_us", "100000\n");
    put(&t, "cpu/cpu.cfs_quota_us", "-1\n");
    put(&t, "cpu/cpu.cfs_period_us", "100000\n");
    put(&t, "mem/x/cpu.cfs_quota_us", "10000\n"); // not the cpu hierarchy: never read
    put(&t, "mem/x/cpu.cfs_period_us", "100000\n");
    CHECK(fabs(cd_cpu_quota(t.proc) - 0.5) < 1e-9);
    tree_free(&t);
}

CD_TEST(cpu_quota_none_or_unreadable_is_zero) {
    tree t;
    tree_init(&t);
    put_mount(&t, "/", "cg", "cgroup2", "rw");
    put(&t, "proc/cgroup", "0::/a\n");
    put(&t, "cg/a/cpu.max", "max 100000\n");
    CHECK_EQ(cd_cpu_quota(t.proc), 0.0);
    put(&t, "cg/a/cpu.max", "garbage\n");
    CHECK_EQ(cd_cpu_quota(t.proc), 0.0);
    put(&t, "cg/a/cpu.max", "100000 0\n");
    CHECK_EQ(cd_cpu_quota(t.proc), 0.0);
    put(&t, "proc/cgroup", "no colons here\n");
    CHECK_EQ(cd_cpu_quota(t.proc), 0.0);
    tree_free(&t);
    // No such folder at all.
    CHECK_EQ(cd_cpu_quota("/nonexistent/proc/self"), 0.0);
}
