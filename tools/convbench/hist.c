// The log-bucketed latency histogram (see hist.h for the layout).

#include "tools/convbench/hist.h"

#include "core/histogram.h"

#include <string.h>

void cd_hist_init(cd_hist *h) {
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

size_t cd_hist_index(uint64_t v) { return cd_log_bucket_index(v, CD_HIST_SUB_BITS); }

uint64_t cd_hist_low(size_t idx) { return cd_log_bucket_lo(idx, CD_HIST_SUB_BITS); }

uint64_t cd_hist_high(size_t idx) {
    return cd_log_bucket_lo(idx, CD_HIST_SUB_BITS) + (cd_log_bucket_width(idx, CD_HIST_SUB_BITS) - 1);
}

void cd_hist_record(cd_hist *h, uint64_t v) {
    h->counts[cd_hist_index(v)]++;
    h->total++;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
    h->sum += (double)v;
}

void cd_hist_merge(cd_hist *dst, const cd_hist *src) {
    if (src->total == 0) return;
    for (size_t i = 0; i < CD_HIST_BUCKETS; i++) dst->counts[i] += src->counts[i];
    dst->total += src->total;
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
    dst->sum += src->sum;
}

uint64_t cd_hist_percentile(const cd_hist *h, double q) {
    if (h->total == 0) return 0;
    if (q <= 0) return h->min;
    if (q >= 100) return h->max;
    // Rank of the wanted value, 1-based: ceil(q% of total), at least 1.
    double r = q / 100.0 * (double)h->total;
    uint64_t rank = (uint64_t)r;
    if ((double)rank < r) rank++;
    if (rank < 1) rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < CD_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t lo = cd_hist_low(i), hi = cd_hist_high(i);
            uint64_t mid = lo + (hi - lo) / 2;
            if (mid < h->min) mid = h->min;
            if (mid > h->max) mid = h->max;
            return mid;
        }
    }
    return h->max;
}

double cd_hist_mean(const cd_hist *h) { return h->total ? h->sum / (double)h->total : 0.0; }
