// Typed access to a request's params map (see proto/params.h).
//
// A key whose value is nil counts as absent (getters return 1): clients that
// fill optional fields with None/nil get the defaults, as if they had left
// them out.

#include "proto/params.h"

#include "core/errors.h"
#include "proto/describe.h"

#include <inttypes.h>
#include <string.h>

bool cd_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xbf; // allowed range of the second byte
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) lo = 0xa0; // overlong
            if (c == 0xed) hi = 0x9f; // surrogates
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) lo = 0x90; // overlong
            if (c == 0xf4) hi = 0x8f; // above U+10FFFF
        } else {
            return false; // continuation byte, overlong 0xc0/0xc1, or 0xf5..0xff
        }
        if (n - i < len || p[i + 1] < lo || p[i + 1] > hi) return false;
        for (size_t k = 2; k < len; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xbf) return false;
        i += len;
    }
    return true;
}

bool cd_obj_text(const msgpack_object *o, const char **s, size_t *n) {
    if (!o) return false;
    if (o->type == MSGPACK_OBJECT_STR) {
        *s = o->via.str.ptr;
        *n = o->via.str.size;
        return true;
    }
    if (o->type == MSGPACK_OBJECT_BIN && cd_utf8_valid(o->via.bin.ptr, o->via.bin.size)) {
        *s = o->via.bin.ptr;
        *n = o->via.bin.size;
        return true;
    }
    return false;
}

bool cd_obj_streq(const msgpack_object *o, const char *s) {
    const char *t;
    size_t tn, n = strlen(s);
    return cd_obj_text(o, &t, &tn) && tn == n && memcmp(t, s, n) == 0;
}

const msgpack_object *cd_map_get(const msgpack_object *map, const char *key) {
    if (!map || map->type != MSGPACK_OBJECT_MAP) return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++)
        if (cd_obj_streq(&map->via.map.ptr[i].key, key)) return &map->via.map.ptr[i].val;
    return NULL;
}

// The value under key, or NULL when it is absent or nil.
static const msgpack_object *param_get(const msgpack_object *map, const char *key) {
    const msgpack_object *v = cd_map_get(map, key);
    return v && v->type != MSGPACK_OBJECT_NIL ? v : NULL;
}

int cd_param_str(const msgpack_object *map, const char *key, char *buf, size_t buflen, char *err, size_t errlen) {
    const msgpack_object *v = param_get(map, key);
    if (!v) return 1;
    const char *text;
    size_t n;
    if (!cd_obj_text(v, &text, &n))
        return cd_errf(CD_EPARAMS, err, errlen, "param '%s' must be a str, got %s%s", key, cd_obj_type_name(v),
                       v->type == MSGPACK_OBJECT_BIN ? " that is not valid UTF-8" : "");
    if (buflen == 0 || n > buflen - 1)
        return cd_errf(CD_EPARAMS, err, errlen, "param '%s' is %zu bytes long, the limit is %zu", key, n,
                       buflen ? buflen - 1 : 0);
    if (n && memchr(text, '\0', n)) return cd_errf(CD_EPARAMS, err, errlen, "param '%s' contains a NUL byte", key);
    if (n) memcpy(buf, text, n);
    buf[n] = '\0';
    return 0;
}

int cd_param_int(const msgpack_object *map, const char *key, int64_t min, int64_t max, int64_t *out, char *err,
                 size_t errlen) {
    const msgpack_object *v = param_get(map, key);
    if (!v) return 1;
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (v->via.u64 > INT64_MAX || (int64_t)v->via.u64 > max)
            return cd_errf(CD_EPARAMS, err, errlen, "param '%s' is %" PRIu64 ", out of range %" PRId64 "..%" PRId64,
                           key, v->via.u64, min, max);
    } else if (v->type != MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        return cd_errf(CD_EPARAMS, err, errlen, "param '%s' must be an int, got %s", key, cd_obj_type_name(v));
    }
    if (v->via.i64 < min || v->via.i64 > max)
        return cd_errf(CD_EPARAMS, err, errlen, "param '%s' is %" PRId64 ", out of range %" PRId64 "..%" PRId64, key,
                       v->via.i64, min, max);
    *out = v->via.i64;
    return 0;
}

int cd_param_bool(const msgpack_object *map, const char *key, bool *out, char *err, size_t errlen) {
    const msgpack_object *v = param_get(map, key);
    if (!v) return 1;
    if (v->type != MSGPACK_OBJECT_BOOLEAN)
        return cd_errf(CD_EPARAMS, err, errlen, "param '%s' must be a bool, got %s", key, cd_obj_type_name(v));
    *out = v->via.boolean;
    return 0;
}
