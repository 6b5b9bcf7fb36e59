// proto/: text sent as bin (valid UTF-8 only), lenient notifications, error
// messages that stay UTF-8, skipping a message without losing the stream,
// the committed size a memory budget charges, and the reply size checks.

#include "tests/unit/test-proto-util.h"

#include "proto/params.h"
#include "proto/tensor.h"

// ---- UTF-8 -------------------------------------------------------------------

CD_TEST(proto_utf8_valid_and_invalid_forms) {
    static const struct {
        const char *s;
        size_t n;
        bool ok;
    } cases[] = {
        {"", 0, true},
        {"infer", 5, true},
        {"caf\xc3\xa9", 5, true},      // U+00E9
        {"\xe2\x82\xac", 3, true},     // U+20AC
        {"\xf0\x9f\x98\x80", 4, true}, // U+1F600
        {"\xf4\x8f\xbf\xbf", 4, true}, // U+10FFFF
        {"a\0b", 3, true},             // NUL is UTF-8 (params refuse it)
        {"\xff", 1, false},
        {"\x80", 1, false},             // lone continuation byte
        {"\xc3", 1, false},             // truncated
        {"\xc0\xaf", 2, false},         // overlong '/'
        {"\xc1\xbf", 2, false},         // overlong
        {"\xe0\x80\xaf", 3, false},     // overlong
        {"\xed\xa0\x80", 3, false},     // surrogate U+D800
        {"\xf0\x80\x80\xaf", 4, false}, // overlong
        {"\xf4\x90\x80\x80", 4, false}, // above U+10FFFF
        {"\xf5\x80\x80\x80", 4, false},
        {"\xe2\x82", 2, false},       // truncated 3-byte form
        {"\xe2\x28\xa1", 3, false},   // bad continuation
        {"ok\xc3\xa9\xff", 5, false}, // bad byte at the end
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cd_utf8_valid(cases[i].s, cases[i].n) != cases[i].ok)
            CD_CHECK_FAIL_("case %zu: expected %s", i, cases[i].ok ? "valid" : "invalid");
    }
}

