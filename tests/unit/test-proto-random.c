// proto/: randomised tests of the reader. Fresh random messages every run
// (CD_TEST_SEED reproduces one): valid streams fed in random chunk sizes must
// decode to exactly what was packed; randomly mutated streams must only ever
// yield a message, "need more", E_PROTOCOL or E_TOO_LARGE, never a crash (run
// these under make SAN=1 too).

#include "tests/unit/test-proto-util.h"

#include "proto/params.h"
#include "proto/tensor.h"

static void rand_bytes(char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (char)cd_test_rand();
}

// A length that is mostly small, sometimes crosses the 8/16-bit header forms.
static size_t rand_len(void) {
    int k = cd_test_randi(0, 99);
    if (k < 80) return (size_t)cd_test_randi(0, 40);
    if (k < 95) return (size_t)cd_test_randi(200, 300);
    return (size_t)cd_test_randi(65530, 70000);
}

static void pack_rand_str(msgpack_packer *pk, size_t max) {
    size_t n = rand_len();
    if (n > max) n = max;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = (char)cd_test_randi('a', 'z');
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
    free(s);
}

static void pack_rand_tensor(msgpack_packer *pk) {
    cd_tensor t = {.dtype = (cd_dtype)cd_test_randi(1, CD_DTYPE_BOOL), .rank = cd_test_randi(1, 4)};
    for (int i = 0; i < t.rank; i++) t.shape[i] = cd_test_randi(1, 5);
    t.nbytes = (size_t)cd_tensor_numel(&t) * cd_dtype_size(t.dtype);
    char *d = malloc(t.nbytes);
    rand_bytes(d, t.nbytes);
    t.data = d;
    CHECK_EQ(cd_tensor_pack(pk, &t), 0);
    free(d);
}

// Packs a random value; depth is the nesting it sits at (kept < CD_MAX_DEPTH).
static void pack_rand_value(msgpack_packer *pk, int depth) {
    int k = cd_test_randi(0, depth >= 6 ? 8 : 11);
    switch (k) {
    case 0: msgpack_pack_nil(pk); break;
    case 1: cd_test_rand() & 1 ? msgpack_pack_true(pk) : msgpack_pack_false(pk); break;
    case 2: msgpack_pack_uint64(pk, cd_test_rand() >> cd_test_randi(0, 63)); break;
    case 3: msgpack_pack_int64(pk, -(int64_t)(cd_test_rand() >> cd_test_randi(1, 63)) - 1); break;
    case 4:
        if (cd_test_rand() & 1)
            msgpack_pack_float(pk, cd_test_randf(-1e6f, 1e6f));
        else
            msgpack_pack_double(pk, (double)cd_test_randf(-1, 1) * 1e-300);
        break;
    case 5: pack_rand_str(pk, SIZE_MAX); break;
    case 6: {
        size_t n = rand_len();
        char *b = malloc(n + 1);
        rand_bytes(b, n);
        msgpack_pack_bin(pk, n);
        msgpack_pack_bin_body(pk, b, n);
        free(b);
        break;
    }
    case 7: {
        static const size_t fix[] = {1, 2, 4, 8, 16};
        size_t n = cd_test_rand() & 1 ? fix[cd_test_randi(0, 4)] : rand_len();
        char *b = malloc(n + 1);
        rand_bytes(b, n);
        msgpack_pack_ext(pk, n, (int8_t)cd_test_randi(-128, 127));
        msgpack_pack_ext_body(pk, b, n);
        free(b);
        break;
    }
    case 8: pack_rand_tensor(pk); break;
    case 9:
    case 10: {
        int n = cd_test_randi(0, 6);
        msgpack_pack_array(pk, (size_t)n);
        for (int i = 0; i < n; i++) pack_rand_value(pk, depth + 1);
        break;
    }
    default: {
        int n = cd_test_randi(0, 5);
        msgpack_pack_map(pk, (size_t)n);
        for (int i = 0; i < n; i++) {
            if (cd_test_randi(0, 3))
                pack_rand_str(pk, 20);
            else
                msgpack_pack_int(pk, cd_test_randi(-100, 100));
            pack_rand_value(pk, depth + 1);
        }
        break;
    }
    }
}

