// Packing msgpack-RPC envelopes, and decoding the error object of a response
// (see proto/rpc.h).

#include "proto/rpc.h"

#include "core/errors.h"
#include "proto/params.h"

#include <stdbool.h>
#include <string.h>

// msgpack_pack_* return the write callback's result: 0, or -1 when the
// buffer could not grow.
#define PK(call)                           \
    do {                                   \
        if ((call) != 0) return CD_ENOMEM; \
    } while (0)

int cd_pack_str(msgpack_packer *pk, const char *s) {
    if (!s) {
        PK(msgpack_pack_nil(pk));
        return 0;
    }
    size_t n = strlen(s);
    PK(msgpack_pack_str(pk, n));
    PK(msgpack_pack_str_body(pk, s, n));
    return 0;
}

int cd_pack_kv_str(msgpack_packer *pk, const char *key, const char *val) {
    int rc = cd_pack_str(pk, key);
    if (rc < 0) return rc;
    return cd_pack_str(pk, val);
}

int cd_rpc_pack_request_begin(msgpack_packer *pk, uint32_t msgid, const char *method) {
    PK(msgpack_pack_array(pk, 4));
    PK(msgpack_pack_uint8(pk, CD_MSG_REQUEST));
    PK(msgpack_pack_uint32(pk, msgid));
    if (cd_pack_str(pk, method) < 0) return CD_ENOMEM;
    PK(msgpack_pack_array(pk, 1));
    return 0;
}

int cd_rpc_pack_response_ok_begin(msgpack_packer *pk, uint32_t msgid) {
    PK(msgpack_pack_array(pk, 4));
    PK(msgpack_pack_uint8(pk, CD_MSG_RESPONSE));
    PK(msgpack_pack_uint32(pk, msgid));
    PK(msgpack_pack_nil(pk));
    return 0;
}

int cd_rpc_pack_response_error(msgpack_packer *pk, uint32_t msgid, int status, const char *message) {
    if (!message) message = cd_strerror(status);
    // A message may quote what a client sent; a str on the wire must be
    // UTF-8, so anything else is escaped (\xNN) rather than passed on.
    char safe[1024];
    if (!cd_utf8_valid(message, strlen(message))) message = cd_sanitize(safe, sizeof safe, message, strlen(message));
    PK(msgpack_pack_array(pk, 4));
    PK(msgpack_pack_uint8(pk, CD_MSG_RESPONSE));
    PK(msgpack_pack_uint32(pk, msgid));
    PK(msgpack_pack_map(pk, 2));
    if (cd_pack_kv_str(pk, "code", cd_err_name(status)) < 0) return CD_ENOMEM;
    if (cd_pack_kv_str(pk, "message", message) < 0) return CD_ENOMEM;
    PK(msgpack_pack_nil(pk));
    return 0;
}

int cd_rpc_pack_notify_begin(msgpack_packer *pk, const char *method) {
    PK(msgpack_pack_array(pk, 3));
    PK(msgpack_pack_uint8(pk, CD_MSG_NOTIFY));
    if (cd_pack_str(pk, method) < 0) return CD_ENOMEM;
    PK(msgpack_pack_array(pk, 1));
    return 0;
}

static void copy_msg(char *dst, size_t dstlen, const char *src, size_t n) {
    if (!dst || dstlen == 0) return;
    if (n > dstlen - 1) n = dstlen - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

// Returns 0 when err is nil (no error). A map {code, message} yields the
// status of code (CD_EINTERNAL when code is missing, not a str, or a name this
// build does not know; never 0) and its message. Any other value (a peer that
// is not convd may send a plain string) yields CD_EINTERNAL with that string,
// or the type's default message.
int cd_rpc_error_decode(const msgpack_object *err, char *msg, size_t msglen) {
    copy_msg(msg, msglen, "", 0);
    if (!err || err->type == MSGPACK_OBJECT_NIL) return 0;
    if (err->type == MSGPACK_OBJECT_STR) {
        copy_msg(msg, msglen, err->via.str.ptr, err->via.str.size);
        return CD_EINTERNAL;
    }
    if (err->type != MSGPACK_OBJECT_MAP) {
        copy_msg(msg, msglen, "malformed error object", 22);
        return CD_EINTERNAL;
    }
    int status = CD_EINTERNAL;
    bool have_msg = false;
    for (uint32_t i = 0; i < err->via.map.size; i++) {
        const msgpack_object *k = &err->via.map.ptr[i].key;
        const msgpack_object *v = &err->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR || v->type != MSGPACK_OBJECT_STR) continue;
        if (k->via.str.size == 4 && memcmp(k->via.str.ptr, "code", 4) == 0) {
            status = cd_err_from_name(v->via.str.ptr, v->via.str.size);
        } else if (k->via.str.size == 7 && memcmp(k->via.str.ptr, "message", 7) == 0) {
            copy_msg(msg, msglen, v->via.str.ptr, v->via.str.size);
            have_msg = true;
        }
    }
    if (!have_msg) {
        const char *d = cd_strerror(status);
        copy_msg(msg, msglen, d, strlen(d));
    }
    return status;
}
