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
