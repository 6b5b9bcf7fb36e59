// The models side of the daemon (see models.h): the registry at start-up
// (--models DIR), the methods models, load and unload, the SIGHUP rescan
// and the per-model part of `stats`. The infer path is daemon/infer.c.
//
// load does its heavy part on the loader thread (cd_model_load); the loop
// only validates, takes references and packs.
#include "daemon/models.h"

#include "core/errors.h"
#include "core/limits.h"
#include "daemon/log.h"
#include "daemon/registry.h"
#include "daemon/request.h"
#include "daemon/server-state.h"
#include "daemon/validate.h"
#include "core/errors.h"
#include "core/limits.h"
#include "proto/params.h"
#include "proto/rpc.h"
#include "runtime/executor.h"
#include "runtime/runtime.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// ---- names and descriptions -------------------------------------------------

// A model name: 1..CD_MAX_NAME bytes of [A-Za-z0-9._-]. Returns 0 or
// CD_EPARAMS.
static int check_name(const char *name, char *err, size_t errlen) {
    size_t n = strlen(name);
    if (n == 0 || n > CD_MAX_NAME) {
        snprintf(err, errlen, "model name must be 1..%d bytes", CD_MAX_NAME);
        return CD_EPARAMS;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '_' || ch == '-')) {
            snprintf(err, errlen, "model name may only use A-Z a-z 0-9 . _ -");
            return CD_EPARAMS;
        }
    }
    return 0;
}

// Inputs/outputs beyond CD_MAX_TENSORS cannot be addressed by one request.
static int check_io_counts(const cd_model *m, char *err, size_t errlen) {
    if (cd_model_num_inputs(m) > CD_MAX_TENSORS || cd_model_num_outputs(m) > CD_MAX_TENSORS) {
        snprintf(err, errlen, "model has more than %d inputs or outputs", CD_MAX_TENSORS);
        return CD_EUNSUPPORTED;
    }
    return 0;
}

static int pack_kv_i64(msgpack_packer *pk, const char *k, int64_t v) {
    return cd_pack_str(pk, k) | msgpack_pack_int64(pk, v);
}

static int pack_io(msgpack_packer *pk, const cd_io_desc *d) {
    int nd = __builtin_popcount(d->dynamic);
    int rc = msgpack_pack_map(pk, nd ? 4 : 3);
    rc |= cd_pack_kv_str(pk, "name", d->name ? d->name : "");
    rc |= cd_pack_kv_str(pk, "dtype", cd_dtype_name(d->dtype));
    rc |= cd_pack_str(pk, "shape");
    rc |= msgpack_pack_array(pk, (size_t)d->rank);
    for (int i = 0; i < d->rank; i++) // the batch dim is open: -1
        rc |= msgpack_pack_int64(pk, i == 0 ? -1 : d->shape[i]);
    if (nd) { // symbolic dims: shape holds the first plan's size of them
        rc |= cd_pack_str(pk, "dynamic");
        rc |= msgpack_pack_array(pk, (size_t)nd);
        for (int i = 1; i < d->rank; i++)
            if (d->dynamic & (1u << i)) rc |= msgpack_pack_int64(pk, i);
    }
    return rc;
}

// The input sizes a model with symbolic dims has plans for: "shapes", one
// entry per plan (the first at load first) of its inputs' shapes (batch -1),
// "max_shapes", and "shapes_bytes", what the plans beyond the first hold.
static int pack_planned_shapes(msgpack_packer *pk, const cd_model_entry *e) {
    static int64_t shapes[CD_MAX_SHAPES][CD_MAX_TENSORS][CD_MAX_RANK]; // loop thread only
    int64_t bytes = 0;
    int n = cd_model_planned_shapes(e->model, shapes, CD_MAX_SHAPES, &bytes), ni = cd_model_num_inputs(e->model);
    int rc = cd_pack_str(pk, "shapes");
    rc |= msgpack_pack_array(pk, (size_t)n);
    for (int k = 0; k < n; k++) {
        rc |= msgpack_pack_array(pk, (size_t)ni);
        for (int i = 0; i < ni; i++) {
            int rank = cd_model_input(e->model, i)->rank;
            rc |= msgpack_pack_array(pk, (size_t)rank);
            for (int d = 0; d < rank; d++) rc |= msgpack_pack_int64(pk, d == 0 ? -1 : shapes[k][i][d]);
        }
    }
    rc |= pack_kv_i64(pk, "max_shapes", e->conf.max_shapes);
    rc |= pack_kv_i64(pk, "shapes_bytes", bytes);
    return rc;
}

