// The streaming msgpack-RPC reader (see proto/rpc.h).
//
// Bytes are appended to one growable buffer; [start, end) is what has not been
// returned yet, and the message at start is pre-scanned (proto/rpc-scan.h) as
// its bytes arrive, so limits are enforced from the headers alone and each
// header is read once. A complete message is moved out of the buffer (the
// buffer itself is handed over when the message fills most of it, so large
// tensors are never copied), unpacked by msgpack-c in place (str/bin objects
// point into those bytes) and its envelope validated.

#include "proto/rpc.h"

#include "core/bigbuf.h"
#include "core/errors.h"
#include "core/limits.h"
#include "proto/describe.h"
#include "proto/params.h"
#include "proto/rpc-scan.h"

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

// A message of at least this many bytes that fills at least half the buffer
// takes the buffer with it instead of being copied out.
#define HANDOVER_MIN (64u << 10)
// When the buffer runs empty and has grown beyond this, it is released so an
// idle connection does not keep the memory of its largest message.
#define KEEP_MAX (256u << 10)
#define INITIAL_CAP (16u << 10)
// A message of at least this many bytes gets one buffer of its size, from
// the big-buffer cache (core/bigbuf.h: its pages stay mapped between
// messages), placed so that its first big payload starts on a PAYLOAD_ALIGN
// boundary: the client hands tensors out where they lie, 64-byte aligned.
// (The fuzz target sets it low, so its small inputs take that path too.)
#ifndef CD_RPC_BIG_MESSAGE
#define CD_RPC_BIG_MESSAGE (1u << 20)
#endif
#define PAYLOAD_ALIGN 64u

struct cd_rpc_reader {
    char *buf;            // buffered bytes; NULL until the first feed
    size_t cap;           // allocated size of buf
    size_t start;         // offset of the first byte not yet returned
    size_t end;           // offset one past the last buffered byte
    size_t max_message;   // largest message accepted, bytes
    size_t align_at;      // offset in the message at start of the payload its
                          // big buffer aligns (reader_regrow_big), or 0
    cd_rpc_scan scan;     // pre-scan state of the message at start
    bool skipping;        // the message at start is being skipped (cd_rpc_reader_skip)
    int error;            // first error (sticky: the stream cannot resync), or 0
    uint32_t error_msgid; // msgid the error can be addressed to, or UINT32_MAX
    char reason[256];     // readable reason of error
};

int cd_rpc_reader_init(cd_rpc_reader **out, size_t max_message) {
    cd_rpc_reader *r = calloc(1, sizeof *r);
    *out = r;
    if (!r) return CD_ENOMEM;
    r->max_message = max_message;
    r->error_msgid = UINT32_MAX;
    cd_rpc_scan_reset(&r->scan);
    return 0;
}

void cd_rpc_reader_free(cd_rpc_reader *r) {
    if (!r) return;
    cd_bigbuf_put(r->buf);
    free(r);
}

size_t cd_rpc_reader_buffered(const cd_rpc_reader *r) { return r->end - r->start; }

// True when the message at start is complete in the buffer (the scan may
// know where it ends, from its last header, before its payload is all in).
static bool reader_complete(const cd_rpc_reader *r) {
    return r->scan.done && r->scan.base + (r->end - r->start) >= r->scan.pos;
}

size_t cd_rpc_reader_committed(const cd_rpc_reader *r) {
    size_t n = r->end - r->start;
    if (r->error || r->skipping) return n;
    return r->scan.pos > n ? r->scan.pos : n;
}

bool cd_rpc_reader_partial(const cd_rpc_reader *r) {
    return !r->error && !r->skipping && r->end > r->start && !reader_complete(r);
}

// Records the first error of the stream (reason already in r->reason).
static int reader_fail(cd_rpc_reader *r, int code) {
    r->error = code;
    r->error_msgid = (r->scan.kind == CD_MSG_REQUEST || r->scan.kind == CD_MSG_RESPONSE) && r->scan.msgid_known
                         ? r->scan.msgid
                         : UINT32_MAX;
    return code;
}

