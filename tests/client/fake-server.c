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

// A control command from the test thread, through the control pipe.
typedef struct {
    char op; // 'r' release, 'c' answer n then close, 's' stop
    int n;
} ctl_cmd;

struct fake_server {
    fake_mode mode;
    int delay_ms;
    int lfd;          // listening socket
    int ctl[2];       // control pipe (ctl_cmd records)
    int done_pipe[2]; // one byte back per handled command
    char path[108];
    char code[64], message[256];
    atomic_int holding;  // FAKE_ECHO_HELD: 1 while answers are queued until released
    atomic_int requests; // requests read
    atomic_int answers;  // answers written
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

// The echo answer: {outputs: <the request's inputs>}; non-infer methods get {}.
static void pack_echo(msgpack_packer *pk, cd_rpc_msg *m) {
    const msgpack_object *p = cd_rpc_params_map(m);
    const msgpack_object *in = p ? cd_map_get(p, "inputs") : NULL;
    cd_rpc_pack_response_ok_begin(pk, m->msgid);
    msgpack_pack_map(pk, 1);
    cd_pack_str(pk, "outputs");
    if (in)
        msgpack_pack_object(pk, *in);
    else
        msgpack_pack_map(pk, 0);
}

// Answers one request according to the mode (the echo modes: at once).
// Returns 0 to keep serving.
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
    case FAKE_ECHO_INPUTS:
    case FAKE_ECHO_REVERSED:
    case FAKE_ECHO_HELD: pack_echo(&pk, m); break;
    case FAKE_CLOSE: keep = -1; break;
    case FAKE_GARBAGE: {
        const char junk[] = "\xc1\xc1\xc1 not msgpack";
        msgpack_sbuffer_write(&sb, junk, sizeof junk - 1);
        keep = -1;
        break;
    }
    case FAKE_NO_READ: break;
    }
    if (sb.size) {
        if (write_all(fd, sb.data, sb.size) != 0)
            keep = -1;
        else if (keep == 0)
            atomic_fetch_add(&s->answers, 1);
    }
    msgpack_sbuffer_destroy(&sb);
    return keep;
}

// Requests read and not yet answered (the reversing modes), in arrival order.
typedef struct {
    cd_rpc_msg *v;
    size_t n, cap;
} msg_queue;

static void queue_push(msg_queue *q, cd_rpc_msg *m) {
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->v = realloc(q->v, q->cap * sizeof *q->v);
        CHECK(q->v);
    }
    q->v[q->n++] = *m;
}

// Answers every queued request in reverse order and drops them.
static int answer_reverse(fake_server *s, int fd, msg_queue *q) {
    int rc = 0;
    for (size_t i = q->n; i-- > 0;) {
        if (rc == 0) rc = answer(s, fd, &q->v[i]);
        cd_rpc_msg_free(&q->v[i]);
    }
    q->n = 0;
    return rc;
}

static void queue_clear(msg_queue *q) {
    for (size_t i = 0; i < q->n; i++) cd_rpc_msg_free(&q->v[i]);
    q->n = 0;
}

// Handles one control command while a connection is served. Returns 1 when
// the connection ends, and sets *stop when the server stops.
static int serve_command(fake_server *s, int fd, msg_queue *q, int *stop) {
    ctl_cmd cmd;
    CHECK_EQ(read(s->ctl[0], &cmd, sizeof cmd), (ssize_t)sizeof cmd);
    int end = 0;
    if (cmd.op == 's') {
        *stop = end = 1;
    } else if (cmd.op == 'r') {
        atomic_store(&s->holding, 0);
        if (answer_reverse(s, fd, q) != 0) end = 1;
    } else if (cmd.op == 'c') {
        for (int i = 0; i < cmd.n && (size_t)i < q->n; i++) answer(s, fd, &q->v[i]);
        end = 1;
    }
    CHECK_EQ(write(s->done_pipe[1], "k", 1), 1);
    return end;
}

