// Input sizes other than the one a model was planned at (runtime.h, "input
// sizes"). A model whose inputs have symbolic dims keeps its file's bytes
// and, next to its first plan (the model itself), a small set of variants:
// the same file imported, lowered and planned again at another input size,
// so that shape ops fold from that size. A variant is built on first use by
// the thread that asks for it, outside the lock: requests of known sizes
// never wait for a build, and callers that ask for the size being built wait
// on that variant alone. At most max_shapes plans exist (the first counts);
// when one more is needed the least recently used idle variant is dropped.

#include "core/errors.h"
#include "runtime/model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One input size's plan.
typedef struct variant {
    int64_t shapes[CD_MAX_TENSORS][CD_MAX_RANK]; // per-item input shapes (dim 0 = 1)
    cd_model *m;                                 // the plan (NULL while building or after a failure)
    int refs;                                    // holds: cd_model_variant_get callers, waiters included
    int building;                                // 1 while a thread builds it
    int rc;                                      // the build's result, once building is 0
    char err[256];                               // its reason when rc < 0
    int listed;                                  // in the set's list (a failed one is taken out at once)
    uint64_t used;                               // LRU tick of the last get
} variant;

struct cd_variants {
    pthread_mutex_t lock; // guards everything below except the constants
    pthread_cond_t built; // a build finished (waiters recheck their variant)
    // Constants after init:
    uint8_t *file; // the ONNX file's bytes
    size_t len;
    char *dir;          // the folder external data resolves in (NULL: none)
    cd_model_opts opts; // as loaded; device and tune_cache point at the copies below
    char *device, *tune_cache;
    int max; // plans at once, the first included
    // Mutable:
    variant **v; // max - 1 slots
    int n;
    uint64_t tick;
};

static void (*g_build_hook)(void *ud, const cd_model *m);
static void *g_build_hook_ud;

void cd_variants_set_build_hook(void (*hook)(void *ud, const cd_model *m), void *ud) {
    g_build_hook_ud = ud;
    __atomic_store_n(&g_build_hook, hook, __ATOMIC_RELEASE);
}

int cd_model_is_dynamic(const cd_model *m) {
    for (int i = 0; i < m->ninputs; i++)
        if (m->inputs[i].d.dynamic) return 1;
    return 0;
}

static char *dup_or_null(const char *s, int *fail) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *fail = 1;
    return d;
}

int cd_variants_init(cd_model *m, uint8_t *buf, size_t len, const char *dir, const cd_model_opts *opts) {
    struct cd_variants *vs = calloc(1, sizeof *vs);
    int fail = !vs;
    if (!fail) {
        vs->file = buf;
        vs->len = len;
        if (opts) vs->opts = *opts;
        vs->dir = dup_or_null(dir, &fail);
        vs->device = dup_or_null(vs->opts.device, &fail);
        vs->tune_cache = dup_or_null(vs->opts.tune_cache, &fail);
        vs->opts.device = vs->device;
        vs->opts.tune_cache = vs->tune_cache;
        vs->opts.input_shape = NULL; // each variant names its own sizes
        vs->max = vs->opts.max_shapes > 0 ? vs->opts.max_shapes : CD_DEFAULT_MAX_SHAPES;
        if (vs->max > 1 && !(vs->v = calloc((size_t)vs->max - 1, sizeof *vs->v))) fail = 1;
    }
    if (fail) {
        if (vs) {
            free(vs->dir);
            free(vs->device);
            free(vs->tune_cache);
            free(vs->v);
            free(vs);
        }
        free(buf);
        return CD_ENOMEM;
    }
    pthread_mutex_init(&vs->lock, NULL);
    pthread_cond_init(&vs->built, NULL);
    m->var = vs;
    return 0;
}

static void variant_free(variant *v) {
    if (!v) return;
    cd_model_free(v->m);
    free(v);
}

void cd_variants_free(cd_model *m) {
    struct cd_variants *vs = m->var;
    if (!vs) return;
    // The owner frees m only when nobody holds any of its plans.
    for (int i = 0; i < vs->n; i++) variant_free(vs->v[i]);
    pthread_cond_destroy(&vs->built);
    pthread_mutex_destroy(&vs->lock);
    free(vs->v);
    free(vs->file);
    free(vs->dir);
    free(vs->device);
    free(vs->tune_cache);
    free(vs);
    m->var = NULL;
}

