#ifndef CD_CONVBENCH_BENCH_H
#define CD_CONVBENCH_BENCH_H

// convbench: a load generator for convd (docs/BENCHMARKING.md). Shared
// between its files: the configuration, the result of a run, and the steps
// main() calls (parse, run, report, plot).

#include "client/convd.h"
#include "tools/convbench/arrival.h"
#include "tools/convbench/batches.h"
#include "tools/convbench/hist.h"

#include <stdint.h>
#include <stdio.h>

// Exit codes.
enum {
    BENCH_EXIT_OK = 0,      // the run completed (errors, if any, are reported)
    BENCH_EXIT_FAIL = 1,    // unknown model, no request succeeded, lost every
                            // connection, cannot write --csv/--plot output
    BENCH_EXIT_USAGE = 2,   // bad command line
    BENCH_EXIT_CONNECT = 3, // cannot connect to the daemon
};

// The command line.
typedef struct {
    const char *socket;      // NULL: $CONVD_SOCKET or the default
    const char *model;       // model name (required)
    int concurrency;         // closed loop: workers; open loop: bound on in flight
    int connections;         // connections to open; 0: min(concurrency, 8)
    double rate;             // open loop: requests/s; 0: closed loop
    cd_arrival_kind arrival; // open loop arrival process
    double duration_s;       // measured seconds (when requests == 0)
    long long requests;      // measured requests; 0: run for duration_s
    double warmup_s;         // unmeasured seconds first
    int batch;               // batch size put in open batch dims
    const char *input_shape; // "auto" or NAME=AxBx..,... / AxBx.. (see --help)
    int timeout_ms;          // per request
    int json;                // final report as JSON on stdout
    const char *csv;         // per-second CSV file, or NULL
    const char *plot;        // PNG file, or NULL
    int progress;            // -1: when stderr is a tty; 0 never; 1 always
    uint64_t seed;           // random inputs and poisson gaps
    int shm;                 // closed loop through shared memory: each worker its own
                             // connection and region (inputs and outputs named, not sent)
} bench_cfg;

// One second of the run (the timeline: progress line, --csv, --plot).
typedef struct {
    double t_s;                            // end of the interval, seconds since the start
    int warmup;                            // 1: the interval is (mostly) warm-up
    uint64_t sent;                         // requests sent in the interval
    uint64_t ok;                           // successful completions in the interval
    uint64_t errors;                       // failed completions / sends in the interval
    double p50_ms, p90_ms, p99_ms, max_ms; // latency of the interval's ok ones
} bench_row;

#define BENCH_CODES 32 // by_code index: -status; BENCH_CODES-1: others

// What a run measured (requests scheduled after the warm-up only).
typedef struct {
    cd_hist lat;     // latency (ns) of successful requests
    uint64_t sent;   // requests issued
    uint64_t ok;     // succeeded
    uint64_t errors; // failed (answer error, timeout, send failure)
    uint64_t by_code[BENCH_CODES];
    double elapsed_s;  // from the end of the warm-up to the last completion
    double max_lag_ms; // open loop: worst lateness of a send vs its schedule
    int connections;   // connections used
    int64_t batch;     // samples per request (shape[0] of the first input)
    bench_row *rows;   // the timeline, one row per second
    size_t nrows;
    char stop_reason[320]; // why the run ended early, "" when it did not
    bench_batches batches; // the daemon's runs by batch size over the measured part
} bench_result;

// Parses argv into cfg. Returns 0; or prints the error (or --help) and
// returns the exit code to use (BENCH_EXIT_USAGE, or -1 after --help).
int bench_parse(int argc, char **argv, bench_cfg *cfg);
void bench_usage(FILE *f);

// Connects, resolves the model's inputs, runs the load, fills *res
// (release with bench_result_free). Returns an exit code; messages on stderr.
int bench_run(const bench_cfg *cfg, bench_result *res);
void bench_result_free(bench_result *res);

// Final report: text or JSON on f.
void bench_report_text(FILE *f, const bench_cfg *cfg, const bench_result *res);
void bench_report_json(FILE *f, const bench_cfg *cfg, const bench_result *res);
// Per-second CSV. Returns 0 or -1 (message printed).
int bench_write_csv(const char *path, const bench_result *res);
// The PNG (gnuplot). Returns 0 or -1 (message printed).
int bench_plot(const char *path, const bench_cfg *cfg, const bench_result *res);

#endif // CD_CONVBENCH_BENCH_H
