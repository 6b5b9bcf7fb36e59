// proto/: the streaming msgpack-RPC reader, its envelope checks and the
// packers. Every bad input asserts its exact code.

#include "tests/unit/test-proto-util.h"

#include "proto/params.h"
#include "proto/rpc-scan.h"

// ---- round trips -----------------------------------------------------------

// Packs [0, msgid, "infer", [{"model": model}]].
static void pack_infer(tp_pack *t, uint32_t msgid, const char *model) {
    CHECK_EQ(cd_rpc_pack_request_begin(&t->pk, msgid, "infer"), 0);
    CHECK_EQ(msgpack_pack_map(&t->pk, 1), 0);
    CHECK_EQ(cd_pack_kv_str(&t->pk, "model", model), 0);
}

CD_TEST(proto_rpc_request_round_trip) {
    tp_pack t;
    tp_pack_init(&t);
    pack_infer(&t, 4000000000u, "r50");
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, t.sb.size), 0);
    cd_rpc_msg m;
    uint32_t id = 0;
    char err[128];
    CHECK_EQ(cd_rpc_reader_next(r, &m, &id, err, sizeof err), 1);
    CHECK_EQ(m.kind, CD_MSG_REQUEST);
    CHECK_EQ(m.msgid, 4000000000u);
    CHECK_EQ(id, 4000000000u);
    CHECK_EQ(m.method_len, 5);
    CHECK(memcmp(m.method, "infer", 5) == 0);
    CHECK_EQ(m.nbytes, t.sb.size);
    const msgpack_object *p = cd_rpc_params_map(&m);
    CHECK(p != NULL);
    CHECK(cd_obj_streq(cd_map_get(p, "model"), "r50"));
    cd_rpc_msg_free(&m);
    CHECK_EQ(cd_rpc_reader_next(r, &m, &id, err, sizeof err), 0);
    CHECK_EQ(cd_rpc_reader_buffered(r), 0);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_response_ok_round_trip) {
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_response_ok_begin(&t.pk, 9), 0);
    CHECK_EQ(msgpack_pack_map(&t.pk, 1), 0);
    CHECK_EQ(cd_pack_kv_str(&t.pk, "status", "ok"), 0);
    tp_result res = tp_decode_one(t.sb.data, t.sb.size, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, 1);
    CHECK_EQ(res.msgid, 9);

    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, t.sb.size), 0);
    cd_rpc_msg m;
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
    CHECK_EQ(m.kind, CD_MSG_RESPONSE);
    CHECK_EQ(m.msgid, 9);
    CHECK_EQ(m.error.type, MSGPACK_OBJECT_NIL);
    CHECK_EQ(cd_rpc_error_decode(&m.error, NULL, 0), 0);
    CHECK(cd_obj_streq(cd_map_get(&m.result, "status"), "ok"));
    CHECK(cd_rpc_params_map(&m) == NULL); // responses have no params
    cd_rpc_msg_free(&m);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_response_error_round_trip) {
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_response_error(&t.pk, 77, CD_ESHAPE, "input 'x' is [1, 3]"), 0);
    CHECK_EQ(cd_rpc_pack_response_error(&t.pk, 78, CD_ETIMEOUT, NULL), 0);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, t.sb.size), 0);
    cd_rpc_msg m;
    char msg[64];
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
    CHECK_EQ(m.msgid, 77);
    CHECK_EQ(m.result.type, MSGPACK_OBJECT_NIL);
    CHECK(cd_obj_streq(cd_map_get(&m.error, "code"), "E_SHAPE"));
    CHECK_EQ(cd_rpc_error_decode(&m.error, msg, sizeof msg), CD_ESHAPE);
    CHECK_STREQ(msg, "input 'x' is [1, 3]");
    cd_rpc_msg_free(&m);
    // NULL message: the table's default text goes on the wire.
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
    CHECK_EQ(m.msgid, 78);
    CHECK_EQ(cd_rpc_error_decode(&m.error, msg, sizeof msg), CD_ETIMEOUT);
    CHECK_STREQ(msg, cd_strerror(CD_ETIMEOUT));
    // A short buffer truncates the message but keeps the code.
    char tiny[5];
    CHECK_EQ(cd_rpc_error_decode(&m.error, tiny, sizeof tiny), CD_ETIMEOUT);
    CHECK_STREQ(tiny, "dead");
    cd_rpc_msg_free(&m);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_notify_round_trip) {
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_notify_begin(&t.pk, "progress"), 0);
    CHECK_EQ(msgpack_pack_map(&t.pk, 1), 0);
    CHECK_EQ(cd_pack_kv_str(&t.pk, "done", "half"), 0);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, t.sb.size), 0);
    cd_rpc_msg m;
    uint32_t id = 5;
    CHECK_EQ(cd_rpc_reader_next(r, &m, &id, NULL, 0), 1);
    CHECK_EQ(m.kind, CD_MSG_NOTIFY);
    CHECK_EQ(id, UINT32_MAX);
    CHECK_EQ(m.method_len, 8);
    CHECK(memcmp(m.method, "progress", 8) == 0);
    CHECK(cd_obj_streq(cd_map_get(cd_rpc_params_map(&m), "done"), "half"));
    cd_rpc_msg_free(&m);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_error_decode_foreign_shapes) {
    tp_pack t;
    tp_pack_init(&t);
    tp_pack_str(&t, "plain string error"); // a non-convd server
    msgpack_pack_map(&t.pk, 1);            // code unknown to us
    msgpack_pack_str(&t.pk, 4), msgpack_pack_str_body(&t.pk, "code", 4);
    tp_pack_str(&t, "E_FROM_THE_FUTURE");
    msgpack_pack_int(&t.pk, 42); // not an error object
    msgpack_pack_nil(&t.pk);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    char msg[64];
    CHECK_EQ(msgpack_unpack_next(&u, t.sb.data, t.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(cd_rpc_error_decode(&u.data, msg, sizeof msg), CD_EINTERNAL);
    CHECK_STREQ(msg, "plain string error");
    CHECK_EQ(msgpack_unpack_next(&u, t.sb.data, t.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(cd_rpc_error_decode(&u.data, msg, sizeof msg), CD_EINTERNAL);
    CHECK_STREQ(msg, cd_strerror(CD_EINTERNAL));
    CHECK_EQ(msgpack_unpack_next(&u, t.sb.data, t.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(cd_rpc_error_decode(&u.data, msg, sizeof msg), CD_EINTERNAL);
    CHECK_EQ(msgpack_unpack_next(&u, t.sb.data, t.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(cd_rpc_error_decode(&u.data, msg, sizeof msg), 0);
    CHECK_STREQ(msg, "");
    msgpack_unpacked_destroy(&u);
    tp_pack_free(&t);
}

// ---- framing ---------------------------------------------------------------

// Three messages of each kind, packed back to back; ends[i] is the offset one
// past message i.
static void pack_three(tp_pack *t, size_t ends[3]) {
    pack_infer(t, 1, "model-one");
    ends[0] = t->sb.size;
    CHECK_EQ(cd_rpc_pack_response_error(&t->pk, 2, CD_EPARAMS, "bad"), 0);
    ends[1] = t->sb.size;
    CHECK_EQ(cd_rpc_pack_notify_begin(&t->pk, "tick"), 0);
    CHECK_EQ(msgpack_pack_array(&t->pk, 0), 0);
    ends[2] = t->sb.size;
}

CD_TEST(proto_rpc_split_one_byte_at_a_time) {
    tp_pack t;
    tp_pack_init(&t);
    size_t ends[3];
    pack_three(&t, ends);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    int got = 0;
    for (size_t i = 0; i < t.sb.size; i++) {
        CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data + i, 1), 0);
        cd_rpc_msg m;
        int rc = cd_rpc_reader_next(r, &m, NULL, NULL, 0);
        if (i + 1 == ends[got]) { // complete exactly at its last byte
            CHECK_EQ(rc, 1);
            CHECK_EQ(m.kind, (cd_msg_kind)(got == 0 ? CD_MSG_REQUEST : got == 1 ? CD_MSG_RESPONSE : CD_MSG_NOTIFY));
            cd_rpc_msg_free(&m);
            got++;
        } else {
            CHECK_EQ(rc, 0);
        }
    }
    CHECK_EQ(got, 3);
    CHECK_EQ(cd_rpc_reader_buffered(r), 0);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_split_at_every_boundary) {
    tp_pack t;
    tp_pack_init(&t);
    size_t ends[3];
    pack_three(&t, ends);
    for (size_t k = 0; k <= t.sb.size; k++) {
        cd_rpc_reader *r;
        CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
        CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, k), 0);
        int got = 0;
        cd_rpc_msg m;
        while (cd_rpc_reader_next(r, &m, NULL, NULL, 0) == 1) {
            cd_rpc_msg_free(&m);
            got++;
        }
        CHECK_EQ(cd_rpc_reader_buffered(r), k - (got ? ends[got - 1] : 0));
        CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data + k, t.sb.size - k), 0);
        while (cd_rpc_reader_next(r, &m, NULL, NULL, 0) == 1) {
            if (got == 0) CHECK(cd_obj_streq(cd_map_get(cd_rpc_params_map(&m), "model"), "model-one"));
            if (got == 1) CHECK_EQ(m.msgid, 2);
            cd_rpc_msg_free(&m);
            got++;
        }
        CHECK_EQ(got, 3);
        cd_rpc_reader_free(r);
    }
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_many_messages_in_one_feed) {
    tp_pack t;
    tp_pack_init(&t);
    for (uint32_t i = 0; i < 1000; i++) pack_infer(&t, i, "m");
    // A small max_message: the limit is per message, not per read.
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_MIN), 0);
    CHECK(t.sb.size > CD_MAX_MESSAGE_MIN);
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, t.sb.size), 0);
    cd_rpc_msg m;
    for (uint32_t i = 0; i < 1000; i++) {
        CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
        CHECK_EQ(m.msgid, i);
        cd_rpc_msg_free(&m);
    }
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 0);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_truncated_needs_more_never_errors) {
    tp_pack t;
    tp_pack_init(&t);
    pack_infer(&t, 3, "truncated");
    for (size_t k = 0; k < t.sb.size; k++) {
        tp_result res = tp_decode_one(t.sb.data, k, CD_MAX_MESSAGE_DEFAULT);
        CHECK_EQ(res.feed_rc, 0);
        CHECK_EQ(res.rc, 0);
    }
    tp_pack_free(&t);
}

