// The scripted server of the asynchronous client tests (see
// test-client-async-server.h).

#include "tests/client/test-client-async-server.h"

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
    char op;  // 'r' release, 'c' answer n then close, 's' stop
    int n;
} ctl_cmd;

struct async_server {
    int lfd;                // listening socket
    int ctl[2];             // control pipe (ctl_cmd records)
    int done_pipe[2];       // one byte back per handled command
    char path[108];
    atomic_int holding;     // 1: queue answers until released
    atomic_int requests;    // requests read
    atomic_int answers;     // answers written
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

// Held requests, in arrival order.
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

// Echo answer: {outputs: <the request's inputs>}; non-infer methods get {}.
static int answer_one(async_server *s, int fd, cd_rpc_msg *m) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    const msgpack_object *p = cd_rpc_params_map(m);
    const msgpack_object *in = p ? cd_map_get(p, "inputs") : NULL;
    cd_rpc_pack_response_ok_begin(&pk, m->msgid);
    msgpack_pack_map(&pk, 1);
    cd_pack_str(&pk, "outputs");
    if (in)
        msgpack_pack_object(&pk, *in);
    else
        msgpack_pack_map(&pk, 0);
    int rc = write_all(fd, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    if (rc == 0) atomic_fetch_add(&s->answers, 1);
    return rc;
}

// Answers queue entries [from, to) in reverse order and drops them.
static int answer_reverse(async_server *s, int fd, msg_queue *q) {
    int rc = 0;
    for (size_t i = q->n; i-- > 0;) {
        if (rc == 0) rc = answer_one(s, fd, &q->v[i]);
        cd_rpc_msg_free(&q->v[i]);
    }
    q->n = 0;
    return rc;
}

static void queue_clear(msg_queue *q) {
    for (size_t i = 0; i < q->n; i++) cd_rpc_msg_free(&q->v[i]);
    q->n = 0;
}

// Serves one connection. Returns 1 when told to stop.
static int serve(async_server *s, int fd) {
    cd_rpc_reader *rd;
    CHECK_EQ(cd_rpc_reader_init(&rd, 1u << 30), 0);
    char *buf = malloc(1 << 16);
    CHECK(buf);
    msg_queue q = {0};
    int stop = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = s->ctl[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) continue;
        if (p[1].revents) {
            ctl_cmd cmd;
            CHECK_EQ(read(s->ctl[0], &cmd, sizeof cmd), (ssize_t)sizeof cmd);
            int end = 0;
            if (cmd.op == 's') {
                stop = end = 1;
            } else if (cmd.op == 'r') {
                atomic_store(&s->holding, 0);
                if (answer_reverse(s, fd, &q) != 0) end = 1;
            } else if (cmd.op == 'c') {
                for (int i = 0; i < cmd.n && (size_t)i < q.n; i++) answer_one(s, fd, &q.v[i]);
                end = 1;
            }
            CHECK_EQ(write(s->done_pipe[1], "k", 1), 1);
            if (end) break;
            continue;
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = recv(fd, buf, 1 << 16, 0);
        if (n <= 0) break;
        CHECK_EQ(cd_rpc_reader_feed(rd, buf, (size_t)n), 0);
        cd_rpc_msg m;
        uint32_t id;
        char err[128];
        while (cd_rpc_reader_next(rd, &m, &id, err, sizeof err) == 1) {
            atomic_fetch_add(&s->requests, 1);
            queue_push(&q, &m);
        }
        if (!atomic_load(&s->holding) && answer_reverse(s, fd, &q) != 0) break;
    }
    queue_clear(&q);
    free(q.v);
    free(buf);
    cd_rpc_reader_free(rd);
    close(fd);
    return stop;
}

static void *server_main(void *arg) {
    async_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN}, {.fd = s->ctl[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) continue;
        if (p[1].revents) {
            ctl_cmd cmd;
            CHECK_EQ(read(s->ctl[0], &cmd, sizeof cmd), (ssize_t)sizeof cmd);
            if (cmd.op == 'r') atomic_store(&s->holding, 0);  // nothing held yet
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

async_server *async_server_start(int holding) {
    async_server *s = calloc(1, sizeof *s);
    CHECK(s);
    atomic_init(&s->holding, holding);
    snprintf(s->path, sizeof s->path, "/tmp/cd-async-%d-%llu.sock", (int)getpid(),
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
    CHECK_EQ(pthread_create(&s->thread, NULL, server_main, s), 0);
    return s;
}

const char *async_server_path(const async_server *s) { return s->path; }

static void command(async_server *s, char op, int n) {
    ctl_cmd cmd = {op, n};
    CHECK_EQ(write(s->ctl[1], &cmd, sizeof cmd), (ssize_t)sizeof cmd);
    char k;
    CHECK_EQ(read(s->done_pipe[0], &k, 1), 1);
}

void async_server_release(async_server *s) { command(s, 'r', 0); }
void async_server_answer_then_close(async_server *s, int n) { command(s, 'c', n); }
int async_server_requests(async_server *s) { return atomic_load(&s->requests); }
int async_server_answers(async_server *s) { return atomic_load(&s->answers); }

int async_server_wait_requests(async_server *s, int n, int timeout_ms) {
    for (int waited = 0; atomic_load(&s->requests) < n && waited < timeout_ms; waited++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->requests);
}

void async_server_stop(async_server *s) {
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