// The `models` entry of one model.
static int pack_entry(msgpack_packer *pk, const cd_model_entry *e) {
    cd_model_summary s;
    cd_model_get_summary(e->model, &s);
    int ni = cd_model_num_inputs(e->model), no = cd_model_num_outputs(e->model);
    bool dyn = cd_model_is_dynamic(e->model) != 0;
    int rc = msgpack_pack_map(pk, dyn ? 18 : 15);
    rc |= cd_pack_kv_str(pk, "name", e->name);
    rc |= cd_pack_kv_str(pk, "path", e->path);
    rc |= pack_kv_i64(pk, "max_batch", e->conf.max_batch);
    rc |= cd_pack_str(pk, "inputs");
    rc |= msgpack_pack_array(pk, (size_t)ni);
    for (int i = 0; i < ni; i++) rc |= pack_io(pk, cd_model_input(e->model, i));
    rc |= cd_pack_str(pk, "outputs");
    rc |= msgpack_pack_array(pk, (size_t)no);
    for (int i = 0; i < no; i++) rc |= pack_io(pk, cd_model_output(e->model, i));
    rc |= pack_kv_i64(pk, "params", s.params);
    rc |= pack_kv_i64(pk, "flops", s.flops);
    rc |= pack_kv_i64(pk, "weight_bytes", s.weight_bytes);
    rc |= pack_kv_i64(pk, "activation_bytes", s.activation_bytes);
    rc |= pack_kv_i64(pk, "device_bytes", s.device_bytes);
    rc |= pack_kv_i64(pk, "lane_activation_bytes", s.lane_activation_bytes);
    rc |= cd_pack_str(pk, "density");
    rc |= msgpack_pack_double(pk, s.params > 0 ? 1.0 - (double)s.zero_params / (double)s.params : 1.0);
    rc |= pack_kv_i64(pk, "layers", s.nlayers);
    rc |= pack_kv_i64(pk, "int8_layers", s.int8_layers);
    rc |= cd_pack_kv_str(pk, "int8_pick", s.int8_pick == 1 ? "dense" : s.int8_pick == 2 ? "sparse" : "none");
    if (dyn) rc |= pack_planned_shapes(pk, e);
    return rc ? CD_ENOMEM : 0;
}

// ---- start-up and shutdown --------------------------------------------------

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The daemon's defaults for a model's scheduling settings.
static cd_model_conf conf_defaults(const cd_settings *set) {
    cd_model_conf c;
    cd_model_conf_defaults(set, &c);
    return c;
}

// Identity of a file for SIGHUP (mtime, size); 0s when it cannot be read.
static void file_identity(const char *path, time_t *mtime, off_t *size) {
    struct stat st;
    if (stat(path, &st) == 0) {
        *mtime = st.st_mtime;
        *size = st.st_size;
    } else {
        *mtime = 0;
        *size = 0;
    }
}

// The registry name of a models-directory file ("x.onnx" -> "x"). Returns 0
// or a negative code with err.
static int name_of_file(const char *file, char *name, char *err, size_t errlen) {
    size_t stem = strlen(file) - 5; // without ".onnx"
    if (stem == 0 || stem > CD_MAX_NAME) {
        snprintf(err, errlen, "name length out of range");
        return CD_EPARAMS;
    }
    memcpy(name, file, stem);
    name[stem] = '\0';
    return check_name(name, err, errlen);
}