// A big message followed by the start of the next one in the same read: the
// buffer is handed to the first, the rest must survive.
CD_TEST(proto_rpc_large_message_then_partial_next) {
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_request_begin(&t.pk, 1, "infer"), 0);
    size_t big = 300000;
    char *blob = malloc(big);
    for (size_t i = 0; i < big; i++) blob[i] = (char)(i * 7);
    msgpack_pack_bin(&t.pk, big);
    msgpack_pack_bin_body(&t.pk, blob, big);
    size_t first = t.sb.size;
    pack_infer(&t, 2, "second");
    size_t cut = first + (t.sb.size - first) / 2;
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, cut), 0);
    cd_rpc_msg m;
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
    const msgpack_object *b = &m.params.via.array.ptr[0];
    CHECK_EQ(b->type, MSGPACK_OBJECT_BIN);
    CHECK_EQ(b->via.bin.size, big);
    CHECK(memcmp(b->via.bin.ptr, blob, big) == 0);
    CHECK_EQ(cd_rpc_reader_buffered(r), cut - first);
    cd_rpc_msg m2;
    CHECK_EQ(cd_rpc_reader_next(r, &m2, NULL, NULL, 0), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data + cut, t.sb.size - cut), 0);
    CHECK_EQ(cd_rpc_reader_next(r, &m2, NULL, NULL, 0), 1);
    CHECK_EQ(m2.msgid, 2);
    CHECK(memcmp(b->via.bin.ptr, blob, big) == 0); // first message untouched
    cd_rpc_msg_free(&m);
    cd_rpc_msg_free(&m2);
    cd_rpc_reader_free(r);
    free(blob);
    tp_pack_free(&t);
}

