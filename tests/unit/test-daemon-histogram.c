// core/histogram (the daemon's metrics histogram): bucketing, quantiles within the documented relative error
// (1/64) against exact sorted quantiles on fresh random data, merging, the
// Prometheus cumulative count, and lock-free recording from several threads.
#include "core/histogram.h"
#include "tests/unit/check.h"

#include <pthread.h>

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

CD_TEST(daemon_hist_bucket_ranges_cover_every_value) {
    // Consecutive buckets tile the value range without gaps or overlaps, and
    // every bucket is at most 1/32 of its lower bound wide.
    CHECK_EQ(cd_histogram_bucket_lo(0), 0);
    for (size_t i = 0; i + 1 < CD_HISTOGRAM_NBUCKETS; i++) {
        CHECK_EQ(cd_histogram_bucket_hi(i) + 1, cd_histogram_bucket_lo(i + 1));
        uint64_t lo = cd_histogram_bucket_lo(i), hi = cd_histogram_bucket_hi(i);
        CHECK(hi >= lo);
        if (lo >= CD_HISTOGRAM_SUB) CHECK((hi - lo + 1) * CD_HISTOGRAM_SUB <= lo);
        CHECK_EQ(cd_histogram_bucket(lo), i);
        CHECK_EQ(cd_histogram_bucket(hi), i);
    }
    CHECK_EQ(cd_histogram_bucket(UINT64_MAX), CD_HISTOGRAM_NBUCKETS - 1);
}

CD_TEST(daemon_hist_small_values_exact) {
    static cd_histogram h;
    cd_histogram_init(&h);
    for (uint64_t v = 0; v < 32; v++) cd_histogram_record(&h, v);
    static cd_histogram_snap s;
    cd_histogram_snapshot(&h, &s);
    CHECK_EQ(s.count, 32);
    CHECK_EQ(s.sum, 31 * 32 / 2);
    CHECK_EQ(s.max, 31);
    CHECK_EQ(cd_histogram_quantile(&s, 0.5), 15);
    CHECK_EQ(cd_histogram_quantile(&s, 1.0), 31);
    CHECK_EQ(cd_histogram_quantile(&s, 0.0), 0);
    CHECK_EQ(cd_histogram_count_le(&s, 7), 8);
}

CD_TEST(daemon_hist_empty_quantile_is_zero) {
    static cd_histogram h;
    static cd_histogram_snap s;
    cd_histogram_init(&h);
    cd_histogram_snapshot(&h, &s);
    CHECK_EQ(cd_histogram_quantile(&s, 0.99), 0);
    CHECK_EQ(cd_histogram_count_le(&s, UINT64_MAX), 0);
}

CD_TEST(daemon_hist_quantiles_within_relative_error_random) {
    static cd_histogram h;
    static cd_histogram_snap s;
    cd_histogram_init(&h);
    int n = cd_test_randi(500, 20000);
    uint64_t *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) {
        // Log-uniform over 1 ns .. ~1 s, like latencies.
        double e = cd_test_randf(0.0f, 30.0f);
        v[i] = (uint64_t)pow(2.0, e);
        cd_histogram_record(&h, v[i]);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    cd_histogram_snapshot(&h, &s);
    CHECK_EQ(s.count, n);
    CHECK_EQ(s.max, v[n - 1]);
    const double qs[] = {0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0};
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        uint64_t rank = (uint64_t)ceil(qs[k] * n);
        if (rank < 1) rank = 1;
        double exact = (double)v[rank - 1];
        double got = (double)cd_histogram_quantile(&s, qs[k]);
        double rel = fabs(got - exact) / (exact > 1 ? exact : 1);
        if (rel > 1.0 / 64 + 1e-12) CD_CHECK_FAIL_("q=%g: got %.0f, exact %.0f (rel %.4f)", qs[k], got, exact, rel);
    }
    free(v);
}

CD_TEST(daemon_hist_merge_equals_recording_all) {
    static cd_histogram a, b, all;
    static cd_histogram_snap sa, sb, sall;
    cd_histogram_init(&a);
    cd_histogram_init(&b);
    cd_histogram_init(&all);
    int n = cd_test_randi(100, 3000);
    for (int i = 0; i < n; i++) {
        uint64_t x = cd_test_rand() % 5000000;
        cd_histogram_record(i % 3 ? &a : &b, x);
        cd_histogram_record(&all, x);
    }
    cd_histogram_snapshot(&a, &sa);
    cd_histogram_snapshot(&b, &sb);
    cd_histogram_snapshot(&all, &sall);
    cd_histogram_merge(&sa, &sb);
    CHECK(memcmp(&sa, &sall, sizeof sa) == 0);
}

static cd_histogram g_shared;

static void *record_many(void *p) {
    uint64_t base = (uint64_t)(uintptr_t)p;
    for (uint64_t i = 0; i < 100000; i++) cd_histogram_record(&g_shared, base + i % 1000);
    return NULL;
}

CD_TEST(daemon_hist_concurrent_records_all_counted) {
    cd_histogram_init(&g_shared);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, record_many, (void *)(uintptr_t)(i * 1000));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    static cd_histogram_snap s;
    cd_histogram_snapshot(&g_shared, &s);
    CHECK_EQ(s.count, 400000);
    uint64_t total = 0;
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) total += s.buckets[i];
    CHECK_EQ(total, 400000);
    CHECK_EQ(s.max, 3999);
    CHECK_EQ(cd_histogram_count_le(&s, UINT64_MAX), 400000);
}
