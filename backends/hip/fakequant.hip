#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/fakequant.h"

// One thread per element (grid-stride). No __restrict__: dst may alias src.
__global__ void cd_hip_fakequant_kernel(size_t total, size_t channels, size_t inner, const float *src,
                                        const float *scale, const float *zero_point, float qmin, float qmax,
                                        float *dst) {
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        size_t c = channels > 1 ? i / inner % channels : 0;
        dst[i] = cd_fakequant_apply(src[i], scale[c], zero_point[c], qmin, qmax);
    }
}

int cd_hip_fakequant(int64_t total, int64_t channels, int64_t inner, const float *src, const float *scale,
                     const float *zero_point, float qmin, float qmax, float *dst, hipStream_t stream) {
    if (total < 0 || channels < 1 || inner < 1) return CD_EPARAMS;
    if (total == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_fakequant_kernel, dim3(cd_hip_grid_1d(&g, (size_t)total, g.block_1d)), dim3(g.block_1d), 0,
                  stream, (size_t)total, (size_t)channels, (size_t)inner, src, scale, zero_point, qmin, qmax, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
