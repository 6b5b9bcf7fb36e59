// pingpong: round trips over a Unix stream socket, for bench/overhead.py.
//
//   pingpong [--iters N] [--warmup N] [--size BYTES] [--cpu-a C] [--cpu-b C]
//       Two processes (fork) on a socketpair: A writes `size` bytes, B reads
//       them and writes `size` bytes back, A reads them: one round trip. Both
//       block in read(2) (no busy polling). --cpu-a/--cpu-b pin the two
//       processes (sched_setaffinity): the same CPU for the same-core case,
//       two CPUs for cross-core; unpinned by default.
//
//   pingpong --convd SOCKET --request FILE [--iters N] [--warmup N] [--cpu-a C]
//       The same blocking loop against a running convd: FILE holds one packed
//       msgpack-RPC request; each iteration writes it and reads exactly one
//       response (msgpack framing), checking that it carries no error.
//
// Prints one JSON object: {"mode", "iters", "size", "p50_us", "p90_us",
// "p99_us", "mean_us", "min_us"}.
#include "core/stats-util.h"

#include <errno.h>
#include <msgpack.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(1);
    }
}

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            perror("write");
            exit(1);
        }
        p += w;
        n -= (size_t)w;
    }
}

// Reads exactly n bytes; returns 0, or -1 on EOF.
static int read_all(int fd, char *p, size_t n) {
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void report(const char *mode, double *t, int n, size_t size) {
    qsort(t, (size_t)n, sizeof *t, cd_cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += t[i];
    printf("{\"mode\": \"%s\", \"iters\": %d, \"size\": %zu, \"p50_us\": %.2f, "
           "\"p90_us\": %.2f, \"p99_us\": %.2f, \"mean_us\": %.2f, \"min_us\": %.2f}\n",
           mode, n, size, t[n / 2], t[(int)(n * 0.9)], t[(int)(n * 0.99)], sum / n, t[0]);
}

int main(int argc, char **argv) {
    int iters = 20000, warmup = 2000, cpu_a = -1, cpu_b = -1;
    size_t size = 64;
    const char *convd = NULL, *reqfile = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "pingpong: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--iters"))
            iters = atoi(v);
        else if (!strcmp(a, "--warmup"))
            warmup = atoi(v);
        else if (!strcmp(a, "--size"))
            size = (size_t)atol(v);
        else if (!strcmp(a, "--cpu-a"))
            cpu_a = atoi(v);
        else if (!strcmp(a, "--cpu-b"))
            cpu_b = atoi(v);
        else if (!strcmp(a, "--convd"))
            convd = v;
        else if (!strcmp(a, "--request"))
            reqfile = v;
        else {
            fprintf(stderr, "pingpong: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (iters < 1 || size < 1) {
        fprintf(stderr, "pingpong: --iters and --size must be >= 1\n");
        return 2;
    }
    double *t = malloc((size_t)iters * sizeof *t);
    if (!t) return 1;

    if (convd) {
        if (!reqfile) {
            fprintf(stderr, "pingpong: --convd needs --request FILE\n");
            return 2;
        }
        FILE *f = fopen(reqfile, "rb");
        if (!f) {
            perror(reqfile);
            return 1;
        }
        static char req[1 << 20];
        size_t rlen = fread(req, 1, sizeof req, f);
        fclose(f);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", convd);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            perror("connect");
            return 1;
        }
        pin(cpu_a);
        msgpack_unpacker up;
        msgpack_unpacker_init(&up, 1 << 16);
        msgpack_unpacked res;
        msgpack_unpacked_init(&res);
        for (int i = -warmup; i < iters; i++) {
            double t0 = now_us();
            write_all(fd, req, rlen);
            for (;;) {
                int rc = msgpack_unpacker_next(&up, &res);
                if (rc == MSGPACK_UNPACK_SUCCESS) break;
                if (rc < 0) {
                    fprintf(stderr, "pingpong: bad response bytes\n");
                    return 1;
                }
                msgpack_unpacker_reserve_buffer(&up, 1 << 16);
                ssize_t r = read(fd, msgpack_unpacker_buffer(&up), msgpack_unpacker_buffer_capacity(&up));
                if (r <= 0) {
                    fprintf(stderr, "pingpong: connection closed\n");
                    return 1;
                }
                msgpack_unpacker_buffer_consumed(&up, (size_t)r);
            }
            double dt = now_us() - t0;
            msgpack_object o = res.data;
            if (o.type != MSGPACK_OBJECT_ARRAY || o.via.array.size != 4 ||
                o.via.array.ptr[2].type != MSGPACK_OBJECT_NIL) {
                fprintf(stderr, "pingpong: the daemon answered an error\n");
                return 1;
            }
            if (i >= 0) t[i] = dt;
        }
        report("convd", t, iters, rlen);
        return 0;
    }

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("socketpair");
        return 1;
    }
    char *buf = calloc(1, size);
    pid_t pid = fork();
    if (pid == 0) { // B: echo
        close(sv[0]);
        pin(cpu_b);
        while (read_all(sv[1], buf, size) == 0) write_all(sv[1], buf, size);
        _exit(0);
    }
    close(sv[1]);
    pin(cpu_a);
    for (int i = -warmup; i < iters; i++) {
        double t0 = now_us();
        write_all(sv[0], buf, size);
        if (read_all(sv[0], buf, size) != 0) {
            fprintf(stderr, "pingpong: peer closed\n");
            return 1;
        }
        if (i >= 0) t[i] = now_us() - t0;
    }
    close(sv[0]);
    waitpid(pid, NULL, 0);
    const char *mode = cpu_a < 0 ? "unpinned" : cpu_a == cpu_b ? "same-core" : "cross-core";
    report(mode, t, iters, size);
    return 0;
}