// 16 MiB of tensor data in 64 KiB reads: decoded in place (the bin points into
// the message's own bytes) and scanned once, not once per read.
CD_TEST(proto_rpc_16mib_bin_in_64k_chunks_zero_copy) {
    size_t big = 16u << 20;
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_request_begin(&t.pk, 5, "infer"), 0);
    msgpack_pack_map(&t.pk, 1);
    tp_pack_str(&t, "x");
    msgpack_pack_bin(&t.pk, big);
    char *blob = malloc(big);
    for (size_t i = 0; i < big; i++) blob[i] = (char)(i ^ (i >> 9));
    msgpack_pack_bin_body(&t.pk, blob, big);

    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    cd_rpc_msg m;
    double t0 = tp_now();
    int rc = 0;
    for (size_t off = 0; off < t.sb.size; off += 65536) {
        size_t n = t.sb.size - off < 65536 ? t.sb.size - off : 65536;
        CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data + off, n), 0);
        rc = cd_rpc_reader_next(r, &m, NULL, NULL, 0);
        CHECK_EQ(rc, off + n == t.sb.size ? 1 : 0);
    }
    double dt = tp_now() - t0;
    CHECK_EQ(rc, 1);
    const msgpack_object *x = cd_map_get(cd_rpc_params_map(&m), "x");
    CHECK(x && x->type == MSGPACK_OBJECT_BIN);
    CHECK_EQ(x->via.bin.size, big);
    CHECK(x->via.bin.ptr >= m.bytes_); // zero-copy: inside the message's bytes
    CHECK(x->via.bin.ptr + big <= m.bytes_ + m.nbytes);
    CHECK(memcmp(x->via.bin.ptr, blob, big) == 0);
    printf("  16 MiB in 64 KiB reads: %.1f ms (%.0f MiB/s)\n", dt * 1e3, 16 / dt);
    CHECK(dt < 2.0); // ~10 ms here; O(n^2) rescanning or copying would be seconds
    cd_rpc_msg_free(&m);
    cd_rpc_reader_free(r);
    free(blob);
    tp_pack_free(&t);
}

