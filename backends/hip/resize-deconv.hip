#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/resize-deconv.h"

// One thread per dst element (grid-stride); the source coordinates come from
// the formulas of kernels/op-desc.h, shared with the reference.
__global__ void cd_hip_resize_kernel(cd_resize_desc d, size_t total, const float *__restrict__ src,
                                     float *__restrict__ dst) {
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        const int ox = (int)(i % (size_t)d.ow), oy = (int)(i / (size_t)d.ow % (size_t)d.oh);
        const float *x = src + i / ((size_t)d.oh * d.ow) * ((size_t)d.h * d.w);
        const float sy = cd_resize_src_coord(d.coord, oy, d.scale_h, d.oh, d.h);
        const float sx = cd_resize_src_coord(d.coord, ox, d.scale_w, d.ow, d.w);
        if (d.mode == CD_RESIZE_NEAREST) {
            dst[i] = x[(size_t)cd_resize_nearest_index(d.nearest, sy, d.h) * d.w +
                       cd_resize_nearest_index(d.nearest, sx, d.w)];
        } else {
            int y0, y1, x0, x1;
            float ly, lx;
            cd_resize_linear_index(sy, d.h, &y0, &y1, &ly);
            cd_resize_linear_index(sx, d.w, &x0, &x1, &lx);
            const float *r0 = x + (size_t)y0 * d.w, *r1 = x + (size_t)y1 * d.w;
            dst[i] = (1.0f - lx) * (1.0f - ly) * r0[x0] + lx * (1.0f - ly) * r0[x1] + (1.0f - lx) * ly * r1[x0] +
                     lx * ly * r1[x1];
        }
    }
}

// Gather form of the transposed conv: output (oy, ox) of channel k sums the
// input pixels (i, j) of k's group with i * stride + kr * dil - pad = oy.
__global__ void cd_hip_deconv_kernel(cd_deconv_desc d, size_t total, const float *__restrict__ src,
                                     const float *__restrict__ w, const float *__restrict__ bias,
                                     float *__restrict__ dst) {
    const int cpg = d.c / d.groups, kpg = d.k / d.groups;
    for (size_t e = cd_hip_global_id(); e < total; e += cd_hip_grid_stride()) {
        const int ox = (int)(e % (size_t)d.ow), oy = (int)(e / (size_t)d.ow % (size_t)d.oh);
        const int k = (int)(e / ((size_t)d.oh * d.ow) % (size_t)d.k);
        const size_t n = e / ((size_t)d.oh * d.ow * d.k);
        const int g = k / kpg, ko = k % kpg;
        float acc = bias ? bias[k] : 0.0f;
        for (int kr = 0; kr < d.r; kr++) {
            const int ty = oy + d.pad_t - kr * d.dil_h;
            if (ty < 0 || ty % d.stride_h) continue;
            const int i = ty / d.stride_h;
            if (i >= d.h) continue;
            for (int ks = 0; ks < d.s; ks++) {
                const int tx = ox + d.pad_l - ks * d.dil_w;
                if (tx < 0 || tx % d.stride_w) continue;
                const int j = tx / d.stride_w;
                if (j >= d.w) continue;
                for (int cl = 0; cl < cpg; cl++) {
                    const int ci = g * cpg + cl;
                    acc +=
                        src[((n * d.c + ci) * d.h + i) * d.w + j] * w[(((size_t)ci * kpg + ko) * d.r + kr) * d.s + ks];
                }
            }
        }
        dst[e] = cd_act_apply(d.act, acc);
    }
}

int cd_hip_resize(const cd_resize_desc *d, int batch, const float *src, float *dst, hipStream_t stream) {
    if (batch < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->oh < 1 || d->ow < 1) return CD_EPARAMS;
    const size_t total = (size_t)batch * d->c * d->oh * d->ow;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_resize_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream, *d,
                  total, src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}

int cd_hip_deconv(const cd_deconv_desc *d, int batch, const float *src, const float *w, const float *bias, float *dst,
                  hipStream_t stream) {
    if (batch < 1 || d->c < 1 || d->k < 1 || d->groups < 1 || d->c % d->groups || d->k % d->groups || d->oh < 1 ||
        d->ow < 1 || d->stride_h < 1 || d->stride_w < 1)
        return CD_EPARAMS;
    const size_t total = (size_t)batch * d->k * d->oh * d->ow;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_deconv_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream, *d,
                  total, src, w, bias, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
