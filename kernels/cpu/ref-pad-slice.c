// Reference Pad and Slice: one walk over dst in C order, the source index
// computed per element from the per-dim mapping. Plain and slow on purpose.

#include "kernels/cpu/ref.h"

#include "core/limits.h"

#include <string.h>

// The source index along one dim of size n for padded position i (already
// shifted by the pad in front), or -1 for the constant.
static int64_t pad_src_index(cd_pad_mode mode, int64_t i, int64_t n) {
    if (i >= 0 && i < n) return i;
    if (mode == CD_PAD_CONSTANT) return -1;
    if (mode == CD_PAD_EDGE) return i < 0 ? 0 : n - 1;
    // REFLECT: mirror without repeating the edge, period 2 * (n - 1).
    if (n == 1) return 0;
    int64_t period = 2 * (n - 1);
    int64_t m = i % period;
    if (m < 0) m += period;
    return m < n ? m : period - m;
}

void cd_ref_pad(const cd_pad_desc *d, int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape,
                float *dst) {
    int64_t stride[CD_MAX_RANK], idx[CD_MAX_RANK] = {0}, total = 1, t = 1;
    for (int i = rank - 1; i >= 0; i--) {
        stride[i] = t;
        t *= src_shape[i];
        total *= dst_shape[i];
    }
    for (int64_t e = 0; e < total; e++) {
        int64_t off = 0;
        int outside = 0;
        for (int i = 0; i < rank && !outside; i++) {
            int64_t si = pad_src_index(d->mode, idx[i] - d->begin[i], src_shape[i]);
            if (si < 0)
                outside = 1;
            else
                off += si * stride[i];
        }
        dst[e] = outside ? d->value : src[off];
        for (int i = rank - 1; i >= 0; i--) {
            if (++idx[i] < dst_shape[i]) break;
            idx[i] = 0;
        }
    }
}

void cd_ref_slice(const cd_slice_desc *d, int rank, const int64_t *src_shape, const void *src, const int64_t *dst_shape,
                  void *dst, size_t elem) {
    int64_t stride[CD_MAX_RANK], idx[CD_MAX_RANK] = {0}, total = 1, t = 1;
    for (int i = rank - 1; i >= 0; i--) {
        stride[i] = t;
        t *= src_shape[i];
        total *= dst_shape[i];
    }
    const char *s = src;
    char *o = dst;
    for (int64_t e = 0; e < total; e++) {
        int64_t off = 0;
        for (int i = 0; i < rank; i++) off += (d->start[i] + idx[i] * d->step[i]) * stride[i];
        memcpy(o + (size_t)e * elem, s + (size_t)off * elem, elem);
        for (int i = rank - 1; i >= 0; i--) {
            if (++idx[i] < dst_shape[i]) break;
            idx[i] = 0;
        }
    }
}