// The rest of a big message read in place (cd_rpc_reader_space, as the
// daemon's reads do) in reads of random sizes, with a small message behind
// it: the same messages as cd_rpc_reader_feed gives; the room offered is
// exactly what the headers declared, and none is offered between messages.
CD_TEST(proto_rpc_big_message_read_in_place) {
    size_t big = (size_t)cd_test_randi(70000, 900000);
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_request_begin(&t.pk, 7, "infer"), 0);
    msgpack_pack_map(&t.pk, 1);
    tp_pack_str(&t, "x");
    msgpack_pack_bin(&t.pk, big);
    char *blob = malloc(big);
    for (size_t i = 0; i < big; i++) blob[i] = (char)cd_test_randi(0, 255);
    msgpack_pack_bin_body(&t.pk, blob, big);
    size_t first = t.sb.size;
    pack_infer(&t, 8, "second");

    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    char *at;
    CHECK_EQ(cd_rpc_reader_space(r, &at), 0); // nothing declared yet
    CHECK(at == NULL);
    size_t head = (size_t)cd_test_randi(20, 4096); // the headers and some payload
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, head), 0);
    size_t off = head, in_place = 0;
    while (off < first) {
        size_t room = cd_rpc_reader_space(r, &at);
        CHECK_EQ(room, first - off); // the declared rest of the message, no more
        size_t n = (size_t)cd_test_randi(1, 200000);
        if (n > room) n = room;
        memcpy(at, t.sb.data + off, n); // the read
        CHECK_EQ(cd_rpc_reader_feed_in_place(r, n), 0);
        off += n;
        in_place += n;
    }
    CHECK_EQ(cd_rpc_reader_space(r, &at), 0); // complete: nothing in place
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data + off, t.sb.size - off), 0);
    cd_rpc_msg m, m2;
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
    CHECK_EQ(m.msgid, 7);
    const msgpack_object *x = cd_map_get(cd_rpc_params_map(&m), "x");
    CHECK(x && x->type == MSGPACK_OBJECT_BIN);
    CHECK_EQ(x->via.bin.size, big);
    CHECK(memcmp(x->via.bin.ptr, blob, big) == 0);
    CHECK_EQ(cd_rpc_reader_next(r, &m2, NULL, NULL, 0), 1);
    CHECK_EQ(m2.msgid, 8);
    CHECK(in_place > 0);
    cd_rpc_msg_free(&m);
    cd_rpc_msg_free(&m2);
    cd_rpc_reader_free(r);
    free(blob);
    tp_pack_free(&t);
}

// ---- not msgpack / not msgpack-RPC -----------------------------------------

