// proto/: the tensor codec. Round trips through the reader (zero-copy), and
// one test per malformed tensor asserting the exact code.

#include "tests/unit/test-proto-util.h"

#include "proto/params.h"
#include "proto/tensor.h"

static void pk_key(tp_pack *t, const char *k) { tp_pack_str(t, k); }

static void pk_shape(tp_pack *t, const int64_t *dims, int rank) {
    CHECK_EQ(msgpack_pack_array(&t->pk, (size_t)rank), 0);
    for (int i = 0; i < rank; i++) CHECK_EQ(msgpack_pack_int64(&t->pk, dims[i]), 0);
}

static void pk_bin(tp_pack *t, size_t n) {
    char *z = calloc(1, n ? n : 1);
    CHECK_EQ(msgpack_pack_bin(&t->pk, n), 0);
    CHECK_EQ(msgpack_pack_bin_body(&t->pk, z, n), 0);
    free(z);
}

// Packs {dtype, shape, data} with data of nbytes zero bytes.
static void pk_tensor(tp_pack *t, const char *dtype, const int64_t *dims, int rank, size_t nbytes) {
    CHECK_EQ(msgpack_pack_map(&t->pk, 3), 0);
    pk_key(t, "dtype");
    tp_pack_str(t, dtype);
    pk_key(t, "shape");
    pk_shape(t, dims, rank);
    pk_key(t, "data");
    pk_bin(t, nbytes);
}

