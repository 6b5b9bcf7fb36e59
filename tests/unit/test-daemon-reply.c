// daemon/reply.c: a reply packed with references to big payloads (writev)
// is, byte for byte, the message packed with its payloads copied; its iovecs
// from any byte on are the rest of it; and the reader takes it back with the
// payloads intact (also when it arrives in random pieces).
#include "daemon/reply.h"
#include "proto/rpc.h"
#include "proto/tensor.h"
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

// Packs [1, 7, nil, {outputs: {t0: tensor, t1: ...}}] of n f32 tensors of
// nbytes[i] bytes each (data[i]) into pk, the bodies with cd_reply_bin_body.
static void pack_reply(msgpack_packer *pk, int n, const size_t *nbytes, char **data) {
    CHECK_EQ(cd_rpc_pack_response_ok_begin(pk, 7), 0);
    msgpack_pack_map(pk, 1);
    cd_pack_str(pk, "outputs");
    msgpack_pack_map(pk, (size_t)n);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        cd_pack_str(pk, name);
        cd_tensor t = {.dtype = CD_DTYPE_F32, .rank = 1, .data = data[i], .nbytes = nbytes[i]};
        t.shape[0] = (int64_t)(nbytes[i] / 4);
        CHECK_EQ(cd_tensor_pack_head(pk, &t), 0);
        CHECK_EQ(cd_reply_bin_body(pk, data[i], nbytes[i]), 0);
    }
}

// Random payload sizes around CD_REPLY_REF_MIN, some over the reference cap.
static int draw_tensors(size_t *nbytes, char **data) {
    int n = cd_test_randi(1, CD_REPLY_MAX_REFS + 3);
    for (int i = 0; i < n; i++) {
        nbytes[i] = 4 * (size_t)cd_test_randi(1, (int)(CD_REPLY_REF_MIN / 2));
        data[i] = malloc(nbytes[i]);
        for (size_t k = 0; k < nbytes[i]; k++) data[i][k] = (char)cd_test_rand();
    }
    return n;
}

CD_TEST(daemon_reply_iov_equals_the_copied_message) {
    for (int round = 0; round < 20; round++) {
        size_t nbytes[CD_REPLY_MAX_REFS + 3];
        char *data[CD_REPLY_MAX_REFS + 3];
        int n = draw_tensors(nbytes, data);
        cd_reply r;
        cd_reply_init(&r);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &r, cd_reply_write);
        pack_reply(&pk, n, nbytes, data);
        msgpack_sbuffer flat;
        msgpack_sbuffer_init(&flat);
        msgpack_packer fk;
        msgpack_packer_init(&fk, &flat, msgpack_sbuffer_write);
        pack_reply(&fk, n, nbytes, data);
        CHECK_EQ(r.total, flat.size);
        int big = 0;
        for (int i = 0; i < n; i++) big += nbytes[i] >= CD_REPLY_REF_MIN;
        CHECK_EQ(r.nref, big < CD_REPLY_MAX_REFS ? big : CD_REPLY_MAX_REFS);
        CHECK(r.head.size < flat.size || r.nref == 0);
        // From a random byte on, the iovecs are the rest of the message.
        for (int k = 0; k < 8; k++) {
            size_t skip = k == 0 ? 0 : k == 1 ? flat.size : cd_test_rand() % flat.size;
            struct iovec iov[CD_REPLY_MAX_IOV];
            int niov = cd_reply_iov(&r, skip, iov);
            CHECK(niov <= CD_REPLY_MAX_IOV);
            size_t off = skip;
            for (int i = 0; i < niov; i++) {
                CHECK(iov[i].iov_len > 0);
                CHECK(off + iov[i].iov_len <= flat.size);
                CHECK(memcmp(iov[i].iov_base, flat.data + off, iov[i].iov_len) == 0);
                off += iov[i].iov_len;
            }
            CHECK_EQ(off, flat.size);
        }
        msgpack_sbuffer copy;
        msgpack_sbuffer_init(&copy);
        CHECK_EQ(cd_reply_copy_to(&r, &copy), 0);
        CHECK_EQ(copy.size, flat.size);
        CHECK(memcmp(copy.data, flat.data, flat.size) == 0);
        msgpack_sbuffer_destroy(&copy);
        msgpack_sbuffer_destroy(&flat);
        cd_reply_destroy(&r);
        for (int i = 0; i < n; i++) free(data[i]);
    }
}

