// libconvd calls: the generic convd_call and the typed status and model
// methods (hello, health, stats, models, load, unload, plan).

#include "client/client-internal.h"
#include "core/errors.h"

#include <stdlib.h>
#include <string.h>

// Params given as msgpack bytes: checked to be exactly one value, then
// written as they are.
typedef struct {
    const void *bytes;
    size_t len;
} raw_params;

static int pack_raw(msgpack_packer *pk, void *ud) {
    const raw_params *rp = ud;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    msgpack_unpack_return ur = msgpack_unpack_next(&up, rp->bytes, rp->len, &off);
    msgpack_unpacked_destroy(&up);
    if (ur != MSGPACK_UNPACK_SUCCESS || off != rp->len)
        return cd_client_fail(CD_EPARAMS, "params must be the msgpack encoding of exactly one value");
    return pk->callback(pk->data, rp->bytes, rp->len) == 0 ? 0 : CD_ENOMEM;
}

// Re-encodes a decoded value into a malloc'd buffer.
static int encode_object(const msgpack_object *o, void **out, size_t *len) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (msgpack_pack_object(&pk, *o) != 0) {
        msgpack_sbuffer_destroy(&sb);
        return cd_client_fail(CD_ENOMEM, "out of memory");
    }
    if (sb.size == 0) { // keep a non-NULL result
        msgpack_sbuffer_destroy(&sb);
        return cd_client_fail(CD_EINTERNAL, "empty result");
    }
    *len = sb.size; // release() resets size
    *out = msgpack_sbuffer_release(&sb);
    return 0;
}

int convd_call(convd_conn *c, const char *method, const void *params, size_t params_len, void **result,
               size_t *result_len, int timeout_ms) {
    if (result) *result = NULL;
    if (result_len) *result_len = 0;
    if (!result || !result_len) return cd_client_fail(CD_EPARAMS, "result and result_len are required");
    if (params_len && !params) return cd_client_fail(CD_EPARAMS, "params is NULL but params_len is not 0");
    raw_params rp = {params, params_len};
    cd_rpc_msg m;
    int rc = cd_client_call(c, method, params_len ? pack_raw : NULL, &rp, timeout_ms, &m);
    if (rc != 0) return rc;
    rc = encode_object(&m.result, result, result_len);
    cd_rpc_msg_free(&m);
    return rc;
}

// Checks that a success answer's result is a map.
static int want_map(cd_rpc_msg *m, const char *method) {
    if (m->result.type == MSGPACK_OBJECT_MAP) return 0;
    cd_rpc_msg_free(m);
    return cd_client_fail(CD_EPROTOCOL, "the result of '%s' is not a map", method);
}

// Calls a method without params and checks that its result is a map.
// Returns 0 (m holds the response) or a negative code.
static int call_for_map(convd_conn *c, const char *method, cd_rpc_msg *m) {
    int rc = cd_client_call(c, method, NULL, NULL, CONVD_TIMEOUT_DEFAULT, m);
    if (rc == 0) rc = want_map(m, method);
    return rc;
}

int convd_hello(convd_conn *c, convd_hello_info *out) {
    memset(out, 0, sizeof *out);
    cd_rpc_msg m;
    int rc = call_for_map(c, "hello", &m);
    if (rc != 0) return rc;
    const msgpack_object *r = &m.result;
    cd_client_strcpy(out->server, sizeof out->server, cd_client_get(r, "server"));
    cd_client_strcpy(out->version, sizeof out->version, cd_client_get(r, "version"));
    cd_client_strcpy(out->device, sizeof out->device, cd_client_get(r, "device"));
    out->protocol = (int)cd_client_int(cd_client_get(r, "protocol"), 0);
    const msgpack_object *f = cd_client_get(r, "features");
    if (f && f->type == MSGPACK_OBJECT_ARRAY) {
        size_t pos = 0;
        for (uint32_t i = 0; i < f->via.array.size; i++) {
            const msgpack_object *s = &f->via.array.ptr[i];
            if (s->type != MSGPACK_OBJECT_STR) continue;
            size_t n = s->via.str.size;
            if (pos + n + 2 > sizeof out->features) break; // full: keep whole names only
            if (pos) out->features[pos++] = ' ';
            memcpy(out->features + pos, s->via.str.ptr, n);
            pos += n;
            out->features[pos] = 0;
        }
    }
    cd_rpc_msg_free(&m);
    return 0;
}

