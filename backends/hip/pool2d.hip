#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/pool2d.h"

#include <float.h>

// One thread per output element (grid-stride). Window cells beyond the
// padded input (ceil mode) count for neither divisor, as in cd_ref_pool2d.
__global__ void cd_hip_pool2d_kernel(cd_pool_desc d, const float *__restrict__ src, float *__restrict__ dst) {
    const size_t ohw = (size_t)d.oh * d.ow;
    const size_t total = (size_t)d.n * d.c * ohw;
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        int ow = (int)(i % d.ow), oh = (int)(i / d.ow % d.oh);
        const float *plane = src + i / ohw * d.h * d.w;
        float acc = 0.0f, mx = -FLT_MAX;
        int count = 0, padded = 0;
        for (int r = 0; r < d.kh; r++) {
            int ih = oh * d.stride_h - d.pad_t + r * d.dil_h;
            for (int s = 0; s < d.kw; s++) {
                int iw = ow * d.stride_w - d.pad_l + s * d.dil_w;
                if (ih < -d.pad_t || ih >= d.h + d.pad_b || iw < -d.pad_l || iw >= d.w + d.pad_r) continue;
                padded++;
                if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
                float v = plane[(size_t)ih * d.w + iw];
                acc += v;
                mx = fmaxf(mx, v);
                count++;
            }
        }
        if (d.kind == CD_POOL_MAX)
            dst[i] = mx;
        else
            dst[i] = acc / (float)(d.count_include_pad ? padded : (count ? count : 1));
    }
}

int cd_hip_pool2d(const cd_pool_desc *d, const float *src, float *dst, hipStream_t stream) {
    if (!d || d->n < 0 || d->c < 0 || d->oh < 1 || d->ow < 1 || d->kh < 1 || d->kw < 1 || d->stride_h < 1 ||
        d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1 || (d->kind != CD_POOL_MAX && d->kind != CD_POOL_AVG))
        return CD_EPARAMS;
    size_t total = (size_t)d->n * d->c * d->oh * d->ow;
    if (total == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_pool2d_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream, *d,
                  src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
