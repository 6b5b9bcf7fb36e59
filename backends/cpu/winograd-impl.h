// Internals of the Winograd conv (backends/cpu/winograd*.c): the state, the
// transform matrices, how a run's tiles are cut into chunks, and the ISA
// bodies. Not for use outside backends/cpu/winograd*.c and its test.
#ifndef CD_BACKENDS_CPU_WINOGRAD_IMPL_H
#define CD_BACKENDS_CPU_WINOGRAD_IMPL_H

#include "backends/cpu/winograd.h"

#include <stdint.h>

// F(2x2,3x3): interpolation points 0, 1, -1 (Lavin & Gray). G is in double:
// the weights are transformed in double at create.
static const float cd_wino_bt2[4 * 4] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const double cd_wino_g2[4 * 3] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const float cd_wino_at2[2 * 4] = {1, 1, 1, 0, 0, 1, -1, -1};

// F(4x4,3x3): points 0, 3/2, -3/2, 2/3, -2/3 (and infinity). On random
// 64-channel layers Lavin's 0, 1, -1, 2, -2 has 8x direct's f32 error;
// this set, the best of the 3060 sets of four from {+-1, +-2, +-3, +-4,
// +-1/2, +-1/3, +-1/4, +-3/2, +-2/3} in a float32 model of this code
// (bench/winograd-points.py), 3.7x, at the same count of nonzero
// coefficients in BT (Barabasz et al. 2020 choose points the same way). With Lavin's set, the deep torchvision
// ResNets (101 and 152 layers) and inception_v3 ended 2-4x further from
// the exact result than PyTorch's own f32 (bench/torchvision-check.py).
static const float cd_wino_bt4[6 * 6] = {
    1, 0,         -97.0f / 36, 0,           1,         0, //
    0, -3.0f / 2, -1,          27.0f / 8,   9.0f / 4,  0, //
    0, 3.0f / 2,  -1,          -27.0f / 8,  9.0f / 4,  0, //
    0, 9.0f / 4,  27.0f / 8,   -1,          -3.0f / 2, 0, //
    0, -9.0f / 4, 27.0f / 8,   1,           -3.0f / 2, 0, //
    0, 1,         0,           -97.0f / 36, 0,         1,
};
static const double cd_wino_g4[6 * 3] = {
    1,         0,         0,         32.0 / 585, 16.0 / 195, 8.0 / 65,  32.0 / 585, -16.0 / 195, 8.0 / 65, //
    27.0 / 65, 18.0 / 65, 12.0 / 65, 27.0 / 65,  -18.0 / 65, 12.0 / 65, 0,          0,           1,
};
static const float cd_wino_at4[4 * 6] = {
    1, 1,         1,          1,         1,          0, //
    0, 3.0f / 2,  -3.0f / 2,  2.0f / 3,  -2.0f / 3,  0, //
    0, 9.0f / 4,  9.0f / 4,   4.0f / 9,  4.0f / 9,   0, //
    0, 27.0f / 8, -27.0f / 8, 8.0f / 27, -8.0f / 27, 1,
};

// F(6x6,3x3): points 0, 1, -1, 2, -2, 1/2, -1/2 (and infinity), as NNPACK
// and ncnn. Its error is measured in tests/unit/test-winograd-f6.c.
static const float cd_wino_bt6[8 * 8] = {
    1, 0,     -5.25f, 0,      5.25f,  0,      -1, 0, //
    0, 1,     1,      -4.25f, -4.25f, 1,      1,  0, //
    0, -1,    1,      4.25f,  -4.25f, -1,     1,  0, //
    0, 0.5f,  0.25f,  -2.5f,  -1.25f, 2,      1,  0, //
    0, -0.5f, 0.25f,  2.5f,   -1.25f, -2,     1,  0, //
    0, 2,     4,      -2.5f,  -5,     0.5f,   1,  0, //
    0, -2,    4,      2.5f,   -5,     -0.5f,  1,  0, //
    0, -1,    0,      5.25f,  0,      -5.25f, 0,  1,
};
static const double cd_wino_g6[8 * 3] = {
    1,         0,          0,        -2.0 / 9,  -2.0 / 9,  -2.0 / 9, //
    -2.0 / 9,  2.0 / 9,    -2.0 / 9, 1.0 / 90,  1.0 / 45,  2.0 / 45, //
    1.0 / 90,  -1.0 / 45,  2.0 / 45, 32.0 / 45, 16.0 / 45, 8.0 / 45, //
    32.0 / 45, -16.0 / 45, 8.0 / 45, 0,         0,         1,
};
static const float cd_wino_at6[6 * 8] = {
    1, 1, 1,  1,  1,   1,        1,         0, //
    0, 1, -1, 2,  -2,  0.5f,     -0.5f,     0, //
    0, 1, 1,  4,  4,   0.25f,    0.25f,     0, //
    0, 1, -1, 8,  -8,  0.125f,   -0.125f,   0, //
    0, 1, 1,  16, 16,  0.0625f,  0.0625f,   0, //
    0, 1, -1, 32, -32, 0.03125f, -0.03125f, 1,
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
// isa at threads, and its n (<= CD_WINO_CACHE_MAX) figures: the candidates'
// times in ns (winograd-choose.c). get: 1 when found.
#define CD_WINO_CACHE_MAX 8
void cd_wino_cache_key(const cd_conv_desc *d, cd_layout l, cd_sparse_isa isa, int threads, char *key, size_t n);
int cd_wino_cache_get(const char *key, uint64_t *ns, int n);
void cd_wino_cache_put(const char *key, const uint64_t *ns, int n);

// The ISA bodies (cd_wino_run's contract).
void cd_wino_run_scalar(const cd_wino *wg, int batch, const float *src, const float *res, float *dst, void *scratch);
void cd_wino_run__avx2(const cd_wino *wg, int batch, const float *src, const float *res, float *dst, void *scratch);
void cd_wino_run__avx512f(const cd_wino *wg, int batch, const float *src, const float *res, float *dst, void *scratch);
// The weight panel width of an ISA body.
int cd_wino_kw__avx2(void);
int cd_wino_kw__avx512f(void);

#endif // CD_BACKENDS_CPU_WINOGRAD_IMPL_H