// A map {key(as bin): value(as bin)} decoded, for the getters.
static const msgpack_object *bin_map(tp_pack *t, msgpack_unpacked *u, const char *key, const char *val, size_t vlen) {
    tp_pack_init(t);
    msgpack_pack_map(&t->pk, 1);
    msgpack_pack_bin(&t->pk, strlen(key));
    msgpack_pack_bin_body(&t->pk, key, strlen(key));
    msgpack_pack_bin(&t->pk, vlen);
    msgpack_pack_bin_body(&t->pk, val, vlen);
    msgpack_unpacked_init(u);
    size_t off = 0;
    CHECK_EQ(msgpack_unpack_next(u, t->sb.data, t->sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    return &u->data;
}

CD_TEST(proto_params_bin_is_text_when_utf8) {
    tp_pack t;
    msgpack_unpacked u;
    const msgpack_object *m = bin_map(&t, &u, "model", "r\xc3\xa9snet", 7);
    char buf[32], err[128];
    CHECK_EQ(cd_param_str(m, "model", buf, sizeof buf, err, sizeof err), 0);
    CHECK(strcmp(buf, "r\xc3\xa9snet") == 0);
    CHECK(cd_obj_streq(cd_map_get(m, "model"), "r\xc3\xa9snet"));
    msgpack_unpacked_destroy(&u);
    tp_pack_free(&t);

    m = bin_map(&t, &u, "model", "r\xffx", 3);
    CHECK(cd_map_get(m, "model") != NULL); // the key is valid UTF-8
    CHECK_EQ(cd_param_str(m, "model", buf, sizeof buf, err, sizeof err), CD_EPARAMS);
    CHECK(strstr(err, "not valid UTF-8") != NULL);
    CHECK(!cd_obj_streq(cd_map_get(m, "model"), "r\xffx"));
    const char *s;
    size_t n;
    CHECK(!cd_obj_text(cd_map_get(m, "model"), &s, &n));
    CHECK(!cd_obj_text(NULL, &s, &n));
    msgpack_unpacked_destroy(&u);
    tp_pack_free(&t);

    m = bin_map(&t, &u, "\xff", "x", 1); // a key that is not text matches nothing
    CHECK_EQ(m->via.map.size, 1);
    CHECK(cd_map_get(m, "\xff") == NULL);
    msgpack_unpacked_destroy(&u);
    tp_pack_free(&t);
}

CD_TEST(proto_tensor_keys_and_dtype_as_bin) {
    tp_pack t;
    tp_pack_init(&t);
    float x[2] = {1, 2};
    msgpack_pack_map(&t.pk, 3);
    msgpack_pack_bin(&t.pk, 5), msgpack_pack_bin_body(&t.pk, "dtype", 5);
    msgpack_pack_bin(&t.pk, 3), msgpack_pack_bin_body(&t.pk, "f32", 3);
    msgpack_pack_bin(&t.pk, 5), msgpack_pack_bin_body(&t.pk, "shape", 5);
    msgpack_pack_array(&t.pk, 1), msgpack_pack_int(&t.pk, 2);
    msgpack_pack_bin(&t.pk, 4), msgpack_pack_bin_body(&t.pk, "data", 4);
    msgpack_pack_bin(&t.pk, 8), msgpack_pack_bin_body(&t.pk, x, 8);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    CHECK_EQ(msgpack_unpack_next(&u, t.sb.data, t.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    cd_tensor ten;
    char err[200];
    CHECK_EQ(cd_tensor_decode(&u.data, &ten, err, sizeof err), 0);
    CHECK_EQ(ten.dtype, CD_DTYPE_F32);
    CHECK_EQ(ten.nbytes, 8);
    msgpack_unpacked_destroy(&u);
    tp_pack_free(&t);

    // dtype as a bin that is not UTF-8: not a str (E_PARAMS), not an unknown name
    tp_pack_init(&t);
    msgpack_pack_map(&t.pk, 3);
    tp_pack_str(&t, "dtype"), msgpack_pack_bin(&t.pk, 2), msgpack_pack_bin_body(&t.pk, "\xff\xfe", 2);
    tp_pack_str(&t, "shape"), msgpack_pack_array(&t.pk, 1), msgpack_pack_int(&t.pk, 2);
    tp_pack_str(&t, "data"), msgpack_pack_bin(&t.pk, 8), msgpack_pack_bin_body(&t.pk, x, 8);
    msgpack_unpacked_init(&u);
    off = 0;
    CHECK_EQ(msgpack_unpack_next(&u, t.sb.data, t.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(cd_tensor_decode(&u.data, &ten, err, sizeof err), CD_EPARAMS);
    CHECK(cd_utf8_valid(err, strlen(err)));
    msgpack_unpacked_destroy(&u);
    tp_pack_free(&t);
}

// ---- envelopes -----------------------------------------------------------------

// Feeds bytes into a fresh reader and takes one message.
static int read_one(const char *p, size_t n, cd_rpc_msg *m, uint32_t *id, char *err, size_t errlen) {
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, p, n), 0);
    int rc = cd_rpc_reader_next(r, m, id, err, errlen);
    cd_rpc_reader_free(r);
    return rc;
}

CD_TEST(proto_rpc_method_as_bin) {
    // What msgpack-python packs for [0, 3, b"hello", []] with use_bin_type=True.
    tp_bytes b = {0};
    tp_raw(&b, 3, 0x94, 0x00, 0x03);
    tp_raw(&b, 2, 0xc4, 5);
    tp_put(&b, "hello", 5);
    tp_raw(&b, 1, 0x90);
    cd_rpc_msg m;
    uint32_t id;
    char err[256];
    CHECK_EQ(read_one(b.p, b.n, &m, &id, err, sizeof err), 1);
    CHECK_EQ(m.kind, CD_MSG_REQUEST);
    CHECK_EQ(m.method_len, 5);
    CHECK(memcmp(m.method, "hello", 5) == 0);
    cd_rpc_msg_free(&m);
    tp_bytes_free(&b);

    // A request whose method is a bin that is not UTF-8: a bad envelope.
    tp_raw(&b, 3, 0x94, 0x00, 0x04);
    tp_raw(&b, 4, 0xc4, 2, 0xff, 0xfe);
    tp_raw(&b, 1, 0x90);
    CHECK_EQ(read_one(b.p, b.n, &m, &id, err, sizeof err), CD_EPROTOCOL);
    CHECK_EQ(id, 4);
    CHECK(strstr(err, "not valid UTF-8") != NULL);
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_notification_any_name_is_accepted) {
    cd_rpc_msg m;
    uint32_t id;
    char err[256];
    // [2, b"\xff\xfe", []]: a bin that is not UTF-8
    tp_bytes b = {0};
    tp_raw(&b, 2, 0x93, 0x02);
    tp_raw(&b, 4, 0xc4, 2, 0xff, 0xfe);
    tp_raw(&b, 1, 0x90);
    CHECK_EQ(read_one(b.p, b.n, &m, &id, err, sizeof err), 1);
    CHECK_EQ(m.kind, CD_MSG_NOTIFY);
    CHECK_EQ(m.method_len, 2);
    cd_rpc_msg_free(&m);
    tp_bytes_free(&b);
    // [2, "x" * 100, []]: longer than a method may be; ignored all the same
    tp_raw(&b, 4, 0x93, 0x02, 0xd9, 100);
    for (int i = 0; i < 100; i++) tp_raw(&b, 1, 'x');
    tp_raw(&b, 1, 0x90);
    CHECK_EQ(read_one(b.p, b.n, &m, &id, err, sizeof err), 1);
    CHECK_EQ(m.kind, CD_MSG_NOTIFY);
    CHECK_EQ(m.method_len, 100);
    cd_rpc_msg_free(&m);
    tp_bytes_free(&b);
    // [2, 7, []]: a method that is no name at all is still a bad envelope
    tp_raw(&b, 4, 0x93, 0x02, 0x07, 0x90);
    CHECK_EQ(read_one(b.p, b.n, &m, &id, err, sizeof err), CD_EPROTOCOL);
    tp_bytes_free(&b);
}

CD_TEST(proto_rpc_error_message_is_made_utf8) {
    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_response_error(&t.pk, 9, CD_ENOT_FOUND, "no model named 'a\xff\xc3'"), 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    CHECK_EQ(msgpack_unpack_next(&u, t.sb.data, t.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *e = &u.data.via.array.ptr[2];
    const msgpack_object *msg = cd_map_get(e, "message");
    CHECK(msg && msg->type == MSGPACK_OBJECT_STR);
    CHECK(cd_utf8_valid(msg->via.str.ptr, msg->via.str.size));
    CHECK(cd_obj_streq(msg, "no model named 'a\\xff\\xc3'"));
    msgpack_unpacked_destroy(&u);
    tp_pack_free(&t);
}

// ---- skipping a message ----------------------------------------------------------

// [0, msgid, "infer", [bin of n bytes]]
static void pack_big(tp_pack *t, uint32_t msgid, size_t n) {
    CHECK_EQ(cd_rpc_pack_request_begin(&t->pk, msgid, "infer"), 0);
    char *blob = calloc(1, n ? n : 1);
    msgpack_pack_bin(&t->pk, n);
    msgpack_pack_bin_body(&t->pk, blob, n);
    free(blob);
}

CD_TEST(proto_rpc_committed_size_from_headers) {
    tp_pack t;
    tp_pack_init(&t);
    pack_big(&t, 7, 1u << 20);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_committed(r), 0);
    CHECK(!cd_rpc_reader_partial(r));
    // Up to and including the bin header: the whole size is committed.
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, 20), 0);
    CHECK_EQ(cd_rpc_reader_buffered(r), 20);
    CHECK_EQ(cd_rpc_reader_committed(r), t.sb.size);
    CHECK(cd_rpc_reader_partial(r));
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data + 20, t.sb.size - 20), 0);
    CHECK(!cd_rpc_reader_partial(r));
    CHECK_EQ(cd_rpc_reader_committed(r), t.sb.size);
    cd_rpc_msg m;
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
    CHECK_EQ(cd_rpc_reader_committed(r), 0);
    cd_rpc_msg_free(&m);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

// A 4 MiB message given up after its first read, fed in 64 KiB pieces with a
// normal message after it: the skipped one is reported once with its msgid,
// the reader never holds more than a read of it, the next one is intact.
CD_TEST(proto_rpc_skip_keeps_the_stream_in_sync) {
    size_t big = 4u << 20, chunk = 64u << 10;
    tp_pack t;
    tp_pack_init(&t);
    pack_big(&t, 11, big);
    size_t first = t.sb.size;
    CHECK_EQ(cd_rpc_pack_request_begin(&t.pk, 12, "hello"), 0);
    msgpack_pack_nil(&t.pk);
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data, chunk), 0);
    CHECK(cd_rpc_reader_partial(r));
    cd_rpc_reader_skip(r);
    CHECK(!cd_rpc_reader_partial(r));
    CHECK_EQ(cd_rpc_reader_buffered(r), 0);
    cd_rpc_msg m;
    uint32_t id;
    char err[256];
    size_t off = chunk, most = 0;
    int skipped = 0, got = 0;
    while (off < t.sb.size || got == 0) {
        size_t n = t.sb.size - off < chunk ? t.sb.size - off : chunk;
        if (n) CHECK_EQ(cd_rpc_reader_feed(r, t.sb.data + off, n), 0);
        off += n;
        if (cd_rpc_reader_buffered(r) > most) most = cd_rpc_reader_buffered(r);
        int rc;
        while ((rc = cd_rpc_reader_next(r, &m, &id, err, sizeof err)) != 0) {
            if (rc == CD_RPC_SKIPPED) {
                CHECK_EQ(m.kind, CD_MSG_REQUEST);
                CHECK_EQ(id, 11);
                skipped++;
                CHECK_EQ(got, 0);
            } else {
                CHECK_EQ(rc, 1);
                CHECK_EQ(m.msgid, 12);
                CHECK_EQ(m.method_len, 5);
                CHECK_EQ(m.nbytes, t.sb.size - first);
                cd_rpc_msg_free(&m);
                got++;
            }
        }
        if (n == 0) break;
    }
    CHECK_EQ(skipped, 1);
    CHECK_EQ(got, 1);
    CHECK(most <= chunk);
    CHECK_EQ(cd_rpc_reader_buffered(r), 0);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
}

