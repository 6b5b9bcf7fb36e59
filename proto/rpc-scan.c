// The resumable pre-scan of one msgpack-RPC message (see proto/rpc-scan.h).

#include "proto/rpc-scan.h"

#include "core/errors.h"
#include "proto/describe.h"

#include <inttypes.h>
#include <string.h>

// What a leading byte announces.
typedef enum {
    HDR_FIXED, // a value of a fixed total size (ints, floats, nil, bool, fixext)
    HDR_BLOB,  // str, bin or ext: header, then len payload bytes
    HDR_ARRAY, // array header, then len elements
    HDR_MAP,   // map header, then 2*len elements
    HDR_BAD,   // 0xc1, never used by msgpack
} hdr_kind;

typedef struct {
    hdr_kind kind;
    unsigned size;     // bytes of the header (the whole value for HDR_FIXED)
    unsigned lenbytes; // big-endian length bytes right after the tag byte (0: in the tag)
    uint32_t len;      // length held in the tag itself (fix* forms)
    const char *what;  // type name for messages
} hdr_info;

static hdr_info hdr_classify(uint8_t b) {
    if (b <= 0x7f) return (hdr_info){HDR_FIXED, 1, 0, 0, "int"};
    if (b <= 0x8f) return (hdr_info){HDR_MAP, 1, 0, b & 0x0fu, "map"};
    if (b <= 0x9f) return (hdr_info){HDR_ARRAY, 1, 0, b & 0x0fu, "array"};
    if (b <= 0xbf) return (hdr_info){HDR_BLOB, 1, 0, b & 0x1fu, "str"};
    if (b >= 0xe0) return (hdr_info){HDR_FIXED, 1, 0, 0, "int"};
    switch (b) {
    case 0xc0: return (hdr_info){HDR_FIXED, 1, 0, 0, "nil"};
    case 0xc1: return (hdr_info){HDR_BAD, 1, 0, 0, "reserved byte"};
    case 0xc2:
    case 0xc3: return (hdr_info){HDR_FIXED, 1, 0, 0, "bool"};
    case 0xc4: return (hdr_info){HDR_BLOB, 2, 1, 0, "bin"};
    case 0xc5: return (hdr_info){HDR_BLOB, 3, 2, 0, "bin"};
    case 0xc6: return (hdr_info){HDR_BLOB, 5, 4, 0, "bin"};
    case 0xc7: return (hdr_info){HDR_BLOB, 3, 1, 0, "ext"}; // + type byte
    case 0xc8: return (hdr_info){HDR_BLOB, 4, 2, 0, "ext"};
    case 0xc9: return (hdr_info){HDR_BLOB, 6, 4, 0, "ext"};
    case 0xca: return (hdr_info){HDR_FIXED, 5, 0, 0, "float"};
    case 0xcb: return (hdr_info){HDR_FIXED, 9, 0, 0, "float"};
    case 0xcc: return (hdr_info){HDR_FIXED, 2, 0, 0, "int"};
    case 0xcd: return (hdr_info){HDR_FIXED, 3, 0, 0, "int"};
    case 0xce: return (hdr_info){HDR_FIXED, 5, 0, 0, "int"};
    case 0xcf: return (hdr_info){HDR_FIXED, 9, 0, 0, "int"};
    case 0xd0: return (hdr_info){HDR_FIXED, 2, 0, 0, "int"};
    case 0xd1: return (hdr_info){HDR_FIXED, 3, 0, 0, "int"};
    case 0xd2: return (hdr_info){HDR_FIXED, 5, 0, 0, "int"};
    case 0xd3: return (hdr_info){HDR_FIXED, 9, 0, 0, "int"};
    case 0xd4: return (hdr_info){HDR_FIXED, 3, 0, 0, "ext"};
    case 0xd5: return (hdr_info){HDR_FIXED, 4, 0, 0, "ext"};
    case 0xd6: return (hdr_info){HDR_FIXED, 6, 0, 0, "ext"};
    case 0xd7: return (hdr_info){HDR_FIXED, 10, 0, 0, "ext"};
    case 0xd8: return (hdr_info){HDR_FIXED, 18, 0, 0, "ext"};
    case 0xd9: return (hdr_info){HDR_BLOB, 2, 1, 0, "str"};
    case 0xda: return (hdr_info){HDR_BLOB, 3, 2, 0, "str"};
    case 0xdb: return (hdr_info){HDR_BLOB, 5, 4, 0, "str"};
    case 0xdc: return (hdr_info){HDR_ARRAY, 3, 2, 0, "array"};
    case 0xdd: return (hdr_info){HDR_ARRAY, 5, 4, 0, "array"};
    case 0xde: return (hdr_info){HDR_MAP, 3, 2, 0, "map"};
    default: return (hdr_info){HDR_MAP, 5, 4, 0, "map"}; // 0xdf
    }
}

