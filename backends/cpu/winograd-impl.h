// Internals of the Winograd conv (backends/cpu/winograd*.c): the state, the
// transform matrices, how a run's tiles are cut into chunks, and the ISA
// bodies. Not for use outside backends/cpu/winograd*.c and its test.
#ifndef CD_BACKENDS_CPU_WINOGRAD_IMPL_H
#define CD_BACKENDS_CPU_WINOGRAD_IMPL_H

#include "backends/cpu/winograd.h"

#include <stdint.h>

// F(2x2,3x3): interpolation points 0, 1, -1 (Lavin & Gray).
static const float cd_wino_bt2[4 * 4] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const float cd_wino_g2[4 * 3] = {1, 0, 0, 0.5f, 0.5f, 0.5f, 0.5f, -0.5f, 0.5f, 0, 0, 1};
static const float cd_wino_at2[2 * 4] = {1, 1, 1, 0, 0, 1, -1, -1};

// F(4x4,3x3): points 0, 1, -1, 2, -2.
static const float cd_wino_bt4[6 * 6] = {
    4, 0,  -5, 0, 1, 0, 0, -4, -4, 1,  1, 0, 0, 4, -4, -1, 1, 0, //
    0, -2, -1, 2, 1, 0, 0, 2,  -1, -2, 1, 0, 0, 4, 0,  -5, 0, 1,
};
static const float cd_wino_g4[6 * 3] = {
    1.0f / 4,  0,         0,        -1.0f / 6, -1.0f / 6,  -1.0f / 6, -1.0f / 6, 1.0f / 6, -1.0f / 6, //
    1.0f / 24, 1.0f / 12, 1.0f / 6, 1.0f / 24, -1.0f / 12, 1.0f / 6,  0,         0,        1,
};
static const float cd_wino_at4[4 * 6] = {
    1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1,
};

struct cd_wino {
    cd_conv_desc d;    // the conv (d.n unused)
    cd_layout l;       // src and dst layout
    int b;             // channels per block of l
    int m, t;          // output tile, input tile (m + 2)
    cd_sparse_isa isa; // SCALAR, AVX2 or AVX512F
    int cp, kp;        // c and k rounded up to whole blocks
    int kw;            // output channels per weight panel (the GEMM's k block)
    float *wt;         // transformed weights, see cd_wino_w_index; zero past c and k
    float *bias;       // kp floats, zero past k and where the conv has none
    char name[40];     // "winograd:F4x4:avx512f"
};

// Where transformed weight (element e of the t x t tile, in channel c, out
// channel k) lives: per element a cp x kp matrix, cut into panels of kw
// output channels (the last one narrower), each panel c-major, so the GEMM
// streams one panel: [e][k / kw][c][k % kw].
static inline size_t cd_wino_w_index(const cd_wino *wg, int e, int c, int k) {
    const int kb = k / wg->kw, width = wg->kp - kb * wg->kw < wg->kw ? wg->kp - kb * wg->kw : wg->kw;
    return (size_t)e * wg->cp * wg->kp + (size_t)kb * wg->kw * wg->cp + (size_t)c * width + (size_t)(k - kb * wg->kw);
}

// The tiles of one run: th x tw per item, ntiles in all, run `chunk` at a
// time so that a chunk's transformed input and products stay in L2.
typedef struct {
    int th, tw, ntiles, chunk;
} cd_wino_grid;
void cd_wino_grid_of(const cd_wino *wg, int batch, cd_wino_grid *g);

// A chunk's scratch: u [t*t][chunk][cp] (transformed input), then mo
// [t*t][chunk][kp] (the products), in floats.
static inline size_t cd_wino_chunk_floats(const cd_wino *wg, int chunk) {
    return (size_t)wg->t * wg->t * (size_t)chunk * (size_t)(wg->cp + wg->kp);
}

// The choice's timings on disk (winograd-cache.c): the key of a conv on
// isa at threads, and its oneDNN, F2 and F4 times in ns (1 when found).
void cd_wino_cache_key(const cd_conv_desc *d, cd_layout l, cd_sparse_isa isa, int threads, char *key, size_t n);
int cd_wino_cache_get(const char *key, uint64_t ns[3]);
void cd_wino_cache_put(const char *key, const uint64_t ns[3]);

// The ISA bodies (cd_wino_run's contract).
void cd_wino_run_scalar(const cd_wino *wg, int batch, const float *src, const float *res, float *dst, void *scratch);
void cd_wino_run__avx2(const cd_wino *wg, int batch, const float *src, const float *res, float *dst, void *scratch);
void cd_wino_run__avx512f(const cd_wino *wg, int batch, const float *src, const float *res, float *dst, void *scratch);
// The weight panel width of an ISA body.
int cd_wino_kw__avx2(void);
int cd_wino_kw__avx512f(void);

#endif // CD_BACKENDS_CPU_WINOGRAD_IMPL_H
