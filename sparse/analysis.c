#include "sparse/analysis.h"

#include "core/errors.h"

#include <stdio.h>
#include <string.h>

const int cd_sparse_block_shapes[CD_SPARSE_NBLOCK_SHAPES][2] = {{1, 4}, {4, 1}, {8, 1}, {4, 4}};

static int shape_ok(const float *w, int k, int cpg, int r, int s, int groups) {
    return w && k > 0 && cpg > 0 && r > 0 && s > 0 && groups > 0 && k % groups == 0;
}

// 1 when input channel c of group g is read by no filter of the group: every
// one of its r*s weights is zero in the group's kpg filters (cols weights
// per filter, rs per channel).
static int in_channel_zero(const float *w, size_t cols, int rs, int kpg, int g, int c) {
    int zero = 1;
    for (int o = g * kpg; o < (g + 1) * kpg && zero; o++) {
        const float *t = w + (size_t)o * cols + (size_t)c * rs;
        for (int j = 0; j < rs; j++)
            if (t[j] != 0.0f) {
                zero = 0;
                break;
            }
    }
    return zero;
}

int cd_sparse_zero_masks(const float *w, int k, int cpg, int r, int s, int groups, unsigned char *zero_out,
                         unsigned char *zero_in) {
    if (!shape_ok(w, k, cpg, r, s, groups)) return CD_EPARAMS;
    const int kpg = k / groups, rs = r * s;
    const size_t cols = (size_t)cpg * rs;
    if (zero_out)
        for (int o = 0; o < k; o++) {
            const float *f = w + (size_t)o * cols;
            size_t j = 0;
            while (j < cols && f[j] == 0.0f) j++;
            zero_out[o] = j == cols;
        }
    if (zero_in)
        for (int g = 0; g < groups; g++)
            for (int c = 0; c < cpg; c++) {
                int zero = in_channel_zero(w, cols, rs, kpg, g, c);
                zero_in[g * cpg + c] = (unsigned char)zero;
            }
    return 0;
}

// Block statistics of one shape over all groups.
static void block_stat(const float *w, int kpg, int groups, size_t cols, int bh, int bw, size_t nnz,
                       cd_sparse_block_stat *st) {
    st->bh = bh;
    st->bw = bw;
    st->nonzero_blocks = st->blocks = 0;
    size_t area = 0; // weights inside nonzero blocks
    for (int g = 0; g < groups; g++)
        for (int r0 = 0; r0 < kpg; r0 += bh)
            for (size_t c0 = 0; c0 < cols; c0 += bw) {
                const int rh = r0 + bh <= kpg ? bh : kpg - r0;
                const size_t cw = c0 + bw <= cols ? (size_t)bw : cols - c0;
                int any = 0;
                for (int i = 0; i < rh && !any; i++) {
                    const float *row = w + ((size_t)g * kpg + r0 + i) * cols + c0;
                    for (size_t j = 0; j < cw; j++)
                        if (row[j] != 0.0f) {
                            any = 1;
                            break;
                        }
                }
                st->blocks++;
                if (any) {
                    st->nonzero_blocks++;
                    area += (size_t)rh * cw;
                }
            }
    st->fill = area ? (double)nnz / (double)area : 1.0;
}

// Fraction of M-column groups with at most N nonzeros; *all set when all do.
static double nm_conformance(const float *w, int k, size_t cols, int n, int m, int *all) {
    size_t groups = 0, ok = 0;
    for (int o = 0; o < k; o++) {
        const float *row = w + (size_t)o * cols;
        for (size_t c0 = 0; c0 < cols; c0 += m) {
            const size_t cw = c0 + m <= cols ? (size_t)m : cols - c0;
            int cnt = 0;
            for (size_t j = 0; j < cw; j++) cnt += row[c0 + j] != 0.0f;
            groups++;
            ok += cnt <= n;
        }
    }
    *all = ok == groups;
    return groups ? (double)ok / (double)groups : 1.0;
}

int cd_sparse_analyze(const float *w, int k, int cpg, int r, int s, int groups, cd_sparse_analysis *a) {
    memset(a, 0, sizeof *a);
    if (!shape_ok(w, k, cpg, r, s, groups)) return CD_EPARAMS;
    const int kpg = k / groups, rs = r * s;
    const size_t cols = (size_t)cpg * rs;
    a->k = k;
    a->cpg = cpg;
    a->r = r;
    a->s = s;
    a->groups = groups;
    a->total = (size_t)k * cols;
    for (size_t i = 0; i < a->total; i++) a->nnz += w[i] != 0.0f;
    a->density = (double)a->nnz / (double)a->total;

    a->connections = (size_t)k * cpg;
    for (int o = 0; o < k; o++) {
        int filter_zero = 1;
        for (int c = 0; c < cpg; c++) {
            const float *t = w + (size_t)o * cols + (size_t)c * rs;
            int zero = 1;
            for (int j = 0; j < rs; j++)
                if (t[j] != 0.0f) {
                    zero = 0;
                    break;
                }
            a->zero_connections += zero;
            filter_zero &= zero;
        }
        a->zero_out_channels += filter_zero;
    }
    for (int g = 0; g < groups; g++)
        for (int c = 0; c < cpg; c++) {
            int zero = in_channel_zero(w, cols, rs, kpg, g, c);
            a->zero_in_channels += zero;
        }

    a->best_block = -1;
    for (int i = 0; i < CD_SPARSE_NBLOCK_SHAPES; i++) {
        cd_sparse_block_stat *st = &a->blocks[i];
        block_stat(w, kpg, groups, cols, cd_sparse_block_shapes[i][0], cd_sparse_block_shapes[i][1], a->nnz, st);
        if (a->nnz == 0 || st->fill < CD_SPARSE_BLOCK_FILL_MIN) continue;
        if (a->best_block < 0) {
            a->best_block = i;
            continue;
        }
        const cd_sparse_block_stat *b = &a->blocks[a->best_block];
        const int area = st->bh * st->bw, best_area = b->bh * b->bw;
        if (area > best_area || (area == best_area && st->fill > b->fill)) a->best_block = i;
    }
    a->nm_2_4 = nm_conformance(w, k, cols, 2, 4, &a->is_2_4);
    a->nm_4_8 = nm_conformance(w, k, cols, 4, 8, &a->is_4_8);
    return 0;
}

int cd_sparse_analysis_format(const cd_sparse_analysis *a, char *buf, size_t n) {
    char blk[32] = "none";
    if (a->best_block >= 0)
        snprintf(blk, sizeof blk, "%dx%d fill %.2f", a->blocks[a->best_block].bh, a->blocks[a->best_block].bw,
                 a->blocks[a->best_block].fill);
    return snprintf(buf, n,
                    "density %.3f zero-filters %d/%d zero-inputs %d/%d zero-connections "
                    "%zu/%zu blocks %s 2:4 %s(%.2f) 4:8 %s(%.2f)",
                    a->density, a->zero_out_channels, a->k, a->zero_in_channels, a->cpg * a->groups,
                    a->zero_connections, a->connections, blk, a->is_2_4 ? "yes" : "no", a->nm_2_4,
                    a->is_4_8 ? "yes" : "no", a->nm_4_8);
}
