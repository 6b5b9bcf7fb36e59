#ifndef CD_TESTS_TEST_PROTO_UTIL_H
#define CD_TESTS_TEST_PROTO_UTIL_H

// Helpers shared by the tests of proto/ (tests/unit/test-proto-*.c): building
// raw msgpack bytes by hand, packing with msgpack-c, and running bytes
// through a reader. Header-only (static inline) so each test file stays
// self-contained.

#include "core/errors.h"
#include "core/limits.h"
#include "proto/rpc.h"
#include "tests/unit/check.h"

#include <msgpack.h>
#include <stdarg.h>
#include <time.h>

// A growable byte string for hand-made (possibly malformed) messages.
typedef struct {
    char *p;
    size_t n, cap;
} tp_bytes;

static inline void tp_put(tp_bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        CHECK(b->p != NULL);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

// Appends bytes given as ints, e.g. tp_raw(&b, 3, 0x94, 0x00, 0x01).
static inline void tp_raw(tp_bytes *b, int count, ...) {
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++) {
        unsigned char c = (unsigned char)va_arg(ap, int);
        tp_put(b, &c, 1);
    }
    va_end(ap);
}

// Appends a tag byte followed by a big-endian 32-bit length (a "5-byte header").
static inline void tp_hdr32(tp_bytes *b, unsigned char tag, uint32_t len) {
    tp_raw(b, 5, tag, (int)(len >> 24), (int)((len >> 16) & 0xff), (int)((len >> 8) & 0xff), (int)(len & 0xff));
}

// Appends a fixstr (len < 32).
static inline void tp_fixstr(tp_bytes *b, const char *s) {
    size_t n = strlen(s);
    CHECK(n < 32);
    tp_raw(b, 1, 0xa0 | (int)n);
    tp_put(b, s, n);
}

// Appends the start of a request up to its params: [0, msgid, method, ...
// with msgid < 128 and a short method.
static inline void tp_request_head(tp_bytes *b, int msgid, const char *method) {
    CHECK(msgid >= 0 && msgid < 128);
    tp_raw(b, 3, 0x94, 0x00, msgid);
    tp_fixstr(b, method);
}

static inline void tp_bytes_free(tp_bytes *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

// A msgpack-c packer writing into an sbuffer.
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} tp_pack;

static inline void tp_pack_init(tp_pack *t) {
    msgpack_sbuffer_init(&t->sb);
    msgpack_packer_init(&t->pk, &t->sb, msgpack_sbuffer_write);
}

static inline void tp_pack_free(tp_pack *t) { msgpack_sbuffer_destroy(&t->sb); }

static inline void tp_pack_str(tp_pack *t, const char *s) {
    size_t n = strlen(s);
    CHECK_EQ(msgpack_pack_str(&t->pk, n), 0);
    CHECK_EQ(msgpack_pack_str_body(&t->pk, s, n), 0);
}

// Feeds len bytes in chunks of chunk bytes; returns the first non-zero
// feed result (or 0).
static inline int tp_feed(cd_rpc_reader *r, const char *p, size_t len, size_t chunk) {
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        int rc = cd_rpc_reader_feed(r, p + off, n);
        if (rc) return rc;
    }
    return 0;
}

// Runs bytes through a fresh reader (max_message bytes), fed whole, and
// returns the result of the first cd_rpc_reader_next. The message (on 1), the
// msgid reported and the reason land in the out-parameters (may be NULL).
typedef struct {
    int rc;         // result of cd_rpc_reader_next
    int feed_rc;    // result of cd_rpc_reader_feed
    uint32_t msgid; // msgid reported by next
    char err[256];  // reason reported by next
} tp_result;

static inline tp_result tp_decode_one(const char *p, size_t len, size_t max_message) {
    tp_result res;
    memset(&res, 0, sizeof res);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, max_message), 0);
    res.feed_rc = cd_rpc_reader_feed(r, p, len);
    cd_rpc_msg msg;
    res.rc = cd_rpc_reader_next(r, &msg, &res.msgid, res.err, sizeof res.err);
    if (res.rc == 1) cd_rpc_msg_free(&msg);
    if (res.rc < 0) CHECK(res.err[0] != '\0'); // every error has a reason
    cd_rpc_reader_free(r);
    return res;
}

// Asserts that bytes decode to exactly code; prints the reason.
#define TP_EXPECT(bytes, len, code)                                           \
    do {                                                                      \
        tp_result r_ = tp_decode_one((bytes), (len), CD_MAX_MESSAGE_DEFAULT); \
        if (r_.rc != (code)) fprintf(stderr, "reason: %s\n", r_.err);         \
        CHECK_EQ(r_.rc, (code));                                              \
    } while (0)

static inline double tp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif // CD_TESTS_TEST_PROTO_UTIL_H