static uint64_t read_be(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

// The value of a non-negative integer at p (all header bytes present), or -1
// when the value there is something else (or does not fit an int64).
static int64_t read_uint(const uint8_t *p) {
    uint8_t b = p[0];
    if (b <= 0x7f) return b;
    if (b >= 0xcc && b <= 0xcf) {
        uint64_t v = read_be(p + 1, 1u << (b - 0xcc));
        return v > INT64_MAX ? -1 : (int64_t)v;
    }
    return -1;
}

void cd_rpc_scan_reset(cd_rpc_scan *s) {
    memset(s, 0, sizeof *s);
    s->kind = -1;
}

// Marks the value that just ended as one element of its container, closing
// every container that it completes; the message is done when none is open.
static void scan_complete(cd_rpc_scan *s) {
    for (;;) {
        if (s->depth == 0) {
            s->done = true;
            return;
        }
        if (--s->left[s->depth - 1] > 0) return;
        s->depth--;
    }
}

int cd_rpc_scan_run(cd_rpc_scan *s, const uint8_t *p, size_t avail, size_t max_message, char *err, size_t errlen) {
    while (!s->done) {
        size_t pos = s->pos;
        size_t rel = pos - s->base; // where pos is in p (pos >= base: see rpc-scan.h)
        if (rel >= avail) return 0;
        hdr_info h = hdr_classify(p[rel]);
        if (h.kind == HDR_BAD)
            return cd_errf(CD_EPROTOCOL, err, errlen, "byte 0xc1 at offset %zu is not valid msgpack", pos);
        if (pos == 0 && h.kind != HDR_ARRAY)
            return cd_errf(CD_EPROTOCOL, err, errlen, "a msgpack-RPC message must be an array, got %s", h.what);
        if (h.size > max_message || pos > max_message - h.size)
            return cd_errf(CD_ETOO_LARGE, err, errlen, "message exceeds max_message (%zu bytes)", max_message);
        // The limits are checked as soon as the length is readable (an ext's
        // type byte may still be missing); an incomplete header is read again
        // whole on the next call.
        if (avail - rel < 1 + h.lenbytes) return 0;
        uint64_t len = h.lenbytes ? read_be(p + rel + 1, h.lenbytes) : h.len;
        size_t room = max_message - pos - h.size; // bytes the message may still have
        uint64_t elems = 0;

        if (h.kind == HDR_BLOB && len > room)
            return cd_errf(CD_ETOO_LARGE, err, errlen,
                           "%s of %" PRIu64 " bytes at offset %zu exceeds max_message "
                           "(%zu bytes)",
                           h.what, len, pos, max_message);
        if (h.kind == HDR_ARRAY || h.kind == HDR_MAP) {
            if (pos == 0 && len != 3 && len != 4)
                return cd_errf(CD_EPROTOCOL, err, errlen,
                               "a msgpack-RPC message must be an array of 3 or 4 "
                               "elements, got %" PRIu64,
                               len);
            if (len > CD_MAX_CONTAINER)
                return cd_errf(CD_ETOO_LARGE, err, errlen,
                               "%s of %" PRIu64 " elements at offset %zu exceeds the "
                               "limit of %d",
                               h.what, len, pos, CD_MAX_CONTAINER);
            elems = h.kind == HDR_MAP ? 2 * len : len;
            if (elems > room)
                return cd_errf(CD_ETOO_LARGE, err, errlen,
                               "%s of %" PRIu64 " elements at offset %zu cannot fit in "
                               "max_message (%zu bytes)",
                               h.what, len, pos, max_message);
            if (s->depth >= CD_MAX_DEPTH)
                return cd_errf(CD_ETOO_LARGE, err, errlen, "nesting deeper than %d at offset %zu", CD_MAX_DEPTH, pos);
            if (s->elements + elems > CD_MAX_ELEMENTS)
                return cd_errf(CD_ETOO_LARGE, err, errlen, "message declares more than %u elements",
                               (unsigned)CD_MAX_ELEMENTS);
        }

        if (avail - rel < h.size) return 0;

        // Remember the envelope's kind and msgid so errors can be addressed.
        if (s->depth == 1 && s->left[0] + 2 > s->top_len) {
            int64_t v = read_uint(p + rel);
            if (s->left[0] == s->top_len) {
                s->kind = v;
            } else if (v >= 0 && v <= UINT32_MAX) {
                s->msgid = (uint32_t)v;
                s->msgid_known = true;
            }
        }

        if (h.kind == HDR_ARRAY || h.kind == HDR_MAP) {
            s->pos = pos + h.size;
            s->elements += elems;
            if (pos == 0) s->top_len = (uint32_t)len;
            if (elems > 0) {
                s->left[s->depth++] = (uint32_t)elems;
                continue;
            }
        } else {
            s->pos = pos + h.size + (h.kind == HDR_BLOB ? (size_t)len : 0);
            if (h.kind == HDR_BLOB) s->blob_at = pos + h.size;
        }
        scan_complete(s);
    }
    return s->base + avail >= s->pos ? 1 : 0;
}
