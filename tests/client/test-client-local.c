// libconvd without a daemon: the error table, connecting to nothing, JSON.

#include "client/convd.h"
#include "core/errors.h"
#include "proto/tensor.h"
#include "tests/unit/check.h"

#include <msgpack.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

CD_TEST(client_errors_match_proto_table) {
    // Every row of the public table equals core/errors.h, number and name,
    // and the two tables have the same rows.
    int n_public = 0, n_proto = 0;
#define XX(name, num)                    \
    n_public++;                          \
    CHECK_EQ(CONVD_E##name, CD_E##name); \
    CHECK_STREQ(convd_errname(CONVD_E##name), "E_" #name);
    CONVD_ERROR_MAP(XX)
#undef XX
#define XX(name, num, msg)               \
    n_proto++;                           \
    CHECK_EQ(CD_E##name, CONVD_E##name); \
    CHECK_STREQ(convd_strerror(CONVD_E##name), msg);
    CD_ERROR_MAP(XX)
#undef XX
    CHECK_EQ(n_public, n_proto);
    CHECK_STREQ(convd_errname(0), "OK");
    CHECK_STREQ(convd_errname(-999), "E_UNKNOWN");
}

CD_TEST(client_dtypes_match_proto_table) {
    int n = 0;
#define XX(e, name, size)                                 \
    n++;                                                  \
    CHECK_EQ(CONVD_DTYPE_##e, CD_DTYPE_##e);              \
    CHECK_STREQ(convd_dtype_name(CONVD_DTYPE_##e), name); \
    CHECK_EQ(convd_dtype_size(CONVD_DTYPE_##e), size);    \
    CHECK_EQ(convd_dtype_from_name(name), CONVD_DTYPE_##e);
    CD_DTYPE_MAP(XX)
#undef XX
    CHECK_EQ(n, CONVD_DTYPE_BOOL);
    CHECK_EQ(convd_dtype_from_name("f128"), CONVD_DTYPE_INVALID);
    CHECK_EQ(CONVD_MAX_RANK, CD_MAX_RANK);
}

CD_TEST(client_connect_missing_socket) {
    convd_conn *c = (convd_conn *)1;
    char path[64];
    snprintf(path, sizeof path, "/tmp/cd-missing-%d-%d.sock", (int)getpid(), cd_test_randi(0, 1 << 30));
    CHECK_EQ(convd_connect(path, NULL, &c), CONVD_ECONNECT);
    CHECK(c == NULL);
    CHECK(strstr(convd_errmsg(NULL), path) != NULL);
    CHECK(strstr(convd_errmsg(NULL), "No such file") != NULL);
}

CD_TEST(client_connect_nobody_listening) {
    // A stale socket file: bound but never listened on -> refused.
    char path[64];
    snprintf(path, sizeof path, "/tmp/cd-stale-%d-%d.sock", (int)getpid(), cd_test_randi(0, 1 << 30));
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, path);
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    convd_conn *c;
    CHECK_EQ(convd_connect(path, NULL, &c), CONVD_ECONNECT);
    CHECK(strstr(convd_errmsg(NULL), "refused") != NULL);
    close(fd);
    unlink(path);
}

CD_TEST(client_connect_path_too_long) {
    char path[300];
    memset(path, 'a', sizeof path - 1);
    path[0] = '/';
    path[sizeof path - 1] = 0;
    convd_conn *c;
    CHECK_EQ(convd_connect(path, NULL, &c), CONVD_EPARAMS);
    CHECK(strstr(convd_errmsg(NULL), "too long") != NULL);
}

CD_TEST(client_connect_env_socket) {
    // path NULL falls back to $CONVD_SOCKET.
    setenv("CONVD_SOCKET", "/tmp/cd-env-socket-that-does-not-exist.sock", 1);
    convd_conn *c;
    CHECK_EQ(convd_connect(NULL, NULL, &c), CONVD_ECONNECT);
    CHECK(strstr(convd_errmsg(NULL), "cd-env-socket-that-does-not-exist") != NULL);
}

CD_TEST(client_default_socket_rule) {
    // Root: the system daemon's socket; anyone else: $XDG_RUNTIME_DIR, and no
    // default at all without it (each test runs in its own forked process,
    // so dropping root here stays here).
    char buf[128];
    unsetenv("CONVD_SOCKET");
    if (geteuid() == 0) {
        CHECK_EQ(convd_default_socket(buf, sizeof buf), 0);
        CHECK(strcmp(buf, CONVD_SYSTEM_SOCKET) == 0);
        CHECK_EQ(convd_default_socket(buf, 8), CONVD_EPARAMS);
        CHECK_EQ(setresgid(65534, 65534, 65534), 0);
        CHECK_EQ(setresuid(65534, 65534, 65534), 0);
    }
    setenv("XDG_RUNTIME_DIR", "/run/user/65534", 1);
    CHECK_EQ(convd_default_socket(buf, sizeof buf), 0);
    CHECK(strcmp(buf, "/run/user/65534/convd.sock") == 0);
    unsetenv("XDG_RUNTIME_DIR");
    CHECK_EQ(convd_default_socket(buf, sizeof buf), CONVD_ECONNECT);
    CHECK(strstr(convd_errmsg(NULL), "XDG_RUNTIME_DIR is not set") != NULL);
    convd_conn *c;
    CHECK_EQ(convd_connect(NULL, NULL, &c), CONVD_ECONNECT);
    CHECK(strstr(convd_errmsg(NULL), "CONVD_SOCKET") != NULL);
}

static void *connect_elsewhere(void *arg) {
    convd_conn *c;
    *(int *)arg = convd_connect("/tmp/cd-nope-2.sock", NULL, &c);
    return NULL;
}

CD_TEST(client_errmsg_is_thread_local) {
    convd_conn *c;
    CHECK_EQ(convd_connect("/tmp/cd-nope-1.sock", NULL, &c), CONVD_ECONNECT);
    // Another thread's failure does not overwrite this thread's message.
    pthread_t t;
    int rc = 0;
    CHECK_EQ(pthread_create(&t, NULL, connect_elsewhere, &rc), 0);
    pthread_join(t, NULL);
    CHECK_EQ(rc, CONVD_ECONNECT);
    CHECK(strstr(convd_errmsg(NULL), "cd-nope-1") != NULL);
}

// Packs a value with every msgpack type and checks the JSON text.
CD_TEST(client_json_every_type) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 8);
    msgpack_pack_str_with_body(&pk, "nil", 3);
    msgpack_pack_nil(&pk);
    msgpack_pack_str_with_body(&pk, "b", 1);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_true(&pk);
    msgpack_pack_false(&pk);
    msgpack_pack_str_with_body(&pk, "ints", 4);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint64(&pk, UINT64_MAX);
    msgpack_pack_int64(&pk, INT64_MIN);
    msgpack_pack_int(&pk, 0);
    msgpack_pack_str_with_body(&pk, "f", 1);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 0.5);
    msgpack_pack_float(&pk, -2.25f);
    msgpack_pack_double(&pk, NAN);
    msgpack_pack_str_with_body(&pk, "s", 1);
    msgpack_pack_str_with_body(&pk, "q\"\\\n\x01\xff\xc3\xa9", 8);
    msgpack_pack_str_with_body(&pk, "bin", 3);
    msgpack_pack_bin_with_body(&pk, "abcd", 4);
    msgpack_pack_int(&pk, 7); // non-string key
    msgpack_pack_map(&pk, 0);
    msgpack_pack_str_with_body(&pk, "e", 1);
    msgpack_pack_array(&pk, 0);
    char *json;
    CHECK_EQ(convd_to_json(sb.data, sb.size, &json), 0);
    CHECK_STREQ(json, "{\"nil\": null, \"b\": [true, false], "
                      "\"ints\": [18446744073709551615, -9223372036854775808, 0], "
                      "\"f\": [0.5, -2.25, null], "
                      "\"s\": \"q\\\"\\\\\\n\\u0001\\ufffd\xc3\xa9\", "
                      "\"bin\": \"YWJjZA==\", \"7\": {}, \"e\": []}");
    convd_free(json);
    // A truncated value is refused.
    CHECK_EQ(convd_to_json(sb.data, sb.size - 1, &json), CONVD_EPROTOCOL);
    CHECK(json == NULL);
    msgpack_sbuffer_destroy(&sb);
}