// The reader gives a message of 1 MiB or more a buffer of its own with its
// first big payload 64-byte aligned (libconvd hands it out in place),
// whatever the pieces it arrives in; the bytes are the ones sent.
CD_TEST(proto_reader_aligns_the_first_big_payload) {
    for (int round = 0; round < 6; round++) {
        size_t nbytes[2] = {4 * (size_t)cd_test_randi(1 << 18, 1 << 20), 4 * (size_t)cd_test_randi(1, 1 << 18)};
        char *data[2];
        for (int i = 0; i < 2; i++) {
            data[i] = malloc(nbytes[i]);
            for (size_t k = 0; k < nbytes[i]; k++) data[i][k] = (char)(k * 7 + i + round);
        }
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        pack_reply(&pk, 2, nbytes, data);
        cd_rpc_reader *rd;
        CHECK_EQ(cd_rpc_reader_init(&rd, (size_t)1 << 30), 0);
        cd_rpc_msg m;
        int rc = 0;
        for (size_t off = 0; off < sb.size && rc == 0;) {
            size_t n = (size_t)cd_test_randi(1, 300000);
            if (n > sb.size - off) n = sb.size - off;
            char *at;
            size_t space = cd_rpc_reader_space(rd, &at);
            if (space && cd_test_randi(0, 1)) { // a read in place, as the daemon and libconvd do
                if (n > space) n = space;
                memcpy(at, sb.data + off, n);
                CHECK_EQ(cd_rpc_reader_feed_in_place(rd, n), 0);
            } else {
                CHECK_EQ(cd_rpc_reader_feed(rd, sb.data + off, n), 0);
            }
            off += n;
            rc = cd_rpc_reader_next(rd, &m, NULL, NULL, 0);
            CHECK(rc == (off == sb.size ? 1 : 0));
        }
        CHECK_EQ(rc, 1);
        const msgpack_object *outs = &m.result.via.map.ptr[0].val;
        for (int i = 0; i < 2; i++) {
            cd_tensor t;
            CHECK_EQ(cd_tensor_decode(&outs->via.map.ptr[i].val, &t, NULL, 0), 0);
            CHECK_EQ(t.nbytes, nbytes[i]);
            CHECK(memcmp(t.data, data[i], nbytes[i]) == 0);
            if (i == 0) CHECK_EQ((uintptr_t)t.data % 64, 0);
        }
        cd_rpc_msg_free(&m);
        cd_rpc_reader_free(rd);
        msgpack_sbuffer_destroy(&sb);
        for (int i = 0; i < 2; i++) free(data[i]);
    }
}

// A big payload followed by many small ones, fed a few bytes at a time: the
// aligned buffer grows geometrically (copying it at every new header would be
// gigabytes here: the runner's timeout catches that), and every byte arrives.
CD_TEST(proto_reader_big_then_many_small_pieces) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    enum { NSMALL = 20000 };
    size_t big = (size_t)1 << 21;
    char *blob = calloc(1, big);
    CHECK_EQ(cd_rpc_pack_request_begin(&pk, 3, "infer"), 0);
    msgpack_pack_array(&pk, NSMALL + 1);
    msgpack_pack_bin(&pk, big);
    msgpack_pack_bin_body(&pk, blob, big);
    for (int i = 0; i < NSMALL; i++) {
        char small[40];
        memset(small, i & 0x7f, sizeof small);
        msgpack_pack_bin(&pk, sizeof small);
        msgpack_pack_bin_body(&pk, small, sizeof small);
    }
    cd_rpc_reader *rd;
    CHECK_EQ(cd_rpc_reader_init(&rd, (size_t)1 << 30), 0);
    size_t off = 0;
    while (off < sb.size) {
        size_t n = off < big ? 65536 : (size_t)cd_test_randi(1, 64);
        if (n > sb.size - off) n = sb.size - off;
        CHECK_EQ(cd_rpc_reader_feed(rd, sb.data + off, n), 0);
        off += n;
    }
    cd_rpc_msg m;
    CHECK_EQ(cd_rpc_reader_next(rd, &m, NULL, NULL, 0), 1);
    const msgpack_object *arr = &m.params.via.array.ptr[0];
    CHECK_EQ(arr->via.array.size, NSMALL + 1);
    CHECK_EQ((uintptr_t)arr->via.array.ptr[0].via.bin.ptr % 64, 0);
    CHECK_EQ(arr->via.array.ptr[NSMALL].via.bin.ptr[0], (NSMALL - 1) & 0x7f);
    cd_rpc_msg_free(&m);
    cd_rpc_reader_free(rd);
    msgpack_sbuffer_destroy(&sb);
    free(blob);
}