// Packs one random msgpack-RPC message of a random kind.
static void pack_rand_message(tp_pack *t) {
    msgpack_packer *pk = &t->pk;
    uint32_t msgid = (uint32_t)cd_test_rand();
    char method[CD_MAX_METHOD + 1];
    int mlen = cd_test_randi(0, CD_MAX_METHOD);
    for (int i = 0; i < mlen; i++) method[i] = (char)cd_test_randi('a', 'z');
    method[mlen] = '\0';
    int kind = cd_test_randi(0, 2);
    if (kind == CD_MSG_RESPONSE) {
        if (cd_test_rand() & 1) {
            CHECK_EQ(cd_rpc_pack_response_ok_begin(pk, msgid), 0);
            pack_rand_value(pk, 1);
        } else {
            CHECK_EQ(cd_rpc_pack_response_error(pk, msgid, -cd_test_randi(1, 22), method), 0);
        }
        return;
    }
    if (kind == CD_MSG_REQUEST)
        CHECK_EQ(cd_rpc_pack_request_begin(pk, msgid, method), 0);
    else
        CHECK_EQ(cd_rpc_pack_notify_begin(pk, method), 0);
    // Mostly the convd shape [ {k: v, ...} ], sometimes any value.
    if (cd_test_randi(0, 3)) {
        int n = cd_test_randi(0, 4);
        msgpack_pack_map(pk, (size_t)n);
        for (int i = 0; i < n; i++) {
            pack_rand_str(pk, 16);
            pack_rand_value(pk, 3);
        }
    } else {
        pack_rand_value(pk, 2);
    }
}

// Deep equality in which floats compare by their bits (mutated bytes make NaNs,
// which msgpack_object_equal calls unequal to themselves).
static bool obj_same(const msgpack_object *a, const msgpack_object *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return memcmp(&a->via.f64, &b->via.f64, sizeof a->via.f64) == 0;
    case MSGPACK_OBJECT_ARRAY:
        if (a->via.array.size != b->via.array.size) return false;
        for (uint32_t i = 0; i < a->via.array.size; i++)
            if (!obj_same(&a->via.array.ptr[i], &b->via.array.ptr[i])) return false;
        return true;
    case MSGPACK_OBJECT_MAP:
        if (a->via.map.size != b->via.map.size) return false;
        for (uint32_t i = 0; i < a->via.map.size; i++)
            if (!obj_same(&a->via.map.ptr[i].key, &b->via.map.ptr[i].key) ||
                !obj_same(&a->via.map.ptr[i].val, &b->via.map.ptr[i].val))
                return false;
        return true;
    default: return msgpack_object_equal(*a, *b);
    }
}

// Checks a message from the reader against the reference decoding of its bytes.
static void check_same(const cd_rpc_msg *m, const msgpack_object *ref) {
    CHECK_EQ(ref->type, MSGPACK_OBJECT_ARRAY);
    const msgpack_object *e = ref->via.array.ptr;
    CHECK_EQ(m->kind, (cd_msg_kind)e[0].via.u64);
    switch (m->kind) {
    case CD_MSG_REQUEST:
        CHECK_EQ(m->msgid, e[1].via.u64);
        CHECK_EQ(m->method_len, e[2].via.str.size);
        CHECK(m->method_len == 0 || memcmp(m->method, e[2].via.str.ptr, m->method_len) == 0);
        CHECK(obj_same(&m->params, &e[3]));
        break;
    case CD_MSG_RESPONSE:
        CHECK_EQ(m->msgid, e[1].via.u64);
        CHECK(obj_same(&m->error, &e[2]));
        CHECK(obj_same(&m->result, &e[3]));
        break;
    case CD_MSG_NOTIFY:
        CHECK_EQ(m->method_len, e[1].via.str.size);
        CHECK(obj_same(&m->params, &e[2]));
        break;
    }
}

// Feeds p in random chunk sizes, pulling messages after each feed; calls
// on_msg for each message (may be NULL). Returns the final status: 0 when the
// stream ended cleanly (possibly mid-message), else the error.
typedef void (*msg_fn)(const cd_rpc_msg *m, size_t index, void *ctx);

