// The Winograd conv's one body for AVX2 and AVX-512 (backends/cpu/winograd.c
// has the design), written in the vector vocabulary of sparse/f32-simd.h.
// Included by winograd-avx2.c and winograd-avx512f.c, each built with its
// ISA's flags after defining CD_SIMD_AVX2 or CD_SIMD_AVX512F.
#ifndef CD_BACKENDS_CPU_WINOGRAD_SIMD_H
#define CD_BACKENDS_CPU_WINOGRAD_SIMD_H

#include "backends/cpu/winograd-impl.h"
#include "sparse/f32-simd.h"

#include <stdint.h>

#define WG_R 6                         // tiles per register block
#define WG_KV (CD_VREGS == 32 ? 4 : 2) // vectors of k per register block
#define WG_KW (WG_KV * CD_VN)          // output channels per weight panel
#define WG_T2 (CD_WINO_MAX_T * CD_WINO_MAX_T)

static inline CD_V_AI cd_vf wg_sub(cd_vf a, cd_vf b) { return CD_V_(sub_ps)(a, b); }
static inline CD_V_AI cd_vf wg_mul(cd_vf a, cd_vf b) { return CD_V_(mul_ps)(a, b); }

// y[i * ys] = sum_j mat[i][j] x[j * xs] (mat rows x cols). With the loops
// unrolled and mat a constant table, the zero coefficients cost nothing and
// the +-1 ones are adds.
static inline CD_V_AI void wg_mat(const int rows, const int cols, const float *mat, const cd_vf *x, const int xs,
                                  cd_vf *y, const int ys) {
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++) {
        cd_vf acc = cd_v_zero();
        int first = 1;
#pragma GCC unroll 8
        for (int j = 0; j < cols; j++) {
            const float c = mat[i * cols + j];
            if (c == 0.0f) continue;
            const cd_vf v = x[j * xs];
            if (first)
                acc = c == 1.0f ? v : c == -1.0f ? wg_sub(cd_v_zero(), v) : wg_mul(cd_v_set1(c), v);
            else
                acc = c == 1.0f ? cd_v_add(acc, v) : c == -1.0f ? wg_sub(acc, v) : cd_v_fmadd(cd_v_set1(c), v, acc);
            first = 0;
        }
        y[i * ys] = acc;
    }
}

// The input transform of one tile (outputs from (oy, ox) of item n) and one
// channel vector g: u[e * es] = (BT d B)[e], pixels outside the input zero.
static inline CD_V_AI void wg_in_tile(const int t, const float *bt, const cd_wino *wg, const float *src, int n, int oy,
                                      int ox, int g, float *u, size_t es) {
    const int h = wg->d.h, w = wg->d.w, b = wg->b, y0 = oy - wg->d.pad_t, x0 = ox - wg->d.pad_l;
    const float *base = src + ((size_t)n * (wg->cp / b) + (size_t)g * CD_VN / b) * h * w * b + (size_t)g * CD_VN % b;
    cd_vf d[WG_T2], tmp[WG_T2];
    if (y0 >= 0 && x0 >= 0 && y0 + t <= h && x0 + t <= w) {
#pragma GCC unroll 8
        for (int i = 0; i < t; i++)
#pragma GCC unroll 8
            for (int j = 0; j < t; j++) d[i * t + j] = cd_v_loadu(base + ((size_t)(y0 + i) * w + x0 + j) * b);
    } else {
#pragma GCC unroll 8
        for (int i = 0; i < t; i++)
#pragma GCC unroll 8
            for (int j = 0; j < t; j++) {
                const int y = y0 + i, x = x0 + j;
                d[i * t + j] =
                    y >= 0 && y < h && x >= 0 && x < w ? cd_v_loadu(base + ((size_t)y * w + x) * b) : cd_v_zero();
            }
    }
#pragma GCC unroll 8
    for (int j = 0; j < t; j++) wg_mat(t, t, bt, d + j, t, tmp + j, t); // columns: BT d
#pragma GCC unroll 8
    for (int i = 0; i < t; i++) wg_mat(t, t, bt, tmp + i * t, 1, d + i * t, 1); // rows: (BT d) B
#pragma GCC unroll 8
    for (int e = 0; e < t * t; e++) cd_v_storeu(u + e * es, d[e]);
}

// act(v) as cd_act_apply: ReLU and Clip in vectors, the others lane by lane.
static inline CD_V_AI cd_vf wg_act(cd_vf v, const cd_activation *a) {
    switch (a->kind) {
    case CD_ACT_NONE: return v;
    case CD_ACT_RELU: return cd_v_max(v, cd_v_zero());
    case CD_ACT_CLIP: return cd_v_min(cd_v_max(v, cd_v_set1(a->alpha)), cd_v_set1(a->beta));
    default: {
        float l[CD_VN];
        cd_v_storeu(l, v);
        for (int i = 0; i < CD_VN; i++) l[i] = cd_act_apply(*a, l[i]);
        return cd_v_loadu(l);
    }
    }
}

