#ifndef CD_CONVBENCH_HIST_H
#define CD_CONVBENCH_HIST_H

// A log-bucketed latency histogram in the style of HdrHistogram: fixed
// memory, O(1) record, percentiles with a bounded relative error.
//
// Layout (the bucketing of core/histogram.h with sub_bits 7). Values below 2^CD_HIST_SUB_BITS (128) have a bucket each (exact).
// Above, each power-of-two range [2^e, 2^(e+1)) is split into 2^SUB_BITS
// equal sub-buckets, so a bucket's width is at most 1/128 of its lower
// bound: a value reported as its bucket's midpoint is within 0.4% of the
// true value (the percentile and max/min are clamped to the exact
// min/max seen). Covers every uint64_t (7424 buckets, 58 KiB).
//
// Not thread-safe: callers lock, or keep one per thread and merge.

#include <stddef.h>
#include <stdint.h>

#define CD_HIST_SUB_BITS 7
#define CD_HIST_SUB (1u << CD_HIST_SUB_BITS)
#define CD_HIST_BUCKETS (CD_HIST_SUB + (64 - CD_HIST_SUB_BITS) * CD_HIST_SUB)

typedef struct {
    uint64_t counts[CD_HIST_BUCKETS]; // values per bucket
    uint64_t total;                   // values recorded
    uint64_t min, max;                // exact extremes (min UINT64_MAX when empty)
    double sum;                       // for the mean
} cd_hist;

void cd_hist_init(cd_hist *h);
void cd_hist_record(cd_hist *h, uint64_t v);
// Adds every value of src to dst.
void cd_hist_merge(cd_hist *dst, const cd_hist *src);

// The bucket holding v, and a bucket's value range [low, high] (inclusive).
size_t cd_hist_index(uint64_t v);
uint64_t cd_hist_low(size_t idx);
uint64_t cd_hist_high(size_t idx);

// The value at percentile q (0..100): the smallest recorded value v such
// that at least q% of the values are <= v, reported as its bucket's
// midpoint clamped to [min, max]; q >= 100 gives max exactly, q <= 0 min.
// 0 for an empty histogram.
uint64_t cd_hist_percentile(const cd_hist *h, double q);
// Mean of the recorded values (0 when empty).
double cd_hist_mean(const cd_hist *h);

#endif // CD_CONVBENCH_HIST_H
