// convbench's latency histogram (tools/convbench/hist.c): bucket layout,
// percentiles within 1% of the exact ones, merge, edge cases.

#include "tests/unit/check.h"
#include "tools/convbench/hist.h"

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

// A random latency-like value: log-uniform over [lo, hi].
static uint64_t rand_loguniform(double lo, double hi) {
    double u = cd_test_randf(0.0f, 1.0f);
    return (uint64_t)exp(log(lo) + u * (log(hi) - log(lo)));
}

// The exact percentile as cd_hist defines it: the value of rank ceil(q% n).
static uint64_t exact_pct(const uint64_t *sorted, size_t n, double q) {
    double r = q / 100.0 * (double)n;
    size_t rank = (size_t)r;
    if ((double)rank < r) rank++;
    if (rank < 1) rank = 1;
    return sorted[rank - 1];
}

static void check_percentiles(const uint64_t *v, size_t n) {
    cd_hist *h = malloc(sizeof *h);
    cd_hist_init(h);
    for (size_t i = 0; i < n; i++) cd_hist_record(h, v[i]);
    uint64_t *s = malloc(n * sizeof *s);
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    CHECK_EQ(h->total, n);
    CHECK_EQ(h->min, s[0]);
    CHECK_EQ(h->max, s[n - 1]);
    CHECK_EQ(cd_hist_percentile(h, 100), s[n - 1]);
    CHECK_EQ(cd_hist_percentile(h, 0), s[0]);
    const double qs[] = {0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99};
    for (size_t k = 0; k < sizeof qs / sizeof *qs; k++) {
        uint64_t want = exact_pct(s, n, qs[k]);
        uint64_t got = cd_hist_percentile(h, qs[k]);
        double rel = fabs((double)got - (double)want) / (want ? (double)want : 1.0);
        if (rel > 0.01)
            CD_CHECK_FAIL_("p%g: %llu vs exact %llu (rel err %.4f, n %zu)", qs[k], (unsigned long long)got,
                           (unsigned long long)want, rel, n);
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)v[i];
    CHECK(fabs(cd_hist_mean(h) - sum / (double)n) <= 1e-9 * sum / (double)n + 1e-9);
    free(s);
    free(h);
}

CD_TEST(bench_hist_percentiles_within_1pct_loguniform) {
    size_t n = (size_t)cd_test_randi(1000, 200000);
    uint64_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = rand_loguniform(1e3, 1e10); // 1 us .. 10 s in ns
    check_percentiles(v, n);
    free(v);
}

CD_TEST(bench_hist_percentiles_within_1pct_narrow_and_tail) {
    // A tight mode (like a fast server) plus a rare slow tail.
    size_t n = (size_t)cd_test_randi(5000, 100000);
    uint64_t *v = malloc(n * sizeof *v);
    uint64_t base = (uint64_t)cd_test_randi(20000, 200000);
    for (size_t i = 0; i < n; i++)
        v[i] =
            cd_test_randi(0, 999) == 0 ? rand_loguniform(1e7, 1e9) : base + (uint64_t)cd_test_randi(0, (int)base / 5);
    check_percentiles(v, n);
    free(v);
}

CD_TEST(bench_hist_small_values_exact) {
    // Values below 128 have a bucket each: percentiles are exact.
    size_t n = (size_t)cd_test_randi(100, 5000);
    uint64_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (uint64_t)cd_test_randi(0, 127);
    cd_hist h;
    cd_hist_init(&h);
    for (size_t i = 0; i < n; i++) cd_hist_record(&h, v[i]);
    qsort(v, n, sizeof *v, cmp_u64);
    for (double q = 1; q < 100; q += 7.5) CHECK_EQ(cd_hist_percentile(&h, q), exact_pct(v, n, q));
    free(v);
}

