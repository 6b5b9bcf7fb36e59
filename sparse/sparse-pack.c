#include "sparse/sparse-pack.h"

#include "core/errors.h"

#include <stdlib.h>
#include <string.h>

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

// True when any of the nb channels starting at row k0 has a nonzero in column j.
static int entry_nonzero(const float *w, int cols, int k0, int nb, int j) {
    for (int i = 0; i < nb; i++)
        if (w[(size_t)(k0 + i) * cols + j] != 0.0f) return 1;
    return 0;
}

// Both builders: shifts = 0 for a plain pack, else a shift pack (nr = 1).
static int pack_build(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off, int nr,
                      int shifts, cd_sparse_pack *p) {
    memset(p, 0, sizeof *p);
    if (!w || !tap_off || groups < 1 || kpg < 1 || cols < 1 || nr < 1 || nr > 64) return CD_EPARAMS;
    if (shifts < 0 || shifts > 8 || (shifts && (nr != 1 || cols % shifts))) return CD_EPARAMS;
    p->nr = nr;
    p->groups = groups;
    p->kpg = kpg;
    p->cols = cols;
    p->main_blocks = kpg / nr;
    p->tail_rows = kpg % nr;
    p->blocks = p->main_blocks + p->tail_rows;
    const size_t nblocks = (size_t)groups * p->blocks;

    // Pass 1: count entries and values.
    size_t entries = 0, nvalues = 0, nnz = 0;
    for (int g = 0; g < groups; g++)
        for (int b = 0; b < p->blocks; b++) {
            const int nb = b < p->main_blocks ? nr : 1;
            const int k0 = g * kpg + (b < p->main_blocks ? b * nr : p->main_blocks * nr + (b - p->main_blocks));
            size_t e = 0;
            for (int j = 0; j < cols; j++) e += entry_nonzero(w, cols, k0, nb, j);
            entries += e;
            nvalues += (size_t)nb * (1 + e);
        }
    for (size_t i = 0; i < (size_t)groups * kpg * cols; i++) nnz += w[i] != 0.0f;

    const size_t o_val = 0;
    const size_t o_off = align64(o_val + nvalues * sizeof(float));
    const size_t o_nnz = align64(o_off + entries * sizeof(int32_t));
    const size_t o_first = align64(o_nnz + nblocks * sizeof(uint32_t));
    const size_t o_vfirst = align64(o_first + (nblocks + 1) * sizeof(size_t));
    const size_t o_snnz = align64(o_vfirst + nblocks * sizeof(size_t));
    const size_t size = align64(o_snnz + nblocks * (size_t)shifts * sizeof(uint32_t));
    char *mem = aligned_alloc(64, size);
    if (!mem) return CD_ENOMEM;
    p->mem = mem;
    p->mem_size = size;
    p->values = (float *)(mem + o_val);
    p->offsets = (int32_t *)(mem + o_off);
    p->nnz_map = (uint32_t *)(mem + o_nnz);
    p->first = (size_t *)(mem + o_first);
    p->vfirst = (size_t *)(mem + o_vfirst);
    p->entries = entries;
    p->nnz = nnz;
    p->shifts = shifts;
    p->shift_nnz = shifts ? (uint32_t *)(mem + o_snnz) : NULL;

    // Pass 2: fill.
    size_t e = 0, v = 0;
    int32_t max_off = 0;
    for (int g = 0; g < groups; g++)
        for (int b = 0; b < p->blocks; b++) {
            const size_t bi = (size_t)g * p->blocks + b;
            const int nb = b < p->main_blocks ? nr : 1;
            const int k0 = g * kpg + (b < p->main_blocks ? b * nr : p->main_blocks * nr + (b - p->main_blocks));
            p->first[bi] = e;
            p->vfirst[bi] = v;
            for (int i = 0; i < nb; i++) p->values[v++] = bias ? bias[k0 + i] : 0.0f;
            uint32_t cnt = 0;
            // A shift pack walks the columns once per tap s (j = s, s + S, ...).
            const int passes = shifts ? shifts : 1, step = shifts ? shifts : 1;
            for (int s = 0; s < passes; s++) {
                uint32_t cs = 0;
                for (int j = s; j < cols; j += step) {
                    if (!entry_nonzero(w, cols, k0, nb, j)) continue;
                    p->offsets[e++] = tap_off[j];
                    if (tap_off[j] > max_off) max_off = tap_off[j];
                    for (int i = 0; i < nb; i++) p->values[v++] = w[(size_t)(k0 + i) * cols + j];
                    cs++;
                }
                if (shifts) p->shift_nnz[bi * shifts + s] = cs;
                cnt += cs;
            }
            p->nnz_map[bi] = cnt;
        }
    p->first[nblocks] = e;
    p->max_off = max_off;
    return 0;
}

int cd_sparse_pack_build(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off,
                         int nr, cd_sparse_pack *p) {
    return pack_build(w, bias, groups, kpg, cols, tap_off, nr, 0, p);
}

int cd_sparse_pack_build_shift(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off,
                               int shifts, cd_sparse_pack *p) {
    if (shifts < 1) {
        memset(p, 0, sizeof *p);
        return CD_EPARAMS;
    }
    return pack_build(w, bias, groups, kpg, cols, tap_off, 1, shifts, p);
}

void cd_sparse_pack_free(cd_sparse_pack *p) {
    free(p->mem);
    memset(p, 0, sizeof *p);
}

size_t cd_sparse_pack_bytes(const cd_sparse_pack *p) { return p->mem_size; }

size_t cd_sparse_pack_stored(const cd_sparse_pack *p) {
    size_t stored = 0;
    for (int g = 0; g < p->groups; g++)
        for (int b = 0; b < p->blocks; b++)
            stored += (size_t)p->nnz_map[(size_t)g * p->blocks + b] * (b < p->main_blocks ? p->nr : 1);
    return stored;
}
