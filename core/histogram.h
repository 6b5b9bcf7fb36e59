#ifndef CD_CORE_HISTOGRAM_H
#define CD_CORE_HISTOGRAM_H

// Log-bucketed histograms of non-negative integers (latencies in ns, batch
// sizes) with bounded relative error, in the style of HdrHistogram.
//
// The bucketing is one scheme with a parameter, sub_bits (the cd_log_bucket_*
// helpers below): values below 2^sub_bits get one bucket each (exact); above
// that, each power of two [2^e, 2^(e+1)) is split into 2^sub_bits equal
// sub-buckets. Bucket i >= 2^sub_bits covers
// [(2^sub_bits + i % 2^sub_bits) << s, ... + 2^s - 1] with s = i / 2^sub_bits - 1.
// The daemon's metrics use cd_histogram (sub_bits 5, lock-free, capped);
// convbench's per-thread latency histogram (tools/convbench/hist.h) uses the
// same helpers with sub_bits 7 and no cap.
//
// cd_histogram, for the per-model metrics:
// Bucketing (HDR-style, CD_HISTOGRAM_SUB_BITS = 5): values 0..31 get one bucket
// each (exact); above that, each power of two [2^e, 2^(e+1)) is split into 32
// equal sub-buckets, so a bucket's width is at most 1/32 of its lower bound.
// Quantiles report the bucket's midpoint: relative error <= 1/64 (1.6 %).
// Values >= 2^48 (~78 hours in ns) go to the last bucket; `max` stays exact.
//
// Recording is lock-free (relaxed atomic adds), so any thread may record
// while another takes a snapshot; a snapshot is then consistent per counter
// but may miss a record that is in progress (count and sum may disagree by
// that one value). Readers work on snapshots (plain copies).

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// The bucket of v when each power of two is split into 2^sub_bits buckets.
static inline size_t cd_log_bucket_index(uint64_t v, unsigned sub_bits) {
    uint64_t sub = (uint64_t)1 << sub_bits;
    if (v < sub) return (size_t)v;
    int shift = 63 - __builtin_clzll(v) - (int)sub_bits; // 2^(shift+sub_bits) <= v
    return (size_t)(shift + 1) * sub + (size_t)((v >> shift) & (sub - 1));
}

// The smallest value of bucket i (the inverse of cd_log_bucket_index).
static inline uint64_t cd_log_bucket_lo(size_t i, unsigned sub_bits) {
    size_t sub = (size_t)1 << sub_bits;
    if (i < sub) return i;
    return (uint64_t)(sub + i % sub) << (i / sub - 1);
}

// How many values bucket i holds (1 in the exact range).
static inline uint64_t cd_log_bucket_width(size_t i, unsigned sub_bits) {
    size_t sub = (size_t)1 << sub_bits;
    return i < sub ? 1 : (uint64_t)1 << (i / sub - 1);
}

#define CD_HISTOGRAM_SUB_BITS 5
#define CD_HISTOGRAM_SUB (1u << CD_HISTOGRAM_SUB_BITS) // 32
#define CD_HISTOGRAM_MAX_EXP 47                        // top power of two
#define CD_HISTOGRAM_NBUCKETS ((CD_HISTOGRAM_MAX_EXP - CD_HISTOGRAM_SUB_BITS + 2) * CD_HISTOGRAM_SUB) // 1408

typedef struct {
    atomic_uint_least64_t buckets[CD_HISTOGRAM_NBUCKETS]; // counts per bucket
    atomic_uint_least64_t count;                          // values recorded
    atomic_uint_least64_t sum;                            // their sum (wraps)
    atomic_uint_least64_t max;                            // largest value
} cd_histogram;

// A plain copy of a histogram for reading and merging.
typedef struct {
    uint64_t buckets[CD_HISTOGRAM_NBUCKETS];
    uint64_t count;
    uint64_t sum;
    uint64_t max;
} cd_histogram_snap;

// Zeroes h (a zeroed allocation is also a valid empty histogram).
void cd_histogram_init(cd_histogram *h);
// Records one value. Lock-free, safe from any thread.
void cd_histogram_record(cd_histogram *h, uint64_t v);
// Copies h into out.
void cd_histogram_snapshot(const cd_histogram *h, cd_histogram_snap *out);
// Adds src into dst (e.g. per-worker histograms merged for a report).
void cd_histogram_merge(cd_histogram_snap *dst, const cd_histogram_snap *src);

// The bucket of a value, and a bucket's inclusive value range.
size_t cd_histogram_bucket(uint64_t v);
uint64_t cd_histogram_bucket_lo(size_t i);
uint64_t cd_histogram_bucket_hi(size_t i);

// The q-quantile (0 <= q <= 1) of the recorded values: the midpoint of the
// bucket holding the ceil(q * count)-th smallest value, capped at max.
// Returns 0 when the histogram is empty.
uint64_t cd_histogram_quantile(const cd_histogram_snap *s, double q);
// Values recorded whose bucket's midpoint is <= bound (the cumulative count
// used for Prometheus `le` buckets; exact for values < 32).
uint64_t cd_histogram_count_le(const cd_histogram_snap *s, uint64_t bound);

#endif // CD_CORE_HISTOGRAM_H