// Decodes the single object packed in t; returns cd_tensor_decode's result.
static int decode_packed(tp_pack *t, char *err, size_t errlen) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    CHECK_EQ(msgpack_unpack_next(&u, t->sb.data, t->sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(off, t->sb.size);
    cd_tensor tensor;
    char buf[256];
    if (!err) err = buf, errlen = sizeof buf;
    int rc = cd_tensor_decode(&u.data, &tensor, err, errlen);
    if (rc < 0) CHECK(err[0] != '\0'); // every rejection says why
    msgpack_unpacked_destroy(&u);
    tp_pack_free(t);
    return rc;
}

#define EXPECT_TENSOR(packing, code)                            \
    do {                                                        \
        tp_pack t_;                                             \
        tp_pack_init(&t_);                                      \
        tp_pack *t = &t_;                                       \
        packing;                                                \
        char e_[256];                                           \
        int rc_ = decode_packed(t, e_, sizeof e_);              \
        if (rc_ != (code)) fprintf(stderr, "reason: %s\n", e_); \
        CHECK_EQ(rc_, (code));                                  \
    } while (0)

// ---- round trips ------------------------------------------------------------

// Packs a request carrying {"x": tensor} with random data, reads it back
// through the reader fed in odd-sized chunks and checks every field, and that
// data points into the message's own bytes.
static void round_trip(cd_dtype dt, const int64_t *dims, int rank) {
    cd_tensor in = {.dtype = dt, .rank = rank};
    memcpy(in.shape, dims, (size_t)rank * sizeof *dims);
    int64_t numel = cd_tensor_numel(&in);
    CHECK(numel > 0);
    in.nbytes = (size_t)numel * cd_dtype_size(dt);
    unsigned char *data = malloc(in.nbytes);
    for (size_t i = 0; i < in.nbytes; i++) data[i] = (unsigned char)cd_test_rand();
    in.data = data;

    tp_pack t;
    tp_pack_init(&t);
    CHECK_EQ(cd_rpc_pack_request_begin(&t.pk, 11, "infer"), 0);
    CHECK_EQ(msgpack_pack_map(&t.pk, 1), 0);
    pk_key(&t, "x");
    CHECK_EQ(cd_tensor_pack(&t.pk, &in), 0);

    cd_rpc_reader *r;
    CHECK_EQ(cd_rpc_reader_init(&r, CD_MAX_MESSAGE_DEFAULT), 0);
    CHECK_EQ(tp_feed(r, t.sb.data, t.sb.size, 1 + cd_test_rand() % 977), 0);
    cd_rpc_msg m;
    CHECK_EQ(cd_rpc_reader_next(r, &m, NULL, NULL, 0), 1);
    cd_tensor out;
    char err[256];
    int rc = cd_tensor_decode(cd_map_get(cd_rpc_params_map(&m), "x"), &out, err, sizeof err);
    if (rc) fprintf(stderr, "reason: %s\n", err);
    CHECK_EQ(rc, 0);
    CHECK_EQ(out.dtype, dt);
    CHECK_EQ(out.rank, rank);
    for (int i = 0; i < rank; i++) CHECK_EQ(out.shape[i], dims[i]);
    CHECK_EQ(out.nbytes, in.nbytes);
    CHECK(memcmp(out.data, data, in.nbytes) == 0);
    CHECK((const char *)out.data >= m.bytes_);
    CHECK((const char *)out.data + out.nbytes <= m.bytes_ + m.nbytes);
    cd_rpc_msg_free(&m);
    cd_rpc_reader_free(r);
    tp_pack_free(&t);
    free(data);
}

CD_TEST(proto_tensor_f32_round_trip) {
    int64_t d[4] = {2, 3, cd_test_randi(1, 17), cd_test_randi(1, 17)};
    round_trip(CD_DTYPE_F32, d, 4);
}

CD_TEST(proto_tensor_f16_round_trip) {
    int64_t d[2] = {cd_test_randi(1, 64), cd_test_randi(1, 64)};
    round_trip(CD_DTYPE_F16, d, 2);
}

CD_TEST(proto_tensor_i8_round_trip) {
    int64_t d[3] = {cd_test_randi(1, 9), 1, cd_test_randi(1, 300)};
    round_trip(CD_DTYPE_I8, d, 3);
}

CD_TEST(proto_tensor_i64_round_trip) {
    int64_t d[1] = {cd_test_randi(1, 1000)};
    round_trip(CD_DTYPE_I64, d, 1);
}

CD_TEST(proto_tensor_rank_8_accepted) {
    int64_t d[8] = {1, 2, 1, 3, 1, 2, 1, 2};
    round_trip(CD_DTYPE_U8, d, 8);
}

CD_TEST(proto_tensor_random_round_trips) {
    for (int it = 0; it < 200; it++) {
        cd_dtype dt = (cd_dtype)cd_test_randi(1, CD_DTYPE_BOOL);
        int rank = cd_test_randi(1, CD_MAX_RANK);
        int64_t d[CD_MAX_RANK];
        for (int i = 0; i < rank; i++) d[i] = cd_test_randi(1, rank > 4 ? 3 : 12);
        round_trip(dt, d, rank);
    }
}

CD_TEST(proto_tensor_dtype_table) {
    size_t sizes[] = {0, 4, 2, 2, 8, 1, 1, 2, 4, 8, 1};
    const char *names[] = {"invalid", "f32", "f16", "bf16", "f64", "i8", "u8", "i16", "i32", "i64", "bool"};
    for (int i = 0; i <= CD_DTYPE_BOOL; i++) {
        CHECK_EQ(cd_dtype_size((cd_dtype)i), sizes[i]);
        CHECK_STREQ(cd_dtype_name((cd_dtype)i), names[i]);
        if (i) CHECK_EQ(cd_dtype_from_name(names[i], strlen(names[i])), i);
    }
    CHECK_EQ(cd_dtype_from_name("invalid", 7), CD_DTYPE_INVALID);
    CHECK_EQ(cd_dtype_from_name("f3", 2), CD_DTYPE_INVALID);
    CHECK_EQ(cd_dtype_from_name("f32x", 4), CD_DTYPE_INVALID);
    CHECK_EQ(cd_dtype_size((cd_dtype)99), 0);
    CHECK_STREQ(cd_dtype_name((cd_dtype)99), "invalid");
}

CD_TEST(proto_tensor_numel_overflow) {
    cd_tensor t = {.rank = 3, .shape = {1ll << 31, 1ll << 31, 4}};
    CHECK_EQ(cd_tensor_numel(&t), -1);
    t.shape[2] = 1;
    CHECK_EQ(cd_tensor_numel(&t), 1ll << 62);
}

// ---- malformed: structure (E_PARAMS) ---------------------------------------

static const int64_t d23[2] = {2, 3};

CD_TEST(proto_tensor_not_a_map) { EXPECT_TENSOR(pk_shape(t, d23, 2), CD_EPARAMS); }

CD_TEST(proto_tensor_unknown_key) {
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    msgpack_pack_map(&t.pk, 4);
    pk_key(&t, "dtype"), tp_pack_str(&t, "f32");
    pk_key(&t, "shape"), pk_shape(&t, d23, 2);
    pk_key(&t, "data"), pk_bin(&t, 24);
    pk_key(&t, "order"), tp_pack_str(&t, "C");
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "tensor has unknown field 'order' (expected dtype, shape, data)");
}

CD_TEST(proto_tensor_missing_dtype) {
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    msgpack_pack_map(&t.pk, 2);
    pk_key(&t, "shape"), pk_shape(&t, d23, 2);
    pk_key(&t, "data"), pk_bin(&t, 24);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "tensor is missing field 'dtype'");
}

CD_TEST(proto_tensor_missing_shape) {
    EXPECT_TENSOR(
        (msgpack_pack_map(&t->pk, 2), pk_key(t, "dtype"), tp_pack_str(t, "f32"), pk_key(t, "data"), pk_bin(t, 4)),
        CD_EPARAMS);
}

