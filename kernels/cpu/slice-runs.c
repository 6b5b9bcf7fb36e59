// Slice as contiguous runs: the trailing dims a slice takes whole (and the
// one before them when its step is 1) are one memcpy per run. The fast CPU
// path of CD_BOP_SLICE (ShuffleNet's channel split is one run per batch
// item); cd_ref_slice stays the oracle.

#include "kernels/cpu/ref.h"

#include "core/limits.h"

#include <string.h>

void cd_cpu_slice_runs(const cd_slice_desc *d, int rank, const int64_t *src_shape, const float *src,
                       const int64_t *dst_shape, float *dst) {
    int64_t sstride[CD_MAX_RANK], t = 1;
    for (int i = rank - 1; i >= 0; i--) {
        sstride[i] = t;
        t *= src_shape[i];
    }
    // Dims k..rank-1 are copied as one run of `run` elements.
    int k = rank;
    int64_t run = 1;
    while (k > 0 && d->start[k - 1] == 0 && d->step[k - 1] == 1 && dst_shape[k - 1] == src_shape[k - 1])
        run *= dst_shape[--k];
    if (k > 0 && d->step[k - 1] == 1) run *= dst_shape[--k];
    int64_t base = 0, outer = 1, idx[CD_MAX_RANK] = {0};
    for (int i = 0; i < rank; i++) base += d->start[i] * sstride[i];
    for (int i = 0; i < k; i++) outer *= dst_shape[i];
    for (int64_t o = 0; o < outer; o++) {
        int64_t off = base;
        for (int i = 0; i < k; i++) off += idx[i] * d->step[i] * sstride[i];
        memcpy(dst + o * run, src + off, (size_t)run * sizeof(float));
        for (int i = k - 1; i >= 0; i--) {
            if (++idx[i] < dst_shape[i]) break;
            idx[i] = 0;
        }
    }
}
