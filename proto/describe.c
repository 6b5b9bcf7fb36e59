// Readable reasons for rejected input (see proto/describe.h).

#include "proto/describe.h"

#include <stdio.h>
#include <string.h>

const char *cd_obj_type_name(const msgpack_object *o) {
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "int";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "float";
    case MSGPACK_OBJECT_STR: return "str";
    case MSGPACK_OBJECT_BIN: return "bin";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_EXT: return "ext";
    }
    return "unknown";
}

static size_t sanitize_width(unsigned char c) { return (c >= 0x20 && c < 0x7f && c != '\\') ? 1 : 4; }

char *cd_sanitize(char *dst, size_t dstlen, const char *src, size_t n) {
    if (!dst || dstlen == 0) return dst;
    size_t room = dstlen - 1, total = 0;
    for (size_t i = 0; i < n && total <= room; i++) total += sanitize_width((unsigned char)src[i]);
    // When it does not all fit, stop early enough to leave room for "...".
    size_t limit = total <= room ? room : (room >= 3 ? room - 3 : 0);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        size_t w = sanitize_width(c);
        if (o + w > limit) break;
        if (w == 1) {
            dst[o++] = (char)c;
        } else {
            snprintf(dst + o, 5, "\\x%02x", c);
            o += 4;
        }
    }
    if (total > room && room >= 3) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
    return dst;
}
