// libFuzzer target for the wire: everything the daemon does between the bytes
// of a connection and a validated request, without a socket, loop or model:
//
//   - the streaming msgpack-RPC reader (proto/rpc-reader.c, rpc-scan.c) fed in
//     chunks, with its limits, and the budget skip the daemon uses
//     (cd_rpc_reader_skip) when a message does not fit --max-buffered; built
//     with CD_RPC_BIG_MESSAGE low, so messages of a few hundred bytes get the
//     aligned buffer of a big one (and the tensors decoded are views into it);
//   - the request envelope: method lookup, the params map (daemon/validate.c);
//   - infer's validation against a model signature (daemon/validate.c: keys,
//     tensor decoding and checks, batch, outputs, reply size, timeout), with
//     its shared-memory parts (region tensors, 'into': proto/region.c);
//   - the params of region_register / region_unregister (a region name);
//   - the codecs in reverse: every decoded input tensor is packed again (also
//     as a writev reply packs it, daemon/reply.c) and decoded back, every request re-packed and read back, and every error
//     the daemon would send packed and read back with its code.
//
// Built only by `make fuzz` (clang); `make fuzz SECONDS=N` runs it with the
// seeds of tests/fuzz/make-corpus.py --rpc (generated, never committed) and
// tests/fuzz/corpus:
//
//   make fuzz && python3 tests/fuzz/make-corpus.py --rpc /tmp/seeds
//   build/bin/fuzz-rpc-reader -max_total_time=60 /tmp/corpus /tmp/seeds
//
// Input: the first byte picks the read size (bits 0-5, so one input explores
// many splits), the message limit (bit 6) and whether an incomplete message
// over 64 bytes is given up as the budget would (bit 7); the rest is the byte
// stream. A request's msgid picks the model signature it is checked against.
//
// Anything outside the documented results aborts: a reader status other than
// 0/1/skipped/E_PROTOCOL/E_TOO_LARGE, a validation code other than those
// validate.h lists, an error message that is not valid UTF-8, a validated
// request that breaks what the workers rely on, a round trip that changes a
// value.

