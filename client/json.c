// msgpack -> JSON text for libconvd (convd_to_json): used by convd_stats and
// by convctl --json.

#include "client/client-internal.h"
#include "core/errors.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} jbuf;

static void jb_put(jbuf *b, const char *p, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void jb_puts(jbuf *b, const char *p) { jb_put(b, p, strlen(p)); }

// Length of the valid UTF-8 sequence at p (n bytes left), or 0 if invalid.
static size_t utf8_len(const unsigned char *p, size_t n) {
    if (p[0] < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if ((p[0] & 0xe0) == 0xc0)
        len = 2, cp = p[0] & 0x1f;
    else if ((p[0] & 0xf0) == 0xe0)
        len = 3, cp = p[0] & 0x0f;
    else if ((p[0] & 0xf8) == 0xf0)
        len = 4, cp = p[0] & 0x07;
    else
        return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < minv[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

// A JSON string; invalid UTF-8 bytes become U+FFFD.
static void jb_str(jbuf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    jb_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char ch = p[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            jb_put(b, e, 2);
            i++;
        } else if (ch < 0x20) {
            char e[8];
            const char *named = ch == '\n' ? "\\n" : ch == '\t' ? "\\t" : ch == '\r' ? "\\r" : NULL;
            if (named)
                jb_puts(b, named);
            else {
                snprintf(e, sizeof e, "\\u%04x", ch);
                jb_puts(b, e);
            }
            i++;
        } else {
            size_t l = utf8_len(p + i, n - i);
            if (l == 0) {
                jb_puts(b, "\\ufffd");
                i++;
            } else {
                jb_put(b, s + i, l);
                i += l;
            }
        }
    }
    jb_put(b, "\"", 1);
}

static void jb_base64(jbuf *b, const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    jb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        char q[4] = {tab[(v >> 18) & 63], tab[(v >> 12) & 63], i + 1 < n ? tab[(v >> 6) & 63] : '=',
                     i + 2 < n ? tab[v & 63] : '='};
        jb_put(b, q, 4);
    }
    jb_put(b, "\"", 1);
}

static void jb_num(jbuf *b, double v, int single) {
    if (!isfinite(v)) {
        jb_puts(b, "null");
        return;
    }
    char t[40];
    snprintf(t, sizeof t, single ? "%.9g" : "%.17g", v);
    // %g may print "1e+20" (valid JSON) or an integer-looking "3"; both parse.
    jb_puts(b, t);
}

static void jb_value(jbuf *b, const msgpack_object *o);

// A map key: strings as they are, anything else as its JSON text quoted.
static void jb_key(jbuf *b, const msgpack_object *k) {
    if (k->type == MSGPACK_OBJECT_STR) {
        jb_str(b, k->via.str.ptr, k->via.str.size);
        return;
    }
    jbuf t = {0};
    jb_value(&t, k);
    if (t.oom) b->oom = 1;
    jb_str(b, t.s ? t.s : "", t.len);
    free(t.s);
}

static void jb_value(jbuf *b, const msgpack_object *o) {
    char t[32];
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: jb_puts(b, "null"); break;
    case MSGPACK_OBJECT_BOOLEAN: jb_puts(b, o->via.boolean ? "true" : "false"); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        snprintf(t, sizeof t, "%" PRIu64, o->via.u64);
        jb_puts(b, t);
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        snprintf(t, sizeof t, "%" PRId64, o->via.i64);
        jb_puts(b, t);
        break;
    case MSGPACK_OBJECT_FLOAT32: jb_num(b, o->via.f64, 1); break;
    case MSGPACK_OBJECT_FLOAT64: jb_num(b, o->via.f64, 0); break;
    case MSGPACK_OBJECT_STR: jb_str(b, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_BIN: jb_base64(b, (const unsigned char *)o->via.bin.ptr, o->via.bin.size); break;
    case MSGPACK_OBJECT_EXT: jb_base64(b, (const unsigned char *)o->via.ext.ptr, o->via.ext.size); break;
    case MSGPACK_OBJECT_ARRAY:
        jb_put(b, "[", 1);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i) jb_put(b, ", ", 2);
            jb_value(b, &o->via.array.ptr[i]);
        }
        jb_put(b, "]", 1);
        break;
    case MSGPACK_OBJECT_MAP:
        jb_put(b, "{", 1);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            if (i) jb_put(b, ", ", 2);
            jb_key(b, &o->via.map.ptr[i].key);
            jb_put(b, ": ", 2);
            jb_value(b, &o->via.map.ptr[i].val);
        }
        jb_put(b, "}", 1);
        break;
    default: jb_puts(b, "null"); break;
    }
}

int convd_to_json(const void *msgpack, size_t len, char **json) {
    *json = NULL;
    if (!msgpack || len == 0) return cd_client_fail(CD_EPROTOCOL, "no msgpack value");
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    msgpack_unpack_return ur = msgpack_unpack_next(&up, msgpack, len, &off);
    if (ur != MSGPACK_UNPACK_SUCCESS) {
        msgpack_unpacked_destroy(&up);
        if (ur == MSGPACK_UNPACK_NOMEM_ERROR) return cd_client_fail(CD_ENOMEM, "out of memory");
        return cd_client_fail(CD_EPROTOCOL, "not a complete msgpack value");
    }
    jbuf b = {0};
    jb_value(&b, &up.data);
    msgpack_unpacked_destroy(&up);
    if (b.oom || !b.s) {
        free(b.s);
        return cd_client_fail(CD_ENOMEM, "out of memory");
    }
    *json = b.s;
    return 0;
}
