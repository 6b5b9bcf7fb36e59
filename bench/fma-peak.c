// The machine's float32 FMA throughput on one core, AVX2 (8 lanes) and, where
// the CPU has it, AVX-512 (16 lanes): 12 independent accumulator chains of
// fused multiply-adds, long enough to hide their latency. This is the
// physical cap of any dense direct convolution on that core; bench/anchors.py
// prints it next to convd's per-layer rates.
//
//   build/bin/fma-peak [--ms M]     (one line per ISA: GFLOP/s, median of 7)

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CHAINS 12

__attribute__((target("avx2,fma"))) static float run_avx2(long iters) {
    __m256 acc[CHAINS], a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_ps((float)i);
    for (long n = 0; n < iters; n++) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    float s = 0, out[8];
    for (int i = 0; i < CHAINS; i++) {
        _mm256_storeu_ps(out, acc[i]);
        s += out[0];
    }
    return s;
}

__attribute__((target("avx512f"))) static float run_avx512(long iters) {
    __m512 acc[CHAINS], a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long n = 0; n < iters; n++) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    float s = 0;
    for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_ps(acc[i]);
    return s;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// GFLOP/s of fn at `lanes` floats per FMA: the median of 7 runs of ~ms each.
static double measure(float (*fn)(long), int lanes, double ms) {
    long iters = 1 << 16;
    for (;;) { // size a run to about ms
        double t0 = now_s();
        volatile float sink = fn(iters);
        (void)sink;
        double dt = now_s() - t0;
        if (dt * 1e3 >= ms / 4) {
            iters = (long)(iters * (ms / 1e3) / dt) + 1;
            break;
        }
        iters *= 4;
    }
    double r[7];
    for (int k = 0; k < 7; k++) {
        double t0 = now_s();
        volatile float sink = fn(iters);
        (void)sink;
        r[k] = 2.0 * lanes * CHAINS * (double)iters / (now_s() - t0) / 1e9;
    }
    qsort(r, 7, sizeof r[0], cmp);
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
