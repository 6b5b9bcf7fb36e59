// The machine's float32 FMA throughput on one core, AVX2 (8 lanes) and, where
// the CPU has it, AVX-512 (16 lanes): 12 independent accumulator chains of
// fused multiply-adds, long enough to hide their latency. This is the
// physical cap of any dense direct convolution on that core; bench/anchors.py
// prints it next to convd's per-layer rates.
// Then the int8 dot products our int8 kernels are built of, in GOP/s (2 per
// u8 x s8 multiply-add, as the FLOP/s): at AVX2 the exact form
// (sparse/i8-spmm-simd.h dot4: the zero-extended even and odd bytes times
// the sign-extended weights by two vpmaddwd) and the short one (vpmaddubsw,
// exact only for weights in [-64, 64]), with VNNI vpdpbusd. Where the exact
// AVX2 dot is no faster than the float32 FMA, int8 kernels cannot beat
// float32 ones by compute at AVX2.
//
//   build/bin/fma-peak [--ms M]     (one line per ISA and form, median of 7)

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

// The int8 dots, as I8_CH chains: STEP(acc, q, w) adds 4 u8 x s8 products
// per 32-bit lane. Each chain has its own activations q (else the compiler
// computes one product for all), which the asm barrier makes new at every
// step (nothing hoisted, no instruction added); 6 chains keep every vector
// in a register at AVX2's 16.
#define I8_CH 6
// clang-format off
#define I8_STEP(STEP, a, q, w) do { __asm__("" : "+x"(q)); a = STEP(a, q, w); } while (0)
#define I8_CHAINS(NAME, TARGET, VI, SET1, STEP, STOREU)                                 \
    __attribute__((target(TARGET))) static float NAME(long iters) {                    \
        const VI w = SET1(0x02fe03fd);                                                  \
        VI a0 = SET1(0), a1 = SET1(1), a2 = SET1(2), a3 = SET1(3), a4 = SET1(4), a5 = SET1(5); \
        VI q0 = SET1(0x01020304), q1 = SET1(0x01020305), q2 = SET1(0x01020306);        \
        VI q3 = SET1(0x01020307), q4 = SET1(0x01020308), q5 = SET1(0x01020309);        \
        for (long n = 0; n < iters; n++) {                                              \
            I8_STEP(STEP, a0, q0, w); I8_STEP(STEP, a1, q1, w); I8_STEP(STEP, a2, q2, w); \
            I8_STEP(STEP, a3, q3, w); I8_STEP(STEP, a4, q4, w); I8_STEP(STEP, a5, q5, w); \
        }                                                                               \
        int out[16];                                                                    \
        const VI all[I8_CH] = {a0, a1, a2, a3, a4, a5};                                 \
        float s = 0;                                                                    \
        for (int i = 0; i < I8_CH; i++) {                                               \
            STOREU((void *)out, all[i]);                                                \
            s += (float)out[0];                                                         \
        }                                                                               \
        return s;                                                                       \
    }
// clang-format on

__attribute__((target("avx2"))) static inline __m256i dot_exact_avx2(__m256i acc, __m256i q, __m256i w) {
    const __m256i we = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8), wo = _mm256_srai_epi16(w, 8);
    const __m256i even = _mm256_and_si256(q, _mm256_set1_epi32(0x00FF00FF)), odd = _mm256_srli_epi16(q, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(even, we), _mm256_madd_epi16(odd, wo)));
}
__attribute__((target("avx2"))) static inline __m256i dot_short_avx2(__m256i acc, __m256i q, __m256i w) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, w), _mm256_set1_epi16(1)));
}
__attribute__((target("avx512f,avx512vnni"))) static inline __m512i dot_vnni(__m512i acc, __m512i q, __m512i w) {
    return _mm512_dpbusd_epi32(acc, q, w);
}
#define STORE256(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define STORE512(p, v) _mm512_storeu_si512(p, v)
I8_CHAINS(run_i8_exact_avx2, "avx2", __m256i, _mm256_set1_epi32, dot_exact_avx2, STORE256)
I8_CHAINS(run_i8_short_avx2, "avx2", __m256i, _mm256_set1_epi32, dot_short_avx2, STORE256)
I8_CHAINS(run_i8_vnni, "avx512f,avx512vnni", __m512i, _mm512_set1_epi32, dot_vnni, STORE512)

// GFLOP/s of fn at `lanes` floats per FMA and `chains` chains: the median
// of 7 runs of ~ms each. (For an int8 dot, lanes = 4 x its 32-bit lanes:
// GOP/s.)
static double measure_chains(float (*fn)(long), int lanes, int chains, double ms) {
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
        r[k] = 2.0 * lanes * chains * (double)iters / (cd_now_ms() - t0) / 1e6;
    }
    qsort(r, 7, sizeof r[0], cd_cmp_double);
    return r[3];
}
static double measure(float (*fn)(long), int lanes, double ms) { return measure_chains(fn, lanes, CHAINS, ms); }
static double measure_i8(float (*fn)(long), int lanes, double ms) { return measure_chains(fn, lanes, I8_CH, ms); }

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
    if (__builtin_cpu_supports("avx2")) {
        printf("avx2 int8 dot, exact (2 x vpmaddwd), 1 core: %.1f GOP/s\n", measure_i8(run_i8_exact_avx2, 32, ms));
        printf("avx2 int8 dot, short weights (vpmaddubsw), 1 core: %.1f GOP/s\n",
               measure_i8(run_i8_short_avx2, 32, ms));
    }
    if (__builtin_cpu_supports("avx512vnni"))
        printf("avx512 int8 dot, vnni (vpdpbusd), 1 core: %.1f GOP/s\n", measure_i8(run_i8_vnni, 64, ms));
    return 0;
}