// The output transform of one tile and one output-channel vector g from its
// products mo[e * es], with bias, residual and activation, into dst.
static inline CD_V_AI void wg_out_tile(const int t, const int m, const float *at, const cd_wino *wg, const float *mo,
                                       size_t es, int n, int oy, int ox, int g, const float *res, float *dst) {
    cd_vf x[WG_T2], tmp[WG_T2], y[WG_T2];
#pragma GCC unroll 8
    for (int e = 0; e < t * t; e++) x[e] = cd_v_load(mo + e * es);
#pragma GCC unroll 8
    for (int j = 0; j < t; j++) wg_mat(m, t, at, x + j, t, tmp + j, t); // AT M: m x t
#pragma GCC unroll 8
    for (int i = 0; i < m; i++) wg_mat(m, t, at, tmp + i * t, 1, y + i * m, 1); // (AT M) A: m x m
    const int oh = wg->d.oh, ow = wg->d.ow, b = wg->b, live = wg->d.k - g * CD_VN;
    const size_t off = ((size_t)n * (wg->kp / b) + (size_t)g * CD_VN / b) * oh * ow * b + (size_t)g * CD_VN % b;
    const cd_vf bias = cd_v_load(wg->bias + (size_t)g * CD_VN);
    for (int i = 0; i < m && oy + i < oh; i++)
        for (int j = 0; j < m && ox + j < ow; j++) {
            const size_t o = off + ((size_t)(oy + i) * ow + ox + j) * b;
            cd_vf v = cd_v_add(y[i * m + j], bias);
            if (res) v = cd_v_add(v, cd_v_loadu(res + o));
            v = wg_act(v, &wg->d.act);
            if (live < CD_VN) v = live > 0 ? cd_v_keep(v, (1u << live) - 1u) : cd_v_zero(); // padding channels: 0
            cd_v_storeu(dst + o, v);
        }
}

