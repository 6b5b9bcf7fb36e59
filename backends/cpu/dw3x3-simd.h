// The depthwise 3x3 kernel body shared by AVX-512 and AVX2 (contract:
// backends/cpu/dw3x3.h), written once in sparse/f32-simd.h's vocabulary. The
// includer defines CD_SIMD_AVX512F or CD_SIMD_AVX2 and is built with that
// ISA's flags. One vector is one pixel's block of CD_VN channels.
//
// Per output row: tiles of DW_T pixels held in registers, with the nine tap
// vectors in registers too; each input vector of a kernel row is loaded once
// and feeds every tile pixel it touches. Tiles at the left and right edge
// (and maps narrower than a tile) skip the padding columns, and every tile
// the rows above and below the map.

#include "backends/cpu/dw3x3.h"
#include "backends/cpu/fakequant-simd.h"
#include "core/one-thread.h"
#include "sparse/f32-simd.h"

// Output pixels per register tile: the nine taps, DW_T accumulators and two
// temporaries fit AVX2's 16 registers at 4, AVX-512's 32 at 8.
#define DW_T (CD_VREGS == 32 ? 8 : 4)

// act(x) for the kinds cd_cpu_dw3x3_act_ok accepts; K is a.kind, a
// constant after inlining (a switch per pixel would cost registers).
static inline CD_V_AI cd_vf dw_act(cd_activation a, const cd_act K, cd_vf x) {
    switch (K) {
    case CD_ACT_RELU: return cd_v_max(x, cd_v_zero());
    case CD_ACT_CLIP: return cd_v_min(cd_v_max(x, cd_v_set1(a.alpha)), cd_v_set1(a.beta));
    case CD_ACT_HARDSIGMOID:
        return cd_v_max(cd_v_zero(), cd_v_min(cd_v_set1(1.0f), cd_v_fmadd(x, cd_v_set1(a.alpha), cd_v_set1(a.beta))));
    case CD_ACT_HARDSWISH: {
        const cd_vf g = cd_v_fmadd(x, cd_v_set1(1.0f / 6.0f), cd_v_set1(0.5f));
        return CD_V_(mul_ps)(x, cd_v_max(cd_v_zero(), cd_v_min(cd_v_set1(1.0f), g)));
    }
    // x >= 0: x + a*0; x < 0: 0 + a*x, both exact.
    case CD_ACT_LEAKYRELU: return cd_v_fmadd(cd_v_min(x, cd_v_zero()), cd_v_set1(a.alpha), cd_v_max(x, cd_v_zero()));
    default: return x;
    }
}

// The epilogue of one pixel: residual, activation, the FakeQuant (fq: its
// parameters, NULL for none), padded lanes zeroed.
static inline CD_V_AI void dw_store(const cd_dw3x3_shape *sh, const cd_act K, const cd_fq_vec *fq, unsigned lanes,
                                    cd_vf acc, const float *res, float *out) {
    if (sh->has_residual) acc = cd_v_add(acc, cd_v_loadu(res));
    acc = dw_act(sh->act, K, acc);
    if (fq) acc = cd_fq_apply(fq, acc);
    cd_v_storeu(out, cd_v_keep(acc, lanes));
}

// The nine tap vectors of a channel block, in registers (on AVX2 too: taps
// read as memory operands measured no faster there).
typedef struct {
    cd_vf v[9];
} dw_taps;
static inline CD_V_AI void dw_taps_init(dw_taps *t, const float *wk) {
    for (int i = 0; i < 9; i++) t->v[i] = cd_v_load(wk + i * CD_VN);
}
#define DW_TAP(t, i) ((t)->v[i])

