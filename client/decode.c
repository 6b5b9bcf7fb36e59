// Reading decoded msgpack results in libconvd: small typed getters and the
// model-entry decoder shared by the models and load methods.

#include "client/client-internal.h"
#include "core/errors.h"
#include "proto/params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const msgpack_object *cd_client_get(const msgpack_object *map, const char *key) { return cd_map_get(map, key); }

int cd_client_strcpy(char *buf, size_t buflen, const msgpack_object *o) {
    if (buflen) buf[0] = 0;
    if (!o || o->type != MSGPACK_OBJECT_STR || buflen == 0) return -1;
    size_t n = o->via.str.size < buflen - 1 ? o->via.str.size : buflen - 1;
    memcpy(buf, o->via.str.ptr, n);
    buf[n] = 0;
    return 0;
}

char *cd_client_strdup(const msgpack_object *o, int *oom) {
    if (!o || o->type != MSGPACK_OBJECT_STR) return NULL;
    char *s = malloc(o->via.str.size + 1);
    if (!s) {
        *oom = 1;
        return NULL;
    }
    memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = 0;
    return s;
}

int64_t cd_client_int(const msgpack_object *o, int64_t def) {
    if (!o) return def;
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return o->via.u64 > INT64_MAX ? INT64_MAX : (int64_t)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return o->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        if (isfinite(o->via.f64) && fabs(o->via.f64) < 9.2e18) return (int64_t)o->via.f64;
        return def;
    default: return def;
    }
}

double cd_client_num(const msgpack_object *o, double def) {
    if (!o) return def;
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
    default: return def;
    }
}

// {name, dtype, shape}: a dim that is not a positive integer (nil, a symbolic
// name, -1) is an open dim, -1.
int cd_client_tensor_info_decode(const msgpack_object *o, convd_tensor_info *ti) {
    memset(ti, 0, sizeof *ti);
    if (!o || o->type != MSGPACK_OBJECT_MAP) return CD_EPROTOCOL;
    int oom = 0;
    ti->name = cd_client_strdup(cd_client_get(o, "name"), &oom);
    if (oom) return CD_ENOMEM;
    char dt[16];
    if (cd_client_strcpy(dt, sizeof dt, cd_client_get(o, "dtype")) == 0) ti->dtype = convd_dtype_from_name(dt);
    const msgpack_object *sh = cd_client_get(o, "shape");
    if (sh && sh->type == MSGPACK_OBJECT_ARRAY) {
        uint32_t n = sh->via.array.size;
        ti->rank = n > CONVD_MAX_RANK ? CONVD_MAX_RANK : (int)n;
        for (int i = 0; i < ti->rank; i++) {
            int64_t d = cd_client_int(&sh->via.array.ptr[i], -1);
            ti->shape[i] = d >= 1 ? d : -1;
        }
    }
    return 0;
}

static int tensor_infos_decode(const msgpack_object *arr, convd_tensor_info **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!arr || arr->type != MSGPACK_OBJECT_ARRAY || arr->via.array.size == 0) return 0;
    convd_tensor_info *v = calloc(arr->via.array.size, sizeof *v);
    if (!v) return CD_ENOMEM;
    *out = v;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        int rc = cd_client_tensor_info_decode(&arr->via.array.ptr[i], &v[i]);
        (*n)++;
        if (rc == CD_ENOMEM) return rc;
    }
    return 0;
}

int cd_client_model_info_decode(const msgpack_object *o, convd_model_info *mi) {
    memset(mi, 0, sizeof *mi);
    mi->max_batch = mi->params = mi->flops = mi->weight_bytes = -1;
    mi->activation_bytes = mi->layers = mi->int8_layers = -1;
    mi->density = -1.0;
    if (!o || o->type != MSGPACK_OBJECT_MAP) return CD_EPROTOCOL;
    int oom = 0;
    mi->name = cd_client_strdup(cd_client_get(o, "name"), &oom);
    mi->path = cd_client_strdup(cd_client_get(o, "path"), &oom);
    mi->int8_pick = cd_client_strdup(cd_client_get(o, "int8_pick"), &oom);
    if (oom) return CD_ENOMEM;
    mi->max_batch = cd_client_int(cd_client_get(o, "max_batch"), -1);
    mi->params = cd_client_int(cd_client_get(o, "params"), -1);
    mi->flops = cd_client_int(cd_client_get(o, "flops"), -1);
    mi->weight_bytes = cd_client_int(cd_client_get(o, "weight_bytes"), -1);
    mi->activation_bytes = cd_client_int(cd_client_get(o, "activation_bytes"), -1);
    mi->density = cd_client_num(cd_client_get(o, "density"), -1.0);
    // layers: a count, or a list of per-layer entries.
    const msgpack_object *ly = cd_client_get(o, "layers");
    if (ly && ly->type == MSGPACK_OBJECT_ARRAY)
        mi->layers = ly->via.array.size;
    else
        mi->layers = cd_client_int(ly, -1);
    mi->int8_layers = cd_client_int(cd_client_get(o, "int8_layers"), -1);
    int rc = tensor_infos_decode(cd_client_get(o, "inputs"), &mi->inputs, &mi->n_inputs);
    if (rc == 0) rc = tensor_infos_decode(cd_client_get(o, "outputs"), &mi->outputs, &mi->n_outputs);
    return rc;
}