// Skipping: drops the bytes of the message at start that the scan has passed
// (it never reads a byte before scan.pos again), and gives a large buffer
// back, so a skipped message holds at most one read and a header.
static void reader_skip_compact(cd_rpc_reader *r) {
    size_t avail = r->end - r->start;
    size_t have = r->scan.base + avail; // message bytes received so far
    size_t upto = r->scan.pos < have ? r->scan.pos : have;
    size_t drop = upto - r->scan.base;
    r->start += drop;
    r->scan.base += drop;
    size_t rest = r->end - r->start;
    if (rest == 0) {
        r->start = r->end = 0;
    } else if (r->start > 0 && rest <= INITIAL_CAP) {
        memmove(r->buf, r->buf + r->start, rest);
        r->start = 0;
        r->end = rest;
    }
    if (r->cap > KEEP_MAX && r->end <= INITIAL_CAP) {
        char *nb = r->end ? malloc(INITIAL_CAP) : NULL;
        if (r->end && !nb) return; // keep the big one; it is released later
        if (r->end) memcpy(nb, r->buf, r->end);
        cd_bigbuf_put(r->buf);
        r->buf = nb;
        r->cap = nb ? INITIAL_CAP : 0;
    }
}

// Continues the pre-scan of the message at start. Returns 1 when it is
// complete, 0 when it needs more bytes (everything buffered then belongs to
// it, and is within max_message), or a negative error (recorded).
static int reader_scan(cd_rpc_reader *r) {
    size_t avail = r->end - r->start;
    static const uint8_t none[1]; // no buffer (nothing held): NULL + 0 is undefined
    const uint8_t *at = r->buf ? (const uint8_t *)r->buf + r->start : none;
    int rc = cd_rpc_scan_run(&r->scan, at, avail, r->max_message, r->reason, sizeof r->reason);
    if (rc == 0 && r->scan.base + avail > r->max_message)
        rc = cd_errf(CD_ETOO_LARGE, r->reason, sizeof r->reason, "message exceeds max_message (%zu bytes)",
                     r->max_message);
    if (rc < 0) return reader_fail(r, rc);
    if (rc == 0 && r->skipping) reader_skip_compact(r);
    return rc;
}

void cd_rpc_reader_skip(cd_rpc_reader *r) {
    if (!cd_rpc_reader_partial(r)) return;
    r->skipping = true;
    r->align_at = 0; // nothing of it is kept: no payload to align
    reader_skip_compact(r);
}

static int reader_regrow_big(cd_rpc_reader *r, size_t need);

// Makes room for len more bytes at end. Returns 0 or CD_ENOMEM.
static int reader_reserve(cd_rpc_reader *r, size_t len) {
    if (r->start == r->end) r->start = r->end = 0;
    if (len <= r->cap - r->end) return 0;
    // A big message keeps its payload's alignment when it grows.
    if (r->align_at && r->end > r->start) return reader_regrow_big(r, r->end - r->start + len);
    if (r->start > 0) { // reclaim the bytes already returned first
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
        if (len <= r->cap - r->end) return 0;
    }
    if (len > SIZE_MAX / 2 - r->end) return CD_ENOMEM;
    size_t need = r->end + len;
    size_t cap = r->cap ? r->cap : INITIAL_CAP;
    while (cap < need) cap *= 2;
    char *nb = realloc(r->buf, cap);
    if (!nb) return CD_ENOMEM;
    r->buf = nb;
    r->cap = cap;
    return 0;
}

// Moves the bytes held (all of the message at start) into a buffer with
// room for `need` bytes of it, from the cache, placed so that message offset
// r->align_at (the first big payload's, kept for later regrows) is aligned.
// Returns 0 or CD_ENOMEM (nothing changed).
static int reader_regrow_big(cd_rpc_reader *r, size_t need) {
    // Growing again (more headers came): at least twice the room, so that a
    // message of many small pieces after a big one is not copied per piece.
    if (r->align_at && r->buf && need < 2 * (r->cap - r->start) && r->cap - r->start < SIZE_MAX / 4)
        need = 2 * (r->cap - r->start);
    if (need > SIZE_MAX - PAYLOAD_ALIGN) return CD_ENOMEM;
    char *nb = cd_bigbuf_get(need + PAYLOAD_ALIGN);
    if (!nb) return CD_ENOMEM;
    if (!r->align_at) r->align_at = r->scan.blob_at;
    size_t held = r->end - r->start;
    size_t shift = (PAYLOAD_ALIGN - ((uintptr_t)nb + r->align_at) % PAYLOAD_ALIGN) % PAYLOAD_ALIGN;
    if (held) memcpy(nb + shift, r->buf + r->start, held);
    cd_bigbuf_put(r->buf);
    r->buf = nb;
    r->cap = need + PAYLOAD_ALIGN;
    r->start = shift;
    r->end = shift + held;
    return 0;
}