int convd_has_feature(const convd_hello_info *info, const char *feature) {
    size_t n = strlen(feature);
    if (n == 0) return 0;
    for (const char *p = info->features; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, feature, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int convd_health(convd_conn *c, convd_health_info *out) {
    memset(out, 0, sizeof *out);
    cd_rpc_msg m;
    int rc = call_for_map(c, "health", &m);
    if (rc != 0) return rc;
    cd_client_strcpy(out->status, sizeof out->status, cd_client_get(&m.result, "status"));
    out->uptime_s = cd_client_num(cd_client_get(&m.result, "uptime_s"), 0.0);
    out->models = cd_client_int(cd_client_get(&m.result, "models"), 0);
    cd_rpc_msg_free(&m);
    return 0;
}

int convd_stats(convd_conn *c, char **json) {
    *json = NULL;
    void *res;
    size_t len;
    int rc = convd_call(c, "stats", NULL, 0, &res, &len, CONVD_TIMEOUT_DEFAULT);
    if (rc != 0) return rc;
    rc = convd_to_json(res, len, json);
    free(res);
    if (rc != 0) return cd_client_fail(rc, "cannot convert the stats to JSON");
    return 0;
}

static void model_info_free(convd_model_info *mi) {
    free(mi->name);
    free(mi->path);
    free(mi->int8_pick);
    for (size_t i = 0; i < mi->n_inputs; i++) free(mi->inputs[i].name);
    for (size_t i = 0; i < mi->n_outputs; i++) free(mi->outputs[i].name);
    free(mi->inputs);
    free(mi->outputs);
}

void convd_model_list_free(convd_model_list *list) {
    if (!list) return;
    for (size_t i = 0; i < list->count; i++) model_info_free(&list->models[i]);
    free(list->models);
    free(list);
}

// Builds a list from n model entries at objs.
static int model_list_decode(const msgpack_object *objs, size_t n, convd_model_list **out) {
    convd_model_list *l = calloc(1, sizeof *l);
    if (!l) return cd_client_fail(CD_ENOMEM, "out of memory");
    if (n) {
        l->models = calloc(n, sizeof *l->models);
        if (!l->models) {
            free(l);
            return cd_client_fail(CD_ENOMEM, "out of memory");
        }
    }
    for (size_t i = 0; i < n; i++) {
        int rc = cd_client_model_info_decode(&objs[i], &l->models[i]);
        l->count++;
        if (rc != 0) {
            convd_model_list_free(l);
            return cd_client_fail(rc, rc == CD_ENOMEM ? "out of memory" : "a model entry is not a map");
        }
    }
    *out = l;
    return 0;
}

int convd_models(convd_conn *c, convd_model_list **out) {
    *out = NULL;
    cd_rpc_msg m;
    int rc = call_for_map(c, "models", &m);
    if (rc != 0) return rc;
    const msgpack_object *arr = cd_client_get(&m.result, "models");
    if (!arr || arr->type != MSGPACK_OBJECT_ARRAY) {
        cd_rpc_msg_free(&m);
        return cd_client_fail(CD_EPROTOCOL, "the result of 'models' has no models list");
    }
    rc = model_list_decode(arr->via.array.ptr, arr->via.array.size, out);
    cd_rpc_msg_free(&m);
    return rc;
}

typedef struct {
    const char *name;
    const char *path;
    int max_batch;
} load_params;

static int pack_load(msgpack_packer *pk, void *ud) {
    const load_params *lp = ud;
    int rc = msgpack_pack_map(pk, lp->path ? (lp->max_batch > 0 ? 3 : 2) : 1);
    rc |= cd_pack_kv_str(pk, "name", lp->name);
    if (lp->path) rc |= cd_pack_kv_str(pk, "path", lp->path);
    if (lp->path && lp->max_batch > 0) {
        rc |= cd_pack_str(pk, "max_batch");
        rc |= msgpack_pack_int(pk, lp->max_batch);
    }
    return rc ? CD_ENOMEM : 0;
}

int convd_load(convd_conn *c, const char *name, const char *path, int max_batch, convd_model_list **info) {
    if (info) *info = NULL;
    if (!name || !path) return cd_client_fail(CD_EPARAMS, "name and path are required");
    load_params lp = {name, path, max_batch};
    cd_rpc_msg m;
    int rc = cd_client_call(c, "load", pack_load, &lp, CONVD_TIMEOUT_DEFAULT, &m);
    if (rc != 0) return rc;
    if (info) rc = model_list_decode(&m.result, 1, info);
    cd_rpc_msg_free(&m);
    return rc;
}

int convd_unload(convd_conn *c, const char *name) {
    if (!name) return cd_client_fail(CD_EPARAMS, "name is required");
    load_params lp = {name, NULL, 0};
    cd_rpc_msg m;
    int rc = cd_client_call(c, "unload", pack_load, &lp, CONVD_TIMEOUT_DEFAULT, &m);
    if (rc != 0) return rc;
    cd_rpc_msg_free(&m);
    return 0;
}

typedef struct {
    const char *model;
    int batch, runs;
} plan_params;

static int pack_plan(msgpack_packer *pk, void *ud) {
    const plan_params *pp = ud;
    int rc = msgpack_pack_map(pk, 1 + (pp->batch > 0) + (pp->runs > 0));
    rc |= cd_pack_kv_str(pk, "model", pp->model);
    if (pp->batch > 0) rc |= cd_pack_str(pk, "batch") | msgpack_pack_int(pk, pp->batch);
    if (pp->runs > 0) rc |= cd_pack_str(pk, "runs") | msgpack_pack_int(pk, pp->runs);
    return rc ? CD_ENOMEM : 0;
}

int convd_plan(convd_conn *c, const char *model, int batch, int runs, char **json, int timeout_ms) {
    if (json) *json = NULL;
    if (!model || !json) return cd_client_fail(CD_EPARAMS, "model and json are required");
    plan_params pp = {model, batch, runs};
    cd_rpc_msg m;
    int rc = cd_client_call(c, "plan", pack_plan, &pp, timeout_ms, &m);
    if (rc == 0) rc = want_map(&m, "plan");
    if (rc != 0) return rc;
    void *res;
    size_t len;
    rc = encode_object(&m.result, &res, &len);
    cd_rpc_msg_free(&m);
    if (rc != 0) return rc;
    rc = convd_to_json(res, len, json);
    free(res);
    if (rc != 0) return cd_client_fail(rc, "cannot convert the plan to JSON");
    return 0;
}
