#include "daemon/methods.h"

#include "core/errors.h"
#include "core/limits.h"
#include "daemon/access.h"
#include "daemon/features.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/models.h"
#include "daemon/regions.h"
#include "daemon/server-state.h"
#include "daemon/stats.h"
#include "daemon/validate.h"
#include "daemon/version.h"
#include "runtime/executor.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*method_fn)(cd_call *call);

enum {
    MF_NEEDS_PARAMS = 1 << 0, // params must be [map]
    MF_NO_DRAINING = 1 << 1,  // refused with E_SHUTDOWN once shutdown began
    MF_ADMIN = 1 << 2,        // changes models or limits: admins only (access.h)
};

typedef struct {
    cd_method_id id;
    method_fn fn;
    unsigned flags;
} method_entry;

static int m_hello(cd_call *call);
static int m_health(cd_call *call);
static int m_stats(cd_call *call);
static int m_metrics(cd_call *call);
static int m_region_register(cd_call *call);
static int m_region_unregister(cd_call *call);
static int m_region_list(cd_call *call);

// The method table (names come from CD_METHOD_NAMES in stats.h).
static const method_entry methods[] = {
    {CD_M_hello, m_hello, 0},
    {CD_M_health, m_health, 0},
    {CD_M_models, cd_method_models, 0},
    {CD_M_stats, m_stats, 0},
    {CD_M_load, cd_method_load, MF_NEEDS_PARAMS | MF_NO_DRAINING | MF_ADMIN},
    {CD_M_unload, cd_method_unload, MF_NEEDS_PARAMS | MF_ADMIN},
    {CD_M_infer, cd_method_infer, MF_NEEDS_PARAMS},
    {CD_M_metrics, m_metrics, 0},
    {CD_M_plan, cd_method_plan, MF_NEEDS_PARAMS | MF_NO_DRAINING},
    // No flags: a refusal before the handler would leave the descriptor that
    // came with the message for the next region_register to take.
    {CD_M_region_register, m_region_register, 0},
    {CD_M_region_unregister, m_region_unregister, MF_NEEDS_PARAMS},
    {CD_M_region_list, m_region_list, 0},
};

// Copies at most 64 bytes of a client string for a message, replacing
// anything but printable ASCII with '?' (replies must stay valid UTF-8).
static void sanitize(char *dst, size_t dstlen, const char *src, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len && n + 4 < dstlen && i < 64; i++)
        dst[n++] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    if (len > 64 && n + 4 < dstlen) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
}

int cd_methods_dispatch(void *ud, cd_request_origin *from, cd_rpc_msg *msg, msgpack_sbuffer *result, char *err,
                        size_t errlen) {
    cd_server *srv = ud;
    cd_method_id id = cd_method_lookup(msg->method, msg->method_len);
    uint32_t msgid = msg->msgid;
    CD_STAT_INC(req_total);
    CD_STAT_INC(by_method[id]);

    const method_entry *e = NULL;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].id == id) e = &methods[i];

    cd_call call = {.srv = srv, .from = from, .msg = msg};
    int rc;
    msgpack_packer pk;
    msgpack_packer_init(&pk, result, msgpack_sbuffer_write);
    call.pk = &pk;
    bool called = false;

    if (!e) {
        char name[80];
        sanitize(name, sizeof name, msg->method, msg->method_len);
        snprintf(call.err, sizeof call.err, "unknown method '%s'", name);
        rc = CD_EMETHOD;
    } else if ((e->flags & MF_ADMIN) &&
               (rc = cd_access_check(from->peer, id, (unsigned long long)from->id, call.err, sizeof call.err)) != 0) {
        // rc set: checked before the params, so a refused peer learns nothing else
    } else if ((rc = cd_params_map(msg, &call.params, call.err, sizeof call.err)) != 0) {
        // rc set
    } else if ((e->flags & MF_NEEDS_PARAMS) && !call.params) {
        snprintf(call.err, sizeof call.err, "%s needs params [map]", cd_method_name(id));
        rc = CD_EPARAMS;
    } else if ((e->flags & MF_NO_DRAINING) && srv->draining) {
        snprintf(call.err, sizeof call.err, "server is shutting down");
        rc = CD_ESHUTDOWN;
    } else {
        rc = e->fn(&call);
        called = true;
    }
    // A region_register refused before its handler still used up its descriptor.
    if (id == CD_M_region_register && !called) cd_region_set_drop_one(from->regions);

    if (rc < 0) {
        CD_DEBUG("conn %llu: msgid %u %s: %s: %s", (unsigned long long)from->id, msgid, cd_method_name(id),
                 cd_err_name(rc), call.err);
        snprintf(err, errlen, "%s", call.err);
    }
    if (rc != CD_CALL_QUEUED) cd_rpc_msg_free(msg);
    return rc;
}

