#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/concat.h"
#include "backends/hip/device.h"

// Copies src [outer, cols] into the columns [col0, col0 + cols) of dst
// [outer, ld]; one thread per source element (grid-stride).
__global__ void cd_hip_concat_kernel(int64_t outer, int64_t cols, int64_t ld, int64_t col0,
                                     const float *__restrict__ src, float *__restrict__ dst) {
    const size_t total = (size_t)outer * (size_t)cols;
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        size_t o = i / (size_t)cols, j = i % (size_t)cols;
        dst[o * (size_t)ld + (size_t)col0 + j] = src[i];
    }
}

int cd_hip_concat(int n, int64_t outer, const int64_t *cols, const float *const *srcs, float *dst, hipStream_t stream) {
    if (n < 0 || outer < 0) return CD_EPARAMS;
    int64_t ld = 0;
    for (int j = 0; j < n; j++) {
        if (cols[j] < 0) return CD_EPARAMS;
        ld += cols[j];
    }
    if (outer == 0 || ld == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    int64_t col0 = 0;
    for (int j = 0; j < n; j++) {
        size_t total = (size_t)outer * (size_t)cols[j];
        if (total) {
            CD_HIP_LAUNCH(cd_hip_concat_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0,
                          stream, outer, cols[j], ld, col0, srcs[j], dst);
            CD_HIP_CHECK(hipGetLastError());
        }
        col0 += cols[j];
    }
    return 0;
}