// 1 when v holds the per-item shapes s of m's inputs.
static int same_shapes(const cd_model *m, const int64_t (*a)[CD_MAX_RANK], const int64_t *const *s) {
    for (int i = 0; i < m->ninputs; i++)
        for (int k = 1; k < m->inputs[i].d.rank; k++)
            if (a[i][k] != s[i][k]) return 0;
    return 1;
}

// Checks shapes against m's inputs: same rank is the caller's promise; every
// dim that is not symbolic must match. Returns 0 or CD_ESHAPE.
static int check_fixed_dims(const cd_model *m, const int64_t *const *s, char *err, size_t errlen) {
    for (int i = 0; i < m->ninputs; i++) {
        const cd_io_desc *d = &m->inputs[i].d;
        for (int k = 1; k < d->rank; k++) {
            if (s[i][k] == d->shape[k]) continue;
            if (!(d->dynamic & (1u << k)))
                return cd_errf(CD_ESHAPE, err, errlen, "input '%s' dim %d must be %lld, got %lld", d->name, k,
                               (long long)d->shape[k], (long long)s[i][k]);
            if (s[i][k] < 1 || s[i][k] > (1 << 24))
                return cd_errf(CD_ESHAPE, err, errlen, "input '%s' dim %d of %lld out of range (1..%d)", d->name, k,
                               (long long)s[i][k], 1 << 24);
        }
    }
    return 0;
}

// Takes v out of the list (lock held).
static void unlist(struct cd_variants *vs, variant *v) {
    for (int i = 0; i < vs->n; i++)
        if (vs->v[i] == v) {
            vs->v[i] = vs->v[--vs->n];
            break;
        }
    v->listed = 0;
}

// Builds v's plan from the file at v's shapes (no lock held).
static int build(const cd_model *m, struct cd_variants *vs, variant *v) {
    cd_input_shape specs[CD_MAX_TENSORS];
    memset(specs, 0, sizeof specs);
    for (int i = 0; i < m->ninputs; i++) {
        snprintf(specs[i].name, sizeof specs[i].name, "%s", m->inputs[i].d.name);
        specs[i].rank = m->inputs[i].d.rank;
        memcpy(specs[i].shape, v->shapes[i], sizeof specs[i].shape);
    }
    void (*hook)(void *, const cd_model *) = __atomic_load_n(&g_build_hook, __ATOMIC_ACQUIRE);
    if (hook) hook(g_build_hook_ud, m);
    cd_model *out = NULL;
    char e[sizeof v->err];
    int rc = cd_model_build(vs->file, vs->len, vs->dir, &vs->opts, specs, m->ninputs, &out, e, sizeof e);
    if (rc == 0 && (out->ninputs != m->ninputs || out->noutputs != m->noutputs)) {
        cd_model_free(out);
        rc = cd_errf(CD_EINTERNAL, e, sizeof e, "the plan at this size has other inputs or outputs");
    }
    pthread_mutex_lock(&vs->lock);
    v->m = rc ? NULL : out;
    v->rc = rc;
    if (rc) {
        snprintf(v->err, sizeof v->err, "%s", e);
        if (v->listed) unlist(vs, v); // the next request of this size tries again
    }
    v->building = 0;
    pthread_cond_broadcast(&vs->built);
    pthread_mutex_unlock(&vs->lock);
    return rc;
}

// Drops a hold on v, whose build failed (it is out of the list): its last
// holder frees it.
static void release_failed(struct cd_variants *vs, variant *v) {
    pthread_mutex_lock(&vs->lock);
    int last = --v->refs == 0;
    pthread_mutex_unlock(&vs->lock);
    if (last) variant_free(v);
}

