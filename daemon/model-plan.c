// The `plan` method: the plan the daemon runs for a loaded model, layer by
// layer, with each layer's time measured here (cd_model_profile_stop).
//
// The loop validates the params and takes a reference on the model's entry;
// the profile runs on the profiler thread (srv->profiler, one thread: a
// profile never holds an inference worker, and profiles run one at a time);
// the result comes back through that pool's uv_async and is packed on the
// loop. A profile stops between runs when its client goes away or a drain
// timeout closes the connection (req->cancelled).
#include "daemon/models.h"

#include "core/errors.h"
#include "core/limits.h"
#include "daemon/features.h"
#include "daemon/registry.h"
#include "daemon/request.h"
#include "daemon/server-state.h"
#include "proto/params.h"
#include "proto/rpc.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_RUNS_DEFAULT 10
#define PLAN_RUNS_MAX 1000 // the profile keeps runs x layers samples

typedef struct {
    cd_model_entry *entry; // reference held until release
    int batch, runs;
    double *layer_ms; // per layer, median ms (worker-filled)
    double total_ms;  // median ms of a whole run
} plan_state;

static int plan_stop(void *ud) {
    cd_request *req = ud;
    return atomic_load(&req->cancelled);
}

static int plan_work(cd_request *req, int worker) {
    (void)worker;
    plan_state *st = req->state;
    return cd_model_profile_stop(st->entry->model, st->batch, st->runs, st->layer_ms, &st->total_ms, plan_stop, req,
                                 req->err, sizeof req->err);
}

static int pack_kv_int(msgpack_packer *pk, const char *k, int64_t v) {
    return cd_pack_str(pk, k) | msgpack_pack_int64(pk, v);
}

// A time in ms; nil when unknown (negative).
static int pack_kv_ms(msgpack_packer *pk, const char *k, double v) {
    return cd_pack_str(pk, k) | (v < 0 ? msgpack_pack_nil(pk) : msgpack_pack_double(pk, v));
}

