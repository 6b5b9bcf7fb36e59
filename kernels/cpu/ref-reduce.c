// Reference reductions and layer normalization (double accumulators: the
// oracle should not share the fast kernels' rounding).

#include "kernels/cpu/ref.h"

#include "core/limits.h"

#include <math.h>
#include <stdlib.h>

void cd_ref_reduce(const cd_reduce_desc *d, int rank, const int64_t *src_shape, const float *src, float *dst) {
    // dst strides of the kept dims (0 for reduced ones), in src's index space.
    int64_t dstride[CD_MAX_RANK], idx[CD_MAX_RANK] = {0}, total = 1, dtotal = 1, count = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int red = (d->mask >> i) & 1u;
        dstride[i] = red ? 0 : dtotal;
        if (red)
            count *= src_shape[i];
        else
            dtotal *= src_shape[i];
        total *= src_shape[i];
    }
    double *acc = malloc((size_t)(dtotal ? dtotal : 1) * sizeof(double));
    if (!acc) return; // a test oracle: the caller's check fails on the stale dst
    for (int64_t o = 0; o < dtotal; o++) acc[o] = d->kind == CD_REDUCE_MAX ? -INFINITY : 0.0;
    int64_t off = 0;
    for (int64_t e = 0; e < total; e++) {
        double v = src[e];
        if (d->kind == CD_REDUCE_MAX)
            acc[off] = v > acc[off] || isnan(v) ? v : acc[off];
        else
            acc[off] += v;
        for (int i = rank - 1; i >= 0; i--) {
            if (++idx[i] < src_shape[i]) {
                off += dstride[i];
                break;
            }
            off -= dstride[i] * (src_shape[i] - 1);
            idx[i] = 0;
        }
    }
    for (int64_t o = 0; o < dtotal; o++) dst[o] = (float)(d->kind == CD_REDUCE_MEAN ? acc[o] / (double)count : acc[o]);
    free(acc);
}

void cd_ref_layernorm(const cd_layernorm_desc *d, int64_t rows, const float *src, const float *gamma, const float *beta,
                      float *dst) {
    const int64_t n = d->len;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = src + r * n;
        float *y = dst + r * n;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; i++) mean += x[i];
        mean /= (double)n;
        for (int64_t i = 0; i < n; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
        var /= (double)n;
        double inv = 1.0 / sqrt(var + (double)d->eps);
        for (int64_t i = 0; i < n; i++) y[i] = (float)(((double)x[i] - mean) * inv * gamma[i] + (beta ? beta[i] : 0.0));
    }
}
