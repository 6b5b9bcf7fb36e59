// The activation arena planner (runtime/arena.c): buffers alive at the same
// step never share bytes, offsets are aligned, and memory is reused.

#include "runtime/arena.h"
#include "tests/unit/check.h"

static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

// Checks the invariants and returns the largest sum of live sizes at a step
// (a lower bound of any valid plan).
static size_t check_plan(const cd_arena_buf *b, int n, size_t total, size_t align) {
    int steps = 0;
    for (int i = 0; i < n; i++) {
        CHECK_EQ(b[i].offset % align, 0);
        CHECK(b[i].offset + b[i].size <= total);
        if (b[i].last + 1 > steps) steps = b[i].last + 1;
        for (int j = 0; j < i; j++) {
            int live_together = !(b[i].last < b[j].first || b[j].last < b[i].first);
            int disjoint = b[i].offset + b[i].size <= b[j].offset || b[j].offset + b[j].size <= b[i].offset;
            if (live_together && b[i].size && b[j].size && !disjoint)
                CD_CHECK_FAIL_("buffers %d [%d,%d] @%zu+%zu and %d [%d,%d] @%zu+%zu overlap", i, b[i].first, b[i].last,
                               b[i].offset, b[i].size, j, b[j].first, b[j].last, b[j].offset, b[j].size);
        }
    }
    size_t peak = 0;
    for (int s = 0; s < steps; s++) {
        size_t live = 0;
        for (int i = 0; i < n; i++)
            if (b[i].first <= s && s <= b[i].last) live += align_up(b[i].size, align);
        if (live > peak) peak = live;
    }
    return peak;
}

CD_TEST(arena_random_lifetimes_never_overlap) {
    for (int iter = 0; iter < 50; iter++) {
        int n = cd_test_randi(1, 60);
        cd_arena_buf b[60];
        size_t sum = 0;
        for (int i = 0; i < n; i++) {
            int first = cd_test_randi(0, 40);
            b[i] = (cd_arena_buf){(size_t)cd_test_randi(0, 5000), first, first + cd_test_randi(0, 10), 0};
            sum += align_up(b[i].size, 64);
        }
        size_t total = cd_arena_plan(b, n, 64);
        size_t peak = check_plan(b, n, total, 64);
        CHECK(total >= peak);
        CHECK(total <= sum);
    }
}

CD_TEST(arena_chain_reuses_memory) {
    // A plain chain: buffer i is written at step i and read at step i+1, so
    // only two are ever alive: the arena needs two buffers, not n.
    int n = cd_test_randi(3, 40);
    size_t sz = (size_t)cd_test_randi(1, 10000);
    cd_arena_buf b[40];
    for (int i = 0; i < n; i++) b[i] = (cd_arena_buf){sz, i, i + 1, 0};
    size_t total = cd_arena_plan(b, n, 64);
    check_plan(b, n, total, 64);
    CHECK_EQ(total, 2 * align_up(sz, 64));
}

CD_TEST(arena_skip_connection_stays_alive) {
    // A residual: buffer 0 lives across the whole block, the others chain.
    cd_arena_buf b[5] = {{1000, 0, 4, 0}, {1000, 1, 2, 0}, {1000, 2, 3, 0}, {1000, 3, 4, 0}, {1000, 4, 5, 0}};
    size_t total = cd_arena_plan(b, 5, 64);
    check_plan(b, 5, total, 64);
    CHECK_EQ(total, 3 * align_up(1000, 64));
}

CD_TEST(arena_zero_sized_and_empty) {
    CHECK_EQ(cd_arena_plan(NULL, 0, 64), 0);
    cd_arena_buf b[3] = {{0, 0, 3, 0}, {128, 0, 3, 0}, {0, 1, 1, 0}};
    size_t total = cd_arena_plan(b, 3, 64);
    check_plan(b, 3, total, 64);
    CHECK_EQ(total, 128);
}

CD_TEST(arena_alignment_odd_sizes) {
    size_t align = (size_t)1 << cd_test_randi(0, 8);
    cd_arena_buf b[8];
    for (int i = 0; i < 8; i++) b[i] = (cd_arena_buf){(size_t)cd_test_randi(1, 333) | 1, 0, 7, 0};
    size_t total = cd_arena_plan(b, 8, align);
    check_plan(b, 8, total, align);
}

// The placement as it was first written (quadratic: every buffer scans all
// others). The output-sensitive version must give the very same offsets.
static size_t plan_reference(cd_arena_buf *bufs, int n, size_t align) {
    size_t total = 0;
    char placed[200] = {0};
    int order[200];
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) // stable insertion sort: size desc, index asc
        for (int j = i; j > 0 && bufs[order[j]].size > bufs[order[j - 1]].size; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int oi = 0; oi < n; oi++) {
        cd_arena_buf *b = &bufs[order[oi]];
        size_t need = align_up(b->size, align), at = 0;
        for (;;) { // lowest gap: retry until nothing placed overlaps [at, at+need)
            int moved = 0;
            for (int j = 0; j < n; j++) {
                if (!placed[j] || bufs[j].size == 0) continue;
                if (bufs[j].last < b->first || bufs[j].first > b->last) continue;
                size_t jb = bufs[j].offset, je = jb + align_up(bufs[j].size, align);
                if (jb < at + need && at < je && need) {
                    at = je;
                    moved = 1;
                }
            }
            if (!moved) break;
        }
        b->offset = need ? at : 0;
        placed[order[oi]] = 1;
        if (at + need > total) total = at + need;
    }
    return total;
}

CD_TEST(arena_same_plan_as_reference) {
    for (int iter = 0; iter < 200; iter++) {
        int n = cd_test_randi(1, 200);
        cd_arena_buf a[200], r[200];
        for (int i = 0; i < n; i++) {
            int first = cd_test_randi(0, 60);
            a[i] = (cd_arena_buf){(size_t)cd_test_randi(0, 4) * 64 * (size_t)cd_test_randi(0, 3), first,
                                  first + cd_test_randi(0, 12), 0};
            r[i] = a[i];
        }
        size_t ta = cd_arena_plan(a, n, 64), tr = plan_reference(r, n, 64);
        check_plan(a, n, ta, 64);
        CHECK_EQ(ta, tr);
        for (int i = 0; i < n; i++) CHECK_EQ(a[i].offset, r[i].offset);
    }
}

CD_TEST(arena_size_overflow_is_reported) {
    // Sizes a hostile model could declare: the sum of two live buffers, or
    // one size rounded up to the alignment, does not fit size_t.
    cd_arena_buf b[2] = {{SIZE_MAX / 2 + 64, 0, 1, 0}, {SIZE_MAX / 2 + 64, 1, 2, 0}};
    CHECK_EQ(cd_arena_plan(b, 2, 64), SIZE_MAX);
    cd_arena_buf c[1] = {{SIZE_MAX - 3, 0, 0, 0}};
    CHECK_EQ(cd_arena_plan(c, 1, 64), SIZE_MAX);
}

CD_TEST(arena_long_chain_is_fast) {
    // 1,000,000 chained buffers: placed in well under a second (the former
    // quadratic scan took hours), two buffers' worth of memory.
    int n = 1000000;
    cd_arena_buf *b = malloc((size_t)n * sizeof *b);
    CHECK(b != NULL);
    for (int i = 0; i < n; i++) b[i] = (cd_arena_buf){256, i, i + 1, 0};
    CHECK_EQ(cd_arena_plan(b, n, 64), 512);
    free(b);
}
