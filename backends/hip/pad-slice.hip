#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/pad-slice.h"

#include <string.h>

// Per dst dim: its size, the source's size and element stride, and the map
// from a dst index i to the source index: start + i * step for a slice;
// i - start, then the pad mode outside [0, src_dim), for a pad.
typedef struct {
    int rank, pad; // pad: 1 (mode below), slice: 0
    int tile;      // 1: the source index is i mod src_dims (Tile, Expand); start, step unused
    int mode;      // cd_pad_mode
    float value;   // CONSTANT
    int64_t dims[CD_MAX_RANK], src_dims[CD_MAX_RANK], src_str[CD_MAX_RANK];
    int64_t start[CD_MAX_RANK], step[CD_MAX_RANK];
} gather_args;

// The source index of padded position i along a dim of n, -1 for the constant.
static __device__ __forceinline__ int64_t cd_hip_pad_index(int mode, int64_t i, int64_t n) {
    if (i >= 0 && i < n) return i;
    if (mode == CD_PAD_CONSTANT) return -1;
    if (mode == CD_PAD_EDGE) return i < 0 ? 0 : n - 1;
    if (n == 1) return 0;
    const int64_t period = 2 * (n - 1);
    int64_t m = i % period;
    if (m < 0) m += period;
    return m < n ? m : period - m;
}

// One thread per dst element (grid-stride): contiguous writes, gathered reads.
__global__ void cd_hip_gather_kernel(gather_args a, size_t total, const float *__restrict__ src,
                                     float *__restrict__ dst) {
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        size_t rest = i;
        int64_t si = 0;
        int outside = 0;
        for (int d = a.rank - 1; d >= 0; d--) {
            int64_t x = (int64_t)(rest % (size_t)a.dims[d]);
            rest /= (size_t)a.dims[d];
            int64_t s = a.tile  ? x % a.src_dims[d]
                        : a.pad ? cd_hip_pad_index(a.mode, x - a.start[d], a.src_dims[d])
                                : a.start[d] + x * a.step[d];
            if (s < 0)
                outside = 1;
            else
                si += s * a.src_str[d];
        }
        dst[i] = outside ? a.value : src[si];
    }
}

static int gather(gather_args *a, const int64_t *src_shape, const int64_t *dst_shape, const float *src, float *dst,
                  hipStream_t stream) {
    if (a->rank < 1 || a->rank > CD_MAX_RANK) return CD_EPARAMS;
    size_t total = 1;
    int64_t s = 1;
    for (int d = a->rank - 1; d >= 0; d--) {
        if (src_shape[d] < 1 || dst_shape[d] < 1) return CD_EPARAMS;
        a->dims[d] = dst_shape[d];
        a->src_dims[d] = src_shape[d];
        a->src_str[d] = s;
        s *= src_shape[d];
        total *= (size_t)dst_shape[d];
    }
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_gather_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream, *a,
                  total, src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}

int cd_hip_pad(const cd_pad_desc *d, int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape,
               float *dst, hipStream_t stream) {
    gather_args a;
    memset(&a, 0, sizeof a);
    a.rank = rank;
    a.pad = 1;
    a.mode = (int)d->mode;
    a.value = d->value;
    for (int i = 0; i < rank && i < CD_MAX_RANK; i++) a.start[i] = d->begin[i];
    return gather(&a, src_shape, dst_shape, src, dst, stream);
}

int cd_hip_slice(const cd_slice_desc *d, int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape,
                 float *dst, hipStream_t stream) {
    gather_args a;
    memset(&a, 0, sizeof a);
    a.rank = rank;
    for (int i = 0; i < rank && i < CD_MAX_RANK; i++) {
        a.start[i] = d->start[i];
        a.step[i] = d->step[i];
    }
    return gather(&a, src_shape, dst_shape, src, dst, stream);
}

int cd_hip_tile(int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape, float *dst,
                hipStream_t stream) {
    gather_args a;
    memset(&a, 0, sizeof a);
    a.rank = rank;
    a.tile = 1;
    return gather(&a, src_shape, dst_shape, src, dst, stream);
}
