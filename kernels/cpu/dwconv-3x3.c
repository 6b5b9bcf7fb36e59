// Depthwise 3x3 on NCHW16C: packing, CPUID selection and the threaded driver
// around the row micro-kernels (f32-dwconv-3x3-*.c).

#include "kernels/cpu/dnnl.h"
#include "kernels/cpu/dwconv.h"
#include "kernels/cpu/ref.h"
#include "proto/errors.h"
#include "sparse/spmm-ukernel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cd_dwconv3x3 {
    cd_conv_desc d;          // the conv (d.n unused)
    int cb;                  // channel blocks: ceil(c / 16)
    float *w;                // [cb][9][16], zero in padded channels
    float *bias;             // [cb][16], zero in padded channels
    float lo, hi;            // clamp for the activation
    cd_dwconv3x3_row_fn row; // selected micro-kernel
    const char *isa;         // its name
};

int cd_dwconv3x3_supports(const cd_conv_desc *d, cd_layout src, cd_layout dst) {
    if (!d || src != CD_LAYOUT_NCHW16C || dst != CD_LAYOUT_NCHW16C) return 0;
    if (d->c < 1 || d->groups != d->c || d->k != d->c || d->r != 3 || d->s != 3) return 0;
    if (d->stride_h < 1 || d->stride_h > 2 || d->stride_w < 1 || d->stride_w > 2) return 0;
    if (d->dil_h != 1 || d->dil_w != 1 || d->has_residual || d->h < 1 || d->w < 1) return 0;
    if (d->pad_t < 0 || d->pad_t > 2 || d->pad_b < 0 || d->pad_b > 2 ||
        d->pad_l < 0 || d->pad_l > 2 || d->pad_r < 0 || d->pad_r > 2)
        return 0;
    if (d->act.kind != CD_ACT_NONE && d->act.kind != CD_ACT_RELU && d->act.kind != CD_ACT_CLIP)
        return 0;
    cd_conv_desc e = *d;
    cd_conv_out_dims(&e);
    return e.oh >= 1 && e.ow >= 1 && e.oh == d->oh && e.ow == d->ow;
}

int cd_dwconv3x3_create(const cd_conv_desc *d, const float *w, const float *bias,
                        int force_portable, cd_dwconv3x3 **out) {
    *out = NULL;
    if (!w || !cd_dwconv3x3_supports(d, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C)) return CD_EPARAMS;
    cd_dwconv3x3 *k = calloc(1, sizeof *k);
    if (!k) return CD_ENOMEM;
    k->d = *d;
    k->cb = (d->c + 15) / 16;
    k->w = calloc((size_t)k->cb * 9 * 16, sizeof(float));
    k->bias = calloc((size_t)k->cb * 16, sizeof(float));
    if (!k->w || !k->bias) {
        cd_dwconv3x3_free(k);
        return CD_ENOMEM;
    }
    for (int c = 0; c < d->c; c++) {
        for (int t = 0; t < 9; t++) k->w[((size_t)(c / 16) * 9 + t) * 16 + c % 16] = w[(size_t)c * 9 + t];
        if (bias) k->bias[c] = bias[c];
    }
    k->lo = -INFINITY;
    k->hi = INFINITY;
    if (d->act.kind == CD_ACT_RELU) k->lo = 0.0f;
    if (d->act.kind == CD_ACT_CLIP) {
        k->lo = d->act.alpha;
        k->hi = d->act.beta;
    }
    if (!force_portable && cd_sparse_isa_supported(CD_SPARSE_ISA_AVX512F)) { // honours CONVD_MAX_ISA
        k->row = cd_f32_dwconv3x3_row__avx512f;
        k->isa = "avx512f";
    } else {
        k->row = cd_f32_dwconv3x3_row__scalar;
        k->isa = "scalar";
    }
    *out = k;
    return 0;
}

int cd_dwconv3x3_run(const cd_dwconv3x3 *k, int batch, const float *src, float *dst) {
    if (!k || !src || !dst || batch < 1) return CD_EPARAMS;
    const cd_conv_desc *d = &k->d;
    const int cb = k->cb, oh = d->oh;
    const size_t in_plane = (size_t)d->h * d->w * 16, out_plane = (size_t)oh * d->ow * 16;
    // Work items: runs of rows of one (item, block) plane; enough of them to
    // keep every thread busy, long enough to amortise the weight loads.
    const int nth = cd_dnnl_get_threads();
    const long planes = (long)batch * cb;
    int chunks = (int)((4L * nth + planes - 1) / planes);
    if (chunks > oh) chunks = oh;
    const int rows = (oh + chunks - 1) / chunks;
    chunks = (oh + rows - 1) / rows;
    const long total = planes * chunks;
#pragma omp parallel for schedule(static) num_threads(nth)
    for (long i = 0; i < total; i++) {
        long nb = i / chunks; // n * cb + block
        int blk = (int)(nb % cb);
        int y = (int)(i % chunks) * rows;
        cd_dwconv3x3_row_args a = {
            .src = src + nb * in_plane,
            .wts = k->w + (size_t)blk * 9 * 16,
            .bias = k->bias + (size_t)blk * 16,
            .dst = dst + nb * out_plane + (size_t)y * d->ow * 16,
            .h = d->h, .w = d->w, .y = y, .ny = y + rows <= oh ? rows : oh - y, .ow = d->ow,
            .stride_h = d->stride_h, .stride_w = d->stride_w,
            .pad_t = d->pad_t, .pad_l = d->pad_l,
            .lo = k->lo, .hi = k->hi,
        };
        k->row(&a);
    }
    // Padded channels: zero weights and bias give 0, clamped into [lo, hi];
    // keep them exactly zero when the clamp excludes 0 (CLIP with alpha > 0).
    if (d->c % 16 && (k->lo > 0.0f || k->hi < 0.0f)) {
        for (long nb = cb - 1; nb < (long)batch * cb; nb += cb)
            for (size_t p = 0; p < (size_t)oh * d->ow; p++)
                memset(dst + nb * out_plane + p * 16 + d->c % 16, 0,
                       (16 - d->c % 16) * sizeof(float));
    }
    return 0;
}

const char *cd_dwconv3x3_isa(const cd_dwconv3x3 *k) { return k->isa; }

void cd_dwconv3x3_free(cd_dwconv3x3 *k) {
    if (!k) return;
    free(k->w);
    free(k->bias);
    free(k);
}
