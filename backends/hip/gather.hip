#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/gather.h"

// One thread per dst element (grid-stride): contiguous writes, reads of the
// gathered rows.
__global__ void cd_hip_gather_rows_kernel(int64_t len, int64_t inner, int64_t nidx, size_t total,
                                          const int64_t *__restrict__ idx, const float *__restrict__ src,
                                          float *__restrict__ dst) {
    for (size_t e = cd_hip_global_id(); e < total; e += cd_hip_grid_stride()) {
        const int64_t i = (int64_t)(e % (size_t)inner), row = (int64_t)(e / (size_t)inner);
        const int64_t j = row % nidx, o = row / nidx;
        dst[e] = src[(o * len + idx[j]) * inner + i];
    }
}

int cd_hip_gather(int64_t outer, int64_t len, int64_t inner, int64_t nidx, const int64_t *idx, const float *src,
                  float *dst, hipStream_t stream) {
    if (outer < 1 || len < 1 || inner < 1 || nidx < 1 || !idx) return CD_EPARAMS;
    const size_t total = (size_t)outer * (size_t)nidx * (size_t)inner;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_gather_rows_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream,
                  len, inner, nidx, total, idx, src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
