#ifndef CD_TOOLS_CONVCTL_QUANT_RANGE_H
#define CD_TOOLS_CONVCTL_QUANT_RANGE_H

// Calibration math of convctl quantize: the statistics of one activation
// over the calibration inputs and the range each method derives from them.
//
//   minmax      [min, max] as seen.
//   percentile  |x| is clipped at its p-th percentile T: [max(min,-T), min(max,T)].
//   entropy     T is the clip of |x| whose 128-level quantization loses the
//               least information: the KL-divergence search of TensorRT (and
//               onnxruntime's entropy calibrator) over a 2048-bin histogram.
//
// The histogram methods need two passes over the inputs: the first finds
// min and max (the histogram's span), the second fills the histogram.

#include <stddef.h>
#include <stdint.h>

#define CTL_QHIST_BINS 2048
#define CTL_QENTROPY_LEVELS 128

typedef struct {
    double min, max; // over every value seen (pass 1)
    uint64_t count;  // values seen in pass 1
    uint64_t *hist;  // CTL_QHIST_BINS counts of |x| over [0, top] (pass 2), or NULL
    double top;      // the histogram's span: max(|min|, |max|) after pass 1
} ctl_qstat;

void ctl_qstat_init(ctl_qstat *s);
void ctl_qstat_free(ctl_qstat *s);
// Pass 1: widens min/max by n values.
void ctl_qstat_add_range(ctl_qstat *s, const float *x, size_t n);
// Pass 2: counts n values in the histogram (allocated on first use; its span
// fixed from pass 1's min/max). Returns 0 or -1 (out of memory).
int ctl_qstat_add_hist(ctl_qstat *s, const float *x, size_t n);

// The clip threshold T of |x| for each histogram method (pass 2 done; the
// largest |x| when the histogram is empty).
double ctl_qstat_percentile(const ctl_qstat *s, double pct);
double ctl_qstat_entropy(const ctl_qstat *s);

// The scale and zero point of [lo, hi] (widened to hold 0): u8 asymmetric
// (zero point 0..255), or s8 symmetric (zero point 0, scale = max|.| / 127).
// An empty or all-zero range gets scale 1 (onnxruntime's choice).
void ctl_qparams(double lo, double hi, int is_u8, float *scale, int *zero_point);

#endif // CD_TOOLS_CONVCTL_QUANT_RANGE_H
