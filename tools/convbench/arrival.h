#ifndef CD_CONVBENCH_ARRIVAL_H
#define CD_CONVBENCH_ARRIVAL_H

// Arrival processes of convbench's open loop: when request i is due.
//
//   uniform  evenly spaced: request i at i / rate (a constant rate)
//   poisson  a Poisson process: independent exponential gaps of mean 1/rate
//            (bursts and lulls, as from many independent clients)
//
// Times are absolute offsets from the start of the run, in nanoseconds, so
// rounding never drifts the rate.

#include <stdint.h>

typedef enum {
    CD_ARRIVAL_UNIFORM,
    CD_ARRIVAL_POISSON,
} cd_arrival_kind;

typedef struct {
    cd_arrival_kind kind; // the process
    double rate;          // arrivals per second, > 0
    uint64_t rng;         // splitmix64 state (poisson)
    uint64_t n;           // arrivals produced so far
    double t;             // time of the last arrival, seconds
} cd_arrival;

// "uniform" / "poisson" -> kind. Returns 0, or -1 for another name.
int cd_arrival_parse(const char *name, cd_arrival_kind *out);
const char *cd_arrival_name(cd_arrival_kind kind);

void cd_arrival_init(cd_arrival *a, cd_arrival_kind kind, double rate, uint64_t seed);

// Time of the next arrival, ns from the start; non-decreasing. The first
// arrival is at 0 (uniform) or after one exponential gap (poisson).
uint64_t cd_arrival_next_ns(cd_arrival *a);

// splitmix64 step, and a uniform double in (0, 1) from it.
uint64_t cd_bench_rand(uint64_t *state);
double cd_bench_rand01(uint64_t *state);

#endif // CD_CONVBENCH_ARRIVAL_H
