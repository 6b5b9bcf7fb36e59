// Calibration ranges for convctl quantize (quant-range.h).

#include "tools/convctl/quant-range.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void ctl_qstat_init(ctl_qstat *s) {
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    s->max = -INFINITY;
}

void ctl_qstat_free(ctl_qstat *s) {
    free(s->hist);
    s->hist = NULL;
}

void ctl_qstat_add_range(ctl_qstat *s, const float *x, size_t n) {
    float lo = (float)s->min, hi = (float)s->max;
    for (size_t i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    s->min = lo;
    s->max = hi;
    s->count += n;
}

int ctl_qstat_add_hist(ctl_qstat *s, const float *x, size_t n) {
    if (!s->hist) {
        if (!(s->hist = calloc(CTL_QHIST_BINS, sizeof *s->hist))) return -1;
        s->top = s->count ? fmax(fabs(s->min), fabs(s->max)) : 0;
    }
    if (!(s->top > 0)) {
        s->hist[0] += n;
        return 0;
    }
    const double per_bin = CTL_QHIST_BINS / s->top;
    for (size_t i = 0; i < n; i++) {
        double b = fabs((double)x[i]) * per_bin;
        int bi = b >= CTL_QHIST_BINS ? CTL_QHIST_BINS - 1 : (int)b; // pass 1's max lands in the last bin
        s->hist[bi]++;
    }
    return 0;
}

static double largest_abs(const ctl_qstat *s) { return s->count ? fmax(fabs(s->min), fabs(s->max)) : 0; }

double ctl_qstat_percentile(const ctl_qstat *s, double pct) {
    if (!s->hist || !(s->top > 0)) return largest_abs(s);
    uint64_t total = 0;
    for (int i = 0; i < CTL_QHIST_BINS; i++) total += s->hist[i];
    if (!total) return largest_abs(s);
    const double want = pct / 100.0 * (double)total, width = s->top / CTL_QHIST_BINS;
    double seen = 0;
    for (int i = 0; i < CTL_QHIST_BINS; i++) {
        double next = seen + (double)s->hist[i];
        if (next >= want && s->hist[i]) // interpolate inside the bin
            return width * (i + (want - seen) / (double)s->hist[i]);
        seen = next;
    }
    return s->top;
}

// KL(p || q) of two unnormalised distributions over n bins; a bin where p
// has mass and q none is charged as if q held a tiny mass there (smoothing).
static double kl_divergence(const double *p, const double *q, int n) {
    double sp = 0, sq = 0;
    for (int i = 0; i < n; i++) sp += p[i], sq += q[i];
    if (!(sp > 0) || !(sq > 0)) return INFINITY;
    double kl = 0;
    for (int i = 0; i < n; i++) {
        if (!(p[i] > 0)) continue;
        double pi = p[i] / sp, qi = q[i] > 0 ? q[i] / sq : 1e-10;
        kl += pi * log(pi / qi);
    }
    return kl;
}

double ctl_qstat_entropy(const ctl_qstat *s) {
    if (!s->hist || !(s->top > 0)) return largest_abs(s);
    const int nb = CTL_QHIST_BINS, nq = CTL_QENTROPY_LEVELS;
    double *h = malloc(sizeof(double) * nb), *p = malloc(sizeof(double) * nb), *q = malloc(sizeof(double) * nb);
    if (!h || !p || !q) {
        free(h);
        free(p);
        free(q);
        return largest_abs(s);
    }
    // The spike of exact zeros (every ReLU output) would dominate both
    // distributions and favour the tightest clip: bin 0 counts like bin 1,
    // as NVIDIA's pytorch-quantization does.
    for (int j = 0; j < nb; j++) h[j] = (double)s->hist[j];
    h[0] = h[1];
    double best_kl = INFINITY;
    int best = nb;
    // Clip after bin i: p is the histogram's first i bins with everything
    // beyond folded into the last; q is those i bins merged into nq levels
    // and spread back evenly over the bins that were not empty.
    double rest = 0;
    for (int j = nq; j < nb; j++) rest += h[j];
    for (int i = nq; i <= nb; i++) {
        for (int j = 0; j < i; j++) p[j] = h[j];
        p[i - 1] += rest;
        for (int level = 0; level < nq; level++) {
            int lo = (int)((int64_t)level * i / nq), hi = (int)((int64_t)(level + 1) * i / nq);
            double sum = 0;
            int nonzero = 0;
            for (int j = lo; j < hi; j++) {
                sum += h[j];
                nonzero += h[j] != 0;
            }
            for (int j = lo; j < hi; j++) q[j] = h[j] != 0 && nonzero ? sum / nonzero : 0;
        }
        double kl = kl_divergence(p, q, i);
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
        if (i < nb) rest -= h[i];
    }
    free(h);
    free(p);
    free(q);
    return s->top * best / nb;
}

void ctl_qparams(double lo, double hi, int is_u8, float *scale, int *zero_point) {
    lo = fmin(lo, 0.0);
    hi = fmax(hi, 0.0);
    if (!isfinite(lo) || !isfinite(hi)) lo = hi = 0;
    if (is_u8) {
        double sc = (hi - lo) / 255.0;
        if (!(sc > FLT_MIN)) {
            *scale = 1.0f;
            *zero_point = 0;
            return;
        }
        *scale = (float)sc;
        double z = nearbyint(-lo / (double)*scale);
        *zero_point = (int)fmin(fmax(z, 0.0), 255.0);
    } else {
        double a = fmax(fabs(lo), fabs(hi)) / 127.0;
        *scale = a > FLT_MIN ? (float)a : 1.0f;
        *zero_point = 0;
    }
}