// mo[r][j] = sum_c u[r][c] w[c][j] for `rows` tiles and kvn vectors of k;
// u rows cp apart, w rows ws apart, mo rows kp apart.
static inline CD_V_AI void wg_gemm_block(const int rows, const int kvn, int cp, const float *u, const float *w, int ws,
                                         float *mo, int kp) {
    cd_vf acc[WG_R][WG_KV];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 8
        for (int j = 0; j < kvn; j++) acc[r][j] = cd_v_zero();
    for (int c = 0; c < cp; c++) {
        cd_vf wv[WG_KV];
#pragma GCC unroll 8
        for (int j = 0; j < kvn; j++) wv[j] = cd_v_load(w + (size_t)c * ws + j * CD_VN);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const cd_vf x = cd_v_bcast(u + (size_t)r * cp + c);
#pragma GCC unroll 8
            for (int j = 0; j < kvn; j++) acc[r][j] = cd_v_fmadd(x, wv[j], acc[r][j]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 8
        for (int j = 0; j < kvn; j++) cd_v_storeu(mo + (size_t)r * kp + j * CD_VN, acc[r][j]);
}

// The block with rows (1..WG_R) known to the compiler.
#define WG_ROWS_CASE(R, KVN) \
    case R: wg_gemm_block(R, KVN, cp, u, w, ws, mo, kp); break;
static void CD_SIMD_FN(wg_gemm_rows)(int rows, int full, int cp, const float *u, const float *w, int ws, float *mo,
                                     int kp) {
    if (full) {
        switch (rows) {
            WG_ROWS_CASE(1, WG_KV)
            WG_ROWS_CASE(2, WG_KV)
            WG_ROWS_CASE(3, WG_KV)
            WG_ROWS_CASE(4, WG_KV)
            WG_ROWS_CASE(5, WG_KV)
            WG_ROWS_CASE(6, WG_KV)
        }
    } else {
        switch (rows) {
            WG_ROWS_CASE(1, 1)
            WG_ROWS_CASE(2, 1)
            WG_ROWS_CASE(3, 1)
            WG_ROWS_CASE(4, 1)
            WG_ROWS_CASE(5, 1)
            WG_ROWS_CASE(6, 1)
        }
    }
}
#undef WG_ROWS_CASE

// The products of element e and weight panel kb for the chunk's ntl tiles.
static void CD_SIMD_FN(wg_gemm)(const cd_wino *wg, int e, int kb, int chunk, int ntl, const float *u, float *mo) {
    const int cp = wg->cp, kp = wg->kp, k0 = kb * WG_KW;
    const int width = kp - k0 < WG_KW ? kp - k0 : WG_KW, nv = width / CD_VN;
    const float *ue = u + (size_t)e * chunk * cp;
    float *me = mo + (size_t)e * chunk * kp + k0;
    const float *wp = wg->wt + cd_wino_w_index(wg, e, 0, k0);
    for (int r0 = 0; r0 < ntl; r0 += WG_R) {
        const int rows = ntl - r0 < WG_R ? ntl - r0 : WG_R;
        int j = 0;
        for (; j + WG_KV <= nv; j += WG_KV) CD_SIMD_FN(wg_gemm_rows)
        (rows, 1, cp, ue + (size_t)r0 * cp, wp + j * CD_VN, width, me + (size_t)r0 * kp + j * CD_VN, kp);
        for (; j < nv; j++) CD_SIMD_FN(wg_gemm_rows)
        (rows, 0, cp, ue + (size_t)r0 * cp, wp + j * CD_VN, width, me + (size_t)r0 * kp + j * CD_VN, kp);
    }
}

// Tile q of the run as (item, first output row, first output column).
static inline void wg_tile_at(const cd_wino_grid *gr, int m, int q, int *n, int *oy, int *ox) {
    const int per = gr->th * gr->tw;
    *n = q / per;
    *oy = q % per / gr->tw * m;
    *ox = q % per % gr->tw * m;
}

// One chunk's three steps for tile size (m, t) known to the compiler; called
// by every thread of the team.
static inline CD_V_AI void wg_chunk(const int m, const int t, const float *bt, const float *at, const cd_wino *wg,
                                    const cd_wino_grid *gr, int q0, const float *src, const float *res, float *dst,
                                    float *u, float *mo) {
    const int ntl = gr->ntiles - q0 < gr->chunk ? gr->ntiles - q0 : gr->chunk;
    const int ncv = wg->cp / CD_VN, nkv = wg->kp / CD_VN, nkb = (wg->kp + WG_KW - 1) / WG_KW, chunk = gr->chunk;
#pragma omp for schedule(static)
    for (int q = 0; q < ntl * ncv; q++) {
        int n, oy, ox;
        const int tl = q / ncv, g = q % ncv;
        wg_tile_at(gr, m, q0 + tl, &n, &oy, &ox);
        wg_in_tile(t, bt, wg, src, n, oy, ox, g, u + (size_t)tl * wg->cp + (size_t)g * CD_VN, (size_t)chunk * wg->cp);
    }
#pragma omp for schedule(static)
    for (int q = 0; q < t * t * nkb; q++) CD_SIMD_FN(wg_gemm)(wg, q / nkb, q % nkb, chunk, ntl, u, mo);
#pragma omp for schedule(static)
    for (int q = 0; q < ntl * nkv; q++) {
        int n, oy, ox;
        const int tl = q / nkv, g = q % nkv;
        wg_tile_at(gr, m, q0 + tl, &n, &oy, &ox);
        wg_out_tile(t, m, at, wg, mo + (size_t)tl * wg->kp + (size_t)g * CD_VN, (size_t)chunk * wg->kp, n, oy, ox, g,
                    res, dst);
    }
}

static void CD_SIMD_FN(wg_run_m2)(const cd_wino *wg, const cd_wino_grid *gr, const float *src, const float *res,
                                  float *dst, float *u, float *mo) {
#pragma omp parallel
    for (int q0 = 0; q0 < gr->ntiles; q0 += gr->chunk)
        wg_chunk(2, 4, cd_wino_bt2, cd_wino_at2, wg, gr, q0, src, res, dst, u, mo);
}

static void CD_SIMD_FN(wg_run_m4)(const cd_wino *wg, const cd_wino_grid *gr, const float *src, const float *res,
                                  float *dst, float *u, float *mo) {
#pragma omp parallel
    for (int q0 = 0; q0 < gr->ntiles; q0 += gr->chunk)
        wg_chunk(4, 6, cd_wino_bt4, cd_wino_at4, wg, gr, q0, src, res, dst, u, mo);
}

static void CD_SIMD_FN(wg_run_m6)(const cd_wino *wg, const cd_wino_grid *gr, const float *src, const float *res,
                                  float *dst, float *u, float *mo) {
#pragma omp parallel
    for (int q0 = 0; q0 < gr->ntiles; q0 += gr->chunk)
        wg_chunk(6, 8, cd_wino_bt6, cd_wino_at6, wg, gr, q0, src, res, dst, u, mo);
}

void CD_SIMD_FN(cd_wino_run)(const cd_wino *wg, int batch, const float *src, const float *res, float *dst,
                             void *scratch) {
    cd_wino_grid gr;
    cd_wino_grid_of(wg, batch, &gr);
    float *u = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *mo = u + (size_t)wg->t * wg->t * gr.chunk * wg->cp;
    if (wg->m == 2)
        CD_SIMD_FN(wg_run_m2)(wg, &gr, src, res, dst, u, mo);
    else if (wg->m == 4)
        CD_SIMD_FN(wg_run_m4)(wg, &gr, src, res, dst, u, mo);
    else
        CD_SIMD_FN(wg_run_m6)(wg, &gr, src, res, dst, u, mo);
}

int CD_SIMD_FN(cd_wino_kw)(void) { return WG_KW; }

#endif // CD_BACKENDS_CPU_WINOGRAD_SIMD_H
