#include "backends/hip/vendor.h"

#include "backends/hip/bias-act.h"
#include "backends/hip/check.h"
#include "backends/hip/conv2d.h"
#include "backends/hip/dwconv.h"
#include "backends/hip/im2col.h"
#include "backends/hip/sgemm.h"

static int conv_is_depthwise(const cd_conv_desc *d) { return d->groups > 1 && d->groups == d->c && d->k % d->c == 0; }

static int conv_is_pointwise(const cd_conv_desc *d) {
    return d->r == 1 && d->s == 1 && d->stride_h == 1 && d->stride_w == 1 && d->pad_t == 0 && d->pad_l == 0 &&
           d->pad_b == 0 && d->pad_r == 0;
}

static int conv_desc_ok(const cd_conv_desc *d) {
    return d && d->n >= 0 && d->c >= 1 && d->k >= 1 && d->groups >= 1 && d->c % d->groups == 0 &&
           d->k % d->groups == 0 && d->r >= 1 && d->s >= 1 && d->oh >= 1 && d->ow >= 1 && d->stride_h >= 1 &&
           d->stride_w >= 1 && d->dil_h >= 1 && d->dil_w >= 1;
}

size_t cd_hip_conv2d_workspace(const cd_conv_desc *d) {
    if (!conv_desc_ok(d) || conv_is_depthwise(d) || conv_is_pointwise(d)) return 0;
    // One group's im2col for the whole batch; groups reuse it in turn.
    return (size_t)d->n * (d->c / d->groups) * d->r * d->s * d->oh * d->ow * sizeof(float);
}

int cd_hip_conv2d(const cd_conv_desc *d, const float *src, const float *w, const float *bias, const float *residual,
                  float *dst, void *workspace, size_t workspace_bytes, hipStream_t stream) {
    if (!conv_desc_ok(d)) return CD_EPARAMS;
    if (d->n == 0) return 0;
    if (conv_is_depthwise(d)) return cd_hip_dwconv(d, src, w, bias, residual, dst, stream);
    if (workspace_bytes < cd_hip_conv2d_workspace(d)) return CD_EPARAMS;
    const int cpg = d->c / d->groups, kpg = d->k / d->groups;
    const ptrdiff_t hw = (ptrdiff_t)d->h * d->w, ohw = (ptrdiff_t)d->oh * d->ow;
    const ptrdiff_t rows = (ptrdiff_t)cpg * d->r * d->s; // GEMM k
    const int pointwise = conv_is_pointwise(d);
    float *col = static_cast<float *>(workspace);
    for (int g = 0; g < d->groups; g++) {
        cd_hip_gemm_desc gd;
        gd.m = kpg;
        gd.n = (int)ohw;
        gd.k = (int)rows;
        gd.batch = d->n;
        gd.a_rs = rows;
        gd.a_cs = 1;
        gd.a_bs = 0; // the weights are shared by the batch
        gd.ldc = ohw;
        gd.c_bs = (ptrdiff_t)d->k * ohw;
        gd.alpha = 1.0f;
        gd.beta = 0.0f;
        const float *b;
        if (pointwise) { // the activations are the GEMM's B as they are
            b = src + (ptrdiff_t)g * cpg * hw;
            gd.b_rs = hw;
            gd.b_cs = 1;
            gd.b_bs = (ptrdiff_t)d->c * hw;
        } else {
            int rc = cd_hip_im2col(d, g, src, col, stream);
            if (rc) return rc;
            b = col;
            gd.b_rs = ohw;
            gd.b_cs = 1;
            gd.b_bs = rows * ohw;
        }
        int rc = cd_hip_sgemm(&gd, w + (ptrdiff_t)g * kpg * rows, b, dst + (ptrdiff_t)g * kpg * ohw, stream);
        if (rc) return rc;
    }
    const float *res = d->has_residual ? residual : NULL;
    if (!bias && !res && d->act.kind == CD_ACT_NONE) return 0;
    return cd_hip_bias_act(d->n, d->k, ohw, dst, bias, res, d->act, dst, stream);
}