static int pack_kv_bool(msgpack_packer *pk, const char *k, int v) {
    return cd_pack_str(pk, k) | (v ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
}

static int pack_kv_shape(msgpack_packer *pk, const char *k, int rank, const int64_t *shape) {
    int rc = cd_pack_str(pk, k) | msgpack_pack_array(pk, (size_t)rank);
    for (int i = 0; i < rank; i++) rc |= msgpack_pack_int64(pk, shape[i]);
    return rc;
}

// One layer: the fields of `convctl plan FILE --json` (docs/PROTOCOL.md).
static int pack_layer(msgpack_packer *pk, int index, const cd_layer_info *l, double ms) {
    int rc = msgpack_pack_map(pk, l->is_weighted ? 27 : 14);
    rc |= pack_kv_int(pk, "index", index);
    rc |= cd_pack_kv_str(pk, "name", l->name ? l->name : "");
    rc |= cd_pack_kv_str(pk, "op", l->op ? l->op : "");
    rc |= cd_pack_kv_str(pk, "kernel", l->kernel ? l->kernel : "");
    rc |= cd_pack_kv_str(pk, "dtype", l->dtype ? l->dtype : "f32");
    rc |= cd_pack_kv_str(pk, "layout", l->layout ? l->layout : "");
    rc |= pack_kv_bool(pk, "reference", l->reference);
    rc |= pack_kv_shape(pk, "in_shape", l->in_rank, l->in_shape);
    rc |= pack_kv_shape(pk, "out_shape", l->out_rank, l->out_shape);
    rc |= pack_kv_bool(pk, "weighted", l->is_weighted);
    rc |= pack_kv_int(pk, "params", l->params);
    rc |= pack_kv_int(pk, "flops", l->flops);
    rc |= cd_pack_str(pk, "density") | msgpack_pack_double(pk, l->density);
    rc |= pack_kv_ms(pk, "measured_ms", ms);
    if (!l->is_weighted) return rc;
    rc |= pack_kv_bool(pk, "sparse", l->sparse);
    rc |= cd_pack_kv_str(pk, "compaction", l->compaction ? l->compaction : "");
    rc |= cd_pack_str(pk, "structure") | msgpack_pack_map(pk, 9);
    rc |= cd_pack_kv_str(pk, "text", l->structure ? l->structure : "");
    rc |= pack_kv_int(pk, "zero_filters", l->an.zero_filters);
    rc |= pack_kv_int(pk, "zero_in_channels", l->an.zero_in_channels);
    rc |= pack_kv_int(pk, "zero_connections", l->an.zero_connections);
    rc |= pack_kv_int(pk, "connections", l->an.connections);
    rc |= cd_pack_str(pk, "best_block");
    if (l->an.best_block_h) {
        rc |= msgpack_pack_map(pk, 3);
        rc |= pack_kv_int(pk, "h", l->an.best_block_h);
        rc |= pack_kv_int(pk, "w", l->an.best_block_w);
        rc |= cd_pack_str(pk, "fill") | msgpack_pack_double(pk, l->an.best_block_fill);
    } else {
        rc |= msgpack_pack_nil(pk);
    }
    rc |= cd_pack_str(pk, "nm_2_4") | msgpack_pack_double(pk, l->an.nm_2_4);
    rc |= pack_kv_bool(pk, "is_2_4", l->an.is_2_4);
    rc |= pack_kv_bool(pk, "is_4_8", l->an.is_4_8);
    rc |= pack_kv_ms(pk, "pred_ms", l->pred_ms);
    rc |= pack_kv_ms(pk, "pred_dense_ms", l->pred_dense_ms);
    rc |= pack_kv_ms(pk, "pred_sparse_ms", l->pred_sparse_ms);
    rc |= pack_kv_ms(pk, "tuned_sparse_ms", l->tuned_sparse_ms);
    rc |= pack_kv_ms(pk, "pred_reorder_ms", l->pred_reorder_ms);
    rc |= pack_kv_ms(pk, "tuned_ms", l->tuned_ms);
    rc |= pack_kv_ms(pk, "tuned_dense_ms", l->tuned_dense_ms);
    rc |= pack_kv_int(pk, "tune_batch", l->tune_batch);
    rc |= pack_kv_int(pk, "flops_dense", l->flops_dense);
    rc |= pack_kv_int(pk, "flops_skipped", l->flops_skipped);
    return rc;
}

static int plan_pack(cd_request *req, msgpack_packer *pk) {
    plan_state *st = req->state;
    const cd_model_entry *e = st->entry;
    const cd_model *m = e->model;
    int n = cd_model_num_layers(m), nref = 0;
    for (int i = 0; i < n; i++) {
        cd_layer_info l;
        cd_model_layer(m, i, &l);
        nref += l.reference != 0;
    }
    int rc = msgpack_pack_map(pk, 11);
    rc |= cd_pack_kv_str(pk, "model", e->name);
    rc |= cd_pack_kv_str(pk, "path", e->path);
    rc |= cd_pack_kv_str(pk, "device", cd_model_device(m));
    rc |= cd_pack_kv_str(pk, "layout", cd_model_layout(m));
    rc |= cd_pack_str(pk, "cpu") | cd_cpu_pack(pk);
    rc |= pack_kv_int(pk, "max_batch", e->conf.max_batch);
    rc |= pack_kv_int(pk, "batch", st->batch);
    rc |= pack_kv_int(pk, "runs", st->runs);
    rc |= pack_kv_ms(pk, "measured_ms", st->total_ms);
    rc |= pack_kv_int(pk, "reference_layers", nref);
    rc |= cd_pack_str(pk, "layers") | msgpack_pack_array(pk, (size_t)n);
    for (int i = 0; i < n && !rc; i++) {
        cd_layer_info l;
        cd_model_layer(m, i, &l);
        rc |= pack_layer(pk, i, &l, st->layer_ms[i]);
    }
    return rc ? CD_ENOMEM : 0;
}

static void plan_release(cd_request *req) {
    plan_state *st = req->state;
    if (!st) return;
    free(st->layer_ms);
    cd_model_entry_unref(st->entry);
    free(st);
}

static const cd_request_ops plan_ops = {plan_work, NULL, plan_pack, plan_release};

int cd_method_plan(cd_call *call) {
    char name[CD_MAX_NAME + 1];
    int64_t runs = PLAN_RUNS_DEFAULT, batch = 1;
    int rc = cd_param_str(call->params, "model", name, sizeof name, call->err, sizeof call->err);
    if (rc == 1) {
        snprintf(call->err, sizeof call->err, "plan needs 'model'");
        return CD_EPARAMS;
    }
    if (rc != 0) return rc;
    rc = cd_param_int(call->params, "runs", 1, PLAN_RUNS_MAX, &runs, call->err, sizeof call->err);
    if (rc < 0) return rc;
    cd_model_entry *e = cd_registry_get(call->srv->registry, name, strlen(name));
    if (!e) {
        char shown[80];
        snprintf(call->err, sizeof call->err, "no model named '%s'",
                 cd_sanitize(shown, sizeof shown, name, strlen(name)));
        return CD_ENOT_FOUND;
    }
    rc = cd_request_budget_check(call->from->budget, call->msg, call->err, sizeof call->err);
    if (rc != 0) {
        cd_model_entry_unref(e);
        return rc;
    }
    rc = cd_param_int(call->params, "batch", 1, e->conf.max_batch, &batch, call->err, sizeof call->err);
    if (rc < 0) {
        cd_model_entry_unref(e);
        return rc;
    }
    plan_state *st = calloc(1, sizeof *st);
    int n = cd_model_num_layers(e->model);
    double *lms = calloc((size_t)n + 1, sizeof *lms);
    cd_request *req = NULL;
    if (!st || !lms || !(req = cd_request_new(call->from, call->msg, CD_M_plan, &plan_ops))) {
        free(st);
        free(lms);
        cd_model_entry_unref(e);
        return CD_ENOMEM;
    }
    for (int i = 0; i < n; i++) lms[i] = -1;
    st->entry = e;
    st->batch = (int)batch;
    st->runs = (int)runs;
    st->layer_ms = lms;
    st->total_ms = -1;
    req->srv = call->srv;
    req->state = st;
    cd_request_started(req);
    cd_workers_submit(call->srv->profiler, req);
    return CD_CALL_QUEUED;
}
