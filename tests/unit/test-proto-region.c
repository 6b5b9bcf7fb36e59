// proto/region.c: region tensors and output places. Random round trips
// (CD_TEST_SEED reproduces one) and one test per malformed field.

#include "tests/unit/check.h"

#include "core/errors.h"
#include "proto/region.h"
#include "proto/rpc.h"

#include <msgpack.h>
#include <string.h>

// Packs with f(pk) and decodes the one object into *u.
static void pack_unpack(void (*f)(msgpack_packer *, void *), void *ud, msgpack_sbuffer *sb, msgpack_unpacked *u) {
    msgpack_sbuffer_init(sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    f(&pk, ud);
    msgpack_unpacked_init(u);
    CHECK_EQ(msgpack_unpack_next(u, sb->data, sb->size, NULL), MSGPACK_UNPACK_SUCCESS);
}

typedef struct {
    cd_tensor t;
    char name[CD_MAX_REGION_NAME + 1];
    uint64_t offset;
} ref_case;

static void pack_ref(msgpack_packer *pk, void *ud) {
    ref_case *c = ud;
    CHECK_EQ(cd_tensor_ref_pack(pk, &c->t, c->name, strlen(c->name), c->offset), 0);
}

CD_TEST(proto_region_tensor_round_trip_random) {
    for (int k = 0; k < 200; k++) {
        ref_case c = {.t = {.dtype = (cd_dtype)cd_test_randi(1, CD_DTYPE_BOOL), .rank = cd_test_randi(1, CD_MAX_RANK)}};
        for (int i = 0; i < c.t.rank; i++) c.t.shape[i] = cd_test_randi(1, 7);
        c.t.nbytes = (size_t)cd_tensor_numel(&c.t) * cd_dtype_size(c.t.dtype);
        int n = cd_test_randi(1, CD_MAX_REGION_NAME);
        for (int i = 0; i < n; i++) c.name[i] = (char)cd_test_randi(0x21, 0x7e);
        c.offset = (uint64_t)cd_test_rand() << 32 | (uint64_t)cd_test_rand();
        msgpack_sbuffer sb;
        msgpack_unpacked u;
        pack_unpack(pack_ref, &c, &sb, &u);
        CHECK(cd_tensor_is_ref(&u.data));
        cd_tensor t;
        cd_region_ref r;
        char err[200];
        CHECK_EQ(cd_tensor_ref_decode(&u.data, &t, &r, err, sizeof err), 0);
        CHECK_EQ(t.dtype, c.t.dtype);
        CHECK_EQ(t.rank, c.t.rank);
        CHECK_EQ(t.nbytes, c.t.nbytes);
        CHECK(t.data == NULL);
        CHECK_EQ(r.size, c.t.nbytes);
        CHECK_EQ(r.offset, c.offset);
        CHECK_EQ(r.name_len, (size_t)n);
        CHECK(memcmp(r.name, c.name, (size_t)n) == 0);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);
    }
}

// Decodes a {dtype, shape, region, offset} map built from the json-ish
// pieces; returns the status.
static void pack_case(msgpack_packer *pk, void *ud) {
    int which = *(int *)ud;
    // 0 good; 1 no offset; 2 negative offset; 3 region not str; 4 empty name;
    // 5 name with a space; 6 name of 65; 7 extra data field; 8 no dtype; 9 bad shape
    int nkeys = 4 - (which == 1) - (which == 8) + (which == 7);
    msgpack_pack_map(pk, (size_t)nkeys);
    if (which != 8) {
        cd_pack_str(pk, "dtype");
        cd_pack_str(pk, "f32");
    }
    cd_pack_str(pk, "shape");
    msgpack_pack_array(pk, 2);
    msgpack_pack_int(pk, 2);
    msgpack_pack_int(pk, which == 9 ? 0 : 3);
    cd_pack_str(pk, "region");
    if (which == 3)
        msgpack_pack_int(pk, 7);
    else
        cd_pack_str(pk, which == 4   ? ""
                        : which == 5 ? "a b"
                        : which == 6 ? "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                     : "r");
    if (which != 1) {
        cd_pack_str(pk, "offset");
        msgpack_pack_int64(pk, which == 2 ? -1 : 64);
    }
    if (which == 7) {
        cd_pack_str(pk, "data");
        msgpack_pack_bin(pk, 0);
    }
}

CD_TEST(proto_region_tensor_bad_fields) {
    static const int want[] = {0,          CD_EPARAMS, CD_EPARAMS, CD_EPARAMS, CD_EPARAMS,
                               CD_EPARAMS, CD_EPARAMS, CD_EPARAMS, CD_EPARAMS, CD_ESHAPE};
    for (int which = 0; which < 10; which++) {
        msgpack_sbuffer sb;
        msgpack_unpacked u;
        pack_unpack(pack_case, &which, &sb, &u);
        cd_tensor t;
        cd_region_ref r;
        char err[200] = "";
        int rc = cd_tensor_ref_decode(&u.data, &t, &r, err, sizeof err);
        if (rc != want[which]) CD_CHECK_FAIL_("case %d: got %d (%s), want %d", which, rc, err, want[which]);
        if (rc) CHECK(err[0] != 0);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);
    }
}

static void pack_place(msgpack_packer *pk, void *ud) {
    int which = *(int *)ud;
    // 0 good; 1 no size; 2 size a str; 3 extra key; 4 not a map
    if (which == 4) {
        msgpack_pack_array(pk, 0);
        return;
    }
    msgpack_pack_map(pk, which == 1 ? 2 : which == 3 ? 4 : 3);
    cd_pack_kv_str(pk, "region", "out");
    cd_pack_str(pk, "offset");
    msgpack_pack_uint64(pk, UINT64_MAX);
    if (which != 1) {
        cd_pack_str(pk, "size");
        if (which == 2)
            cd_pack_str(pk, "12");
        else
            msgpack_pack_uint64(pk, 12);
    }
    if (which == 3) cd_pack_kv_str(pk, "more", "x");
}

CD_TEST(proto_region_place_fields) {
    for (int which = 0; which < 5; which++) {
        msgpack_sbuffer sb;
        msgpack_unpacked u;
        pack_unpack(pack_place, &which, &sb, &u);
        cd_region_ref r;
        char err[200] = "";
        int rc = cd_region_ref_decode(&u.data, &r, err, sizeof err);
        CHECK_EQ(rc, which == 0 ? 0 : CD_EPARAMS);
        if (rc == 0) {
            CHECK_EQ(r.offset, UINT64_MAX);
            CHECK_EQ(r.size, 12);
            CHECK_EQ(r.name_len, 3);
        }
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);
    }
}
