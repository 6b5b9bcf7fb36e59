// The batch-1 fully connected layer over oneDNN's own packed weights
// (backends/cpu/gemv.h). oneDNN 2.6's brgemm inner product reads them as one
// sequential stream, ~15-17 GB/s on one Zen 4 core; four blocks of 64
// outputs at a time are four streams, which the core's prefetchers serve
// faster (~23-25 GB/s measured for four row streams).

#include "backends/cpu/gemv.h"
#include "core/one-thread.h"

#include <immintrin.h>

// Outputs [64 a0, 64 (a0 + nblk)) (nblk <= 4): nblk streams side by side.
static void blocks(int n, int k, int kb, int a0, int nblk, const float *w, const float *x, float *y) {
    __m512 acc[4][4];
    for (int s = 0; s < 4; s++)
        for (int q = 0; q < 4; q++) acc[s][q] = _mm512_setzero_ps();
    const float *wa[4];
    for (int s = 0; s < nblk; s++) wa[s] = w + (size_t)(a0 + s) * (size_t)kb * 1024;
    for (int b = 0; b < kb; b++) {
        const int ni = b == kb - 1 ? k - 16 * b : 16; // x past k is not ours to read
        for (int i = 0; i < ni; i++) {
            const __m512 xv = _mm512_set1_ps(x[16 * b + i]);
            const size_t o = (size_t)b * 1024 + 64 * (size_t)i;
            for (int s = 0; s < nblk; s++) // unrolled by the compiler for nblk = 4
                for (int q = 0; q < 4; q++)
                    acc[s][q] = _mm512_fmadd_ps(_mm512_load_ps(wa[s] + o + 16 * q), xv, acc[s][q]);
        }
    }
    for (int s = 0; s < nblk; s++) {
        float out[64] __attribute__((aligned(64)));
        for (int q = 0; q < 4; q++) _mm512_store_ps(out + 16 * q, acc[s][q]);
        const int a = a0 + s, m = n - 64 * a < 64 ? n - 64 * a : 64;
        for (int j = 0; j < m; j++) y[64 * a + j] = out[j];
    }
}

// Group g: up to 4 blocks of 64 outputs from 64g on.
static void group(int n, int k, int kb, int nb, int g, const float *w, const float *x, float *y) {
    const int a0 = 4 * g, nblk = nb - a0 < 4 ? nb - a0 : 4;
    if (nblk == 4)
        blocks(n, k, kb, a0, 4, w, x, y);
    else
        blocks(n, k, kb, a0, nblk, w, x, y);
}

void cd_cpu_gemv_oi16i64o_avx512f(int n, int k, const float *w, const float *x, float *y) {
    // Block (a, b) holds w[64a + j][16b + i] at i * 64 + j, the blocks of one
    // a contiguous.
    const int nb = (n + 63) / 64, kb = (k + 15) / 16, groups = (nb + 3) / 4;
    if (cd_one_thread()) { // no OpenMP region (core/one-thread.h)
        for (int g = 0; g < groups; g++) group(n, k, kb, nb, g, w, x, y);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int g = 0; g < groups; g++) group(n, k, kb, nb, g, w, x, y);
}
