#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/reorder.h"

// One thread per NCHW16C element (grid-stride; padding included). to_blocked:
// gathers from NCHW (0 for padding channels); otherwise scatters the real
// channels back to NCHW.
__global__ void cd_hip_reorder_kernel(int to_blocked, int n, int c, int hw, const float *__restrict__ src,
                                      float *__restrict__ dst) {
    const int cb = (c + 15) / 16;
    const size_t total = (size_t)n * cb * hw * 16;
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        int lane = (int)(i % 16);
        size_t p = i / 16 % (size_t)hw;
        size_t blk = i / 16 / (size_t)hw; // n * cb + b
        int ch = (int)(blk % (size_t)cb) * 16 + lane;
        size_t img = blk / (size_t)cb;
        size_t plain = (img * (size_t)c + (size_t)ch) * (size_t)hw + p;
        if (to_blocked)
            dst[i] = ch < c ? src[plain] : 0.0f;
        else if (ch < c)
            dst[plain] = src[i];
    }
}

int cd_hip_reorder(cd_layout from, cd_layout to, int n, int c, int h, int w, const float *src, float *dst,
                   hipStream_t stream) {
    if (n < 0 || c < 0 || h < 0 || w < 0) return CD_EPARAMS;
    if ((from != CD_LAYOUT_NCHW && from != CD_LAYOUT_NCHW16C) || (to != CD_LAYOUT_NCHW && to != CD_LAYOUT_NCHW16C))
        return CD_EPARAMS;
    size_t plain = (size_t)n * c * h * w;
    size_t blocked = (size_t)n * ((c + 15) / 16) * 16 * h * w;
    if (from == to) {
        size_t bytes = (from == CD_LAYOUT_NCHW ? plain : blocked) * sizeof(float);
        if (bytes && src != dst) CD_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, stream));
        return 0;
    }
    if (blocked == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_reorder_kernel, dim3(cd_hip_grid_1d(&g, blocked, g.block_1d)), dim3(g.block_1d), 0, stream,
                  to == CD_LAYOUT_NCHW16C ? 1 : 0, n, c, h * w, src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