// Takes the len bytes just placed at end (by a copy or a read in place).
static int reader_took(cd_rpc_reader *r, size_t len) {
    size_t old_end = r->end;
    r->end += len;
    // Scanning now (not only in next) rejects an over-limit message at the
    // read that declares it, before more of it is buffered. A protocol error
    // is left for cd_rpc_reader_next to report.
    int scan = reader_scan(r);
    if (scan == CD_ETOO_LARGE) {
        r->end = old_end;
        return CD_ETOO_LARGE;
    }
    // A big message arrives in many reads: room for all it has declared now
    // (its size is within max_message), so it is not copied again at every
    // doubling of the buffer, and the next read can go straight into it
    // (cd_rpc_reader_space). Best effort: a failure here is met again, and
    // reported, by the feed that needs the room.
    size_t committed = cd_rpc_reader_committed(r), held = r->end - r->start;
    if (scan == 0 && committed > held && r->cap - r->end < committed - held) {
        if (committed >= CD_RPC_BIG_MESSAGE && !r->skipping)
            (void)reader_regrow_big(r, committed);
        else
            (void)reader_reserve(r, committed - held);
    }
    return 0;
}

int cd_rpc_reader_feed(cd_rpc_reader *r, const char *buf, size_t len) {
    // After an error the stream is dead: later bytes are dropped unread.
    if (r->error) return r->error == CD_ETOO_LARGE ? CD_ETOO_LARGE : 0;
    if (len == 0) return 0;
    int rc = reader_reserve(r, len);
    if (rc < 0) return rc;
    memcpy(r->buf + r->end, buf, len);
    return reader_took(r, len);
}

size_t cd_rpc_reader_space(cd_rpc_reader *r, char **at) {
    *at = NULL;
    if (!cd_rpc_reader_partial(r)) return 0;
    size_t committed = cd_rpc_reader_committed(r), held = r->end - r->start;
    if (committed <= held || r->cap - r->end < committed - held) return 0;
    *at = r->buf + r->end;
    return committed - held;
}

int cd_rpc_reader_feed_in_place(cd_rpc_reader *r, size_t len) {
    if (r->error) return r->error == CD_ETOO_LARGE ? CD_ETOO_LARGE : 0;
    if (len == 0) return 0;
    assert(len <= r->cap - r->end);
    return reader_took(r, len);
}

// Checks that the decoded msgid is a uint32; who is "request" or "response".
static int check_msgid(const msgpack_object *o, const char *who, char *err, size_t errlen) {
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 <= UINT32_MAX) return 0;
        return cd_errf(CD_EPROTOCOL, err, errlen, "%s msgid %" PRIu64 " is larger than %" PRIu32, who, o->via.u64,
                       UINT32_MAX);
    }
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return cd_errf(CD_EPROTOCOL, err, errlen, "%s msgid %" PRId64 " is negative", who, o->via.i64);
    return cd_errf(CD_EPROTOCOL, err, errlen, "%s msgid must be an unsigned 32-bit integer, got %s", who,
                   cd_obj_type_name(o));
}

// Checks a request's method name: a str, or a bin of valid UTF-8 (some
// clients send names as bin), of at most CD_MAX_METHOD bytes.
static int check_method(const msgpack_object *o, const char *who, char *err, size_t errlen) {
    const char *s;
    size_t n;
    if (!cd_obj_text(o, &s, &n))
        return cd_errf(CD_EPROTOCOL, err, errlen, "%s method must be a str, got %s%s", who, cd_obj_type_name(o),
                       o->type == MSGPACK_OBJECT_BIN ? " that is not valid UTF-8" : "");
    if (n > CD_MAX_METHOD)
        return cd_errf(CD_EPROTOCOL, err, errlen, "%s method is %zu bytes long, the limit is %d", who, n,
                       CD_MAX_METHOD);
    return 0;
}

// A notification's method: any str or bin. Nothing answers a notification
// and no method takes one, so its name only has to be a name-like value;
// whatever it says, the notification is counted and ignored.
static int check_notify_method(const msgpack_object *o, char *err, size_t errlen) {
    if (o->type != MSGPACK_OBJECT_STR && o->type != MSGPACK_OBJECT_BIN)
        return cd_errf(CD_EPROTOCOL, err, errlen, "notification method must be a str, got %s", cd_obj_type_name(o));
    return 0;
}

static int check_params(const msgpack_object *o, const char *who, char *err, size_t errlen) {
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return cd_errf(CD_EPROTOCOL, err, errlen, "%s params must be an array, got %s", who, cd_obj_type_name(o));
    return 0;
}

