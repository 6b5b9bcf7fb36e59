// Reference Gather and Tile on float activations (ONNX Gather over a tensor,
// Tile, Expand), and the CPU backend's Gather as memcpy runs.

#include "kernels/cpu/ref.h"

#include "core/limits.h"

#include <string.h>

// outer, len and inner of src around dim axis.
static void gather_dims(int rank, const int64_t *src_shape, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= src_shape[i];
    for (int i = axis + 1; i < rank; i++) *inner *= src_shape[i];
    *len = src_shape[axis];
}

void cd_ref_gather(const cd_gather_desc *d, int rank, const int64_t *src_shape, const float *src, float *dst) {
    int64_t outer, len, inner;
    gather_dims(rank, src_shape, d->axis, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < d->nidx; j++)
            for (int64_t i = 0; i < inner; i++)
                dst[(o * d->nidx + j) * inner + i] = src[(o * len + d->idx[j]) * inner + i];
}

void cd_cpu_gather_runs(const cd_gather_desc *d, int rank, const int64_t *src_shape, const float *src, float *dst) {
    int64_t outer, len, inner;
    gather_dims(rank, src_shape, d->axis, &outer, &len, &inner);
    const size_t run = (size_t)inner * sizeof(float);
    for (int64_t o = 0; o < outer; o++) {
        const float *s = src + o * len * inner;
        for (int64_t j = 0; j < d->nidx; j++, dst += inner) memcpy(dst, s + d->idx[j] * inner, run);
    }
}

void cd_ref_tile(int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape, float *dst) {
    int64_t stride[CD_MAX_RANK], idx[CD_MAX_RANK] = {0}, total = 1, t = 1;
    for (int i = rank - 1; i >= 0; i--) {
        stride[i] = t;
        t *= src_shape[i];
        total *= dst_shape[i];
    }
    for (int64_t e = 0; e < total; e++) {
        int64_t off = 0;
        for (int i = 0; i < rank; i++) off += (idx[i] % src_shape[i]) * stride[i];
        dst[e] = src[off];
        for (int i = rank - 1; i >= 0; i--) {
            if (++idx[i] < dst_shape[i]) break;
            idx[i] = 0;
        }
    }
}