// A model being loaded: at start-up, by a client's `load` or by a rescan.
typedef struct {
    char name[CD_MAX_NAME + 1]; // registry name
    char path[CD_MAX_STR + 1];  // as sent (relative to --models)
    char real[PATH_MAX];        // resolved inside --models
    cd_model_conf conf;         // defaults < .conf file < load params
    uint64_t given;             // the per-model keys `load` gave (bit cd_model_key_index)
    bool from_dir;              // a SIGHUP rescan (no client)
    bool pending;               // counted in srv->pending_loads (a client's load)
    time_t mtime, conf_mtime;   // file identities when read
    off_t size, conf_size;
    cd_model *model;       // loaded by the worker; owned until installed
    cd_model_entry *entry; // installed entry (no reference held)
} load_state;

// The runtime's options for loading a model with scheduling settings conf.
static cd_model_opts model_opts(const cd_settings *set, const cd_model_conf *conf) {
    cd_model_opts opts = {.max_batch = (int)conf->max_batch,
                          .threads = (int)set->threads,
                          .device = set->device,
                          .tune = (int)set->tune,
                          .tune_cache = set->tune_cache[0] ? set->tune_cache : NULL,
                          .max_file_bytes = set->max_model_bytes,
                          .input_shape = conf->input_shape,
                          .max_shapes = (int)conf->max_shapes};
    return opts;
}

// A registry entry for st's loaded model, its queue running the infer path.
// Returns NULL when out of memory (st->model is then still st's).
static cd_model_entry *entry_new(cd_server *srv, const load_state *st) {
    cd_model_entry *e = cd_model_entry_new(st->name, st->path, st->model, &st->conf, cd_infer_run_batch,
                                           cd_workers_count(srv->workers));
    if (e) {
        cd_infer_set_batching(e, srv->set->double_buffer, srv->set->fill_batches != 0);
        cd_infer_set_same_size(e);
        e->from_dir = st->from_dir;
        e->mtime = st->mtime;
        e->size = st->size;
        e->conf_mtime = st->conf_mtime;
        e->conf_size = st->conf_size;
    }
    return e;
}

// Loads one file of the models directory synchronously (start-up); a
// failure is logged and skipped.
static void load_at_start(cd_server *srv, const char *file) {
    const cd_settings *set = srv->set;
    static load_state st; // loop thread only; 12 KiB off the stack
    memset(&st, 0, sizeof st);
    st.conf = conf_defaults(set);
    st.from_dir = true;
    snprintf(st.path, sizeof st.path, "%s", file);
    char err[512];
    int rc = name_of_file(file, st.name, err, sizeof err);
    if (rc == 0) rc = cd_model_path_resolve(set->models, file, st.real, err, sizeof err);
    if (rc == 0) rc = cd_model_conf_read(st.real, &st.conf, &st.conf_mtime, &st.conf_size, err, sizeof err);
    if (rc == 0) {
        cd_model_opts opts = model_opts(set, &st.conf);
        if ((int64_t)cd_registry_count(srv->registry) >= set->max_models)
            rc = cd_errf(CD_ETOO_LARGE, err, sizeof err, "%lld models loaded (max-models)", (long long)set->max_models);
        else
            rc = cd_model_load(st.real, &opts, &st.model, err, sizeof err);
    }
    if (rc == 0 && (rc = check_io_counts(st.model, err, sizeof err)) != 0) cd_model_free(st.model);
    if (rc != 0) {
        CD_WARN("skipping model '%s': %s: %s", file, cd_err_name(rc), err);
        return;
    }
    file_identity(st.real, &st.mtime, &st.size);
    cd_model_entry *e = entry_new(srv, &st);
    if (!e || cd_registry_put(srv->registry, e) != 0) {
        CD_WARN("skipping model '%s': out of memory", file);
        if (e)
            cd_model_entry_unref(e);
        else
            cd_model_free(st.model);
        return;
    }
    cd_model_summary s;
    cd_model_get_summary(st.model, &s);
    CD_INFO("loaded model %s from %s (%d layers, %lld params, max_batch %d, "
            "max_delay_us %lld, max_queue %lld)",
            st.name, file, s.nlayers, (long long)s.params, (int)st.conf.max_batch, (long long)st.conf.max_delay_us,
            (long long)st.conf.max_queue);
}