CD_TEST(proto_tensor_missing_data) {
    EXPECT_TENSOR((msgpack_pack_map(&t->pk, 2), pk_key(t, "dtype"), tp_pack_str(t, "f32"), pk_key(t, "shape"),
                   pk_shape(t, d23, 2)),
                  CD_EPARAMS);
}

CD_TEST(proto_tensor_duplicate_key) {
    EXPECT_TENSOR((msgpack_pack_map(&t->pk, 4), pk_key(t, "dtype"), tp_pack_str(t, "f32"), pk_key(t, "shape"),
                   pk_shape(t, d23, 2), pk_key(t, "data"), pk_bin(t, 24), pk_key(t, "dtype"), tp_pack_str(t, "f32")),
                  CD_EPARAMS);
}

CD_TEST(proto_tensor_int_key) {
    EXPECT_TENSOR((msgpack_pack_map(&t->pk, 1), msgpack_pack_int(&t->pk, 1), tp_pack_str(t, "f32")), CD_EPARAMS);
}

CD_TEST(proto_tensor_dtype_not_str) {
    EXPECT_TENSOR((msgpack_pack_map(&t->pk, 3), pk_key(t, "dtype"), msgpack_pack_int(&t->pk, 1), pk_key(t, "shape"),
                   pk_shape(t, d23, 2), pk_key(t, "data"), pk_bin(t, 24)),
                  CD_EPARAMS);
}

CD_TEST(proto_tensor_shape_not_array) {
    EXPECT_TENSOR((msgpack_pack_map(&t->pk, 3), pk_key(t, "dtype"), tp_pack_str(t, "f32"), pk_key(t, "shape"),
                   msgpack_pack_map(&t->pk, 0), pk_key(t, "data"), pk_bin(t, 24)),
                  CD_EPARAMS);
}

static void pk_tensor_data_as(tp_pack *t, int kind) {
    msgpack_pack_map(&t->pk, 3);
    pk_key(t, "dtype"), tp_pack_str(t, "i8");
    pk_key(t, "shape"), pk_shape(t, d23, 2);
    pk_key(t, "data");
    if (kind == 0) {
        msgpack_pack_str(&t->pk, 6), msgpack_pack_str_body(&t->pk, "abcdef", 6);
    } else if (kind == 1) {
        msgpack_pack_ext(&t->pk, 6, 7), msgpack_pack_ext_body(&t->pk, "abcdef", 6);
    } else if (kind == 2) {
        msgpack_pack_nil(&t->pk);
    } else {
        msgpack_pack_array(&t->pk, 6);
        for (int i = 0; i < 6; i++) msgpack_pack_int(&t->pk, i);
    }
}

CD_TEST(proto_tensor_data_str) {
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    pk_tensor_data_as(&t, 0);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "tensor field 'data' must be bin, got str");
}

CD_TEST(proto_tensor_data_ext) { EXPECT_TENSOR(pk_tensor_data_as(t, 1), CD_EPARAMS); }
CD_TEST(proto_tensor_data_nil) { EXPECT_TENSOR(pk_tensor_data_as(t, 2), CD_EPARAMS); }
CD_TEST(proto_tensor_data_array) { EXPECT_TENSOR(pk_tensor_data_as(t, 3), CD_EPARAMS); }

// ---- malformed: dtype (E_DTYPE) ----------------------------------------------

CD_TEST(proto_tensor_dtype_unknown) {
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    pk_tensor(&t, "f128", d23, 2, 96);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_EDTYPE);
    CHECK(strstr(err, "'f128'") != NULL);
}

CD_TEST(proto_tensor_dtype_empty) { EXPECT_TENSOR(pk_tensor(t, "", d23, 2, 6), CD_EDTYPE); }

CD_TEST(proto_tensor_dtype_wrong_case) { EXPECT_TENSOR(pk_tensor(t, "F32", d23, 2, 24), CD_EDTYPE); }

// ---- malformed: shape (E_SHAPE, E_TOO_LARGE) -----------------------------------

CD_TEST(proto_tensor_rank_0) { EXPECT_TENSOR(pk_tensor(t, "f32", d23, 0, 4), CD_ESHAPE); }

CD_TEST(proto_tensor_rank_9) {
    int64_t d[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    pk_tensor(&t, "f32", d, 9, 4);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_ESHAPE);
    CHECK_STREQ(err, "tensor rank 9 is out of range 1..8");
}

CD_TEST(proto_tensor_dim_zero) {
    int64_t d[3] = {2, 0, 3};
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    pk_tensor(&t, "f32", d, 3, 0);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_ESHAPE);
    CHECK_STREQ(err, "tensor shape[1] is 0, every dim must be >= 1");
}

