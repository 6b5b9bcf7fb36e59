// convbench: parse, run, report (docs/BENCHMARKING.md).

#include "tools/convbench/bench.h"

#include <signal.h>

int main(int argc, char **argv) {
    bench_cfg cfg;
    int rc = bench_parse(argc, argv, &cfg);
    if (rc == -1) return BENCH_EXIT_OK; // --help
    if (rc != 0) return rc;
    signal(SIGPIPE, SIG_IGN);

    bench_result res;
    rc = bench_run(&cfg, &res);
    if (rc != BENCH_EXIT_OK && res.nrows == 0 && res.sent == 0) {
        bench_result_free(&res);
        return rc;
    }
    if (cfg.json)
        bench_report_json(stdout, &cfg, &res);
    else
        bench_report_text(stdout, &cfg, &res);
    fflush(stdout);
    if (cfg.csv && bench_write_csv(cfg.csv, &res) != 0) rc = BENCH_EXIT_FAIL;
    if (cfg.plot && bench_plot(cfg.plot, &cfg, &res) != 0) rc = BENCH_EXIT_FAIL;
    if (rc == BENCH_EXIT_OK && res.ok == 0) {
        fprintf(stderr, "convbench: no request succeeded\n");
        rc = BENCH_EXIT_FAIL;
    }
    bench_result_free(&res);
    return rc;
}