static int run_stream(cd_rpc_reader *r, const char *p, size_t n, msg_fn on_msg, void *ctx, size_t *count) {
    size_t off = 0, got = 0;
    int status = 0;
    while (off < n && status == 0) {
        size_t chunk = cd_test_randi(0, 3) ? (size_t)cd_test_randi(1, 64) : (size_t)cd_test_randi(1, 100000);
        if (chunk > n - off) chunk = n - off;
        int rc = cd_rpc_reader_feed(r, p + off, chunk);
        CHECK(rc == 0 || rc == CD_ETOO_LARGE);
        off += chunk;
        for (;;) {
            cd_rpc_msg m;
            uint32_t id;
            char err[256];
            rc = cd_rpc_reader_next(r, &m, &id, err, sizeof err);
            if (rc == 1) {
                if (on_msg) on_msg(&m, got, ctx);
                got++;
                cd_rpc_msg_free(&m);
                continue;
            }
            if (rc < 0) {
                CHECK(rc == CD_EPROTOCOL || rc == CD_ETOO_LARGE);
                CHECK(err[0] != '\0');
                status = rc;
            }
            break;
        }
    }
    *count = got;
    return status;
}

typedef struct {
    const char *bytes;
    size_t n;
    size_t off; // offset of the next reference message
} ref_ctx;

