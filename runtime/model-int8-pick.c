// The whole-model pick between the sparse and the dense int8 kernels for a
// quantized model's convs over sparse weights (model.h cd_model_int8_pick).
//
// The planner decides by the sum of the layers' timed ms
// (plan-int8.c dense_over_sparse). The sums miss what each choice costs
// between the layers: the sparse int8 kernels run NCHW, so their plan keeps
// float32 pools, reorders and FakeQuant passes at its boundaries that the
// dense (NHWC) plan does not have, and the reverse. Where that choice was
// open, the model is planned the other way too and both plans are timed
// whole at batch 1, interleaved in rounds on this process's threads; the
// faster stays (with a max batch above 1, timed at it too: the smaller
// product of the two batches' times). The times are cached by the file's
// hash, the planned input sizes, threads, max batch and CPU, so that a
// second load plans once and makes the same choice.

#include "core/errors.h"
#include "core/log.h"
#include "runtime/executor.h"
#include "runtime/model.h"
#include "runtime/options.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PICK_CACHE "int8-pick-v1.txt"
#define PICK_ROUNDS 3 // interleaved rounds of each plan
#define PICK_RUNS 4   // timed runs per round (after one warm-up); the round's median counts

// 64-bit FNV-1a over 8-byte words (then the tail bytes): the file's
// identity in the cache key, fast enough for a 100 MB file.
static uint64_t file_hash(const uint8_t *b, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void pick_key(const cd_model *m, const uint8_t *buf, size_t len, char *key, size_t cap) {
    const int threads = m->threads > 0 ? m->threads : cd_executor_threads();
    int o = snprintf(key, cap, "pick|%016llx %zu|t%d b%d|", (unsigned long long)file_hash(buf, len), len, threads,
                     m->max_batch);
    for (int i = 0; i < m->ninputs && o > 0 && (size_t)o < cap; i++) {
        const cd_io_desc *d = &m->inputs[i].d;
        for (int k = 1; k < d->rank && o > 0 && (size_t)o < cap; k++)
            o += snprintf(key + o, cap - (size_t)o, "%s%lld", k > 1 ? "x" : i ? "," : "", (long long)d->shape[k]);
    }
    if (o > 0 && (size_t)o < cap) snprintf(key + o, cap - (size_t)o, "|%s", cd_planner_cpu_name());
}

// Times plans `dense` and `sparse` whole at `batch`, interleaved: each
// one's fastest round median. 0 or a negative code.
static int time_both(const cd_model *dense, const cd_model *sparse, int batch, double *dense_ms, double *sparse_ms,
                     char *err, size_t errlen) {
    *dense_ms = *sparse_ms = -1;
    for (int r = 0; r < PICK_ROUNDS; r++) {
        const cd_model *order[2] = {r % 2 ? sparse : dense, r % 2 ? dense : sparse};
        for (int i = 0; i < 2; i++) {
            double t = 0;
            int rc = cd_model_profile(order[i], batch, PICK_RUNS, NULL, &t, err, errlen);
            if (rc) return rc;
            double *best = order[i] == dense ? dense_ms : sparse_ms;
            if (*best < 0 || t < *best) *best = t;
        }
    }
    return 0;
}

// The two plans' times: [0] at batch 1, [1] at the model's max batch
// (-1 when that is 1).
typedef struct {
    double dense[2], sparse[2];
} pick_times;

// 1 the dense plan, 2 the sparse one: the faster at batch 1, or with a max
// batch above 1 the smaller product of the two batches' times (a plan 10%
// faster alone but 40% slower on a full batch loses).
static int faster(const pick_times *t) {
    if (t->dense[1] > 0 && t->sparse[1] > 0) return t->dense[0] * t->dense[1] < t->sparse[0] * t->sparse[1] ? 1 : 2;
    return t->dense[0] < t->sparse[0] ? 1 : 2;
}

static int cache_get(const cd_model *a, const char *key, const char *key_b, pick_times *t) {
    t->dense[1] = t->sparse[1] = -1;
    if (!cd_planner_cache_get(&a->popts, PICK_CACHE, key, &t->dense[0], &t->sparse[0])) return 0;
    return a->max_batch < 2 || cd_planner_cache_get(&a->popts, PICK_CACHE, key_b, &t->dense[1], &t->sparse[1]);
}

static void set_summary(cd_model *m, const pick_times *t, const char *by) {
    m->summary.int8_pick = faster(t);
    m->summary.int8_pick_by = by;
    m->summary.int8_pick_dense_ms = t->dense[0];
    m->summary.int8_pick_sparse_ms = t->sparse[0];
    m->summary.int8_pick_batch = t->dense[1] > 0 ? m->max_batch : 1;
    m->summary.int8_pick_dense_batch_ms = t->dense[1];
    m->summary.int8_pick_sparse_batch_ms = t->sparse[1];
}

int cd_model_int8_pick(const uint8_t *buf, size_t len, const char *dir, const cd_model_opts *opts,
                       const cd_input_shape *specs, int nspecs, cd_model **m, char *err, size_t errlen) {
    cd_model *a = *m;
    // Only where the planner had the choice, by its sums, in auto.
    if (!a->summary.int8_pick || a->popts.i8_pick || cd_runtime_opts()->int8_pick != CD_I8_PICK_AUTO) return 0;
    if (cd_backend_get_caps(a->be).device_memory) return 0;
    char key[512], key_b[600];
    pick_key(a, buf, len, key, sizeof key);
    snprintf(key_b, sizeof key_b, "%s|at b%d", key, a->max_batch);
    const int cur = a->summary.int8_pick; // 1 dense, 2 sparse
    pick_times t;
    const int cached = cache_get(a, key, key_b, &t);
    if (cached && faster(&t) == cur) {
        set_summary(a, &t, "cache");
        return 0;
    }
    // The other plan: the one the cache names, or the one to time against.
    cd_model *b = NULL;
    int rc = cd_model_build_plan(buf, len, dir, opts, specs, nspecs, cur == 1 ? CD_I8_PICK_SPARSE : CD_I8_PICK_DENSE,
                                 &b, err, errlen);
    if (rc == CD_ENOMEM) {
        // Keep the first plan: it is complete, and as good as the sums say.
        cd_rt_log(CD_RT_LOG_WARN, "convd: no memory for the second int8 plan; kept the one by the layers' sums");
        return 0;
    }
    if (rc) goto fail;
    if (!cached) {
        const cd_model *dense = cur == 1 ? a : b, *sparse = cur == 1 ? b : a;
        rc = time_both(dense, sparse, 1, &t.dense[0], &t.sparse[0], err, errlen);
        if (!rc && a->max_batch > 1)
            rc = time_both(dense, sparse, a->max_batch, &t.dense[1], &t.sparse[1], err, errlen);
        if (rc) {
            // Random inputs the model refuses (ids out of range, say) or no
            // memory for the runs: the plan by the sums is complete; keep it.
            cd_rt_log(CD_RT_LOG_WARN, "convd: timing the two int8 plans failed (%s); kept the one by the layers' sums",
                      err && err[0] ? err : cd_strerror(rc));
            if (err && errlen) err[0] = '\0';
            cd_model_free(b);
            return 0;
        }
        cd_planner_cache_put(&a->popts, PICK_CACHE, key, t.dense[0], t.sparse[0]);
        if (a->max_batch > 1) cd_planner_cache_put(&a->popts, PICK_CACHE, key_b, t.dense[1], t.sparse[1]);
    }
    const int keep_b = faster(&t) != cur;
    cd_model *keep = keep_b ? b : a;
    cd_model_free(keep_b ? a : b);
    set_summary(keep, &t, cached ? "cache" : "model");
    *m = keep;
    return 0;
fail:
    cd_model_free(a);
    cd_model_free(b);
    *m = NULL;
    return rc;
}