int cd_model_variant_get(const cd_model *m, const int64_t *const *shapes, const cd_model **out, char *err,
                         size_t errlen) {
    *out = NULL;
    int rc = check_fixed_dims(m, shapes, err, errlen);
    if (rc) return rc;
    int64_t own[CD_MAX_TENSORS][CD_MAX_RANK];
    for (int i = 0; i < m->ninputs; i++) memcpy(own[i], m->inputs[i].d.shape, sizeof own[i]);
    if (same_shapes(m, (const int64_t(*)[CD_MAX_RANK])own, shapes)) {
        *out = m;
        return 0;
    }
    struct cd_variants *vs = m->var;
    if (!vs) return cd_errf(CD_ESHAPE, err, errlen, "the model has no symbolic dims"); // unreachable: checked above
    variant *evicted = NULL, *v = NULL;
    pthread_mutex_lock(&vs->lock);
    for (int i = 0; i < vs->n && !v; i++)
        if (same_shapes(m, (const int64_t(*)[CD_MAX_RANK])vs->v[i]->shapes, shapes)) v = vs->v[i];
    int builder = 0;
    if (!v) {
        if (vs->n >= vs->max - 1) {
            // Full: drop the least recently used idle variant.
            int lru = -1;
            for (int i = 0; i < vs->n; i++)
                if (vs->v[i]->refs == 0 && !vs->v[i]->building && (lru < 0 || vs->v[i]->used < vs->v[lru]->used))
                    lru = i;
            if (lru < 0) {
                pthread_mutex_unlock(&vs->lock);
                return cd_errf(CD_EOVERLOADED, err, errlen,
                               "%d input sizes are planned and all in use (max_shapes %d): retry later", vs->n + 1,
                               vs->max);
            }
            evicted = vs->v[lru];
            unlist(vs, evicted);
        }
        v = calloc(1, sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&vs->lock);
            variant_free(evicted);
            return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        }
        for (int i = 0; i < m->ninputs; i++) {
            memcpy(v->shapes[i], shapes[i], sizeof(int64_t) * (size_t)m->inputs[i].d.rank);
            v->shapes[i][0] = 1;
        }
        v->building = 1;
        v->listed = 1;
        vs->v[vs->n++] = v;
        builder = 1;
    }
    v->refs++;
    v->used = ++vs->tick;
    pthread_mutex_unlock(&vs->lock);
    variant_free(evicted); // outside the lock: freeing a plan takes a while
    if (builder) {
        build(m, vs, v);
    } else {
        pthread_mutex_lock(&vs->lock);
        while (v->building) pthread_cond_wait(&vs->built, &vs->lock);
        pthread_mutex_unlock(&vs->lock);
    }
    // v->rc, v->m and v->err are fixed once building is 0.
    if (v->rc) {
        rc = cd_errf(v->rc, err, errlen, "%s", v->err);
        release_failed(vs, v);
        return rc;
    }
    *out = v->m;
    return 0;
}

void cd_model_variant_put(const cd_model *m, const cd_model *p) {
    struct cd_variants *vs = m->var;
    if (!vs || p == m || !p) return;
    pthread_mutex_lock(&vs->lock);
    for (int i = 0; i < vs->n; i++)
        if (vs->v[i]->m == p) {
            vs->v[i]->refs--;
            break;
        }
    pthread_mutex_unlock(&vs->lock);
}

// Bytes a plan holds beyond its file: weights, constants, idle arenas.
static int64_t plan_bytes(cd_model *p) {
    pthread_mutex_lock(&p->idle_lock);
    int64_t b = p->summary.weight_bytes + p->summary.activation_bytes * (int64_t)p->nidle;
    pthread_mutex_unlock(&p->idle_lock);
    return b;
}

int cd_model_planned_shapes(const cd_model *m, int64_t (*shapes)[CD_MAX_TENSORS][CD_MAX_RANK], int max,
                            int64_t *bytes) {
    int n = 0;
    if (bytes) *bytes = 0;
    if (max > 0) {
        for (int i = 0; i < m->ninputs; i++) memcpy(shapes[0][i], m->inputs[i].d.shape, sizeof shapes[0][i]);
        n = 1;
    }
    struct cd_variants *vs = m->var;
    if (!vs) return n;
    pthread_mutex_lock(&vs->lock);
    if (bytes) *bytes = (int64_t)vs->len;
    for (int k = 0; k < vs->n; k++) {
        const variant *v = vs->v[k];
        if (!v->m) continue; // still building
        if (bytes) *bytes += plan_bytes(v->m);
        if (n < max) memcpy(shapes[n++], v->shapes, sizeof shapes[0]);
    }
    pthread_mutex_unlock(&vs->lock);
    return n;
}
