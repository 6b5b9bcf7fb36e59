#ifndef CD_CONVBENCH_BATCHES_H
#define CD_CONVBENCH_BATCHES_H

// The daemon's runs of one model by batch size (its `stats`), for the report.

#include "client/convd.h"

#include <stdint.h>

#define BENCH_BATCH_SLOTS 4097 // items 0..4096 (CD_MAX_BATCH); the last slot also holds any larger

typedef struct {
    int valid;                        // 0: the daemon did not say (an older daemon, a failed call)
    uint64_t runs[BENCH_BATCH_SLOTS]; // runs[i]: runs of i items
} bench_batches;

// Reads model's batch_sizes from the daemon's stats. 0 or the call's error.
int bench_batches_read(convd_conn *conn, const char *model, bench_batches *out);
// after - before, per size (valid when both are).
void bench_batches_diff(const bench_batches *before, const bench_batches *after, bench_batches *out);
// The number of runs and their mean items.
void bench_batches_totals(const bench_batches *b, uint64_t *runs, double *mean_items);

#endif // CD_CONVBENCH_BATCHES_H