// Limits still hold while skipping: a later header over max_message is an
// error, as it would have been.
CD_TEST(proto_rpc_skip_still_checks_limits) {
    tp_bytes b = {0};
    tp_raw(&b, 3, 0x94, 0x00, 0x05);
    tp_fixstr(&b, "infer");
    tp_raw(&b, 1, 0x92);
    tp_hdr32(&b, 0xc6, 100);
    for (int i = 0; i < 100; i++) tp_raw(&b, 1, 0);
    tp_hdr32(&b, 0xc6, 1u << 30); // over max_message
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, 1u << 20), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, b.p, 20), 0);
    cd_rpc_reader_skip(r);
    CHECK_EQ(cd_rpc_reader_feed(r, b.p + 20, b.n - 20), CD_ETOO_LARGE);
    cd_rpc_msg m;
    uint32_t id;
    CHECK_EQ(cd_rpc_reader_next(r, &m, &id, NULL, 0), CD_ETOO_LARGE);
    CHECK_EQ(id, 5);
    cd_rpc_reader_free(r);
    tp_bytes_free(&b);
}

// ---- replies over 4 GiB ------------------------------------------------------------

CD_TEST(proto_tensor_pack_refuses_over_4gib) {
    // No 4 GiB buffer: the check looks at nbytes only and packs nothing.
    cd_tensor t = {.dtype = CD_DTYPE_F32,
                   .rank = 2,
                   .shape = {1u << 20, 1025},
                   .data = NULL,
                   .nbytes = (size_t)(1u << 20) * 1025 * 4};
    char err[200];
    CHECK_EQ(cd_tensor_pack_check(&t, err, sizeof err), CD_ETOO_LARGE);
    CHECK(strstr(err, "4299161600") != NULL);
    tp_pack p;
    tp_pack_init(&p);
    CHECK_EQ(cd_tensor_pack(&p.pk, &t), CD_ETOO_LARGE);
    CHECK_EQ(p.sb.size, 0);
    tp_pack_free(&p);
    t.nbytes = CD_MAX_BIN;
    CHECK_EQ(cd_tensor_pack_check(&t, err, sizeof err), 0);
    t.nbytes = (size_t)CD_MAX_BIN + 1;
    CHECK_EQ(cd_tensor_pack_check(&t, NULL, 0), CD_ETOO_LARGE);
}

CD_TEST(proto_reply_size_check) {
    float x[6] = {0};
    cd_tensor t = {.dtype = CD_DTYPE_F32, .rank = 2, .shape = {2, 3}, .data = x, .nbytes = sizeof x};
    tp_pack p;
    tp_pack_init(&p);
    CHECK_EQ(cd_tensor_pack(&p.pk, &t), 0);
    uint64_t bound = cd_tensor_packed_size(&t);
    CHECK(bound >= p.sb.size);
    CHECK(bound <= p.sb.size + 64);
    tp_pack_free(&p);
    // 5 GiB of output, computed, against a 4 GiB limit.
    t.rank = 1;
    t.shape[0] = (int64_t)5 << 28;
    t.nbytes = (size_t)5 << 30;
    char err[200];
    CHECK_EQ(cd_reply_size_check(cd_tensor_packed_size(&t), 4ull << 30, err, sizeof err), CD_ETOO_LARGE);
    CHECK(strstr(err, "over the limit of 4294967296") != NULL);
    CHECK_EQ(cd_reply_size_check(1000, 1000, err, sizeof err), 0);
    CHECK_EQ(cd_reply_size_check(1001, 1000, NULL, 0), CD_ETOO_LARGE);
}