CD_TEST(bench_hist_bucket_bounds_cover_every_value) {
    // Edges: 0, the exact range's end, powers of two and their neighbours,
    // UINT64_MAX; then random values of every magnitude.
    uint64_t edges[200];
    size_t ne = 0;
    edges[ne++] = 0;
    edges[ne++] = 127;
    edges[ne++] = 128;
    edges[ne++] = UINT64_MAX;
    edges[ne++] = UINT64_MAX - 1;
    for (int e = 1; e < 64; e++) {
        edges[ne++] = ((uint64_t)1 << e) - 1;
        edges[ne++] = (uint64_t)1 << e;
        edges[ne++] = ((uint64_t)1 << e) + 1;
    }
    for (int k = 0; k < 20000 + (int)ne; k++) {
        uint64_t v = k < (int)ne ? edges[k] : cd_test_rand() >> cd_test_randi(0, 63);
        size_t i = cd_hist_index(v);
        CHECK(i < CD_HIST_BUCKETS);
        uint64_t lo = cd_hist_low(i), hi = cd_hist_high(i);
        if (!(lo <= v && v <= hi))
            CD_CHECK_FAIL_("value %llu in bucket %zu [%llu, %llu]", (unsigned long long)v, i, (unsigned long long)lo,
                           (unsigned long long)hi);
        // Width at most 1/128 of the bucket's lower bound (exact below 128).
        if (v < 128)
            CHECK_EQ(lo, hi);
        else
            CHECK((double)(hi - lo + 1) <= (double)lo / 128.0);
    }
    // Buckets tile the number line without gaps or overlaps.
    for (size_t i = 0; i + 1 < CD_HIST_BUCKETS; i++) CHECK_EQ(cd_hist_high(i) + 1, cd_hist_low(i + 1));
    CHECK_EQ(cd_hist_low(0), 0);
    CHECK_EQ(cd_hist_high(CD_HIST_BUCKETS - 1), UINT64_MAX);
}

CD_TEST(bench_hist_merge_equals_one_histogram) {
    cd_hist *a = malloc(sizeof *a), *b = malloc(sizeof *b), *all = malloc(sizeof *all);
    cd_hist_init(a);
    cd_hist_init(b);
    cd_hist_init(all);
    int n = cd_test_randi(1000, 20000);
    for (int i = 0; i < n; i++) {
        uint64_t v = rand_loguniform(10, 1e9);
        cd_hist_record(cd_test_randi(0, 1) ? a : b, v);
        cd_hist_record(all, v);
    }
    cd_hist empty;
    cd_hist_init(&empty);
    cd_hist_merge(a, &empty); // merging nothing changes nothing (min stays)
    cd_hist_merge(a, b);
    CHECK_EQ(a->total, all->total);
    CHECK_EQ(a->min, all->min);
    CHECK_EQ(a->max, all->max);
    CHECK(memcmp(a->counts, all->counts, sizeof a->counts) == 0);
    for (double q = 0; q <= 100; q += 12.5) CHECK_EQ(cd_hist_percentile(a, q), cd_hist_percentile(all, q));
    free(a);
    free(b);
    free(all);
}

CD_TEST(bench_hist_empty_and_single_value) {
    cd_hist h;
    cd_hist_init(&h);
    CHECK_EQ(h.total, 0);
    CHECK_EQ(cd_hist_percentile(&h, 50), 0);
    CHECK_EQ(cd_hist_percentile(&h, 100), 0);
    CHECK(cd_hist_mean(&h) == 0.0);
    // One value: every percentile is that value exactly (clamped to min/max),
    // also for a value inside a wide bucket.
    uint64_t v = (uint64_t)cd_test_randi(1000000, 2000000000) * 3 + 1;
    cd_hist_record(&h, v);
    for (double q = 0; q <= 100; q += 10) CHECK_EQ(cd_hist_percentile(&h, q), v);
    CHECK(cd_hist_mean(&h) == (double)v);
    // Many copies of a huge value: no overflow.
    cd_hist_init(&h);
    for (int i = 0; i < 1000; i++) cd_hist_record(&h, UINT64_MAX);
    CHECK_EQ(cd_hist_percentile(&h, 50), UINT64_MAX);
    CHECK_EQ(h.counts[CD_HIST_BUCKETS - 1], 1000);
}