// Pixels ox0 .. ox0 + n - 1 (n <= DW_T) of one output row, in registers,
// their inputs at columns ix0 + j (j = t*S + s) of rows iy0..iy0+2 (the valid
// ones flagged in rowok). Each input vector is loaded once per kernel row and
// feeds every pixel it touches. CHK 0: every column is inside the map and n
// is DW_T (the interior); CHK 1: columns outside are skipped (a branch on a
// bit per column: cheaper than masked loads on Zen 4) and pixels past n are
// not stored. S, CHK and K are constants after inlining, so every loop
// unrolls and the accumulators stay in registers.
static inline CD_V_AI void dw_tile(const cd_dw3x3_shape *sh, const float *in, int iy0, int ix0, const dw_taps *wv,
                                   cd_vf b, const int rowok[3], const int S, const int CHK, const cd_act K, int n,
                                   unsigned lanes, const float *res, float *out) {
    enum { JN = (DW_T - 1) * 2 + 3 }; // columns a tile reads at stride 2 (fewer at 1)
    unsigned colm = (1u << JN) - 1u;  // bit j: column ix0 + j inside the map
    if (CHK) {
        const int j0 = ix0 < 0 ? -ix0 : 0, j1 = sh->w - ix0 < JN ? sh->w - ix0 : JN;
        colm = j1 > j0 ? ((1u << j1) - 1u) & ~((1u << j0) - 1u) : 0u;
    }
    cd_vf acc[DW_T];
#pragma GCC unroll 8
    for (int t = 0; t < DW_T; t++) acc[t] = b;
#pragma GCC unroll 3
    for (int r = 0; r < 3; r++) {
        if (!rowok[r]) continue;
        const float *x = in + ((ptrdiff_t)(iy0 + r) * sh->w + ix0) * CD_VN;
#pragma GCC unroll 17
        for (int j = 0; j < (DW_T - 1) * S + 3; j++) {
            if (CHK && !((colm >> j) & 1u)) continue; // a padding column: adds nothing
            const cd_vf v = cd_v_loadu(x + (ptrdiff_t)j * CD_VN);
#pragma GCC unroll 3
            for (int s = 0; s < 3; s++)
                if (j >= s && (j - s) % S == 0 && (j - s) / S < DW_T)
                    acc[(j - s) / S] = cd_v_fmadd(v, DW_TAP(wv, r * 3 + s), acc[(j - s) / S]);
        }
    }
    // Broadcast once per tile, not per pixel (the stores may alias sh).
    const cd_fq_vec fqv = cd_fq_vec_of(sh->fq[0], sh->fq[1], sh->fq[2], sh->fq[3]);
    const cd_fq_vec *fq = sh->fq[0] > 0.0f ? &fqv : NULL;
#pragma GCC unroll 8
    for (int t = 0; t < DW_T; t++) {
        if (CHK && t >= n) break;
        dw_store(sh, K, fq, lanes, acc[t], sh->has_residual ? res + (size_t)t * CD_VN : NULL, out + (size_t)t * CD_VN);
    }
}

// Output row oy of one image's channel block (in, res, out at that block;
// wv its nine taps).
static inline CD_V_AI void dw_row(const cd_dw3x3_shape *sh, const float *in, const dw_taps *wv, cd_vf b, unsigned lanes,
                                  int oy, const int S, const cd_act K, const float *res, float *out) {
    const int iy0 = oy * S - sh->pad_t;
    const int rowok[3] = {iy0 >= 0 && iy0 < sh->h, iy0 + 1 >= 0 && iy0 + 1 < sh->h, iy0 + 2 >= 0 && iy0 + 2 < sh->h};
    // Interior pixels: ox*S - pad_l >= 0 and ox*S - pad_l + 2 < w.
    const int lo = (sh->pad_l + S - 1) / S;
    int hi = sh->w - 3 + sh->pad_l >= 0 ? (sh->w - 3 + sh->pad_l) / S + 1 : 0;
    if (hi > sh->ow) hi = sh->ow;
    const size_t orow = (size_t)oy * sh->ow * CD_VN;
    const float *rrow = sh->has_residual ? res + orow : NULL;
    int ox = 0;
#define DW_TILE_AT(CHK, N)                                                     \
    dw_tile(sh, in, iy0, ox *S - sh->pad_l, wv, b, rowok, S, CHK, K, N, lanes, \
            rrow ? rrow + (size_t)ox * CD_VN : NULL, out + orow + (size_t)ox * CD_VN)
    for (int n; ox < lo && ox < sh->ow; ox += n) {
        n = sh->ow - ox < DW_T ? sh->ow - ox : DW_T;
        DW_TILE_AT(1, n);
    }
    for (; ox + DW_T <= hi; ox += DW_T) DW_TILE_AT(0, DW_T);
    for (int n; ox < sh->ow; ox += n) {
        n = sh->ow - ox < DW_T ? sh->ow - ox : DW_T;
        DW_TILE_AT(1, n);
    }
#undef DW_TILE_AT
}