int cd_models_init(cd_server *srv) {
    const cd_settings *set = srv->set;
    int rc = cd_registry_init(&srv->registry, cd_workers_count(srv->workers));
    if (rc != 0) return rc;
    rc = cd_runtime_init((int)set->threads);
    if (rc != 0) {
        CD_ERROR("runtime initialisation failed: %s", cd_strerror(rc));
        return rc;
    }
    // Every worker's runs share the executor's one team (runtime/executor.h).
    cd_executor_set_spin_ns((unsigned long long)set->worker_spin_us * 1000);
    cd_executor_set_lanes((int)set->lanes);
    const double quota = cd_executor_cpu_quota();
    if (cd_executor_threads() > cd_executor_affinity_cpus())
        CD_WARN("--threads %d is more than the %d CPUs of the affinity mask: threads will wait for each other",
                cd_executor_threads(), cd_executor_affinity_cpus());
    if (quota > 0 && cd_executor_threads() > cd_executor_quota_threads(quota))
        CD_WARN("--threads %d is more than the cgroup's CPU quota of %.2f CPUs: runs will be throttled",
                cd_executor_threads(), quota);
    if (quota > 0)
        CD_INFO("compute: %d threads on the %d CPUs of the affinity mask with a CPU quota of %.2f, shared by %d "
                "workers",
                cd_executor_threads(), cd_executor_affinity_cpus(), quota, cd_workers_count(srv->workers));
    else
        CD_INFO("compute: %d threads on the %d CPUs of the affinity mask, shared by %d workers", cd_executor_threads(),
                cd_executor_affinity_cpus(), cd_workers_count(srv->workers));
    if (!set->models[0]) return 0;
    DIR *dir = opendir(set->models);
    if (!dir) {
        CD_ERROR("cannot open --models %s: %s", set->models, strerror(errno));
        return CD_EIO;
    }
    char **files = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".onnx") != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nf = realloc(files, cap * sizeof *nf);
            if (!nf) break;
            files = nf;
        }
        if (!(files[n] = strdup(de->d_name))) break;
        n++;
    }
    closedir(dir);
    if (n) qsort(files, n, sizeof *files, cmp_str);
    for (size_t i = 0; i < n; i++) {
        load_at_start(srv, files[i]);
        free(files[i]);
    }
    free(files);
    CD_INFO("%zu of %zu models in %s loaded", cd_registry_count(srv->registry), n, set->models);
    return 0;
}

void cd_models_free(cd_server *srv) {
    cd_registry_free(srv->registry);
    srv->registry = NULL;
}

int64_t cd_models_count(cd_server *srv) { return (int64_t)cd_registry_count(srv->registry); }

// {count, mean, p50, p90, p99, p999, max} of a histogram, values scaled by
// 1/div (ns -> us with div 1000).
static int pack_hist(msgpack_packer *pk, const char *key, const cd_histogram *h, double div) {
    static cd_histogram_snap s; // loop thread only; 11 KiB off the stack
    cd_histogram_snapshot(h, &s);
    static const struct {
        const char *k;
        double q;
    } qs[] = {{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p999", 0.999}};
    int rc = cd_pack_str(pk, key);
    rc |= msgpack_pack_map(pk, 7);
    rc |= pack_kv_i64(pk, "count", (int64_t)s.count);
    rc |= cd_pack_str(pk, "mean");
    rc |= msgpack_pack_double(pk, s.count ? (double)s.sum / (double)s.count / div : 0.0);
    for (size_t i = 0; i < 4; i++) {
        rc |= cd_pack_str(pk, qs[i].k);
        rc |= msgpack_pack_double(pk, (double)cd_histogram_quantile(&s, qs[i].q) / div);
    }
    rc |= cd_pack_str(pk, "max");
    rc |= msgpack_pack_double(pk, (double)s.max / div);
    return rc;
}

// The runs per batch size: {items: runs} for the sizes that occurred (exact
// up to 63 items; above, the key is the lower bound of a bucket 1/32 wide).
static int pack_batch_sizes(msgpack_packer *pk, const cd_histogram *h) {
    static cd_histogram_snap s; // loop thread only
    cd_histogram_snapshot(h, &s);
    size_t n = 0;
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) n += s.buckets[i] != 0;
    int rc = cd_pack_str(pk, "batch_sizes");
    rc |= msgpack_pack_map(pk, n);
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) {
        if (!s.buckets[i]) continue;
        char key[24];
        snprintf(key, sizeof key, "%llu", (unsigned long long)cd_histogram_bucket_lo(i));
        rc |= pack_kv_i64(pk, key, (int64_t)s.buckets[i]);
    }
    return rc;
}

