// Arrival processes of the open loop (see arrival.h).

#include "tools/convbench/arrival.h"

#include <math.h>
#include <string.h>

uint64_t cd_bench_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double cd_bench_rand01(uint64_t *state) {
    // 53 random bits, shifted by half a step: never 0, never 1.
    return ((double)(cd_bench_rand(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

int cd_arrival_parse(const char *name, cd_arrival_kind *out) {
    if (strcmp(name, "uniform") == 0) {
        *out = CD_ARRIVAL_UNIFORM;
        return 0;
    }
    if (strcmp(name, "poisson") == 0) {
        *out = CD_ARRIVAL_POISSON;
        return 0;
    }
    return -1;
}

const char *cd_arrival_name(cd_arrival_kind kind) { return kind == CD_ARRIVAL_POISSON ? "poisson" : "uniform"; }

void cd_arrival_init(cd_arrival *a, cd_arrival_kind kind, double rate, uint64_t seed) {
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->rate = rate;
    a->rng = seed;
}

uint64_t cd_arrival_next_ns(cd_arrival *a) {
    if (a->kind == CD_ARRIVAL_UNIFORM) {
        // i / rate computed from i, not accumulated: no drift.
        a->t = (double)a->n / a->rate;
    } else {
        // Inverse transform: -ln(U) / rate is exponential with mean 1/rate.
        a->t += -log(cd_bench_rand01(&a->rng)) / a->rate;
    }
    a->n++;
    return (uint64_t)llround(a->t * 1e9);
}
