// convbench's command line: options, their checks, --help.

#include "tools/convbench/bench.h"

#include "convd-version.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void bench_usage(FILE *f) {
    fprintf(f, "usage: convbench --model M --concurrency C [--rate R [--arrival poisson|uniform]]\n"
               "                 [--duration S | --requests N] [--warmup S] [--batch B]\n"
               "                 [--socket PATH] [--connections K] [--input-shape auto|SHAPE]\n"
               "                 [--timeout MS] [--seed N] [--json] [--csv FILE] [--plot FILE.png]\n"
               "                 [--progress | --no-progress] [--shm]\n"
               "\n"
               "Load-tests a running convd with inference requests on random f32 inputs and\n"
               "reports throughput and latency (docs/BENCHMARKING.md).\n"
               "\n"
               "Load:\n"
               "  --model M          the model to run (must be loaded; see convctl models)\n"
               "  --concurrency C    closed loop (no --rate): C workers, each with exactly one\n"
               "                     request in flight, sending the next as soon as the last\n"
               "                     completes. Open loop: at most C requests in flight.\n"
               "  --rate R           open loop: R requests per second on a fixed schedule,\n"
               "                     whatever the latency; latency is measured from each\n"
               "                     request's scheduled send time (no coordinated omission)\n"
               "  --arrival A        open loop schedule: poisson (exponential gaps, default)\n"
               "                     or uniform (evenly spaced)\n"
               "  --connections K    connections to spread the requests over (default\n"
               "                     min(C, 8)); requests are pipelined on each\n"
               "  --duration S       measure for S seconds (default 10)\n"
               "  --requests N       measure N requests instead\n"
               "  --warmup S         run S seconds first without measuring (default 1)\n"
               "  --batch B          samples per request: the model's open batch dim (default 1)\n"
               "  --input-shape X    auto (default): from the daemon's models answer, batch dim\n"
               "                     = B; or AxBx.. for a one-input model; or NAME=AxB..,NAME=..\n"
               "  --timeout MS       per-request timeout, also sent to the daemon (default 10000)\n"
               "  --seed N           seed of the random inputs and arrivals (default: time)\n"
               "  --shm              closed loop through shared-memory regions: each worker has\n"
               "                     its own connection and region holding its inputs and\n"
               "                     outputs; requests name them instead of carrying them\n"
               "  --socket PATH      daemon socket (default $CONVD_SOCKET, else /run/convd/convd.sock\n"
               "                     as root, else $XDG_RUNTIME_DIR/convd.sock)\n"
               "\n"
               "Output:\n"
               "  (default)          a text report on stdout: requests, throughput, latency\n"
               "                     min/mean/p50/p90/p99/p99.9/max, errors by code\n"
               "  --json             the report as one JSON object on stdout instead\n"
               "  --csv FILE         one row per second: second,phase,sent,ok,errors,\n"
               "                     throughput_rps,p50_ms,p90_ms,p99_ms,max_ms\n"
               "  --plot FILE.png    latency histogram and latency over time (gnuplot)\n"
               "  --progress         a progress line on stderr every second (default: when\n"
               "                     stderr is a terminal); --no-progress: never\n"
               "  --version          print convbench's version and exit\n"
               "\n"
               "Exit: 0 run completed, 1 failed (unknown model, nothing succeeded, lost\n"
               "connections, output files), 2 usage, 3 cannot connect.\n");
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "convbench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    fprintf(stderr, "usage: convbench --model M --concurrency C [options]  (--help for all)\n");
    return BENCH_EXIT_USAGE;
}

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int parse_ll(const char *s, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

int bench_parse(int argc, char **argv, bench_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->duration_s = 10;
    cfg->warmup_s = 1;
    cfg->batch = 1;
    cfg->input_shape = "auto";
    cfg->timeout_ms = 10000;
    cfg->progress = -1;
    cfg->arrival = CD_ARRIVAL_POISSON;
    cfg->seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    int have_duration = 0, have_arrival = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            bench_usage(stdout);
            return -1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("convbench %s (libconvd %s)\n", CD_VERSION, convd_version());
            return -1;
        }
        // Flags without a value.
        if (strcmp(a, "--json") == 0) {
            cfg->json = 1;
            continue;
        }
        if (strcmp(a, "--shm") == 0) {
            cfg->shm = 1;
            continue;
        }
        if (strcmp(a, "--progress") == 0) {
            cfg->progress = 1;
            continue;
        }
        if (strcmp(a, "--no-progress") == 0) {
            cfg->progress = 0;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) return usage_error("unexpected argument '%s'", a);
        // --opt VALUE or --opt=VALUE.
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
            if (i + 1 >= argc) return usage_error("%s needs a value", a);
            val = argv[++i];
        }
        double d;
        long long n;
        if (strcmp(name, "--model") == 0) {
            cfg->model = val;
        } else if (strcmp(name, "--socket") == 0) {
            cfg->socket = val;
        } else if (strcmp(name, "--concurrency") == 0) {
            if (parse_ll(val, &n) || n < 1 || n > 100000)
                return usage_error("--concurrency must be 1..100000, not '%s'", val);
            cfg->concurrency = (int)n;
        } else if (strcmp(name, "--connections") == 0) {
            if (parse_ll(val, &n) || n < 1 || n > 10000)
                return usage_error("--connections must be 1..10000, not '%s'", val);
            cfg->connections = (int)n;
        } else if (strcmp(name, "--rate") == 0) {
            if (parse_double(val, &d) || d <= 0 || d > 1e7)
                return usage_error("--rate must be a number of requests/s in (0, 1e7], not '%s'", val);
            cfg->rate = d;
        } else if (strcmp(name, "--arrival") == 0) {
            if (cd_arrival_parse(val, &cfg->arrival) != 0)
                return usage_error("--arrival must be poisson or uniform, not '%s'", val);
            have_arrival = 1;
        } else if (strcmp(name, "--duration") == 0) {
            if (parse_double(val, &d) || d <= 0 || d > 1e6)
                return usage_error("--duration must be seconds > 0, not '%s'", val);
            cfg->duration_s = d;
            have_duration = 1;
        } else if (strcmp(name, "--requests") == 0) {
            if (parse_ll(val, &n) || n < 1) return usage_error("--requests must be >= 1, not '%s'", val);
            cfg->requests = n;
        } else if (strcmp(name, "--warmup") == 0) {
            if (parse_double(val, &d) || d < 0 || d > 1e5)
                return usage_error("--warmup must be seconds >= 0, not '%s'", val);
            cfg->warmup_s = d;
        } else if (strcmp(name, "--batch") == 0) {
            if (parse_ll(val, &n) || n < 1 || n > 1000000) return usage_error("--batch must be >= 1, not '%s'", val);
            cfg->batch = (int)n;
        } else if (strcmp(name, "--input-shape") == 0) {
            cfg->input_shape = val;
        } else if (strcmp(name, "--timeout") == 0) {
            if (parse_ll(val, &n) || n < 1 || n > 86400000)
                return usage_error("--timeout must be milliseconds >= 1, not '%s'", val);
            cfg->timeout_ms = (int)n;
        } else if (strcmp(name, "--seed") == 0) {
            if (parse_ll(val, &n)) return usage_error("--seed must be an integer, not '%s'", val);
            cfg->seed = (uint64_t)n;
        } else if (strcmp(name, "--csv") == 0) {
            cfg->csv = val;
        } else if (strcmp(name, "--plot") == 0) {
            cfg->plot = val;
        } else {
            return usage_error("unknown option '%s'", name);
        }
    }
    if (!cfg->model) return usage_error("%s", "--model is required");
    if (cfg->concurrency < 1) return usage_error("%s", "--concurrency is required");
    if (have_duration && cfg->requests) return usage_error("%s", "give --duration or --requests, not both");
    if (have_arrival && cfg->rate == 0) return usage_error("%s", "--arrival needs --rate (open loop)");
    if (cfg->shm && cfg->rate != 0) return usage_error("%s", "--shm is a closed loop: it takes no --rate");
    if (cfg->shm) cfg->connections = cfg->concurrency; // a worker, a connection, a region
    if (cfg->connections == 0) cfg->connections = cfg->concurrency < 8 ? cfg->concurrency : 8;
    if (cfg->connections > cfg->concurrency) return usage_error("%s", "--connections cannot exceed --concurrency");
    return 0;
}