int cd_models_pack_stats(cd_server *srv, msgpack_packer *pk) {
    size_t n = cd_registry_count(srv->registry);
    int rc = msgpack_pack_map(pk, n);
    for (size_t i = 0; i < n; i++) {
        const cd_model_counters *c = cd_registry_counters_at(srv->registry, i);
        const cd_model_entry *e = cd_registry_at(srv->registry, i);
        rc |= cd_pack_str(pk, e->name);
        cd_model_summary sum;
        cd_model_get_summary(e->model, &sum);
        rc |= msgpack_pack_map(pk, 17);
        rc |= pack_kv_i64(pk, "requests", (int64_t)c->requests);
        rc |= pack_kv_i64(pk, "errors", (int64_t)c->errors);
        rc |= pack_kv_i64(pk, "ok", (int64_t)c->ok);
        rc |= pack_kv_i64(pk, "batches", (int64_t)c->batches);
        rc |= pack_kv_i64(pk, "items", (int64_t)c->items);
        rc |= pack_kv_i64(pk, "queued", (int64_t)cd_workers_queue_len(srv->workers, &e->queue));
        rc |= pack_kv_i64(pk, "max_batch", e->conf.max_batch);
        rc |= pack_kv_i64(pk, "max_delay_us", e->conf.max_delay_us);
        rc |= pack_kv_i64(pk, "max_queue", e->conf.max_queue);
        rc |= pack_kv_i64(pk, "device_bytes", sum.device_bytes);
        rc |= cd_pack_str(pk, "layer_dtypes"); // what its layers compute in
        rc |= msgpack_pack_map(pk, 2);
        rc |= pack_kv_i64(pk, "int8", sum.int8_layers);
        rc |= pack_kv_i64(pk, "f32", sum.nlayers - sum.int8_layers);
        size_t nerr = 0;
        for (int k = 0; k < CD_STATS_NERR; k++) nerr += c->by_code[k] != 0;
        rc |= cd_pack_str(pk, "errors_by_code");
        rc |= msgpack_pack_map(pk, nerr);
        for (int k = 0; k < CD_STATS_NERR; k++)
            if (c->by_code[k]) rc |= pack_kv_i64(pk, cd_err_name(-k), (int64_t)c->by_code[k]);
        rc |= pack_hist(pk, "batch_size", &c->batch_size, 1.0);
        rc |= pack_batch_sizes(pk, &c->batch_size);
        rc |= pack_hist(pk, "queue_wait_us", &c->queue_ns, 1000.0);
        rc |= pack_hist(pk, "compute_us", &c->compute_ns, 1000.0);
        rc |= pack_hist(pk, "total_us", &c->total_ns, 1000.0);
    }
    return rc ? CD_ENOMEM : 0;
}

// ---- models -----------------------------------------------------------------

int cd_method_models(cd_call *call) {
    cd_registry *r = call->srv->registry;
    size_t n = cd_registry_count(r);
    int rc = msgpack_pack_map(call->pk, 1);
    rc |= cd_pack_str(call->pk, "models");
    rc |= msgpack_pack_array(call->pk, n);
    if (rc) return CD_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if ((rc = pack_entry(call->pk, cd_registry_at(r, i))) != 0) return rc;
    return 0;
}

