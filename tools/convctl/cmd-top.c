// convctl top: `stats` every --interval seconds as a compact live view: the
// daemon line (uptime, connections, in flight, RSS, bytes), then the
// per-model table with request rates. On a terminal the screen is cleared
// before each snapshot (ANSI); otherwise (piped) each snapshot is printed
// after the previous one without escape codes.

#include "proto/params.h"
#include "tools/convctl/convctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double getn(const msgpack_object *map, const char *k1, const char *k2) {
    const msgpack_object *v = cd_map_get(map, k1);
    if (v && k2) v = cd_map_get(v, k2);
    if (!v) return 0;
    switch (v->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)v->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)v->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return v->via.f64;
    default: return 0;
    }
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// Sleeps s seconds (restarting after signals).
static void sleep_s(double s) {
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int ctl_cmd_top(ctl_ctx *ctx, int argc, char **argv) {
    double interval = 1.0;
    long count = 0;
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) return CTL_EXIT_USAGE;
        if (r == 1) continue;
        const char *a = argv[i];
        const char *v = NULL;
        bool is_int = strncmp(a, "--count", 7) == 0;
        if (strcmp(a, "--interval") == 0 || strcmp(a, "--count") == 0) {
            if (i + 1 >= argc) return ctl_usage_error(argv[0], "%s needs a value", a);
            v = argv[++i];
        } else if (strncmp(a, "--interval=", 11) == 0) {
            v = a + 11;
        } else if (strncmp(a, "--count=", 8) == 0) {
            v = a + 8;
        } else {
            return ctl_usage_error(argv[0], "unexpected argument '%s'", a);
        }
        char *end;
        errno = 0;
        if (is_int) {
            count = strtol(v, &end, 10);
            if (*v == 0 || *end || errno || count < 1)
                return ctl_usage_error(argv[0], "--count wants an integer >= 1, got '%s'", v);
        } else {
            interval = strtod(v, &end);
            if (*v == 0 || *end || errno || !(interval >= 0.1 && interval <= 3600))
                return ctl_usage_error(argv[0], "--interval wants seconds 0.1..3600, got '%s'", v);
        }
    }
    int rc = ctl_connect(ctx);
    if (rc) return rc;
    bool tty = isatty(STDOUT_FILENO);
    void *prev_buf = NULL;
    size_t prev_len = 0;
    double prev_t = 0;
    for (long n = 0; count == 0 || n < count; n++) {
        if (n > 0) sleep_s(interval);
        void *res;
        size_t len;
        if ((rc = convd_call(ctx->conn, "stats", NULL, 0, &res, &len, CONVD_TIMEOUT_DEFAULT))) {
            free(prev_buf);
            return ctl_fail(rc);
        }
        double t = mono_s();
        msgpack_unpacked cur, prev;
        msgpack_unpacked_init(&cur);
        msgpack_unpacked_init(&prev);
        size_t off = 0;
        if (msgpack_unpack_next(&cur, res, len, &off) != MSGPACK_UNPACK_SUCCESS ||
            cur.data.type != MSGPACK_OBJECT_MAP) {
            msgpack_unpacked_destroy(&cur);
            convd_free(res);
            free(prev_buf);
            return ctl_fail_msg("E_PROTOCOL: the stats answer is not a map");
        }
        const msgpack_object *pm = NULL;
        off = 0;
        if (prev_buf && msgpack_unpack_next(&prev, prev_buf, prev_len, &off) == MSGPACK_UNPACK_SUCCESS) pm = &prev.data;
        const msgpack_object *s = &cur.data;
        double dt = pm ? t - prev_t : 0;
        if (tty)
            printf("\033[H\033[2J");
        else if (n > 0)
            printf("\n");
        char up[64], rss[32], bin[32], bout[32];
        double reqs = getn(s, "requests", "total");
        char rate[32] = "-";
        if (pm && dt > 0) snprintf(rate, sizeof rate, "%.1f/s", (reqs - getn(pm, "requests", "total")) / dt);
        printf("convd  up %s  connections %.0f  in flight %.0f  requests %.0f (%s)  rss %s  "
               "in %s  out %s\n\n",
               ctl_fmt_duration(up, sizeof up, getn(s, "uptime_s", NULL)), getn(s, "connections", "current"),
               getn(s, "requests", "in_flight"), reqs, rate, ctl_fmt_bytes(rss, sizeof rss, getn(s, "rss_bytes", NULL)),
               ctl_fmt_bytes(bin, sizeof bin, getn(s, "bytes_in", NULL)),
               ctl_fmt_bytes(bout, sizeof bout, getn(s, "bytes_out", NULL)));
        ctl_render_models_table(cd_map_get(s, "models"), pm ? cd_map_get(pm, "models") : NULL, dt, 0);
        fflush(stdout);
        msgpack_unpacked_destroy(&cur);
        msgpack_unpacked_destroy(&prev);
        free(prev_buf);
        prev_buf = malloc(len);
        if (prev_buf) {
            memcpy(prev_buf, res, len);
            prev_len = len;
            prev_t = t;
        }
        convd_free(res);
    }
    free(prev_buf);
    return CTL_EXIT_OK;
}