static void check_against_ref(const cd_rpc_msg *m, size_t index, void *vctx) {
    ref_ctx *c = vctx;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = c->off;
    CHECK_EQ(msgpack_unpack_next(&u, c->bytes, c->n, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(m->nbytes, off - c->off);
    check_same(m, &u.data);
    c->off = off;
    msgpack_unpacked_destroy(&u);
}

CD_TEST(proto_random_valid_streams_round_trip) {
    for (int it = 0; it < 300; it++) {
        tp_pack t;
        tp_pack_init(&t);
        int nmsg = cd_test_randi(1, 12);
        for (int i = 0; i < nmsg; i++) pack_rand_message(&t);
        cd_rpc_reader *r;
        CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
        ref_ctx c = {t.sb.data, t.sb.size, 0};
        size_t got;
        CHECK_EQ(run_stream(r, t.sb.data, t.sb.size, check_against_ref, &c, &got), 0);
        CHECK_EQ(got, (size_t)nmsg);
        CHECK_EQ(c.off, t.sb.size);
        CHECK_EQ(cd_rpc_reader_buffered(r), 0);
        cd_rpc_reader_free(r);
        tp_pack_free(&t);
    }
}

// Uses what a daemon would use on a decoded message, so that mutated values
// reach the tensor codec and the getters too.
static void exercise(const cd_rpc_msg *m, size_t index, void *ctx) {
    const msgpack_object *p = cd_rpc_params_map(m);
    char err[256], buf[CD_MAX_NAME + 1];
    if (p) {
        for (uint32_t i = 0; i < p->via.map.size; i++) {
            cd_tensor t;
            int rc = cd_tensor_decode(&p->via.map.ptr[i].val, &t, err, sizeof err);
            CHECK(rc == 0 || rc == CD_EPARAMS || rc == CD_EDTYPE || rc == CD_ESHAPE || rc == CD_ETOO_LARGE);
            if (rc == 0) CHECK_EQ((int64_t)t.nbytes, cd_tensor_numel(&t) * (int64_t)cd_dtype_size(t.dtype));
        }
        int64_t v;
        CHECK(cd_param_str(p, "model", buf, sizeof buf, err, sizeof err) <= 1);
        CHECK(cd_param_int(p, "timeout_ms", 0, 1000, &v, err, sizeof err) <= 1);
    }
    if (m->kind == CD_MSG_RESPONSE) {
        char msg[64];
        CHECK(cd_rpc_error_decode(&m->error, msg, sizeof msg) <= 0);
    }
    (void)ctx;
    (void)index;
}

typedef struct {
    const char *bytes;
    size_t n;
    size_t off;
    size_t max_message;
} diff_ctx;

// Whatever the reader accepts, msgpack-c agrees it is one object of exactly
// those bytes.
static void check_agrees_with_msgpack(const cd_rpc_msg *m, size_t index, void *vctx) {
    diff_ctx *c = vctx;
    CHECK(m->nbytes <= c->max_message);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = c->off;
    CHECK_EQ(msgpack_unpack_next(&u, c->bytes, c->n, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(off - c->off, m->nbytes);
    check_same(m, &u.data);
    c->off = off;
    msgpack_unpacked_destroy(&u);
    exercise(m, index, NULL);
}

static void mutate(tp_bytes *b) {
    static const unsigned char interesting[] = {0xc1, 0xdd, 0xdf, 0xdb, 0xc6, 0xc9, 0xdc, 0xde, 0xff, 0x00,
                                                0x7f, 0x80, 0x90, 0xa0, 0xc0, 0xcf, 0xd3, 0xd8, 0x9f, 0x8f};
    int nmut = cd_test_randi(1, 4);
    for (int k = 0; k < nmut && b->n > 0; k++) {
        size_t at = cd_test_rand() % b->n;
        switch (cd_test_randi(0, 5)) {
        case 0: b->p[at] = (char)cd_test_rand(); break;
        case 1: b->p[at] = (char)interesting[cd_test_randi(0, sizeof interesting - 1)]; break;
        case 2: b->p[at] ^= (char)(1 << cd_test_randi(0, 7)); break;
        case 3: { // insert a few random bytes
            size_t n = (size_t)cd_test_randi(1, 8);
            char ins[8];
            rand_bytes(ins, n);
            tp_put(b, ins, n); // grow, then shift the tail
            memmove(b->p + at + n, b->p + at, b->n - n - at);
            memcpy(b->p + at, ins, n);
            break;
        }
        case 4: { // delete a range
            size_t n = (size_t)cd_test_randi(1, 16);
            if (n > b->n - at) n = b->n - at;
            memmove(b->p + at, b->p + at + n, b->n - at - n);
            b->n -= n;
            break;
        }
        default: // truncate
            b->n = at;
            break;
        }
    }
}

CD_TEST(proto_random_mutations_never_crash) {
    int outcome[4] = {0}; // clean end, E_PROTOCOL, E_TOO_LARGE, some message decoded
    for (int it = 0; it < 4000; it++) {
        tp_pack t;
        tp_pack_init(&t);
        int nmsg = cd_test_randi(1, 3);
        for (int i = 0; i < nmsg; i++) pack_rand_message(&t);
        tp_bytes b = {0};
        tp_put(&b, t.sb.data, t.sb.size);
        tp_pack_free(&t);
        mutate(&b);
        size_t max = cd_test_randi(0, 1) ? CD_MAX_MESSAGE_MIN : CD_MAX_MESSAGE_DEFAULT;
        cd_rpc_reader *r;
        CHECK_EQ(cd_rpc_reader_init(&r, max), 0);
        diff_ctx c = {b.p, b.n, 0, max};
        size_t got;
        int rc = run_stream(r, b.p, b.n, check_agrees_with_msgpack, &c, &got);
        outcome[rc == 0 ? 0 : rc == CD_EPROTOCOL ? 1 : 2]++;
        if (got) outcome[3]++;
        // A dead stream stays dead and buffers nothing more.
        if (rc < 0) {
            size_t before = cd_rpc_reader_buffered(r);
            int frc = cd_rpc_reader_feed(r, "\x94\x00\x01\xa1m\x90", 6);
            CHECK(frc == 0 || frc == CD_ETOO_LARGE);
            CHECK_EQ(cd_rpc_reader_buffered(r), before);
            cd_rpc_msg m;
            CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), rc);
        }
        cd_rpc_reader_free(r);
        tp_bytes_free(&b);
    }
    printf("  4000 mutated streams: %d ended cleanly, %d E_PROTOCOL, %d E_TOO_LARGE, "
           "%d yielded messages\n",
           outcome[0], outcome[1], outcome[2], outcome[3]);
    // The mutations must reach every outcome, or the test is not testing much.
    CHECK(outcome[0] > 0 && outcome[1] > 0 && outcome[2] > 0 && outcome[3] > 0);
}

// Random bytes, no structure at all.
CD_TEST(proto_random_garbage_never_crashes) {
    for (int it = 0; it < 2000; it++) {
        size_t n = (size_t)cd_test_randi(1, 512);
        char *p = malloc(n);
        rand_bytes(p, n);
        // Often start like a request so the garbage gets past the first header.
        if (cd_test_rand() & 1) p[0] = (char)0x94;
        if (n > 1 && (cd_test_rand() & 1)) p[1] = 0x00;
        cd_rpc_reader *r;
        CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_MIN), 0);
        diff_ctx c = {p, n, 0, CD_MAX_MESSAGE_MIN};
        size_t got;
        run_stream(r, p, n, check_agrees_with_msgpack, &c, &got);
        cd_rpc_reader_free(r);
        free(p);
    }
}