// ---- load -------------------------------------------------------------------

static int load_work(cd_request *req, int worker) {
    load_state *st = req->state;
    const cd_settings *set = req->srv->set;
    // The .conf file sits under the load params: read it, then re-apply them.
    cd_model_conf given = st->conf;
    int rc = cd_model_conf_read(st->real, &st->conf, &st->conf_mtime, &st->conf_size, req->err, sizeof req->err);
    if (rc != 0) return rc;
    for (const cd_setting_desc *k = cd_model_key_next(NULL); k; k = cd_model_key_next(k))
        if (st->given >> cd_model_key_index(k) & 1)
            memcpy((char *)&st->conf + k->model_offset, (const char *)&given + k->model_offset, cd_model_key_bytes(k));
    file_identity(st->real, &st->mtime, &st->size);
    cd_model_opts opts = model_opts(set, &st->conf);
    rc = cd_model_load(st->real, &opts, &st->model, req->err, sizeof req->err);
    if (rc == 0 && (rc = check_io_counts(st->model, req->err, sizeof req->err)) != 0) {
        cd_model_free(st->model);
        st->model = NULL;
    }
    return rc;
}

// Installs the loaded model (even when the client has gone: the operator
// asked for it).
static void load_done(cd_request *req) {
    load_state *st = req->state;
    cd_registry *reg = req->srv->registry;
    int64_t max_models = req->srv->set->max_models;
    if (req->status == 0 && (int64_t)cd_registry_count(reg) >= max_models &&
        !cd_registry_counters(reg, st->name, strlen(st->name))) {
        // Other loads of new names finished first: the cap holds at install.
        cd_model_free(st->model);
        st->model = NULL;
        req->status = CD_ETOO_LARGE;
        snprintf(req->err, sizeof req->err, "%lld models are loaded (max-models): unload one first",
                 (long long)max_models);
    }
    if (req->status != 0) {
        CD_WARN("load %s from %s failed: %s: %s", st->name, st->path, cd_err_name(req->status), req->err);
        return;
    }
    cd_model_entry *e = entry_new(req->srv, st);
    if (!e || cd_registry_put(req->srv->registry, e) != 0) {
        if (e)
            cd_model_entry_unref(e); // frees the model too
        else
            cd_model_free(st->model);
        st->model = NULL;
        req->status = CD_ENOMEM;
        snprintf(req->err, sizeof req->err, "out of memory installing the model");
        return;
    }
    st->model = NULL;
    st->entry = e;
    CD_INFO("loaded model %s from %s (max_batch %lld, max_delay_us %lld, max_queue %lld)", st->name, st->path,
            (long long)st->conf.max_batch, (long long)st->conf.max_delay_us, (long long)st->conf.max_queue);
}

static int load_pack(cd_request *req, msgpack_packer *pk) {
    load_state *st = req->state;
    return pack_entry(pk, st->entry);
}

static void load_release(cd_request *req) {
    load_state *st = req->state;
    if (st) {
        if (st->pending) req->srv->pending_loads--;
        cd_model_free(st->model);
        free(st);
    }
}

// Queues the load described by st on the loader thread (never on the
// inference workers: a load neither holds one nor waits behind inference);
// from may be NULL (SIGHUP). Returns 0 or CD_ENOMEM (st is freed then).
static int load_submit(cd_server *srv, cd_request_origin *from, cd_rpc_msg *msg, load_state *st) {
    cd_rpc_msg none;
    memset(&none, 0, sizeof none);
    static const cd_request_ops load_ops = {load_work, load_done, load_pack, load_release};
    cd_request *req = cd_request_new(from, msg ? msg : &none, CD_M_load, &load_ops);
    if (!req) {
        free(st);
        return CD_ENOMEM;
    }
    req->srv = srv;
    req->state = st;
    if (from) {
        st->pending = true;
        srv->pending_loads++;
        cd_request_started(req);
    }
    cd_workers_submit(srv->loader, req);
    return 0;
}

