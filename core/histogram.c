#include "core/histogram.h"

#include <string.h>

void cd_histogram_init(cd_histogram *h) {
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) atomic_init(&h->buckets[i], 0);
    atomic_init(&h->count, 0);
    atomic_init(&h->sum, 0);
    atomic_init(&h->max, 0);
}

size_t cd_histogram_bucket(uint64_t v) {
    if (v >= CD_HISTOGRAM_SUB && 63 - __builtin_clzll(v) > CD_HISTOGRAM_MAX_EXP) return CD_HISTOGRAM_NBUCKETS - 1;
    return cd_log_bucket_index(v, CD_HISTOGRAM_SUB_BITS);
}

uint64_t cd_histogram_bucket_lo(size_t i) { return cd_log_bucket_lo(i, CD_HISTOGRAM_SUB_BITS); }

uint64_t cd_histogram_bucket_hi(size_t i) {
    if (i < CD_HISTOGRAM_SUB) return i;
    if (i == CD_HISTOGRAM_NBUCKETS - 1) return UINT64_MAX;
    return cd_log_bucket_lo(i, CD_HISTOGRAM_SUB_BITS) + cd_log_bucket_width(i, CD_HISTOGRAM_SUB_BITS) - 1;
}

// The value reported for bucket i (its midpoint; the value itself when exact).
static uint64_t bucket_mid(size_t i) {
    if (i < CD_HISTOGRAM_SUB) return i;
    return cd_log_bucket_lo(i, CD_HISTOGRAM_SUB_BITS) + (cd_log_bucket_width(i, CD_HISTOGRAM_SUB_BITS) >> 1);
}

void cd_histogram_record(cd_histogram *h, uint64_t v) {
    atomic_fetch_add_explicit(&h->buckets[cd_histogram_bucket(v)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
    uint64_t m = atomic_load_explicit(&h->max, memory_order_relaxed);
    while (v > m && !atomic_compare_exchange_weak_explicit(&h->max, &m, v, memory_order_relaxed, memory_order_relaxed))
        ;
}

void cd_histogram_snapshot(const cd_histogram *h, cd_histogram_snap *out) {
    cd_histogram *mh = (cd_histogram *)h;
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++)
        out->buckets[i] = atomic_load_explicit(&mh->buckets[i], memory_order_relaxed);
    out->count = atomic_load_explicit(&mh->count, memory_order_relaxed);
    out->sum = atomic_load_explicit(&mh->sum, memory_order_relaxed);
    out->max = atomic_load_explicit(&mh->max, memory_order_relaxed);
}

void cd_histogram_merge(cd_histogram_snap *dst, const cd_histogram_snap *src) {
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->max > dst->max) dst->max = src->max;
}

uint64_t cd_histogram_quantile(const cd_histogram_snap *s, double q) {
    // The bucket counts are the truth (count may lag them by a record).
    uint64_t total = 0;
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) total += s->buckets[i];
    if (total == 0) return 0;
    if (q < 0) q = 0;
    if (q > 1) q = 1;
    uint64_t rank = (uint64_t)(q * (double)total + 0.999999999);
    if (rank < 1) rank = 1;
    if (rank > total) rank = total;
    uint64_t seen = 0;
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) {
        seen += s->buckets[i];
        if (seen >= rank) {
            uint64_t v = bucket_mid(i);
            return s->max && v > s->max ? s->max : v;
        }
    }
    return s->max;
}

uint64_t cd_histogram_count_le(const cd_histogram_snap *s, uint64_t bound) {
    uint64_t n = 0;
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) {
        if (bucket_mid(i) > bound) break;
        n += s->buckets[i];
    }
    return n;
}
