// proto/: typed getters over a params map.

#include "tests/unit/test-proto-util.h"

#include "proto/params.h"

// The params map used by every test below.
typedef struct {
    tp_pack t;
    msgpack_unpacked u;
} pmap;

static const msgpack_object *pmap_build(pmap *p) {
    tp_pack_init(&p->t);
    msgpack_packer *pk = &p->t.pk;
    msgpack_pack_map(pk, 12);
    tp_pack_str(&p->t, "name"), tp_pack_str(&p->t, "resnet50");
    tp_pack_str(&p->t, "empty"), tp_pack_str(&p->t, "");
    tp_pack_str(&p->t, "nul"), msgpack_pack_str(pk, 3), msgpack_pack_str_body(pk, "a\0b", 3);
    tp_pack_str(&p->t, "n"), msgpack_pack_int(pk, 8);
    tp_pack_str(&p->t, "neg"), msgpack_pack_int(pk, -5);
    tp_pack_str(&p->t, "big"), msgpack_pack_uint64(pk, UINT64_MAX);
    tp_pack_str(&p->t, "flt"), msgpack_pack_double(pk, 1.5);
    tp_pack_str(&p->t, "yes"), msgpack_pack_true(pk);
    tp_pack_str(&p->t, "none"), msgpack_pack_nil(pk);
    tp_pack_str(&p->t, "arr"), msgpack_pack_array(pk, 0);
    msgpack_pack_int(pk, 7), tp_pack_str(&p->t, "int key"); // ignored by lookups
    tp_pack_str(&p->t, "min"), msgpack_pack_int64(pk, INT64_MIN);
    msgpack_unpacked_init(&p->u);
    size_t off = 0;
    CHECK_EQ(msgpack_unpack_next(&p->u, p->t.sb.data, p->t.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    return &p->u.data;
}

static void pmap_free(pmap *p) {
    msgpack_unpacked_destroy(&p->u);
    tp_pack_free(&p->t);
}

CD_TEST(proto_params_map_get) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    CHECK(cd_obj_streq(cd_map_get(m, "name"), "resnet50"));
    CHECK(cd_map_get(m, "absent") == NULL);
    CHECK(cd_map_get(m, "nam") == NULL);
    CHECK(cd_map_get(NULL, "name") == NULL);
    CHECK(cd_map_get(cd_map_get(m, "n"), "name") == NULL); // not a map
    CHECK_EQ(cd_map_get(m, "none")->type, MSGPACK_OBJECT_NIL);
    pmap_free(&p);
}

CD_TEST(proto_params_obj_streq) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    CHECK(cd_obj_streq(cd_map_get(m, "empty"), ""));
    CHECK(!cd_obj_streq(cd_map_get(m, "name"), "resnet5"));
    CHECK(!cd_obj_streq(cd_map_get(m, "name"), "resnet500"));
    CHECK(!cd_obj_streq(cd_map_get(m, "n"), "8"));
    CHECK(!cd_obj_streq(NULL, ""));
    pmap_free(&p);
}

CD_TEST(proto_params_str_ok) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    char buf[9], err[128];
    CHECK_EQ(cd_param_str(m, "name", buf, sizeof buf, err, sizeof err), 0);
    CHECK_STREQ(buf, "resnet50");
    CHECK_EQ(cd_param_str(m, "empty", buf, sizeof buf, err, sizeof err), 0);
    CHECK_STREQ(buf, "");
    pmap_free(&p);
}

CD_TEST(proto_params_str_absent_or_nil_keeps_default) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    char buf[16] = "default", err[128];
    CHECK_EQ(cd_param_str(m, "absent", buf, sizeof buf, err, sizeof err), 1);
    CHECK_EQ(cd_param_str(m, "none", buf, sizeof buf, err, sizeof err), 1);
    CHECK_STREQ(buf, "default");
    pmap_free(&p);
}

