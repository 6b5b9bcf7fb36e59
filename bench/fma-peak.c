// The machine's float32 FMA throughput on one core, AVX2 (8 lanes) and, where
// the CPU has it, AVX-512 (16 lanes): 12 independent accumulator chains of
// fused multiply-adds, long enough to hide their latency. This is the
// physical cap of any dense direct convolution on that core; bench/anchors.py
// prints it next to convd's per-layer rates.
//
//   build/bin/fma-peak [--ms M]     (one line per ISA: GFLOP/s, median of 7)

#include "core/clock.h"
#include "core/stats-util.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAINS 12

// One chain runner per ISA from the same body. VEC is the vector type of
// LANES floats, SET1/FMADD/STOREU its intrinsics; the sum of each chain's
// first lane keeps the chains live.
// clang-format off
#define FMA_CHAINS(NAME, TARGET, VEC, LANES, SET1, FMADD, STOREU)                      \
    __attribute__((target(TARGET))) static float NAME(long iters) {                    \
        VEC acc[CHAINS], a = SET1(0.999f), b = SET1(1e-6f);                             \
        for (int i = 0; i < CHAINS; i++) acc[i] = SET1((float)i);                      \
        for (long n = 0; n < iters; n++) {                                              \
            _Pragma("GCC unroll 12")                                                    \
            for (int i = 0; i < CHAINS; i++) acc[i] = FMADD(acc[i], a, b);              \
        }                                                                               \
        float s = 0, out[LANES];                                                        \
        for (int i = 0; i < CHAINS; i++) {                                              \
            STOREU(out, acc[i]);                                                        \
            s += out[0];                                                                \
        }                                                                               \
        return s;                                                                       \
    }
// clang-format on

FMA_CHAINS(run_avx2, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)
FMA_CHAINS(run_avx512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)

// GFLOP/s of fn at `lanes` floats per FMA: the median of 7 runs of ~ms each.
static double measure(float (*fn)(long), int lanes, double ms) {
    long iters = 1 << 16;
    for (;;) { // size a run to about ms
        double t0 = cd_now_ms();
        volatile float sink = fn(iters);
        (void)sink;
        double dt = cd_now_ms() - t0;
        if (dt >= ms / 4) {
            iters = (long)(iters * ms / dt) + 1;
            break;
        }
        iters *= 4;
    }
    double r[7];
    for (int k = 0; k < 7; k++) {
        double t0 = cd_now_ms();
        volatile float sink = fn(iters);
        (void)sink;
        r[k] = 2.0 * lanes * CHAINS * (double)iters / (cd_now_ms() - t0) / 1e6;
    }
    qsort(r, 7, sizeof r[0], cd_cmp_double);
    return r[3];
}

int main(int argc, char **argv) {
    double ms = 100;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ms") && i + 1 < argc)
            ms = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--ms M]\n", argv[0]);
            return 2;
        }
    }
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        printf("avx2 fma peak, 1 core: %.1f GFLOP/s\n", measure(run_avx2, 8, ms));
    if (__builtin_cpu_supports("avx512f"))
        printf("avx512 fma peak, 1 core: %.1f GFLOP/s\n", measure(run_avx512, 16, ms));
    return 0;
}
