#include "runtime/arena.h"

#include <stdlib.h>

typedef struct {
    size_t begin, end;
} range;

static int by_size_desc(const void *a, const void *b, void *bufs) {
    const cd_arena_buf *x = &((cd_arena_buf *)bufs)[*(const int *)a], *y = &((cd_arena_buf *)bufs)[*(const int *)b];
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

static int by_begin(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

size_t cd_arena_plan(cd_arena_buf *bufs, int n, size_t align) {
    if (n <= 0) return 0;
    int *order = malloc((size_t)n * sizeof *order);
    range *busy = malloc((size_t)n * sizeof *busy);
    char *placed = calloc((size_t)n, 1);
    if (!order || !busy || !placed) {
        // Without scratch memory fall back to no sharing at all.
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            bufs[i].offset = off;
            off += (bufs[i].size + align - 1) & ~(align - 1);
        }
        free(order);
        free(busy);
        free(placed);
        return off;
    }
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, by_size_desc, bufs);
    size_t total = 0;
    for (int oi = 0; oi < n; oi++) {
        cd_arena_buf *b = &bufs[order[oi]];
        size_t need = (b->size + align - 1) & ~(align - 1);
        int nb = 0;
        for (int j = 0; j < n; j++) {
            if (!placed[j] || bufs[j].size == 0) continue;
            if (bufs[j].last < b->first || bufs[j].first > b->last) continue;
            busy[nb++] = (range){bufs[j].offset, bufs[j].offset + ((bufs[j].size + align - 1) & ~(align - 1))};
        }
        qsort(busy, (size_t)nb, sizeof *busy, by_begin);
        size_t at = 0;
        for (int j = 0; j < nb; j++) {
            if (busy[j].begin >= at + need) break; // the gap before busy[j] fits
            if (busy[j].end > at) at = busy[j].end;
        }
        b->offset = need ? at : 0;
        placed[order[oi]] = 1;
        if (at + need > total) total = at + need;
    }
    free(order);
    free(busy);
    free(placed);
    return total;
}
