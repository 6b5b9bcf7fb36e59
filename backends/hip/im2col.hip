#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/im2col.h"

// Geometry of one im2col, passed by value to the kernel.
typedef struct {
    int n, c, h, w; // input (full channel count c)
    int c0, cpg;    // first channel of the group, channels per group
    int r, s, oh, ow;
    int stride_h, stride_w, pad_t, pad_l, dil_h, dil_w;
} im2col_args;

// One thread per col element (grid-stride).
__global__ void cd_hip_im2col_kernel(im2col_args a, const float *__restrict__ src, float *__restrict__ col) {
    const size_t ohw = (size_t)a.oh * a.ow;
    const size_t rows = (size_t)a.cpg * a.r * a.s;
    const size_t total = (size_t)a.n * rows * ohw;
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        size_t p = i % ohw;
        size_t row = i / ohw % rows;
        size_t n = i / ohw / rows;
        int ow = (int)(p % a.ow), oh = (int)(p / a.ow);
        int s = (int)(row % a.s), r = (int)(row / a.s % a.r), c = (int)(row / a.s / a.r);
        int ih = oh * a.stride_h - a.pad_t + r * a.dil_h;
        int iw = ow * a.stride_w - a.pad_l + s * a.dil_w;
        float v = 0.0f;
        if (ih >= 0 && ih < a.h && iw >= 0 && iw < a.w) v = src[(((size_t)n * a.c + a.c0 + c) * a.h + ih) * a.w + iw];
        col[i] = v;
    }
}

int cd_hip_im2col(const cd_conv_desc *d, int group, const float *src, float *col, hipStream_t stream) {
    if (!d || d->groups < 1 || d->c % d->groups || group < 0 || group >= d->groups || d->n < 1 || d->oh < 1 ||
        d->ow < 1 || d->r < 1 || d->s < 1 || d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1)
        return CD_EPARAMS;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    im2col_args a;
    a.n = d->n;
    a.c = d->c;
    a.h = d->h;
    a.w = d->w;
    a.cpg = d->c / d->groups;
    a.c0 = group * a.cpg;
    a.r = d->r;
    a.s = d->s;
    a.oh = d->oh;
    a.ow = d->ow;
    a.stride_h = d->stride_h;
    a.stride_w = d->stride_w;
    a.pad_t = d->pad_t;
    a.pad_l = d->pad_l;
    a.dil_h = d->dil_h;
    a.dil_w = d->dil_w;
    size_t total = (size_t)a.n * a.cpg * a.r * a.s * a.oh * a.ow;
    CD_HIP_LAUNCH(cd_hip_im2col_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream, a,
                  src, col);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
