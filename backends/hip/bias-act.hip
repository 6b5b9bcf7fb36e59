#include "backends/hip/vendor.h"

#include "backends/hip/bias-act.h"
#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"

// One thread per element (grid-stride). No __restrict__: dst may alias src.
__global__ void cd_hip_bias_act_kernel(size_t total, int64_t c, int64_t inner, const float *src, const float *bias,
                                       const float *residual, cd_activation act, float *dst) {
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        float v = src[i];
        if (bias) v += bias[i / (size_t)inner % (size_t)c];
        if (residual) v += residual[i];
        dst[i] = cd_hip_act(act, v);
    }
}

int cd_hip_bias_act(int64_t n, int64_t c, int64_t inner, const float *src, const float *bias, const float *residual,
                    cd_activation act, float *dst, hipStream_t stream) {
    if (n < 0 || c < 0 || inner < 0) return CD_EPARAMS;
    size_t total = (size_t)n * (size_t)c * (size_t)inner;
    if (total == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_bias_act_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream,
                  total, c, inner, src, bias, residual, act, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