CD_TEST(proto_rpc_reserved_byte_c1_at_top) {
    const char b[] = {(char)0xc1, 0x00, 0x00};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_reserved_byte_c1_nested) {
    tp_bytes b = {0};
    tp_request_head(&b, 1, "m");
    tp_raw(&b, 3, 0x92, 0x01, 0xc1);
    tp_result res = tp_decode_one(b.p, b.n, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_EQ(res.msgid, 1); // readable before the bad byte
    CHECK(strstr(res.err, "0xc1") != NULL);
    tp_bytes_free(&b);
}

// Once the stream is broken it stays broken: later reads are not parsed.
CD_TEST(proto_rpc_error_is_sticky) {
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    const char bad[] = {(char)0xc1};
    CHECK_EQ(cd_rpc_reader_feed(r, bad, 1), 0);
    cd_rpc_msg m;
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), CD_EPROTOCOL);
    tp_pack t;
    tp_pack_init(&t);
    pack_infer(&t, 1, "fine");
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, t.sb.size), 0);
    char err[128];
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, err, sizeof err), CD_EPROTOCOL);
    CHECK(strstr(err, "0xc1") != NULL);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_top_level_map) {
    const char b[] = {(char)0x81, (char)0xa1, 'a', 0x01};
    tp_result res = tp_decode_one(b, sizeof b, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_STREQ(res.err, "a msgpack-RPC message must be an array, got map");
}

CD_TEST(proto_rpc_top_level_int) {
    const char b[] = {0x05};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_top_level_str) {
    const char b[] = {(char)0xa2, 'h', 'i'};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

// Rejected from the array header alone, before the elements arrive.
CD_TEST(proto_rpc_array_length_2) {
    const char b[] = {(char)0x92};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_array_length_5) {
    const char b[] = {(char)0x95, 0x00, 0x01, (char)0xa1, 'm', (char)0x90, 0x00};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_request_with_3_elements) {
    const char b[] = {(char)0x93, 0x00, 0x07, (char)0xa1, 'm'};
    tp_result res = tp_decode_one(b, sizeof b, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_EQ(res.msgid, 7);
    CHECK_STREQ(res.err, "a request must be an array of 4 elements, got 3");
}

CD_TEST(proto_rpc_notify_with_4_elements) {
    const char b[] = {(char)0x94, 0x02, (char)0xa1, 'm', (char)0x90, (char)0xc0};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_response_with_3_elements) {
    const char b[] = {(char)0x93, 0x01, 0x07, (char)0xc0};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_type_3) {
    const char b[] = {(char)0x94, 0x03, 0x01, (char)0xa1, 'm', (char)0x90};
    tp_result res = tp_decode_one(b, sizeof b, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_EQ(res.msgid, UINT32_MAX); // not a request: no msgid to answer
    CHECK_STREQ(res.err, "message type must be 0, 1 or 2, got 3");
}

CD_TEST(proto_rpc_type_negative) {
    const char b[] = {(char)0x94, (char)0xff, 0x01, (char)0xa1, 'm', (char)0x90};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_type_str) {
    const char b[] = {(char)0x94, (char)0xa1, '0', 0x01, (char)0xa1, 'm', (char)0x90};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_type_float) {
    const char b[] = {(char)0x94, (char)0xca, 0, 0, 0, 0, 0x01, (char)0xa1, 'm', (char)0x90};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_msgid_negative) {
    const char b[] = {(char)0x94, 0x00, (char)0xff, (char)0xa1, 'm', (char)0x90};
    tp_result res = tp_decode_one(b, sizeof b, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_EQ(res.msgid, UINT32_MAX);
    CHECK_STREQ(res.err, "request msgid -1 is negative");
}

CD_TEST(proto_rpc_msgid_over_uint32) {
    tp_bytes b = {0};
    tp_raw(&b, 2, 0x94, 0x00);
    tp_raw(&b, 9, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0); // 2^32
    tp_fixstr(&b, "m");
    tp_raw(&b, 1, 0x90);
    tp_result res = tp_decode_one(b.p, b.n, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_EQ(res.msgid, UINT32_MAX);
    CHECK_STREQ(res.err, "request msgid 4294967296 is larger than 4294967295");
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_msgid_uint32_max_accepted) {
    tp_bytes b = {0};
    tp_raw(&b, 2, 0x94, 0x00);
    tp_raw(&b, 5, 0xce, 0xff, 0xff, 0xff, 0xff);
    tp_fixstr(&b, "m");
    tp_raw(&b, 1, 0x90);
    tp_result res = tp_decode_one(b.p, b.n, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, 1);
    CHECK_EQ(res.msgid, UINT32_MAX);
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_msgid_str) {
    const char b[] = {(char)0x94, 0x00, (char)0xa1, '1', (char)0xa1, 'm', (char)0x90};
    tp_result res = tp_decode_one(b, sizeof b, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_STREQ(res.err, "request msgid must be an unsigned 32-bit integer, got str");
}

CD_TEST(proto_rpc_response_msgid_nil) {
    const char b[] = {(char)0x94, 0x01, (char)0xc0, (char)0xc0, (char)0xc0};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

CD_TEST(proto_rpc_method_not_str) {
    const char b[] = {(char)0x94, 0x00, 0x09, 0x05, (char)0x90};
    tp_result res = tp_decode_one(b, sizeof b, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_EQ(res.msgid, 9); // the error can be addressed to the request
    CHECK_STREQ(res.err, "request method must be a str, got int");
}

// Some clients send names as bin: valid UTF-8 is taken as the str it means
// (more in test-proto-limits.c).
CD_TEST(proto_rpc_method_bin) {
    const char b[] = {(char)0x94, 0x00, 0x09, (char)0xc4, 0x01, 'm', (char)0x90};
    TP_EXPECT(b, sizeof b, 1);
}

CD_TEST(proto_rpc_notify_method_not_str) {
    const char b[] = {(char)0x93, 0x02, (char)0xc0, (char)0x90};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

static void method_of_len(tp_bytes *b, size_t n) {
    char name[128];
    memset(name, 'a', n);
    tp_raw(b, 4, 0x94, 0x00, 0x01, 0xd9);
    tp_raw(b, 1, (int)n);
    tp_put(b, name, n);
    tp_raw(b, 1, 0x90);
}

CD_TEST(proto_rpc_method_too_long) {
    tp_bytes b = {0};
    method_of_len(&b, CD_MAX_METHOD + 1);
    tp_result res = tp_decode_one(b.p, b.n, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_EQ(res.msgid, 1);
    CHECK_STREQ(res.err, "request method is 65 bytes long, the limit is 64");
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_method_at_limit_accepted) {
    tp_bytes b = {0};
    method_of_len(&b, CD_MAX_METHOD);
    TP_EXPECT(b.p, b.n, 1);
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_params_map_not_array) {
    tp_bytes b = {0};
    tp_request_head(&b, 3, "infer");
    tp_raw(&b, 1, 0x80);
    tp_result res = tp_decode_one(b.p, b.n, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_EPROTOCOL);
    CHECK_EQ(res.msgid, 3);
    CHECK_STREQ(res.err, "request params must be an array, got map");
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_params_nil_not_array) {
    tp_bytes b = {0};
    tp_request_head(&b, 3, "hello");
    tp_raw(&b, 1, 0xc0);
    TP_EXPECT(b.p, b.n, CD_EPROTOCOL);
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_notify_params_not_array) {
    const char b[] = {(char)0x93, 0x02, (char)0xa1, 'm', 0x01};
    TP_EXPECT(b, sizeof b, CD_EPROTOCOL);
}

// ---- params_map --------------------------------------------------------------

// Decodes [0, 1, "m", <params bytes>] and returns whether params_map found a map.
static int params_map_found(const char *params, size_t n) {
    tp_bytes b = {0};
    tp_request_head(&b, 1, "m");
    tp_put(&b, params, n);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, b.p, b.n), 0);
    cd_rpc_msg m;
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
    const msgpack_object *map = cd_rpc_params_map(&m);
    if (map) CHECK_EQ(map->type, MSGPACK_OBJECT_MAP);
    int found = map != NULL;
    cd_rpc_msg_free(&m);
    cd_rpc_reader_free(r);
    tp_bytes_free(&b);
    return found;
}

CD_TEST(proto_rpc_params_map_one_map) {
    const char p[] = {(char)0x91, (char)0x81, (char)0xa1, 'k', 0x01};
    CHECK_EQ(params_map_found(p, sizeof p), 1);
}

CD_TEST(proto_rpc_params_map_empty_array) {
    const char p[] = {(char)0x90};
    CHECK_EQ(params_map_found(p, sizeof p), 0);
}

CD_TEST(proto_rpc_params_map_nil) {
    const char p[] = {(char)0x91, (char)0xc0};
    CHECK_EQ(params_map_found(p, sizeof p), 0);
}

CD_TEST(proto_rpc_params_map_int) {
    const char p[] = {(char)0x91, 0x05};
    CHECK_EQ(params_map_found(p, sizeof p), 0);
}

CD_TEST(proto_rpc_params_map_two_maps) {
    const char p[] = {(char)0x92, (char)0x80, (char)0x80};
    CHECK_EQ(params_map_found(p, sizeof p), 0);
}

// ---- limits ----------------------------------------------------------------

// A request whose params array holds one value announced by a 5-byte header
// (tag + 32-bit length) and nothing after it: rejected from the header, at
// the feed that brings it, with the msgid that was already readable.
static void expect_header_too_large(unsigned char tag, uint32_t len) {
    tp_bytes b = {0};
    tp_request_head(&b, 42, "infer");
    tp_raw(&b, 1, 0x91);
    tp_hdr32(&b, tag, len);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, b.p, b.n), CD_ETOO_LARGE);
    CHECK_EQ(cd_rpc_reader_buffered(r), 0); // nothing buffered
    cd_rpc_msg m;
    uint32_t id = 0;
    char err[256];
    CHECK_EQ(cd_rpc_reader_next(r, &m, &id, err, sizeof err), CD_ETOO_LARGE);
    CHECK_EQ(id, 42);
    CHECK(err[0] != '\0');
    cd_rpc_reader_free(r);
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_array32_over_container_limit) { expect_header_too_large(0xdd, CD_MAX_CONTAINER + 1); }

CD_TEST(proto_rpc_array32_huge) { expect_header_too_large(0xdd, 0xffffffffu); }

CD_TEST(proto_rpc_map32_over_container_limit) { expect_header_too_large(0xdf, CD_MAX_CONTAINER + 1); }

CD_TEST(proto_rpc_str32_over_max_message) { expect_header_too_large(0xdb, CD_MAX_MESSAGE_DEFAULT); }

CD_TEST(proto_rpc_bin32_over_max_message) { expect_header_too_large(0xc6, 0xffffffffu); }

CD_TEST(proto_rpc_ext32_over_max_message) { expect_header_too_large(0xc9, CD_MAX_MESSAGE_DEFAULT); }

// Within CD_MAX_CONTAINER, but more elements than bytes left in max_message.
CD_TEST(proto_rpc_array_cannot_fit_in_max_message) {
    tp_bytes b = {0};
    tp_request_head(&b, 1, "m");
    tp_raw(&b, 1, 0x91);
    tp_hdr32(&b, 0xdd, CD_MAX_MESSAGE_MIN);
    tp_result res = tp_decode_one(b.p, b.n, CD_MAX_MESSAGE_MIN);
    CHECK_EQ(res.feed_rc, CD_ETOO_LARGE);
    CHECK_EQ(res.rc, CD_ETOO_LARGE);
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_array_at_container_limit_accepted) {
    tp_bytes b = {0};
    tp_request_head(&b, 1, "m");
    tp_raw(&b, 1, 0x91);
    tp_hdr32(&b, 0xdd, CD_MAX_CONTAINER);
    for (int i = 0; i < CD_MAX_CONTAINER; i++) tp_raw(&b, 1, 0xc0);
    TP_EXPECT(b.p, b.n, 1);
    tp_bytes_free(&b);
}

// [0, 1, "m", [[[...]]]] with depth containers in all (the message itself is 1).
static void nested(tp_bytes *b, int depth) {
    tp_request_head(b, 1, "m");
    for (int d = 2; d < depth; d++) tp_raw(b, 1, 0x91);
    tp_raw(b, 1, 0x90);
}

CD_TEST(proto_rpc_depth_16_accepted) {
    tp_bytes b = {0};
    nested(&b, CD_MAX_DEPTH);
    TP_EXPECT(b.p, b.n, 1);
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_depth_17_too_large) {
    tp_bytes b = {0};
    nested(&b, CD_MAX_DEPTH + 1);
    tp_result res = tp_decode_one(b.p, b.n, CD_MAX_MESSAGE_DEFAULT);
    CHECK_EQ(res.rc, CD_ETOO_LARGE);
    CHECK_EQ(res.msgid, 1);
    CHECK(strstr(res.err, "nesting") != NULL);
    tp_bytes_free(&b);
}

// Depth is counted through maps too.
CD_TEST(proto_rpc_depth_17_through_maps_too_large) {
    tp_bytes b = {0};
    tp_request_head(&b, 1, "m");
    tp_raw(&b, 1, 0x91);
    for (int d = 3; d <= CD_MAX_DEPTH + 1; d++) tp_raw(&b, 2, 0x81, 0x00);
    tp_raw(&b, 1, 0x00);
    TP_EXPECT(b.p, b.n, CD_ETOO_LARGE);
    tp_bytes_free(&b);
}

// Many small elements: the total, not one length, crosses max_message.
CD_TEST(proto_rpc_message_over_max_message_by_content) {
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_request_begin(&t.pk, 1, "m"), 0);
    msgpack_pack_array(&t.pk, 3000);
    for (int i = 0; i < 3000; i++) tp_pack_str(&t, "ab");
    CHECK(t.sb.size > CD_MAX_MESSAGE_MIN);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_MIN), 0);
    // Fed in small reads: the read that crosses the limit is refused.
    int rc = tp_feed(r, t.sb.data, t.sb.size, 100);
    CHECK_EQ(rc, CD_ETOO_LARGE);
    CHECK(cd_rpc_reader_buffered(r) <= CD_MAX_MESSAGE_MIN);
    cd_rpc_msg m;
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), CD_ETOO_LARGE);
    CHECK_EQ(cd_rpc_reader_feed(r, "x", 1), CD_ETOO_LARGE);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

CD_TEST(proto_rpc_bin_over_max_message) {
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_request_begin(&t.pk, 6, "infer"), 0);
    char *blob = calloc(1, 5000);
    msgpack_pack_bin(&t.pk, 5000);
    msgpack_pack_bin_body(&t.pk, blob, 5000);
    tp_result res = tp_decode_one(t.sb.data, t.sb.size, CD_MAX_MESSAGE_MIN);
    CHECK_EQ(res.rc, CD_ETOO_LARGE);
    CHECK_EQ(res.msgid, 6);
    free(blob);
    tp_pack_free(&t);
}

// A message of exactly max_message bytes is accepted; one byte more is not.
CD_TEST(proto_rpc_message_exactly_max_message) {
    for (int extra = 0; extra <= 1; extra++) {
        tp_bytes b = {0};
        tp_request_head(&b, 1, "m");
        tp_raw(&b, 1, 0x91);
        size_t body = CD_MAX_MESSAGE_MIN - b.n - 5 + (size_t)extra;
        tp_hdr32(&b, 0xc6, (uint32_t)body);
        char *z = calloc(1, body);
        tp_put(&b, z, body);
        free(z);
        CHECK_EQ(b.n, CD_MAX_MESSAGE_MIN + (size_t)extra);
        tp_result res = tp_decode_one(b.p, b.n, CD_MAX_MESSAGE_MIN);
        CHECK_EQ(res.rc, extra ? CD_ETOO_LARGE : 1);
        tp_bytes_free(&b);
    }
}

// Nested arrays, each within CD_MAX_CONTAINER, that together declare more
// elements than msgpack-c should ever allocate objects for.
CD_TEST(proto_rpc_total_elements_over_limit) {
    tp_bytes b = {0};
    tp_request_head(&b, 1, "m");
    tp_raw(&b, 1, 0x91);
    int outer = (int)(CD_MAX_ELEMENTS / CD_MAX_CONTAINER) + 1;
    tp_raw(&b, 3, 0xdc, outer >> 8, outer & 0xff);
    char *nils = malloc(CD_MAX_CONTAINER);
    memset(nils, 0xc0, CD_MAX_CONTAINER);
    for (int i = 0; i < outer; i++) {
        tp_hdr32(&b, 0xdd, CD_MAX_CONTAINER);
        tp_put(&b, nils, CD_MAX_CONTAINER);
    }
    free(nils);
    TP_EXPECT(b.p, b.n, CD_ETOO_LARGE);
    tp_bytes_free(&b);
}

// Many small pipelined requests (the hello/health path): prints the decode
// rate; the bound only catches a pathological slowdown.
CD_TEST(proto_rpc_small_messages_throughput) {
    tp_pack t;
    tp_pack_init(&t);
    int n = 200000;
    for (int i = 0; i < n; i++) pack_infer(&t, (uint32_t)i, "resnet50");
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    double t0 = tp_now();
    int got = 0;
    for (size_t off = 0; off < t.sb.size; off += 65536) {
        size_t len = t.sb.size - off < 65536 ? t.sb.size - off : 65536;
        CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data + off, len), 0);
        cd_rpc_msg m;
        while (cd_rpc_reader_next(r, &m, NULL, NULL, 0) == 1) {
            CHECK_EQ(m.msgid, (uint32_t)got);
            got++;
            cd_rpc_msg_free(&m);
        }
    }
    double dt = tp_now() - t0;
    CHECK_EQ(got, n);
    printf("  %d requests of %zu bytes in 64 KiB reads: %.0f ns/message\n", n, t.sb.size / (size_t)n, dt * 1e9 / n);
    CHECK(dt < 10.0);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}