// ---- the cheap methods, answered on the loop --------------------------------

static int pack_key(msgpack_packer *pk, const char *k) { return cd_pack_str(pk, k); }

static int m_hello(cd_call *call) {
    msgpack_packer *pk = call->pk;
    const char *feat[32];
    size_t nfeat = cd_features_list(feat, 32);
    int rc = msgpack_pack_map(pk, 5);
    rc |= cd_pack_kv_str(pk, "server", CD_DAEMON_NAME);
    rc |= cd_pack_kv_str(pk, "version", CD_DAEMON_VERSION);
    rc |= pack_key(pk, "protocol");
    rc |= msgpack_pack_int(pk, CD_PROTOCOL_VERSION);
    rc |= cd_pack_kv_str(pk, "device", call->srv->set->device);
    rc |= pack_key(pk, "features");
    rc |= msgpack_pack_array(pk, nfeat);
    for (size_t i = 0; i < nfeat; i++) rc |= cd_pack_str(pk, feat[i]);
    return rc ? CD_ENOMEM : 0;
}

static int m_health(cd_call *call) {
    msgpack_packer *pk = call->pk;
    int rc = msgpack_pack_map(pk, 4);
    rc |= cd_pack_kv_str(pk, "status", call->srv->draining ? "draining" : "ok");
    rc |= pack_key(pk, "uptime_s");
    rc |= msgpack_pack_double(pk, cd_server_uptime(call->srv));
    rc |= pack_key(pk, "models");
    rc |= msgpack_pack_int64(pk, cd_models_count(call->srv));
    rc |= pack_key(pk, "cpu");
    rc |= cd_cpu_pack(pk);
    return rc ? CD_ENOMEM : 0;
}

static int pack_kv_u64(msgpack_packer *pk, const char *k, uint64_t v) {
    return pack_key(pk, k) | msgpack_pack_uint64(pk, v);
}

// One key and its count in a `stats` section.
typedef struct {
    const char *key;
    uint64_t value;
} kv_u64;

// Packs a map of the n rows and `more` keys the caller packs after them.
static int pack_kv_u64_map(msgpack_packer *pk, const kv_u64 *rows, size_t n, size_t more) {
    int rc = msgpack_pack_map(pk, (uint32_t)(n + more));
    for (size_t i = 0; i < n; i++) rc |= pack_kv_u64(pk, rows[i].key, rows[i].value);
    return rc;
}

// Threads running a request now (of the workers, the loader and the
// profiler): unlike in_flight, queued work is not counted, so a client can
// wait for "a worker has taken it".
static uint64_t running_now(cd_server *srv) {
    char desc[512];
    cd_workers *const pools[] = {srv->workers, srv->loader, srv->profiler};
    uint64_t n = 0;
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
        if (pools[i]) n += cd_workers_describe(pools[i], "", desc, sizeof desc);
    return n;
}

