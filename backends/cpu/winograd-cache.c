// The Winograd choice's timings on disk, so that every process on this
// machine makes the same choice for the same conv (two loads of a model plan
// the same kernels, and give the same numbers) and pays the timing once. The
// backend cannot reach the planner's cache (runtime/planner.c): this is the
// same folder and the same record format, in a file of its own:
//   $XDG_CACHE_HOME/convd/winograd-v2.txt (or ~/.cache/convd/...)
//   key<TAB>onednn_ns f2_ns f4_ns f6_ns onednn_winograd_ns
// (v2: F6 and oneDNN's Winograd joined; a candidate not built is
// 18446744073709551615; the depthwise verdicts of dw3x3-choose.c are 3
// figures under keys of their own).
// key = CPU model, the ISAs in force (our kernels', oneDNN's), threads and the
// conv's shape; appended, the last record of a key wins, a torn line is
// skipped. The version goes up when a kernel's speed changes enough to make
// old records wrong.

#include "backends/cpu/winograd-impl.h"

#include "core/host.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

// The cache file's path into buf (its folder created); 0 or -1 when there is
// no folder.
static int cache_path(char *buf, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[1024];
    if (xdg && *xdg)
        snprintf(dir, sizeof dir, "%s/convd", xdg);
    else if (home && *home)
        snprintf(dir, sizeof dir, "%s/.cache", home);
    else
        return -1;
    if (!(xdg && *xdg)) {
        mkdir(dir, 0700); // ~/.cache
        strncat(dir, "/convd", sizeof dir - strlen(dir) - 1);
    } else {
        mkdir(xdg, 0700);
    }
    if (mkdir(dir, 0700) && errno != EEXIST) return -1;
    return snprintf(buf, n, "%s/winograd-v2.txt", dir) < (int)n ? 0 : -1;
}

void cd_wino_cache_key(const cd_conv_desc *d, cd_layout l, cd_sparse_isa isa, int threads, char *key, size_t n) {
    char cpu[128] = "?";
    cd_host_cpu_model(cpu, sizeof cpu);
    snprintf(key, n, "%s [%s %s]%s|%d|%s|c%d h%d w%d k%d p%d,%d,%d,%d res%d act%d", cpu, cd_sparse_isa_name(isa),
             cd_dnnl_isa(), CD_HOST_BUILD_FLAVOR, threads, cd_layout_name(l), d->c, d->h, d->w, d->k, d->pad_t,
             d->pad_l, d->pad_b, d->pad_r, d->has_residual, d->act.kind);
}

// The n nonzero figures after a record's tab into v: 1, else 0.
static int parse_figures(const char *p, uint64_t *v, int n) {
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        v[i] = strtoull(p, &end, 10);
        if (end == p || errno || !v[i]) return 0;
        p = end;
    }
    return *p == '\n' || *p == '\0';
}

int cd_wino_cache_get(const char *key, uint64_t *ns, int n) {
    char path[1100], line[1024];
    if (cache_path(path, sizeof path)) return 0;
    pthread_mutex_lock(&g_lock);
    FILE *f = fopen(path, "r");
    int found = 0;
    const size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f)) {
        uint64_t v[CD_WINO_CACHE_MAX];
        if (strncmp(line, key, kl) != 0 || line[kl] != '\t') continue;
        if (n <= CD_WINO_CACHE_MAX && parse_figures(line + kl + 1, v, n)) {
            memcpy(ns, v, (size_t)n * sizeof *v);
            found = 1;
        }
    }
    if (f) fclose(f);
    pthread_mutex_unlock(&g_lock);
    return found;
}

void cd_wino_cache_put(const char *key, const uint64_t *ns, int n) {
    char path[1100];
    if (cache_path(path, sizeof path)) return;
    pthread_mutex_lock(&g_lock);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%s\t", key);
        for (int i = 0; i < n; i++) fprintf(f, "%" PRIu64 "%c", ns[i], i + 1 < n ? ' ' : '\n');
        fclose(f);
    }
    pthread_mutex_unlock(&g_lock);
}