#include "core/errors.h"
#include "core/limits.h"
#include "daemon/reply.h"
#include "daemon/stats.h"
#include "daemon/validate.h"
#include "proto/params.h"
#include "proto/region.h"
#include "proto/rpc.h"
#include "proto/tensor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                            \
    do {                                                                                    \
        if (!(c)) {                                                                         \
            fprintf(stderr, "fuzz-rpc-reader: check failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

// ---- model signatures ---------------------------------------------------------

static const cd_io_desc img_x = {"x", CD_DTYPE_F32, 4, {1, 3, 8, 8}};
static const cd_io_desc img_y = {"y", CD_DTYPE_F32, 2, {1, 10}};
static const cd_io_desc two_a = {"a", CD_DTYPE_F32, 2, {1, 4}};
static const cd_io_desc two_b = {"b", CD_DTYPE_I64, 2, {1, 2}};
static const cd_io_desc two_s = {"s", CD_DTYPE_F32, 2, {1, 4}};
static const cd_io_desc two_big = {"big", CD_DTYPE_F32, 2, {1, 100000}};
static const cd_io_desc vec_in = {"in", CD_DTYPE_U8, 1, {1}};
static const cd_io_desc vec_out = {"out", CD_DTYPE_F32, 1, {1}};
static const cd_io_desc deep_in = {"t", CD_DTYPE_F16, 8, {1, 2, 1, 2, 1, 2, 1, 2}};
static const cd_io_desc deep_huge = {"h", CD_DTYPE_F32, 3, {1, 1 << 20, 1 << 12}};

static const cd_infer_sig sigs[] = {
    // an image classifier
    {.model = "img", .nin = 1, .nout = 1, .in = {&img_x}, .out = {&img_y}, .max_batch = 8, .max_reply = 64 << 20},
    // two inputs of two dtypes; a large second output and a small reply limit
    {.model = "two",
     .nin = 2,
     .nout = 2,
     .in = {&two_a, &two_b},
     .out = {&two_s, &two_big},
     .max_batch = 4096,
     .max_reply = 1 << 20},
    // rank 1: the batch is the whole shape; one item at most
    {.model = "vec", .nin = 1, .nout = 1, .in = {&vec_in}, .out = {&vec_out}, .max_batch = 1, .max_reply = 64 << 20},
    // rank 8, f16; an output over one msgpack bin (4 GiB) at any batch
    {.model = "deep",
     .nin = 1,
     .nout = 1,
     .in = {&deep_in},
     .out = {&deep_huge},
     .max_batch = 64,
     .max_reply = UINT64_MAX},
};
#define NSIGS (sizeof sigs / sizeof sigs[0])

// ---- helpers --------------------------------------------------------------------

static bool is_code(int rc, const int *codes, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (rc == codes[i]) return true;
    return false;
}

// Reads one whole message from bytes with a fresh reader; returns its status.
static int read_one(const char *bytes, size_t len, cd_rpc_msg *m) {
    cd_rpc_reader *r;
    if (cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT) < 0) abort();
    CHECK(cd_rpc_reader_feed(r, bytes, len) == 0);
    char err[256];
    int rc = cd_rpc_reader_next(r, m, NULL, err, sizeof err);
    if (rc == 1) CHECK(cd_rpc_reader_buffered(r) == 0);
    cd_rpc_reader_free(r);
    return rc;
}

// What the daemon sends for an error: packed, read back, same msgid and code.
static void check_error_reply(uint32_t msgid, int status, const char *why) {
    CHECK(why[0] != '\0');
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    CHECK(cd_rpc_pack_response_error(&pk, msgid, status, why) == 0);
    cd_rpc_msg m;
    CHECK(read_one(sb.data, sb.size, &m) == 1);
    CHECK(m.kind == CD_MSG_RESPONSE && m.msgid == msgid);
    char back[256];
    CHECK(cd_rpc_error_decode(&m.error, back, sizeof back) == status);
    // every message on the wire is valid UTF-8, whatever the reason echoed
    const msgpack_object *text = cd_map_get(&m.error, "message");
    CHECK(text && text->type == MSGPACK_OBJECT_STR);
    CHECK(cd_utf8_valid(text->via.str.ptr, text->via.str.size));
    cd_rpc_msg_free(&m);
    msgpack_sbuffer_destroy(&sb);
}

// A decoded tensor packed again and decoded back is the same tensor, and the
// packed size stays within cd_tensor_packed_size.
static void check_tensor_round_trip(const cd_tensor *t) {
    CHECK(t->rank >= 1 && t->rank <= CD_MAX_RANK);
    CHECK(cd_tensor_numel(t) >= 1);
    CHECK(t->nbytes == (size_t)cd_tensor_numel(t) * cd_dtype_size(t->dtype));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    CHECK(cd_tensor_pack(&pk, t) == 0);
    CHECK(sb.size <= cd_tensor_packed_size(t));
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    CHECK(msgpack_unpack_next(&u, sb.data, sb.size, &off) == MSGPACK_UNPACK_SUCCESS);
    cd_tensor back;
    char err[256];
    CHECK(cd_tensor_decode(&u.data, &back, err, sizeof err) == 0);
    CHECK(back.dtype == t->dtype && back.rank == t->rank && back.nbytes == t->nbytes);
    CHECK(memcmp(back.shape, t->shape, sizeof t->shape[0] * (size_t)t->rank) == 0);
    CHECK(t->nbytes == 0 || memcmp(back.data, t->data, t->nbytes) == 0);
    msgpack_unpacked_destroy(&u);
    // As a reply packs it (daemon/reply.c): the header, then the payload
    // referenced where it lies; the message it makes is the same bytes.
    cd_reply r;
    cd_reply_init(&r);
    msgpack_packer rk;
    msgpack_packer_init(&rk, &r, cd_reply_write);
    CHECK(cd_tensor_pack_head(&rk, t) == 0);
    CHECK(cd_reply_bin_body(&rk, t->data, t->nbytes) == 0);
    CHECK(r.total == sb.size);
    msgpack_sbuffer flat;
    msgpack_sbuffer_init(&flat);
    CHECK(cd_reply_copy_to(&r, &flat) == 0);
    CHECK(flat.size == sb.size && memcmp(flat.data, sb.data, sb.size) == 0);
    msgpack_sbuffer_destroy(&flat);
    cd_reply_destroy(&r);
    msgpack_sbuffer_destroy(&sb);
}

// A request packed again from what was decoded reads back as the same
// request (method sent as a str, params as decoded).
static void check_request_round_trip(const cd_rpc_msg *m) {
    if (m->method_len > 255 || (m->method_len && memchr(m->method, '\0', m->method_len))) return;
    char method[256];
    if (m->method_len) memcpy(method, m->method, m->method_len);
    method[m->method_len] = '\0';
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    CHECK(cd_rpc_pack_request_begin(&pk, m->msgid, method) == 0);
    // begin opens a params array of one: pack the map, or nil for no map
    const msgpack_object *p = cd_rpc_params_map(m);
    if (p)
        CHECK(msgpack_pack_object(&pk, *p) == 0);
    else
        CHECK(msgpack_pack_nil(&pk) == 0);
    cd_rpc_msg back;
    int rc = read_one(sb.data, sb.size, &back);
    // the same bytes, re-encoded, may only shrink (msgpack-c packs minimal
    // headers), so they read back whole
    CHECK(rc == 1);
    CHECK(back.kind == CD_MSG_REQUEST && back.msgid == m->msgid);
    CHECK(back.method_len == m->method_len);
    CHECK(m->method_len == 0 || memcmp(back.method, m->method, m->method_len) == 0);
    const msgpack_object *q = cd_rpc_params_map(&back);
    CHECK(!p == !q);
    if (p) { // compared as packed bytes (NaN != NaN as a value)
        msgpack_sbuffer x, y;
        msgpack_sbuffer_init(&x);
        msgpack_sbuffer_init(&y);
        msgpack_packer px, py;
        msgpack_packer_init(&px, &x, msgpack_sbuffer_write);
        msgpack_packer_init(&py, &y, msgpack_sbuffer_write);
        CHECK(msgpack_pack_object(&px, *p) == 0 && msgpack_pack_object(&py, *q) == 0);
        CHECK(x.size == y.size && memcmp(x.data, y.data, x.size) == 0);
        msgpack_sbuffer_destroy(&x);
        msgpack_sbuffer_destroy(&y);
    }
    cd_rpc_msg_free(&back);
    msgpack_sbuffer_destroy(&sb);
}

// A region tensor packed again decodes to the same dtype, shape, name and
// offset.
static void check_ref_round_trip(const cd_tensor *t, const cd_region_ref *ref) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    CHECK(cd_tensor_ref_pack(&pk, t, ref->name, ref->name_len, ref->offset) == 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS);
    cd_tensor t2;
    cd_region_ref r2;
    char err[200];
    CHECK(cd_tensor_ref_decode(&u.data, &t2, &r2, err, sizeof err) == 0);
    CHECK(t2.dtype == t->dtype && t2.rank == t->rank && t2.nbytes == t->nbytes);
    CHECK(memcmp(t2.shape, t->shape, sizeof t->shape[0] * (size_t)t->rank) == 0);
    CHECK(r2.name_len == ref->name_len && memcmp(r2.name, ref->name, ref->name_len) == 0);
    CHECK(r2.offset == ref->offset);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

// ---- what the daemon does with a request ------------------------------------------

static void check_infer(const cd_rpc_msg *m, const msgpack_object *params) {
    static const int codes[] = {CD_EPARAMS, CD_EDTYPE, CD_ESHAPE, CD_ETOO_LARGE};
    char err[256] = "";
    int rc = cd_infer_check_keys(params, err, sizeof err);
    if (rc != 0) {
        CHECK(rc == CD_EPARAMS);
        check_error_reply(m->msgid, rc, err);
        return;
    }
    char name[CD_MAX_NAME + 1];
    rc = cd_param_str(params, "model", name, sizeof name, err, sizeof err);
    if (rc < 0) {
        CHECK(rc == CD_EPARAMS);
        check_error_reply(m->msgid, rc, err);
    }
    const cd_infer_sig *sig = &sigs[m->msgid % NSIGS];
    cd_infer_args a;
    memset(&a, 0, sizeof a);
    err[0] = '\0';
    rc = cd_infer_validate(params, sig, &a, err, sizeof err);
    if (rc != 0) {
        CHECK(is_code(rc, codes, sizeof codes / sizeof codes[0]));
        check_error_reply(m->msgid, rc, err);
        return;
    }
    // What the workers rely on: a batch in range, every input present with
    // exactly batch items of its shape, inside the message's bytes; at least
    // one output wanted; the reply within the limit.
    CHECK(a.batch >= 1 && a.batch <= sig->max_batch);
    for (int i = 0; i < sig->nin; i++) {
        const cd_io_desc *d = sig->in[i];
        uint64_t want = (uint64_t)a.batch * cd_dtype_size(d->dtype);
        for (int k = 1; k < d->rank; k++) want *= (uint64_t)d->shape[k];
        CHECK(a.in_bytes[i] == want);
        const cd_region_ref *ref = &a.in_ref[i];
        if (ref->name) { // named in a region: resolved by the daemon, not here
            CHECK(a.in[i] == NULL && ref->size == a.in_bytes[i]);
            CHECK(cd_region_name_check(ref->name, ref->name_len, NULL, 0) == 0);
            CHECK(ref->name >= m->bytes_ && ref->name + ref->name_len <= m->bytes_ + m->nbytes);
            continue;
        }
        const char *p = a.in[i];
        CHECK(p >= m->bytes_ && p + a.in_bytes[i] <= m->bytes_ + m->nbytes);
    }
    int nwant = 0;
    for (int i = 0; i < sig->nout; i++) {
        nwant += a.want[i];
        const cd_region_ref *ref = &a.out_ref[i];
        if (ref->name) CHECK(a.want[i] && cd_region_name_check(ref->name, ref->name_len, NULL, 0) == 0);
    }
    CHECK(nwant >= 1);
    CHECK(cd_infer_reply_bytes(sig, &a) <= sig->max_reply);
    CHECK(a.timeout_ms >= 0 && a.timeout_ms <= INT32_MAX);
}

static void use_request(const cd_rpc_msg *m) {
    CHECK(m->method_len == 0 || m->method);
    cd_method_id id = cd_method_lookup(m->method, m->method_len);
    const msgpack_object *params;
    char err[256] = "";
    int rc = cd_params_map(m, &params, err, sizeof err);
    if (rc != 0) {
        CHECK(rc == CD_EPARAMS);
        check_error_reply(m->msgid, rc, err);
        return;
    }
    check_request_round_trip(m);
    if (!params) return;
    // Tensors wherever they appear at the top level decode consistently.
    for (uint32_t i = 0; i < params->via.map.size; i++) {
        cd_tensor t;
        if (cd_tensor_decode(&params->via.map.ptr[i].val, &t, err, sizeof err) == 0) check_tensor_round_trip(&t);
    }
    const msgpack_object *inputs = cd_map_get(params, "inputs");
    if (inputs && inputs->type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < inputs->via.map.size; i++) {
            cd_tensor t;
            if (cd_tensor_decode(&inputs->via.map.ptr[i].val, &t, err, sizeof err) == 0) check_tensor_round_trip(&t);
        }
    if (inputs && inputs->type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < inputs->via.map.size; i++) {
            cd_tensor t;
            cd_region_ref ref;
            if (cd_tensor_ref_decode(&inputs->via.map.ptr[i].val, &t, &ref, err, sizeof err) == 0)
                check_ref_round_trip(&t, &ref);
        }
    if (id == CD_M_infer) check_infer(m, params);
    if (id == CD_M_region_register || id == CD_M_region_unregister) { // the name, as daemon/regions.c takes it
        char rname[CD_MAX_REGION_NAME + 1];
        if (cd_param_str(params, "name", rname, sizeof rname, err, sizeof err) == 0)
            cd_region_name_check(rname, strlen(rname), err, sizeof err);
    }
    // The typed getters the other methods use.
    int64_t v;
    bool b;
    char buf[CD_MAX_NAME + 1];
    cd_param_str(params, "name", buf, sizeof buf, err, sizeof err);
    cd_param_int(params, "max_batch", 1, 4096, &v, err, sizeof err);
    cd_param_bool(params, "verbose", &b, err, sizeof err);
}

static void use_message(const cd_rpc_msg *m) {
    switch (m->kind) {
    case CD_MSG_REQUEST: use_request(m); break;
    case CD_MSG_RESPONSE: {
        char buf[CD_MAX_NAME + 1];
        cd_rpc_error_decode(&m->error, buf, sizeof buf);
        break;
    }
    case CD_MSG_NOTIFY: break;
    default: abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t chunk = (size_t)(data[0] & 0x3f) + 1;
    size_t max = data[0] & 0x40 ? CD_MAX_MESSAGE_MIN : CD_MAX_MESSAGE_DEFAULT;
    bool skip_big = data[0] & 0x80;
    data++, size--;
    cd_rpc_reader *r;
    if (cd_rpc_reader_init(&r, max) < 0) return 0;
    bool failed = false;
    for (size_t off = 0; off < size && !failed;) {
        size_t n = size - off < chunk ? size - off : chunk;
        // The rest of a big message goes in place when the reader offers
        // room (as the daemon reads it), every other read through a copy.
        char *at;
        size_t room = cd_rpc_reader_space(r, &at);
        int rc;
        if (room > 0) {
            if (n > room) n = room;
            memcpy(at, data + off, n);
            rc = cd_rpc_reader_feed_in_place(r, n);
        } else {
            rc = cd_rpc_reader_feed(r, (const char *)data + off, n);
        }
        CHECK(rc == 0 || rc == CD_ETOO_LARGE);
        off += n;
        // The budget: the daemon gives up a partial message it cannot hold.
        if (rc == 0 && skip_big && cd_rpc_reader_partial(r) && cd_rpc_reader_committed(r) > 64) {
            cd_rpc_reader_skip(r);
            // it keeps at most the bytes its scan has not passed: part of the
            // last read and a header
            CHECK(cd_rpc_reader_buffered(r) <= n + 16);
        }
        for (;;) {
            cd_rpc_msg m;
            char err[256] = "";
            uint32_t msgid = UINT32_MAX;
            rc = cd_rpc_reader_next(r, &m, &msgid, err, sizeof err);
            if (rc == 1) {
                CHECK(m.nbytes <= max);
                use_message(&m);
                cd_rpc_msg_free(&m);
                continue;
            }
            if (rc == CD_RPC_SKIPPED) continue;
            if (rc < 0) {
                CHECK(rc == CD_EPROTOCOL || rc == CD_ETOO_LARGE);
                // answered (msgid 0 when unknown) and the connection closed
                check_error_reply(msgid == UINT32_MAX ? 0 : msgid, rc, err);
                failed = true;
            }
            CHECK(rc <= 0);
            break;
        }
    }
    cd_rpc_reader_free(r);
    return 0;
}
