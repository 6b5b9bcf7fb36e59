// daemon/validate.c: from the bytes of a request to a validated infer, as
// the daemon and the wire fuzz target run it. Inputs are the bytes a client
// sends (packed here, or as found by the fuzzer).

#include "tests/unit/check.h"

#include "core/errors.h"
#include "core/limits.h"
#include "daemon/stats.h"
#include "daemon/validate.h"
#include "proto/rpc.h"

#include <msgpack.h>

static const cd_io_desc in_x = {"x", CD_DTYPE_F32, 4, {1, 3, 2, 2}};
static const cd_io_desc out_y = {"y", CD_DTYPE_F32, 2, {1, 10}};
static const cd_io_desc out_big = {"big", CD_DTYPE_F32, 3, {1, 1 << 20, 1 << 12}};

static cd_infer_sig sig(void) {
    cd_infer_sig s = {
        .model = "m", .nin = 1, .nout = 1, .in = {&in_x}, .out = {&out_y}, .max_batch = 4, .max_reply = 1 << 20};
    return s;
}

// Reads one message from bytes; CHECKs that it is a whole request.
static void read_msg(const char *bytes, size_t n, cd_rpc_msg *m) {
    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(cd_rpc_reader_feed(r, bytes, n), 0);
    char err[256];
    CHECK_EQ(cd_rpc_reader_next(r, m, NULL, err, sizeof err), 1);
    cd_rpc_reader_free(r);
}

static void pk_str(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

// [0, 1, "infer", [{model: "m", inputs: {x: {dtype, shape, data}}, (outputs)}]]
// with the given shape (rank 4) and data of exactly its size.
static void pack_infer(msgpack_sbuffer *sb, const int64_t shape[4], int noutputs, const char *output) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    CHECK_EQ(cd_rpc_pack_request_begin(&pk, 1, "infer"), 0);
    msgpack_pack_map(&pk, output || noutputs == 0 ? 3 : 2);
    pk_str(&pk, "model");
    pk_str(&pk, "m");
    pk_str(&pk, "inputs");
    msgpack_pack_map(&pk, 1);
    pk_str(&pk, "x");
    msgpack_pack_map(&pk, 3);
    pk_str(&pk, "dtype");
    pk_str(&pk, "f32");
    pk_str(&pk, "shape");
    msgpack_pack_array(&pk, 4);
    size_t n = 4;
    for (int i = 0; i < 4; i++) {
        msgpack_pack_int64(&pk, shape[i]);
        n *= (size_t)shape[i];
    }
    pk_str(&pk, "data");
    char *z = calloc(1, n + 1);
    msgpack_pack_bin(&pk, n);
    msgpack_pack_bin_body(&pk, z, n);
    free(z);
    if (output) {
        pk_str(&pk, "outputs");
        msgpack_pack_array(&pk, 1);
        pk_str(&pk, output);
    } else if (noutputs == 0) {
        pk_str(&pk, "outputs");
        msgpack_pack_array(&pk, 0);
    }
}

// Validates the request in sb against s; returns the code, fills *a.
static int validate(msgpack_sbuffer *sb, const cd_infer_sig *s, cd_infer_args *a, cd_rpc_msg *m) {
    read_msg(sb->data, sb->size, m);
    const msgpack_object *params;
    char err[256] = "";
    CHECK_EQ(cd_params_map(m, &params, err, sizeof err), 0);
    CHECK(params != NULL);
    CHECK_EQ(cd_infer_check_keys(params, err, sizeof err), 0);
    memset(a, 0, sizeof *a);
    int rc = cd_infer_validate(params, s, a, err, sizeof err);
    if (rc != 0) CHECK(err[0] != '\0');
    return rc;
}

CD_TEST(daemon_validate_infer_ok_points_into_the_message) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int64_t shape[4] = {2, 3, 2, 2};
    pack_infer(&sb, shape, 1, NULL);
    cd_infer_sig s = sig();
    cd_infer_args a;
    cd_rpc_msg m;
    CHECK_EQ(validate(&sb, &s, &a, &m), 0);
    CHECK_EQ(a.batch, 2);
    CHECK_EQ(a.in_bytes[0], 2 * 3 * 2 * 2 * 4);
    CHECK((const char *)a.in[0] >= m.bytes_ && (const char *)a.in[0] + a.in_bytes[0] <= m.bytes_ + m.nbytes);
    CHECK(a.want[0]);
    CHECK_EQ(a.out_bytes[0], 2 * 10 * 4);
    cd_rpc_msg_free(&m);
    msgpack_sbuffer_destroy(&sb);
}

CD_TEST(daemon_validate_infer_exact_codes) {
    struct {
        int64_t shape[4];
        int noutputs;
        const char *output;
        int code;
    } cases[] = {
        {{0, 3, 2, 2}, 1, NULL, CD_ESHAPE},                                        // a dim of 0: empty tensor
        {{1, 0, 2, 2}, 1, NULL, CD_ESHAPE},    {{5, 3, 2, 2}, 1, NULL, CD_ESHAPE}, // over max_batch
        {{1, 3, 2, 3}, 1, NULL, CD_ESHAPE},                                        // wrong dim
        {{1, 3, 2, 2}, 0, NULL, CD_EPARAMS},                                       // outputs []
        {{1, 3, 2, 2}, 1, "nope", CD_EPARAMS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        pack_infer(&sb, cases[i].shape, cases[i].noutputs, cases[i].output);
        cd_infer_sig s = sig();
        cd_infer_args a;
        cd_rpc_msg m;
        CHECK_EQ(validate(&sb, &s, &a, &m), cases[i].code);
        cd_rpc_msg_free(&m);
        msgpack_sbuffer_destroy(&sb);
    }
}

CD_TEST(daemon_validate_infer_reply_limits_before_running) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int64_t shape[4] = {1, 3, 2, 2};
    pack_infer(&sb, shape, 1, NULL);
    cd_infer_sig s = sig();
    s.max_reply = 64; // the reply of 10 floats does not fit
    cd_infer_args a;
    cd_rpc_msg m;
    CHECK_EQ(validate(&sb, &s, &a, &m), CD_ETOO_LARGE);
    cd_rpc_msg_free(&m);
    s = sig();
    s.out[0] = &out_big; // 16 GiB per item: not one msgpack bin
    s.max_reply = UINT64_MAX;
    CHECK_EQ(validate(&sb, &s, &a, &m), CD_ETOO_LARGE);
    cd_rpc_msg_free(&m);
    msgpack_sbuffer_destroy(&sb);
}

// Found by the wire fuzz target: a request whose method is an empty bin
// (method NULL, length 0) and whose params are []. Unknown method, no params
// map: nothing read through the NULL.
CD_TEST(daemon_validate_empty_bin_method) {
    static const char bytes[] = "\x94\x00\x07\xc4\x00\x90";
    cd_rpc_msg m;
    read_msg(bytes, sizeof bytes - 1, &m);
    CHECK_EQ(m.method_len, 0);
    CHECK_EQ(cd_method_lookup(m.method, m.method_len), CD_M_unknown);
    const msgpack_object *params;
    char err[256];
    CHECK_EQ(cd_params_map(&m, &params, err, sizeof err), 0);
    CHECK(params == NULL);
    cd_rpc_msg_free(&m);
}
