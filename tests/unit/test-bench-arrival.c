// convbench's open-loop arrival processes (tools/convbench/arrival.c):
// uniform is evenly spaced without drift; poisson has exponential gaps of
// mean 1/rate (mean, coefficient of variation, Kolmogorov-Smirnov) and
// Poisson counts (variance = mean).

#include "core/stats-util.h"
#include "tests/unit/check.h"
#include "tools/convbench/arrival.h"

static double rand_rate(void) { return exp(cd_test_randf(log(5.0f), log(200000.0f))); }

CD_TEST(bench_arrival_parse_names) {
    cd_arrival_kind k;
    CHECK_EQ(cd_arrival_parse("poisson", &k), 0);
    CHECK_EQ(k, CD_ARRIVAL_POISSON);
    CHECK_EQ(cd_arrival_parse("uniform", &k), 0);
    CHECK_EQ(k, CD_ARRIVAL_UNIFORM);
    CHECK_EQ(cd_arrival_parse("Poisson", &k), -1);
    CHECK_EQ(cd_arrival_parse("", &k), -1);
    CHECK_STREQ(cd_arrival_name(CD_ARRIVAL_POISSON), "poisson");
    CHECK_STREQ(cd_arrival_name(CD_ARRIVAL_UNIFORM), "uniform");
}

CD_TEST(bench_arrival_uniform_evenly_spaced_no_drift) {
    double rate = rand_rate();
    cd_arrival a;
    cd_arrival_init(&a, CD_ARRIVAL_UNIFORM, rate, cd_test_rand());
    int n = 1000000;
    uint64_t prev = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t = cd_arrival_next_ns(&a);
        double want = (double)i / rate * 1e9;
        if (fabs((double)t - want) > 1.0)
            CD_CHECK_FAIL_("arrival %d at %llu ns, want %.1f (rate %g)", i, (unsigned long long)t, want, rate);
        if (i == 0) CHECK_EQ(t, 0);
        CHECK(t >= prev);
        prev = t;
    }
}

// n poisson gaps (seconds) at rate.
static double *poisson_gaps(double rate, int n, uint64_t seed) {
    cd_arrival a;
    cd_arrival_init(&a, CD_ARRIVAL_POISSON, rate, seed);
    double *g = malloc((size_t)n * sizeof *g);
    uint64_t prev = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t = cd_arrival_next_ns(&a);
        CHECK(t >= prev);
        g[i] = (double)(t - prev) / 1e9;
        prev = t;
    }
    return g;
}

CD_TEST(bench_arrival_poisson_mean_and_cv) {
    double rate = exp(cd_test_randf(log(5.0f), log(20000.0f))); // gaps >= 50 us: ns rounding negligible
    int n = 400000;
    double *g = poisson_gaps(rate, n, cd_test_rand());
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) sum += g[i];
    double mean = sum / n;
    for (int i = 0; i < n; i++) sq += (g[i] - mean) * (g[i] - mean);
    double cv = sqrt(sq / (n - 1)) / mean;
    // Standard error of the mean ~ 1/sqrt(n) = 0.16%: 1% is > 6 sigma.
    if (fabs(mean * rate - 1) > 0.01) CD_CHECK_FAIL_("mean gap %g, want %g", mean, 1 / rate);
    // Exponential: CV = 1 (a uniform schedule has 0).
    if (fabs(cv - 1) > 0.02) CD_CHECK_FAIL_("coefficient of variation %g, want 1", cv);
    free(g);
}

CD_TEST(bench_arrival_poisson_gaps_exponential_ks) {
    double rate = exp(cd_test_randf(log(5.0f), log(20000.0f)));
    int n = 100000;
    double *g = poisson_gaps(rate, n, cd_test_rand());
    qsort(g, (size_t)n, sizeof *g, cd_cmp_double);
    double d = 0;
    for (int i = 0; i < n; i++) {
        double f = 1 - exp(-rate * g[i]);
        double lo = f - (double)i / n, hi = (double)(i + 1) / n - f;
        if (lo > d) d = lo;
        if (hi > d) d = hi;
    }
    // P(D > 2.3/sqrt(n)) ~ 2 exp(-2 * 2.3^2) = 5e-5 for the right law;
    // gaps uniform on [0, 2/rate] would give D ~ 0.1.
    if (d > 2.3 / sqrt(n)) CD_CHECK_FAIL_("KS distance %g > %g (rate %g)", d, 2.3 / sqrt(n), rate);
    free(g);
}

// Variance / mean of arrivals per window of `per` expected arrivals.
static double dispersion(cd_arrival_kind kind, double rate, double per, int windows, uint64_t seed) {
    cd_arrival a;
    cd_arrival_init(&a, kind, rate, seed);
    int *cnt = calloc((size_t)windows, sizeof *cnt);
    double w = per / rate; // seconds per window
    for (;;) {
        double t = (double)cd_arrival_next_ns(&a) / 1e9;
        long k = (long)(t / w);
        if (k >= windows) break;
        cnt[k]++;
    }
    double mean = 0, var = 0;
    for (int i = 0; i < windows; i++) mean += cnt[i];
    mean /= windows;
    for (int i = 0; i < windows; i++) var += (cnt[i] - mean) * (cnt[i] - mean);
    var /= windows - 1;
    free(cnt);
    CHECK(fabs(mean / per - 1) < 0.05);
    return var / mean;
}

CD_TEST(bench_arrival_counts_poisson_dispersion_one_uniform_zero) {
    double rate = exp(cd_test_randf(log(10.0f), log(10000.0f)));
    double per = cd_test_randi(10, 40);
    double dp = dispersion(CD_ARRIVAL_POISSON, rate, per, 20000, cd_test_rand());
    // Sampling sd of the dispersion index ~ sqrt(2/windows) = 1%.
    if (fabs(dp - 1) > 0.08) CD_CHECK_FAIL_("poisson dispersion %g, want 1", dp);
    double du = dispersion(CD_ARRIVAL_UNIFORM, rate, per, 20000, cd_test_rand());
    if (du > 0.3) CD_CHECK_FAIL_("uniform dispersion %g, want ~0", du);
}

CD_TEST(bench_arrival_poisson_seed_reproducible) {
    double rate = rand_rate();
    uint64_t seed = cd_test_rand();
    cd_arrival a, b, c;
    cd_arrival_init(&a, CD_ARRIVAL_POISSON, rate, seed);
    cd_arrival_init(&b, CD_ARRIVAL_POISSON, rate, seed);
    cd_arrival_init(&c, CD_ARRIVAL_POISSON, rate, seed + 1);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t ta = cd_arrival_next_ns(&a);
        CHECK_EQ(ta, cd_arrival_next_ns(&b));
        differ += ta != cd_arrival_next_ns(&c);
    }
    CHECK(differ > 990);
}

CD_TEST(bench_arrival_rand01_open_interval) {
    uint64_t s = cd_test_rand();
    double lo = 1, hi = 0;
    for (int i = 0; i < 1000000; i++) {
        double u = cd_bench_rand01(&s);
        CHECK(u > 0 && u < 1);
        if (u < lo) lo = u;
        if (u > hi) hi = u;
    }
    CHECK(lo < 1e-4 && hi > 1 - 1e-4);
}
