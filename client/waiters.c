// The waiters of a connection, indexed: the msgid table (chained buckets,
// grown by doubling) and the min-heap of async deadlines (see
// conn-internal.h).

#include "client/conn-internal.h"

#include "core/errors.h"

#include <stdlib.h>

// ---- the msgid table (caller holds mu) --------------------------------------

static int table_grow_locked(convd_conn *c) {
    size_t nb = (c->table_mask + 1) * 2;
    cd_waiter **t = calloc(nb, sizeof *t);
    if (!t) return CD_ENOMEM;
    for (size_t i = 0; i <= c->table_mask; i++) {
        cd_waiter *w = c->table[i];
        while (w) {
            cd_waiter *next = w->hnext;
            size_t b = w->msgid & (nb - 1);
            w->hnext = t[b];
            t[b] = w;
            w = next;
        }
    }
    free(c->table);
    c->table = t;
    c->table_mask = nb - 1;
    return 0;
}

// Adds w; 0 or CD_ENOMEM (the table stays as it was).
int cd_client_table_add_locked(convd_conn *c, cd_waiter *w) {
    if (c->nwaiters >= c->table_mask + 1 && table_grow_locked(c) != 0 && c->nwaiters >= 4 * (c->table_mask + 1))
        return CD_ENOMEM; // growing failed and the chains got long: refuse
    size_t b = w->msgid & c->table_mask;
    w->hnext = c->table[b];
    c->table[b] = w;
    c->nwaiters++;
    return 0;
}

cd_waiter *cd_client_table_find_locked(convd_conn *c, uint32_t msgid) {
    for (cd_waiter *w = c->table[msgid & c->table_mask]; w; w = w->hnext)
        if (w->msgid == msgid) return w;
    return NULL;
}

// Unlinks w when it is in the table; returns 1 when it was.
int cd_client_table_remove_locked(convd_conn *c, cd_waiter *w) {
    for (cd_waiter **pp = &c->table[w->msgid & c->table_mask]; *pp; pp = &(*pp)->hnext) {
        if (*pp == w) {
            *pp = w->hnext;
            w->hnext = NULL;
            c->nwaiters--;
            return 1;
        }
    }
    return 0;
}

// ---- the deadline heap (caller holds mu) ------------------------------------

static void heap_swap(convd_conn *c, size_t i, size_t j) {
    cd_waiter *t = c->heap[i];
    c->heap[i] = c->heap[j];
    c->heap[j] = t;
    c->heap[i]->heap_idx = i;
    c->heap[j]->heap_idx = j;
}

static void heap_up(convd_conn *c, size_t i) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (c->heap[p]->deadline <= c->heap[i]->deadline) break;
        heap_swap(c, i, p);
        i = p;
    }
}

static void heap_down(convd_conn *c, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < c->heap_len && c->heap[l]->deadline < c->heap[m]->deadline) m = l;
        if (r < c->heap_len && c->heap[r]->deadline < c->heap[m]->deadline) m = r;
        if (m == i) return;
        heap_swap(c, i, m);
        i = m;
    }
}

int cd_client_heap_push_locked(convd_conn *c, cd_waiter *w) {
    if (c->heap_len == c->heap_cap) {
        size_t cap = c->heap_cap ? c->heap_cap * 2 : 64;
        cd_waiter **h = realloc(c->heap, cap * sizeof *h);
        if (!h) return CD_ENOMEM;
        c->heap = h;
        c->heap_cap = cap;
    }
    w->heap_idx = c->heap_len;
    c->heap[c->heap_len++] = w;
    heap_up(c, w->heap_idx);
    return 0;
}

void cd_client_heap_remove_locked(convd_conn *c, cd_waiter *w) {
    size_t i = w->heap_idx;
    if (i == SIZE_MAX) return;
    w->heap_idx = SIZE_MAX;
    c->heap_len--;
    if (i == c->heap_len) return;
    c->heap[i] = c->heap[c->heap_len];
    c->heap[i]->heap_idx = i;
    heap_up(c, i);
    heap_down(c, c->heap[i]->heap_idx);
}