// Output rows [oy0, oy1) of one image's channel block: dw_row with a literal
// stride and activation kind (OpenMP passes S into its body as a variable, and
// the tile's loops unroll only on constants).
static void dw_rows(const cd_dw3x3_shape *sh, const float *in, const float *wk, cd_vf b, unsigned lanes, int oy0,
                    int oy1, int S, const float *res, float *out) {
    dw_taps taps;
    dw_taps_init(&taps, wk);
    const dw_taps *wv = &taps;
#define DW_ROWS_K(K)                                          \
    for (int oy = oy0; oy < oy1; oy++)                        \
        if (S == 1)                                           \
            dw_row(sh, in, wv, b, lanes, oy, 1, K, res, out); \
        else                                                  \
            dw_row(sh, in, wv, b, lanes, oy, 2, K, res, out);
    switch (sh->act.kind) {
    case CD_ACT_RELU: DW_ROWS_K(CD_ACT_RELU); break;
    case CD_ACT_CLIP: DW_ROWS_K(CD_ACT_CLIP); break;
    case CD_ACT_HARDSIGMOID: DW_ROWS_K(CD_ACT_HARDSIGMOID); break;
    case CD_ACT_HARDSWISH: DW_ROWS_K(CD_ACT_HARDSWISH); break;
    case CD_ACT_LEAKYRELU: DW_ROWS_K(CD_ACT_LEAKYRELU); break;
    default: DW_ROWS_K(CD_ACT_NONE); break;
    }
#undef DW_ROWS_K
}

// Every image and channel block in chunks of rows of at least ~64 pixels
// (a job's fixed cost, the taps and the index arithmetic, is then small next
// to its FMAs even on 7x7 maps), split over the team.
// Job j of dw_run: `rows` output rows of one block of one image.
static inline void dw_job(const cd_dw3x3_shape *sh, int rows, int chunks, long j, const float *src, const float *res,
                          float *dst) {
    const int nb = (sh->c + CD_VN - 1) / CD_VN;
    const size_t in_blk = (size_t)sh->h * sh->w * CD_VN, out_blk = (size_t)sh->oh * sh->ow * CD_VN;
    const int oy0 = (int)(j % chunks) * rows, oy1 = oy0 + rows < sh->oh ? oy0 + rows : sh->oh;
    const long ib = j / chunks; // image * nb + block
    const int cb = (int)(ib % nb);
    const int left = sh->c - cb * CD_VN;
    const unsigned lanes = left >= CD_VN ? (1u << CD_VN) - 1u : (1u << left) - 1u;
    const cd_vf b = cd_v_load(sh->bias + (size_t)cb * CD_VN);
    const float *wk = sh->weights + (size_t)cb * 9 * CD_VN;
    const float *r = sh->has_residual ? res + (size_t)ib * out_blk : NULL;
    dw_rows(sh, src + (size_t)ib * in_blk, wk, b, lanes, oy0, oy1, sh->stride, r, dst + (size_t)ib * out_blk);
}

static void dw_run(const cd_dw3x3_shape *sh, int batch, const float *src, const float *res, float *dst) {
    const int nb = (sh->c + CD_VN - 1) / CD_VN;
    int rows = (64 + sh->ow - 1) / sh->ow;
    if (rows > sh->oh) rows = sh->oh;
    const int chunks = (sh->oh + rows - 1) / rows;
    const long jobs = (long)batch * nb * chunks;
    if (cd_one_thread()) { // no OpenMP region (core/one-thread.h)
        for (long j = 0; j < jobs; j++) dw_job(sh, rows, chunks, j, src, res, dst);
        return;
    }
#pragma omp parallel for schedule(static)
    for (long j = 0; j < jobs; j++) dw_job(sh, rows, chunks, j, src, res, dst);
}

void CD_SIMD_FN(cd_cpu_dw3x3)(const cd_dw3x3_shape *sh, int batch, const float *src, const float *res, float *dst) {
    dw_run(sh, batch, src, res, dst);
}
