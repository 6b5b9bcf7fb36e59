// The msgpack building blocks the commands share (convctl.h): call params
// and --json documents.

#include "tools/convctl/convctl.h"

#include <string.h>

void ctl_mp_init(ctl_mp *m) {
    msgpack_sbuffer_init(&m->sb);
    msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
}

void ctl_mp_free(ctl_mp *m) { msgpack_sbuffer_destroy(&m->sb); }

void ctl_mp_str(msgpack_packer *pk, const char *s) { msgpack_pack_str_with_body(pk, s, strlen(s)); }

void ctl_mp_kv_str(msgpack_packer *pk, const char *k, const char *v) {
    ctl_mp_str(pk, k);
    if (v)
        ctl_mp_str(pk, v);
    else
        msgpack_pack_nil(pk);
}

void ctl_mp_kv_i64(msgpack_packer *pk, const char *k, int64_t v) {
    ctl_mp_str(pk, k);
    msgpack_pack_int64(pk, v);
}

void ctl_mp_kv_u64(msgpack_packer *pk, const char *k, uint64_t v) {
    ctl_mp_str(pk, k);
    msgpack_pack_uint64(pk, v);
}

void ctl_mp_kv_bool(msgpack_packer *pk, const char *k, int v) {
    ctl_mp_str(pk, k);
    if (v)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}

void ctl_mp_kv_f64(msgpack_packer *pk, const char *k, double v) {
    ctl_mp_str(pk, k);
    msgpack_pack_double(pk, v);
}

int ctl_mp_json_call(ctl_ctx *ctx, const char *method, ctl_mp *params) {
    int rc = ctl_print_json_call(ctx, method, params->sb.data, params->sb.size);
    ctl_mp_free(params);
    return rc;
}

int ctl_mp_print(ctl_mp *m) {
    int rc = ctl_print_json(m->sb.data, m->sb.size);
    ctl_mp_free(m);
    return rc;
}
