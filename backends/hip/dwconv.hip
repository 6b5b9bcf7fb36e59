#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/dwconv.h"

// One thread per output element (grid-stride), the r x s window read
// straight from global memory (depthwise layers are memory-bound: there is
// no reuse across output channels for shared memory to capture).
__global__ void cd_hip_dwconv_kernel(cd_conv_desc d, const float *__restrict__ src, const float *__restrict__ w,
                                     const float *__restrict__ bias, const float *__restrict__ residual,
                                     float *__restrict__ dst) {
    const size_t ohw = (size_t)d.oh * d.ow;
    const size_t total = (size_t)d.n * d.k * ohw;
    const int mult = d.k / d.c;
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        int ow = (int)(i % d.ow), oh = (int)(i / d.ow % d.oh);
        int k = (int)(i / ohw % d.k), n = (int)(i / ohw / d.k);
        const float *plane = src + ((size_t)n * d.c + k / mult) * d.h * d.w;
        const float *wk = w + (size_t)k * d.r * d.s;
        float acc = 0.0f;
        for (int r = 0; r < d.r; r++) {
            int ih = oh * d.stride_h - d.pad_t + r * d.dil_h;
            if (ih < 0 || ih >= d.h) continue;
            for (int s = 0; s < d.s; s++) {
                int iw = ow * d.stride_w - d.pad_l + s * d.dil_w;
                if (iw < 0 || iw >= d.w) continue;
                acc += plane[(size_t)ih * d.w + iw] * wk[r * d.s + s];
            }
        }
        if (bias) acc += bias[k];
        if (residual) acc += residual[i];
        dst[i] = cd_hip_act(d.act, acc);
    }
}

int cd_hip_dwconv(const cd_conv_desc *d, const float *src, const float *w, const float *bias, const float *residual,
                  float *dst, hipStream_t stream) {
    if (!d || d->n < 0 || d->c < 1 || d->k < 1 || d->oh < 1 || d->ow < 1 || d->r < 1 || d->s < 1 || d->stride_h < 1 ||
        d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1)
        return CD_EPARAMS;
    if (d->groups != d->c || d->k % d->c) return CD_EUNSUPPORTED;
    size_t total = (size_t)d->n * d->k * d->oh * d->ow;
    if (total == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    const float *res = d->has_residual ? residual : NULL;
    CD_HIP_LAUNCH(cd_hip_dwconv_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream, *d,
                  src, w, bias, res, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