static int m_stats(cd_call *call) {
    msgpack_packer *pk = call->pk;
    cd_server *srv = call->srv;
    cd_workers_sync(srv->workers);     // count answers workers have already written
    int rc = msgpack_pack_map(pk, 13); // the top-level keys below
    rc |= pack_key(pk, "uptime_s");
    rc |= msgpack_pack_double(pk, cd_server_uptime(srv));
    rc |= pack_key(pk, "cpu");
    rc |= cd_cpu_pack(pk);

    uint64_t rej_limit = CD_STAT_GET(conn_rejected_limit);
    uint64_t rej_emfile = CD_STAT_GET(conn_rejected_emfile);
    const kv_u64 connections[] = {
        {"current", srv->hub.nactive},
        {"total", CD_STAT_GET(conn_total)},
        {"rejected", rej_limit + rej_emfile},
        {"rejected_limit", rej_limit},
        {"rejected_emfile", rej_emfile},
        {"eof_mid_message", CD_STAT_GET(conn_eof_mid_message)},
        {"write_errors", CD_STAT_GET(conn_write_errors)},
        {"slow_readers", CD_STAT_GET(conn_slow_reader)},
        {"idle_timeouts", CD_STAT_GET(conn_idle_timeouts)},
        {"read_timeouts", CD_STAT_GET(conn_read_timeouts)},
        {"unsent_bytes", srv->hub.unsent},
    };
    rc |= pack_key(pk, "connections");
    rc |= pack_kv_u64_map(pk, connections, sizeof connections / sizeof connections[0], 0);

    const kv_u64 requests[] = {
        {"total", CD_STAT_GET(req_total)},
        {"in_flight", cd_server_in_flight(srv)},
        {"running", running_now(srv)},
        {"notifications", CD_STAT_GET(notifications)},
        {"cancelled", CD_STAT_GET(req_cancelled)},
        {"dropped", CD_STAT_GET(req_dropped)},
        {"direct", CD_STAT_GET(resp_direct)},
        {"direct_partial", CD_STAT_GET(resp_partial)},
        {"direct_queued", CD_STAT_GET(resp_queued)},
    };
    rc |= pack_key(pk, "requests");
    rc |= pack_kv_u64_map(pk, requests, sizeof requests / sizeof requests[0], 1); // and by_method
    rc |= pack_key(pk, "by_method");
    rc |= msgpack_pack_map(pk, CD_M_COUNT);
    for (int i = 0; i < CD_M_COUNT; i++)
        rc |= pack_kv_u64(pk, cd_method_name((cd_method_id)i), CD_STAT_GET(by_method[i]));

    rc |= pack_key(pk, "errors");
    size_t nerr = 0;
#define XX(name, num, msg) nerr++;
    CD_ERROR_MAP(XX)
#undef XX
    rc |= msgpack_pack_map(pk, nerr);
#define XX(name, num, msg) rc |= pack_kv_u64(pk, "E_" #name, CD_STAT_GET(errors[num]));
    CD_ERROR_MAP(XX)
#undef XX

    rc |= pack_key(pk, "access");
    rc |= msgpack_pack_map(pk, 1);
    rc |= pack_key(pk, "refused"); // E_PERMISSION answers by method class
    rc |= msgpack_pack_map(pk, 2);
    rc |= pack_kv_u64(pk, "load", CD_STAT_GET(refused_load));
    rc |= pack_kv_u64(pk, "unload", CD_STAT_GET(refused_unload));

    // compute: the runtime's one CPU executor (runtime/executor.h)
    cd_executor_stats ex;
    cd_executor_get_stats(&ex);
    unsigned long long lane_images = 0, lane_runs = cd_runtime_lane_batches(&lane_images);
    const kv_u64 compute[] = {
        {"threads", (uint64_t)ex.threads},
        {"affinity_cpus", (uint64_t)cd_executor_affinity_cpus()},
        {"quota_millicpus", (uint64_t)(cd_executor_cpu_quota() * 1000.0 + 0.5)},
        {"lanes", (uint64_t)ex.lanes},
        {"jobs", ex.jobs},
        {"wide_jobs", ex.wide_jobs},
        {"lane_jobs", ex.lane_jobs},
        {"caller_jobs", ex.caller_jobs},
        {"lane_spans", ex.lane_spans},
        {"queued", (uint64_t)ex.queued},
        {"running", (uint64_t)ex.running},
        {"batch_lane_runs", lane_runs},
        {"batch_lane_images", lane_images},
    };
    rc |= pack_key(pk, "compute");
    rc |= pack_kv_u64_map(pk, compute, sizeof compute / sizeof compute[0], 0);

    rc |= pack_kv_u64(pk, "bytes_in", CD_STAT_GET(bytes_in));
    rc |= pack_kv_u64(pk, "bytes_out", CD_STAT_GET(bytes_out));
    rc |= pack_kv_u64(pk, "rss_bytes", cd_stats_rss_bytes());
    // limits: the request-memory budget and the load queue
    const kv_u64 limits[] = {
        {"buffered_bytes", srv->hub.budget.held},        {"max_buffered", (uint64_t)cd_settings_max_buffered(srv->set)},
        {"budget_refused", CD_STAT_GET(budget_refused)}, {"pending_loads", srv->pending_loads},
        {"models", (uint64_t)cd_models_count(srv)},
    };
    rc |= pack_key(pk, "limits");
    rc |= pack_kv_u64_map(pk, limits, sizeof limits / sizeof limits[0], 0);
    rc |= pack_key(pk, "models");
    rc |= cd_models_pack_stats(srv, pk);
    rc |= pack_key(pk, "settings");
    rc |= cd_settings_pack(pk, srv->set);
    return rc ? CD_ENOMEM : 0;
}

// The Prometheus text exposition as one str (docs/OPERATIONS.md, "Metrics").
static int m_metrics(cd_call *call) {
    char *text;
    size_t len;
    cd_workers_sync(call->srv->workers); // as in m_stats
    int rc = cd_metrics_render(call->srv, &text, &len);
    if (rc != 0) return rc;
    rc = msgpack_pack_str(call->pk, len) | msgpack_pack_str_body(call->pk, text, len);
    free(text);
    return rc ? CD_ENOMEM : 0;
}

// ---- shared-memory regions (daemon/regions.c) ---------------------------------

static int m_region_register(cd_call *call) {
    return cd_region_method_register(call->from->regions, call->srv->set, call->params, call->pk, call->err,
                                     sizeof call->err);
}

static int m_region_unregister(cd_call *call) {
    return cd_region_method_unregister(call->from->regions, call->params, call->pk, call->err, sizeof call->err);
}

static int m_region_list(cd_call *call) {
    return cd_region_method_list(call->from->regions, call->pk, call->err, sizeof call->err);
}
