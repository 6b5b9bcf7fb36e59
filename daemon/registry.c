#include "daemon/registry.h"

#include "core/errors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    cd_model_entry *entry;       // current version (one registry reference)
    cd_model_counters *counters; // per-name counters (owned)
} slot;

struct cd_registry {
    slot *slots; // in load order
    size_t n, cap;
    int nworkers;
};

int cd_registry_init(cd_registry **out, int nworkers) {
    cd_registry *r = calloc(1, sizeof *r);
    if (!r) return CD_ENOMEM;
    r->nworkers = nworkers;
    *out = r;
    return 0;
}

void cd_registry_free(cd_registry *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) {
        cd_model_entry_unref(r->slots[i].entry);
        free(r->slots[i].counters);
    }
    free(r->slots);
    free(r);
}

static slot *find(cd_registry *r, const char *name, size_t len) {
    for (size_t i = 0; i < r->n; i++) {
        const char *n = r->slots[i].entry->name;
        if (strlen(n) == len && memcmp(n, name, len) == 0) return &r->slots[i];
    }
    return NULL;
}

int cd_registry_put(cd_registry *r, cd_model_entry *e) {
    slot *s = find(r, e->name, strlen(e->name));
    if (s) {
        cd_model_entry *old = s->entry;
        s->entry = e;
        cd_model_entry_unref(old);
        return 0;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 8;
        slot *ns = realloc(r->slots, cap * sizeof *ns);
        if (!ns) return CD_ENOMEM;
        r->slots = ns;
        r->cap = cap;
    }
    cd_model_counters *c = calloc(1, sizeof *c); // zeroed histograms are empty
    if (!c) return CD_ENOMEM;
    r->slots[r->n].counters = c;
    r->slots[r->n++].entry = e;
    return 0;
}

int cd_registry_remove(cd_registry *r, const char *name, size_t len) {
    slot *s = find(r, name, len);
    if (!s) return CD_ENOT_FOUND;
    cd_model_entry *old = s->entry;
    free(s->counters);
    size_t i = (size_t)(s - r->slots);
    memmove(&r->slots[i], &r->slots[i + 1], (r->n - i - 1) * sizeof *s);
    r->n--;
    cd_model_entry_unref(old);
    return 0;
}

cd_model_entry *cd_registry_get(cd_registry *r, const char *name, size_t len) {
    slot *s = find(r, name, len);
    if (!s) return NULL;
    cd_model_entry_ref(s->entry);
    return s->entry;
}

cd_model_counters *cd_registry_counters(cd_registry *r, const char *name, size_t len) {
    slot *s = find(r, name, len);
    return s ? s->counters : NULL;
}

size_t cd_registry_count(const cd_registry *r) { return r ? r->n : 0; }

const cd_model_entry *cd_registry_at(const cd_registry *r, size_t i) { return r->slots[i].entry; }

const cd_model_counters *cd_registry_counters_at(const cd_registry *r, size_t i) { return r->slots[i].counters; }

cd_model_entry *cd_model_entry_new(const char *name, const char *path, cd_model *m, const cd_model_conf *conf,
                                   cd_batch_fn run, int nworkers) {
    cd_model_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->execs = calloc((size_t)nworkers * 2, sizeof *e->execs);
    if (!e->execs) {
        free(e);
        return NULL;
    }
    e->refs = 1;
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->path, sizeof e->path, "%s", path);
    e->model = m;
    e->conf = *conf;
    cd_sched_queue_init(&e->queue, run, &e->conf);
    e->nexecs = nworkers * 2;
    return e;
}

void cd_model_entry_ref(cd_model_entry *e) { e->refs++; }

void cd_model_entry_unref(cd_model_entry *e) {
    if (!e || --e->refs > 0) return;
    for (int i = 0; i < e->nexecs; i++) cd_exec_free(e->execs[i]);
    free(e->execs);
    cd_model_free(e->model);
    free(e);
}

int cd_model_path_resolve(const char *models_dir, const char *rel, char *out, char *err, size_t errlen) {
    if (!models_dir[0]) {
        snprintf(err, errlen, "the daemon has no --models directory: load is disabled");
        return CD_EACCESS;
    }
    if (rel[0] == '\0') {
        snprintf(err, errlen, "path is empty");
        return CD_EPARAMS;
    }
    if (rel[0] == '/') {
        snprintf(err, errlen, "path must be relative to the models directory");
        return CD_EACCESS;
    }
    // No ".." component, whatever the file system says.
    for (const char *p = rel; *p;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            snprintf(err, errlen, "path must not contain '..'");
            return CD_EACCESS;
        }
        p += n + (slash ? 1 : 0);
    }
    char root[PATH_MAX], joined[PATH_MAX * 2];
    if (!realpath(models_dir, root)) {
        snprintf(err, errlen, "models directory unavailable: %s", strerror(errno));
        return CD_EIO;
    }
    snprintf(joined, sizeof joined, "%s/%s", root, rel);
    if (!realpath(joined, out)) {
        snprintf(err, errlen, "cannot open '%.200s': %s", rel, strerror(errno));
        return CD_EIO;
    }
    size_t rl = strlen(root);
    if (strncmp(out, root, rl) != 0 || (out[rl] != '/' && strcmp(root, "/") != 0)) {
        snprintf(err, errlen, "'%.200s' resolves outside the models directory", rel);
        return CD_EACCESS;
    }
    struct stat st;
    if (stat(out, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%.200s' is not a regular file", rel);
        return CD_EIO;
    }
    return 0;
}