// Serves one accepted connection until it ends or the server stops. Returns
// 1 when told to stop.
static int serve(fake_server *s, int fd) {
    cd_rpc_reader *rd;
    CHECK_EQ(cd_rpc_reader_init(&rd, 1u << 30), 0);
    char *buf = malloc(1 << 16);
    CHECK(buf);
    int reversing = s->mode == FAKE_ECHO_REVERSED || s->mode == FAKE_ECHO_HELD;
    msg_queue q = {0};
    int stop = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = s->mode == FAKE_NO_READ ? 0 : POLLIN},
                              {.fd = s->ctl[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) continue;
        if (p[1].revents) {
            if (serve_command(s, fd, &q, &stop)) break;
            continue;
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = recv(fd, buf, 1 << 16, 0);
        if (n <= 0) break;
        CHECK_EQ(cd_rpc_reader_feed(rd, buf, (size_t)n), 0);
        cd_rpc_msg m;
        uint32_t id;
        char err[128];
        int end = 0;
        while (!end && cd_rpc_reader_next(rd, &m, &id, err, sizeof err) == 1) {
            atomic_fetch_add(&s->requests, 1);
            if (reversing) {
                queue_push(&q, &m);
                continue;
            }
            end = answer(s, fd, &m) != 0;
            cd_rpc_msg_free(&m);
        }
        if (reversing && !atomic_load(&s->holding)) end = answer_reverse(s, fd, &q) != 0;
        if (end) break;
    }
    queue_clear(&q);
    free(q.v);
    free(buf);
    cd_rpc_reader_free(rd);
    close(fd);
    return stop;
}

static void *fake_main(void *arg) {
    fake_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN}, {.fd = s->ctl[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) continue;
        if (p[1].revents) {
            ctl_cmd cmd;
            CHECK_EQ(read(s->ctl[0], &cmd, sizeof cmd), (ssize_t)sizeof cmd);
            if (cmd.op == 'r') atomic_store(&s->holding, 0); // nothing held yet
            CHECK_EQ(write(s->done_pipe[1], "k", 1), 1);
            if (cmd.op == 's') break;
            continue;
        }
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) continue;
        if (serve(s, fd)) break;
    }
    return NULL;
}

fake_server *fake_start(fake_mode mode, int delay_ms) {
    fake_server *s = calloc(1, sizeof *s);
    CHECK(s);
    s->mode = mode;
    s->delay_ms = delay_ms;
    atomic_init(&s->holding, mode == FAKE_ECHO_HELD);
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
    CHECK_EQ(pipe(s->ctl), 0);
    CHECK_EQ(pipe(s->done_pipe), 0);
    CHECK_EQ(pthread_create(&s->thread, NULL, fake_main, s), 0);
    return s;
}

const char *fake_path(const fake_server *s) { return s->path; }

void fake_set_error(fake_server *s, const char *code, const char *message) {
    snprintf(s->code, sizeof s->code, "%s", code);
    snprintf(s->message, sizeof s->message, "%s", message);
}

// Sends a command to the server thread and waits until it is handled.
static void command(fake_server *s, char op, int n) {
    ctl_cmd cmd = {op, n};
    CHECK_EQ(write(s->ctl[1], &cmd, sizeof cmd), (ssize_t)sizeof cmd);
    char k;
    CHECK_EQ(read(s->done_pipe[0], &k, 1), 1);
}

void fake_release(fake_server *s) { command(s, 'r', 0); }
void fake_answer_then_close(fake_server *s, int n) { command(s, 'c', n); }
int fake_requests(fake_server *s) { return atomic_load(&s->requests); }
int fake_answers(fake_server *s) { return atomic_load(&s->answers); }

int fake_wait_requests(fake_server *s, int n, int timeout_ms) {
    for (int waited = 0; atomic_load(&s->requests) < n && waited < timeout_ms; waited++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->requests);
}

void fake_stop(fake_server *s) {
    command(s, 's', 0);
    pthread_join(s->thread, NULL);
    close(s->lfd);
    close(s->ctl[0]);
    close(s->ctl[1]);
    close(s->done_pipe[0]);
    close(s->done_pipe[1]);
    unlink(s->path);
    free(s);
}