// Validates the envelope of a decoded message and fills the public fields of
// m. *msgid gets the msgid as soon as it is known to be one (even when a later
// field is bad). Returns 0 or CD_EPROTOCOL with a reason.
static int msg_envelope(cd_rpc_msg *m, uint32_t *msgid, char *err, size_t errlen) {
    const msgpack_object *top = &m->unpacked_.data;
    if (top->type != MSGPACK_OBJECT_ARRAY) // the pre-scan rules this out
        return cd_errf(CD_EPROTOCOL, err, errlen, "a msgpack-RPC message must be an array, got %s",
                       cd_obj_type_name(top));
    const msgpack_object *e = top->via.array.ptr;
    uint32_t n = top->via.array.size;
    if (n < 3 || n > 4)
        return cd_errf(CD_EPROTOCOL, err, errlen,
                       "a msgpack-RPC message must be an array of 3 or 4 elements, "
                       "got %" PRIu32,
                       n);
    if (e[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || e[0].via.u64 > 2) {
        if (e[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            return cd_errf(CD_EPROTOCOL, err, errlen, "message type must be 0, 1 or 2, got %" PRIu64, e[0].via.u64);
        if (e[0].type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return cd_errf(CD_EPROTOCOL, err, errlen, "message type must be 0, 1 or 2, got %" PRId64, e[0].via.i64);
        return cd_errf(CD_EPROTOCOL, err, errlen, "message type must be 0, 1 or 2, got %s", cd_obj_type_name(&e[0]));
    }
    m->kind = (cd_msg_kind)e[0].via.u64;
    if (m->kind != CD_MSG_NOTIFY && e[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER && e[1].via.u64 <= UINT32_MAX)
        *msgid = (uint32_t)e[1].via.u64;

    int rc;
    switch (m->kind) {
    case CD_MSG_REQUEST:
        if (n != 4)
            return cd_errf(CD_EPROTOCOL, err, errlen, "a request must be an array of 4 elements, got %" PRIu32, n);
        if ((rc = check_msgid(&e[1], "request", err, errlen)) < 0) return rc;
        if ((rc = check_method(&e[2], "request", err, errlen)) < 0) return rc;
        if ((rc = check_params(&e[3], "request", err, errlen)) < 0) return rc;
        m->msgid = (uint32_t)e[1].via.u64;
        cd_obj_text(&e[2], &m->method, &m->method_len); // checked above
        m->params = e[3];
        return 0;
    case CD_MSG_RESPONSE:
        if (n != 4)
            return cd_errf(CD_EPROTOCOL, err, errlen, "a response must be an array of 4 elements, got %" PRIu32, n);
        if ((rc = check_msgid(&e[1], "response", err, errlen)) < 0) return rc;
        m->msgid = (uint32_t)e[1].via.u64;
        m->error = e[2];
        m->result = e[3];
        return 0;
    case CD_MSG_NOTIFY:
        if (n != 3)
            return cd_errf(CD_EPROTOCOL, err, errlen, "a notification must be an array of 3 elements, got %" PRIu32, n);
        if ((rc = check_notify_method(&e[1], err, errlen)) < 0) return rc;
        if ((rc = check_params(&e[2], "notification", err, errlen)) < 0) return rc;
        if (e[1].type == MSGPACK_OBJECT_BIN) {
            m->method = e[1].via.bin.ptr;
            m->method_len = e[1].via.bin.size;
        } else {
            m->method = e[1].via.str.ptr;
            m->method_len = e[1].via.str.size;
        }
        m->params = e[2];
        return 0;
    }
    return CD_EPROTOCOL;
}

// Moves the complete message of n bytes at start out of the buffer: *owner
// gets the allocation to free, *bytes the message's first byte. Returns 0 or
// CD_ENOMEM (nothing consumed then).
static int reader_take(cd_rpc_reader *r, size_t n, char **owner, const char **bytes) {
    size_t rest = r->end - r->start - n;
    // A big message's own buffer (reader_regrow_big) always goes with it.
    if (n >= HANDOVER_MIN && (n >= r->cap / 2 || r->align_at)) {
        char *nb = NULL;
        size_t ncap = 0;
        if (rest > 0) {
            ncap = rest > INITIAL_CAP ? rest : INITIAL_CAP;
            nb = malloc(ncap);
            if (!nb) return CD_ENOMEM;
            memcpy(nb, r->buf + r->start + n, rest);
        }
        *owner = r->buf;
        *bytes = r->buf + r->start;
        r->buf = nb;
        r->cap = ncap;
        r->start = 0;
        r->end = rest;
        return 0;
    }
    char *copy = malloc(n);
    if (!copy) return CD_ENOMEM;
    memcpy(copy, r->buf + r->start, n);
    *owner = copy;
    *bytes = copy;
    r->start += n;
    if (r->start == r->end) {
        r->start = r->end = 0;
        if (r->cap > KEEP_MAX) {
            cd_bigbuf_put(r->buf);
            r->buf = NULL;
            r->cap = 0;
        }
    }
    return 0;
}

int cd_rpc_reader_next(cd_rpc_reader *r, cd_rpc_msg *msg, uint32_t *msgid_out, char *err, size_t errlen) {
    memset(msg, 0, sizeof *msg);
    uint32_t msgid = UINT32_MAX;
    if (msgid_out) *msgid_out = UINT32_MAX;
    if (err && errlen) err[0] = '\0';
    if (!r->error) {
        int rc = reader_scan(r);
        if (rc == 0) return 0;
    }
    if (r->error) {
        if (msgid_out) *msgid_out = r->error_msgid;
        cd_errf(r->error, err, errlen, "%s", r->reason);
        return r->error;
    }

    if (r->skipping) {
        // The skipped message has passed: drop what is left of it.
        r->start += r->scan.pos - r->scan.base;
        if (r->start == r->end) r->start = r->end = 0;
        msg->kind = r->scan.kind >= 0 && r->scan.kind <= 2 ? (cd_msg_kind)r->scan.kind : CD_MSG_REQUEST;
        if (msgid_out && r->scan.kind == CD_MSG_REQUEST && r->scan.msgid_known) *msgid_out = r->scan.msgid;
        r->skipping = false;
        cd_rpc_scan_reset(&r->scan);
        r->align_at = 0;
        return CD_RPC_SKIPPED;
    }

    size_t n = r->scan.pos;
    char *owner;
    const char *bytes;
    int rc = reader_take(r, n, &owner, &bytes);
    if (rc < 0) return cd_errf(rc, err, errlen, "out of memory for a %zu-byte message", n);
    cd_rpc_scan_reset(&r->scan);
    r->align_at = 0;
    msg->alloc_ = owner;
    msg->bytes_ = bytes;
    msg->nbytes = n;

    // The pre-scan has checked every length, so msgpack-c allocates at most
    // one object per declared element and never fails on syntax.
    msgpack_unpacked_init(&msg->unpacked_);
    size_t off = 0;
    msgpack_unpack_return ur = msgpack_unpack_next(&msg->unpacked_, bytes, n, &off);
    if (ur != MSGPACK_UNPACK_SUCCESS || off != n) {
        cd_rpc_msg_free(msg);
        if (ur == MSGPACK_UNPACK_NOMEM_ERROR) {
            cd_errf(CD_ENOMEM, r->reason, sizeof r->reason, "out of memory decoding a %zu-byte message", n);
            r->error = CD_ENOMEM;
        } else {
            cd_errf(CD_EPROTOCOL, r->reason, sizeof r->reason,
                    "msgpack decoder rejected the message (status %d, %zu of %zu "
                    "bytes)",
                    (int)ur, off, n);
            r->error = CD_EPROTOCOL;
        }
        r->error_msgid = UINT32_MAX;
        cd_errf(r->error, err, errlen, "%s", r->reason);
        return r->error;
    }

    rc = msg_envelope(msg, &msgid, r->reason, sizeof r->reason);
    if (msgid_out) *msgid_out = msgid;
    if (rc < 0) {
        cd_rpc_msg_free(msg);
        r->error = rc;
        r->error_msgid = msgid;
        cd_errf(rc, err, errlen, "%s", r->reason);
        return rc;
    }
    if (msg->kind == CD_MSG_NOTIFY && msgid_out) *msgid_out = UINT32_MAX;
    return 1;
}

void cd_rpc_msg_free(cd_rpc_msg *msg) {
    if (!msg) return;
    msgpack_unpacked_destroy(&msg->unpacked_);
    cd_bigbuf_put(msg->alloc_);
    memset(msg, 0, sizeof *msg);
}

const msgpack_object *cd_rpc_params_map(const cd_rpc_msg *msg) {
    if (msg->kind != CD_MSG_REQUEST && msg->kind != CD_MSG_NOTIFY) return NULL;
    const msgpack_object *p = &msg->params;
    if (p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size != 1) return NULL;
    const msgpack_object *m = &p->via.array.ptr[0];
    return m->type == MSGPACK_OBJECT_MAP ? m : NULL;
}
