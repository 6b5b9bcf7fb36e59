// The scripted fake daemon of the C client tests (see fake-server.h).

#include "tests/client/fake-server.h"

#include "core/errors.h"
#include "proto/params.h"
#include "proto/rpc.h"
#include "tests/unit/check.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct fake_server {
    fake_mode mode;
    int delay_ms;
    int lfd;                // listening socket
    int stop_pipe[2];       // written to stop the thread
    char path[108];
    char code[64], message[256];
    atomic_int requests;
    pthread_t thread;
};

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// Answers one request according to the mode. Returns 0 to keep serving.
static int answer(fake_server *s, int fd, cd_rpc_msg *m) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int keep = 0;
    switch (s->mode) {
    case FAKE_ANSWER:
        if (s->delay_ms) sleep_ms(s->delay_ms);
        cd_rpc_pack_response_ok_begin(&pk, m->msgid);
        msgpack_pack_map(&pk, 2);
        cd_pack_kv_str(&pk, "server", "fake");
        cd_pack_str(&pk, "msgid");
        msgpack_pack_uint32(&pk, m->msgid);
        break;
    case FAKE_ERROR:
        msgpack_pack_array(&pk, 4);
        msgpack_pack_uint8(&pk, 1);
        msgpack_pack_uint32(&pk, m->msgid);
        msgpack_pack_map(&pk, 2);
        cd_pack_kv_str(&pk, "code", s->code);
        cd_pack_kv_str(&pk, "message", s->message);
        msgpack_pack_nil(&pk);
        break;
    case FAKE_ECHO_INPUTS: {
        const msgpack_object *p = cd_rpc_params_map(m);
        const msgpack_object *in = p ? cd_map_get(p, "inputs") : NULL;
        cd_rpc_pack_response_ok_begin(&pk, m->msgid);
        msgpack_pack_map(&pk, 1);
        cd_pack_str(&pk, "outputs");
        if (in)
            msgpack_pack_object(&pk, *in);
        else
            msgpack_pack_map(&pk, 0);
        break;
    }
    case FAKE_CLOSE:
        keep = -1;
        break;
    case FAKE_GARBAGE: {
        const char junk[] = "\xc1\xc1\xc1 not msgpack";
        msgpack_sbuffer_write(&sb, junk, sizeof junk - 1);
        keep = -1;
        break;
    }
    case FAKE_NO_READ:
        break;
    }
    if (sb.size && write_all(fd, sb.data, sb.size) != 0) keep = -1;
    msgpack_sbuffer_destroy(&sb);
    return keep;
}

// Serves one accepted connection until it ends or the server stops.
static void serve(fake_server *s, int fd) {
    cd_rpc_reader *rd;
    CHECK_EQ(cd_rpc_reader_init(&rd, 1u << 30), 0);
    char *buf = malloc(1 << 16);
    CHECK(buf);
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = s->mode == FAKE_NO_READ ? 0 : POLLIN},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) continue;
        if (p[1].revents) break;
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = recv(fd, buf, 1 << 16, 0);
        if (n <= 0) break;
        CHECK_EQ(cd_rpc_reader_feed(rd, buf, (size_t)n), 0);
        cd_rpc_msg m;
        uint32_t id;
        char err[128];
        int rc, stop = 0;
        while (!stop && (rc = cd_rpc_reader_next(rd, &m, &id, err, sizeof err)) == 1) {
            atomic_fetch_add(&s->requests, 1);
            stop = answer(s, fd, &m) != 0;
            cd_rpc_msg_free(&m);
        }
        if (stop) break;
    }
    free(buf);
    cd_rpc_reader_free(rd);
    close(fd);
}

static void *fake_main(void *arg) {
    fake_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) continue;
        if (p[1].revents) break;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) continue;
        serve(s, fd);
    }
    return NULL;
}

fake_server *fake_start(fake_mode mode, int delay_ms) {
    fake_server *s = calloc(1, sizeof *s);
    CHECK(s);
    s->mode = mode;
    s->delay_ms = delay_ms;
    snprintf(s->code, sizeof s->code, "E_INTERNAL");
    snprintf(s->path, sizeof s->path, "/tmp/cd-fake-%d-%llu.sock", (int)getpid(),
             (unsigned long long)cd_test_rand() % 1000000);
    unlink(s->path);
    s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s->lfd >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, s->path, strlen(s->path) + 1);
    CHECK_EQ(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_EQ(listen(s->lfd, 16), 0);
    CHECK_EQ(pipe(s->stop_pipe), 0);
    CHECK_EQ(pthread_create(&s->thread, NULL, fake_main, s), 0);
    return s;
}

const char *fake_path(const fake_server *s) { return s->path; }

void fake_set_error(fake_server *s, const char *code, const char *message) {
    snprintf(s->code, sizeof s->code, "%s", code);
    snprintf(s->message, sizeof s->message, "%s", message);
}

int fake_requests(fake_server *s) { return atomic_load(&s->requests); }

void fake_stop(fake_server *s) {
    CHECK_EQ(write(s->stop_pipe[1], "x", 1), 1);
    pthread_join(s->thread, NULL);
    close(s->lfd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    unlink(s->path);
    free(s);
}
