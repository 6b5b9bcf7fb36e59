#include "runtime/arena.h"

#include "core/checked.h"

#include <stdint.h>
#include <stdlib.h>

// Pairs of buffers alive at the same step kept for the placement; beyond it
// (a graph keeping thousands of activations alive at once, which no CNN does)
// the plan falls back to no sharing rather than spending minutes placing.
#define ARENA_MAX_PAIRS ((size_t)1 << 24)

typedef struct {
    size_t begin, end;
} range;

static int by_size_desc(const void *a, const void *b, void *bufs) {
    const cd_arena_buf *x = &((cd_arena_buf *)bufs)[*(const int *)a], *y = &((cd_arena_buf *)bufs)[*(const int *)b];
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

static int by_first(const void *a, const void *b, void *bufs) {
    const cd_arena_buf *x = &((cd_arena_buf *)bufs)[*(const int *)a], *y = &((cd_arena_buf *)bufs)[*(const int *)b];
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

static int by_begin(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

// No sharing: each buffer after the previous one.
static size_t plan_flat(cd_arena_buf *bufs, int n, size_t align) {
    size_t off = 0, need;
    for (int i = 0; i < n; i++) {
        bufs[i].offset = off;
        if (cd_ck_align_size(bufs[i].size, align, &need) || cd_ck_add_size(off, need, &off)) return SIZE_MAX;
    }
    return off;
}

// Lists, for every non-empty buffer, the non-empty buffers alive at a step it
// is alive too (CSR in *start / *adj). A sweep over the buffers by first step
// with the set of those still alive: linear in buffers plus pairs. Returns 0,
// 1 when there are more than ARENA_MAX_PAIRS pairs, -1 out of memory.
static int overlaps(const cd_arena_buf *bufs, int n, const int *by_first_order, size_t **start, int **adj) {
    int *active = malloc((size_t)n * sizeof *active);
    size_t *cnt = calloc((size_t)n + 1, sizeof *cnt), npairs = 0;
    int *list = NULL, rc = -1;
    if (!active || !cnt) goto out;
    for (int pass = 0; pass < 2; pass++) {
        int na = 0;
        for (int oi = 0; oi < n; oi++) {
            int i = by_first_order[oi];
            if (bufs[i].size == 0) continue;
            int keep = 0;
            for (int a = 0; a < na; a++) {
                int j = active[a];
                if (bufs[j].last < bufs[i].first) continue; // dead from now on
                active[keep++] = j;
                if (pass == 0) {
                    cnt[i + 1]++;
                    cnt[j + 1]++;
                    if (++npairs > ARENA_MAX_PAIRS) {
                        rc = 1;
                        goto out;
                    }
                } else {
                    list[cnt[i]++] = j;
                    list[cnt[j]++] = i;
                }
            }
            na = keep;
            active[na++] = i;
        }
        if (pass == 0) {
            for (int i = 0; i < n; i++) cnt[i + 1] += cnt[i];
            if (!(list = malloc((npairs ? 2 * npairs : 1) * sizeof *list))) goto out;
        } else {
            // cnt[i] now ends list i: shift back to starts.
            for (int i = n; i > 0; i--) cnt[i] = cnt[i - 1];
            cnt[0] = 0;
        }
    }
    *start = cnt;
    *adj = list;
    cnt = NULL;
    list = NULL;
    rc = 0;
out:
    free(active);
    free(cnt);
    free(list);
    return rc;
}

size_t cd_arena_plan(cd_arena_buf *bufs, int n, size_t align) {
    if (n <= 0) return 0;
    int *order = malloc((size_t)n * sizeof *order);
    range *busy = malloc((size_t)n * sizeof *busy);
    char *placed = calloc((size_t)n, 1);
    size_t *start = NULL, total = 0;
    int *adj = NULL;
    int orc = -1;
    if (order && busy && placed) {
        for (int i = 0; i < n; i++) order[i] = i;
        qsort_r(order, (size_t)n, sizeof *order, by_first, bufs);
        orc = overlaps(bufs, n, order, &start, &adj);
    }
    if (orc) {
        // Without scratch memory, or with too many buffers alive at once:
        // no sharing at all.
        free(order);
        free(busy);
        free(placed);
        return plan_flat(bufs, n, align);
    }
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, by_size_desc, bufs);
    for (int oi = 0; oi < n; oi++) {
        cd_arena_buf *b = &bufs[order[oi]];
        size_t need, at = 0, end;
        if (cd_ck_align_size(b->size, align, &need)) goto overflow;
        int nb = 0;
        for (size_t e = start[order[oi]]; e < start[order[oi] + 1]; e++) {
            int j = adj[e];
            if (!placed[j]) continue;
            size_t jn;
            if (cd_ck_align_size(bufs[j].size, align, &jn) || cd_ck_add_size(bufs[j].offset, jn, &end)) goto overflow;
            busy[nb++] = (range){bufs[j].offset, end};
        }
        qsort(busy, (size_t)nb, sizeof *busy, by_begin);
        for (int j = 0; j < nb; j++) {
            if (cd_ck_add_size(at, need, &end)) goto overflow;
            if (busy[j].begin >= end) break; // the gap before busy[j] fits
            if (busy[j].end > at) at = busy[j].end;
        }
        b->offset = need ? at : 0;
        placed[order[oi]] = 1;
        if (cd_ck_add_size(at, need, &end)) goto overflow;
        if (end > total) total = end;
    }
    goto done;
overflow:
    total = SIZE_MAX;
done:
    free(order);
    free(busy);
    free(placed);
    free(start);
    free(adj);
    return total;
}