CD_TEST(proto_tensor_dim_negative) {
    int64_t d[2] = {2, -3};
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    pk_tensor(&t, "f32", d, 2, 24);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_ESHAPE);
    CHECK_STREQ(err, "tensor shape[1] is -3, every dim must be >= 1");
}

static void pk_shape_with(tp_pack *t, int kind) {
    msgpack_pack_map(&t->pk, 3);
    pk_key(t, "dtype"), tp_pack_str(t, "f32");
    pk_key(t, "shape");
    msgpack_pack_array(&t->pk, 2);
    msgpack_pack_int(&t->pk, 2);
    if (kind == 0)
        msgpack_pack_double(&t->pk, 3.0);
    else if (kind == 1)
        tp_pack_str(t, "3");
    else if (kind == 2)
        msgpack_pack_nil(&t->pk);
    else
        msgpack_pack_true(&t->pk);
    pk_key(t, "data"), pk_bin(t, 24);
}

CD_TEST(proto_tensor_dim_float) { EXPECT_TENSOR(pk_shape_with(t, 0), CD_ESHAPE); }
CD_TEST(proto_tensor_dim_str) { EXPECT_TENSOR(pk_shape_with(t, 1), CD_ESHAPE); }
CD_TEST(proto_tensor_dim_nil) { EXPECT_TENSOR(pk_shape_with(t, 2), CD_ESHAPE); }
CD_TEST(proto_tensor_dim_bool) { EXPECT_TENSOR(pk_shape_with(t, 3), CD_ESHAPE); }

CD_TEST(proto_tensor_dim_over_int64) {
    EXPECT_TENSOR((msgpack_pack_map(&t->pk, 3), pk_key(t, "dtype"), tp_pack_str(t, "u8"), pk_key(t, "shape"),
                   msgpack_pack_array(&t->pk, 1), msgpack_pack_uint64(&t->pk, UINT64_MAX), pk_key(t, "data"),
                   pk_bin(t, 1)),
                  CD_ETOO_LARGE);
}

// Each dim fine on its own; the product does not fit an int64.
CD_TEST(proto_tensor_dims_product_overflows_int64) {
    int64_t d[3] = {1ll << 32, 1ll << 32, 2};
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    pk_tensor(&t, "u8", d, 3, 8);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_ETOO_LARGE);
    CHECK(strstr(err, "[4294967296, 4294967296, 2]") != NULL);
}

// The element count fits, the byte count does not.
CD_TEST(proto_tensor_bytes_overflow_int64) {
    int64_t d[1] = {1ll << 62};
    EXPECT_TENSOR(pk_tensor(t, "f32", d, 1, 16), CD_ETOO_LARGE);
}

CD_TEST(proto_tensor_huge_dims_mismatch_not_overflow) {
    int64_t d[2] = {1ll << 30, 1ll << 30}; // 2^60 bytes of u8: fits, but not sent
    EXPECT_TENSOR(pk_tensor(t, "u8", d, 2, 16), CD_ESHAPE);
}

CD_TEST(proto_tensor_data_too_short) {
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    pk_tensor(&t, "f32", d23, 2, 23);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_ESHAPE);
    CHECK_STREQ(err, "tensor data is 23 bytes, shape [2, 3] of f32 needs 24");
}

CD_TEST(proto_tensor_data_too_long) { EXPECT_TENSOR(pk_tensor(t, "f16", d23, 2, 13), CD_ESHAPE); }

CD_TEST(proto_tensor_data_empty) { EXPECT_TENSOR(pk_tensor(t, "i8", d23, 2, 0), CD_ESHAPE); }

CD_TEST(proto_tensor_decode_null) {
    cd_tensor t;
    char err[128];
    CHECK_EQ(cd_tensor_decode(NULL, &t, err, sizeof err), CD_EPARAMS);
}

// A hostile key is quoted safely: non-printable bytes escaped, long ones cut.
CD_TEST(proto_tensor_unknown_key_sanitised) {
    char err[256];
    tp_pack t;
    tp_pack_init(&t);
    msgpack_pack_map(&t.pk, 1);
    msgpack_pack_str(&t.pk, 4), msgpack_pack_str_body(&t.pk, "a\n\\\xff", 4);
    msgpack_pack_nil(&t.pk);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "tensor has unknown field 'a\\x0a\\x5c\\xff' (expected dtype, shape, data)");

    char key[300];
    memset(key, 'k', sizeof key);
    tp_pack_init(&t);
    msgpack_pack_map(&t.pk, 1);
    msgpack_pack_str(&t.pk, sizeof key), msgpack_pack_str_body(&t.pk, key, sizeof key);
    msgpack_pack_nil(&t.pk);
    CHECK_EQ(decode_packed(&t, err, sizeof err), CD_EPARAMS);
    CHECK(strstr(err, "kkk...'") != NULL);
    CHECK(strlen(err) <= 120);
}