// The load param of per-model key k, when given: into st->conf, parsed and
// checked like the key in a .conf file. 0 (given or not) or CD_EPARAMS.
static int load_param(cd_call *call, const cd_setting_desc *k, load_state *st) {
    int rc;
    if (k->type == CD_SET_INT) {
        int64_t v;
        rc = cd_param_int(call->params, k->model_key, k->min, k->max, &v, call->err, sizeof call->err);
        if (rc == 0) memcpy((char *)&st->conf + k->model_offset, &v, sizeof v);
    } else {
        char text[CD_MAX_STR + 2];
        rc = cd_param_str(call->params, k->model_key, text, sizeof text, call->err, sizeof call->err);
        if (rc == 0 && cd_model_conf_set(&st->conf, k, text, call->err, sizeof call->err) != 0) rc = CD_EPARAMS;
    }
    if (rc == 0) st->given |= (uint64_t)1 << cd_model_key_index(k);
    return rc == 1 ? 0 : rc;
}

// The limits a `load` is checked against before it is queued: the pending
// loads (E_OVERLOADED), the number of models (E_TOO_LARGE; replacing a loaded
// name is always allowed), the file size (E_TOO_LARGE; the importer checks
// it again with fstat before reading), and the memory budget.
static int load_limits(cd_call *call, const load_state *st) {
    cd_server *srv = call->srv;
    const cd_settings *set = srv->set;
    if ((int64_t)srv->pending_loads >= set->max_pending_loads)
        return cd_errf(CD_EOVERLOADED, call->err, sizeof call->err,
                       "%zu loads are queued or running (max-pending-loads): retry later", srv->pending_loads);
    if ((int64_t)cd_registry_count(srv->registry) >= set->max_models &&
        !cd_registry_counters(srv->registry, st->name, strlen(st->name)))
        return cd_errf(CD_ETOO_LARGE, call->err, sizeof call->err,
                       "%lld models are loaded (max-models): unload one first", (long long)set->max_models);
    struct stat sb;
    if (stat(st->real, &sb) == 0 && sb.st_size > set->max_model_bytes)
        return cd_errf(CD_ETOO_LARGE, call->err, sizeof call->err, "%s is %lld bytes, over max-model-bytes (%lld)",
                       st->path, (long long)sb.st_size, (long long)set->max_model_bytes);
    return cd_request_budget_check(call->from->budget, call->msg, call->err, sizeof call->err);
}

int cd_method_load(cd_call *call) {
    load_state *st = calloc(1, sizeof *st);
    if (!st) return CD_ENOMEM;
    st->conf = conf_defaults(call->srv->set);
    int rc = cd_param_str(call->params, "name", st->name, sizeof st->name, call->err, sizeof call->err);
    if (rc == 1) {
        snprintf(call->err, sizeof call->err, "load needs 'name'");
        rc = CD_EPARAMS;
    }
    if (rc == 0) rc = check_name(st->name, call->err, sizeof call->err);
    if (rc == 0) {
        rc = cd_param_str(call->params, "path", st->path, sizeof st->path, call->err, sizeof call->err);
        if (rc == 1) {
            snprintf(call->err, sizeof call->err, "load needs 'path'");
            rc = CD_EPARAMS;
        }
    }
    for (const cd_setting_desc *k = cd_model_key_next(NULL); k && rc == 0; k = cd_model_key_next(k))
        rc = load_param(call, k, st);
    if (rc == 0) rc = cd_model_path_resolve(call->srv->set->models, st->path, st->real, call->err, sizeof call->err);
    if (rc == 0) rc = load_limits(call, st);
    if (rc != 0) {
        free(st);
        return rc;
    }
    rc = load_submit(call->srv, call->from, call->msg, st);
    return rc ? rc : CD_CALL_QUEUED;
}

// ---- SIGHUP: rescan the models directory --------------------------------------