CD_TEST(proto_params_str_too_long) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    char buf[8], err[128];
    CHECK_EQ(cd_param_str(m, "name", buf, sizeof buf, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "param 'name' is 8 bytes long, the limit is 7");
    pmap_free(&p);
}

CD_TEST(proto_params_str_with_nul) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    char buf[16], err[128];
    CHECK_EQ(cd_param_str(m, "nul", buf, sizeof buf, err, sizeof err), CD_EPARAMS);
    pmap_free(&p);
}

CD_TEST(proto_params_str_wrong_type) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    char buf[16], err[128];
    CHECK_EQ(cd_param_str(m, "n", buf, sizeof buf, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "param 'n' must be a str, got int");
    CHECK_EQ(cd_param_str(m, "arr", buf, sizeof buf, NULL, 0), CD_EPARAMS);
    pmap_free(&p);
}

CD_TEST(proto_params_int_ok_and_bounds) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    int64_t v = 0;
    char err[128];
    CHECK_EQ(cd_param_int(m, "n", 1, 8, &v, err, sizeof err), 0);
    CHECK_EQ(v, 8);
    CHECK_EQ(cd_param_int(m, "neg", -5, 0, &v, err, sizeof err), 0);
    CHECK_EQ(v, -5);
    CHECK_EQ(cd_param_int(m, "min", INT64_MIN, INT64_MAX, &v, err, sizeof err), 0);
    CHECK_EQ(v, INT64_MIN);
    pmap_free(&p);
}

CD_TEST(proto_params_int_above_max) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    int64_t v = 42;
    char err[128];
    CHECK_EQ(cd_param_int(m, "n", 1, 7, &v, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "param 'n' is 8, out of range 1..7");
    CHECK_EQ(v, 42);
    pmap_free(&p);
}

CD_TEST(proto_params_int_below_min) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    int64_t v;
    CHECK_EQ(cd_param_int(m, "neg", 0, 10, &v, NULL, 0), CD_EPARAMS);
    pmap_free(&p);
}

CD_TEST(proto_params_int_over_int64) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    int64_t v;
    char err[128];
    CHECK_EQ(cd_param_int(m, "big", INT64_MIN, INT64_MAX, &v, err, sizeof err), CD_EPARAMS);
    pmap_free(&p);
}

CD_TEST(proto_params_int_float_rejected) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    int64_t v;
    char err[128];
    CHECK_EQ(cd_param_int(m, "flt", 0, 10, &v, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "param 'flt' must be an int, got float");
    pmap_free(&p);
}

CD_TEST(proto_params_int_absent_or_nil) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    int64_t v = 3;
    CHECK_EQ(cd_param_int(m, "absent", 0, 10, &v, NULL, 0), 1);
    CHECK_EQ(cd_param_int(m, "none", 0, 10, &v, NULL, 0), 1);
    CHECK_EQ(v, 3);
    pmap_free(&p);
}

CD_TEST(proto_params_bool) {
    pmap p;
    const msgpack_object *m = pmap_build(&p);
    bool b = false;
    char err[128];
    CHECK_EQ(cd_param_bool(m, "yes", &b, err, sizeof err), 0);
    CHECK(b);
    CHECK_EQ(cd_param_bool(m, "absent", &b, err, sizeof err), 1);
    CHECK_EQ(cd_param_bool(m, "n", &b, err, sizeof err), CD_EPARAMS);
    CHECK_STREQ(err, "param 'n' must be a bool, got int");
    pmap_free(&p);
}

// Params that are not a map at all: every key is absent.
CD_TEST(proto_params_not_a_map) {
    char buf[8];
    int64_t v;
    bool b;
    CHECK_EQ(cd_param_str(NULL, "k", buf, sizeof buf, NULL, 0), 1);
    CHECK_EQ(cd_param_int(NULL, "k", 0, 1, &v, NULL, 0), 1);
    CHECK_EQ(cd_param_bool(NULL, "k", &b, NULL, 0), 1);
}