int cd_models_rescan(cd_server *srv) {
    const cd_settings *set = srv->set;
    if (!set->models[0]) return 0;
    DIR *dir = opendir(set->models);
    if (!dir) {
        CD_WARN("rescan: cannot open --models %s: %s", set->models, strerror(errno));
        return CD_EIO;
    }
    cd_registry *reg = srv->registry;
    size_t n0 = cd_registry_count(reg);
    bool *seen = calloc(n0 ? n0 : 1, sizeof *seen);
    if (!seen) {
        closedir(dir);
        return CD_ENOMEM;
    }
    int loads = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".onnx") != 0) continue;
        char name[CD_MAX_NAME + 1], err[512], real[PATH_MAX];
        if (name_of_file(de->d_name, name, err, sizeof err) != 0 ||
            cd_model_path_resolve(set->models, de->d_name, real, err, sizeof err) != 0) {
            CD_WARN("rescan: skipping '%s': %s", de->d_name, err);
            continue;
        }
        const char *why = "new file";
        for (size_t i = 0; i < n0; i++) {
            const cd_model_entry *e = cd_registry_at(reg, i);
            if (strcmp(e->name, name) != 0) continue;
            seen[i] = true;
            time_t mt, cmt;
            off_t sz, csz;
            file_identity(real, &mt, &sz);
            char conf_path[PATH_MAX + 8];
            snprintf(conf_path, sizeof conf_path, "%s.conf", real);
            file_identity(conf_path, &cmt, &csz);
            if (!e->from_dir)
                why = "restoring the directory's version over the one a client loaded";
            else if (strcmp(e->path, de->d_name) != 0)
                why = "file now provides this name";
            else if (mt != e->mtime || sz != e->size)
                why = "file changed";
            else if (cmt != e->conf_mtime || csz != e->conf_size)
                why = ".conf changed";
            else
                why = NULL;
        }
        if (!why) continue;
        load_state *st = calloc(1, sizeof *st);
        if (!st) break;
        st->conf = conf_defaults(set);
        st->from_dir = true;
        snprintf(st->name, sizeof st->name, "%s", name);
        snprintf(st->path, sizeof st->path, "%s", de->d_name);
        memcpy(st->real, real, sizeof st->real);
        CD_INFO("rescan: loading %s from %s (%s)", name, de->d_name, why);
        if (load_submit(srv, NULL, NULL, st) == 0) loads++;
    }
    closedir(dir);
    // Models that came from the directory and whose file is gone, and models
    // a client loaded under a name the directory does not have: the
    // directory is the operator's source of truth.
    int unloads = 0;
    for (size_t i = n0; i-- > 0;) {
        const cd_model_entry *e = cd_registry_at(reg, i);
        if (seen[i]) continue;
        char name[CD_MAX_NAME + 1];
        snprintf(name, sizeof name, "%s", e->name);
        if (e->from_dir)
            CD_INFO("rescan: unloading %s (%s is gone)", name, e->path);
        else
            CD_INFO("rescan: unloading %s (loaded by a client from %s; not in the models "
                    "directory)",
                    name, e->path);
        cd_registry_remove(reg, name, strlen(name));
        unloads++;
    }
    free(seen);
    CD_INFO("rescan of %s: %d model(s) to load, %d unloaded", set->models, loads, unloads);
    return 0;
}

// ---- unload -----------------------------------------------------------------

int cd_method_unload(cd_call *call) {
    char name[CD_MAX_NAME + 1];
    int rc = cd_param_str(call->params, "name", name, sizeof name, call->err, sizeof call->err);
    if (rc == 1) {
        snprintf(call->err, sizeof call->err, "unload needs 'name'");
        return CD_EPARAMS;
    }
    if (rc != 0) return rc;
    if (cd_registry_remove(call->srv->registry, name, strlen(name)) != 0) {
        char shown[80];
        snprintf(call->err, sizeof call->err, "no model named '%s'",
                 cd_sanitize(shown, sizeof shown, name, strlen(name)));
        return CD_ENOT_FOUND;
    }
    CD_INFO("unloaded model %s", name);
    rc = msgpack_pack_map(call->pk, 1);
    rc |= cd_pack_kv_str(call->pk, "name", name);
    return rc ? CD_ENOMEM : 0;
}
