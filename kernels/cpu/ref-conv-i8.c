// The int8 convolution's reference (kernels/op-desc.h cd_conv_quant): exact
// s32 accumulators, then the shared epilogue. The oracle of every int8 kernel.

#include "kernels/cpu/ref.h"

#include <stdlib.h>

void cd_ref_conv2d_i8_acc(const cd_conv_desc *d, const int32_t *xq, int in_zp, const int8_t *wq, int32_t *acc) {
    const int cpg = d->c / d->groups, kpg = d->k / d->groups;
    for (int n = 0; n < d->n; n++)
        for (int k = 0; k < d->k; k++) {
            const int g = k / kpg;
            for (int oh = 0; oh < d->oh; oh++)
                for (int ow = 0; ow < d->ow; ow++) {
                    int64_t a = 0; // the kernels' s32 must equal this; int64 catches an overflow
                    for (int c = 0; c < cpg; c++)
                        for (int r = 0; r < d->r; r++) {
                            int ih = oh * d->stride_h - d->pad_t + r * d->dil_h;
                            if (ih < 0 || ih >= d->h) continue;
                            for (int s = 0; s < d->s; s++) {
                                int iw = ow * d->stride_w - d->pad_l + s * d->dil_w;
                                if (iw < 0 || iw >= d->w) continue;
                                size_t si = (((size_t)n * d->c + g * cpg + c) * d->h + ih) * d->w + iw;
                                size_t wi = (((size_t)k * cpg + c) * d->r + r) * d->s + s;
                                a += (int64_t)(xq[si] - in_zp) * wq[wi];
                            }
                        }
                    acc[(((size_t)n * d->k + k) * d->oh + oh) * d->ow + ow] = (int32_t)a;
                }
        }
}

// Residual element i as a float (its grid value when stored as integers).
static float residual_at(const cd_conv_quant *q, const void *residual, size_t i) {
    if (!q->res_int) return ((const float *)residual)[i];
    float r = q->res_signed ? (float)((const int8_t *)residual)[i] : (float)((const uint8_t *)residual)[i];
    return (r - (float)q->res_zp) * q->res_scale;
}

void cd_ref_conv2d_i8(const cd_conv_desc *d, const cd_conv_quant *q, const void *src, const int8_t *wq,
                      const float *bias, const void *residual, void *dst) {
    size_t nin = (size_t)d->n * d->c * d->h * d->w, nout = (size_t)d->n * d->k * d->oh * d->ow;
    int32_t *xq = malloc(sizeof(int32_t) * (nin ? nin : 1)), *acc = malloc(sizeof(int32_t) * (nout ? nout : 1));
    if (!xq || !acc) abort(); // a test oracle: no caller handles a failure
    for (size_t i = 0; i < nin; i++)
        xq[i] = !q->src_int    ? cd_conv_quant_in(q, ((const float *)src)[i])
                : q->in_signed ? ((const int8_t *)src)[i]
                               : ((const uint8_t *)src)[i];
    cd_ref_conv2d_i8_acc(d, xq, q->in_zp, wq, acc);
    size_t plane = (size_t)d->oh * d->ow;
    for (size_t i = 0; i < nout; i++) {
        int k = (int)(i / plane % (size_t)d->k);
        float mult = q->in_scale * q->w_scale[k];
        float y0 = fmaf((float)acc[i], mult, bias ? bias[k] : 0.0f);
        y0 = cd_conv_quant_mid(q, d->border ? y0 + d->border[i % (plane * (size_t)d->k)] : y0);
        float y = cd_conv_quant_y(0, 0.0f, y0, residual ? residual_at(q, residual, i) : 0.0f,
                                  d->has_residual && residual, d->act);
        float v = cd_conv_quant_out(q, y);
        if (!q->dst_int)
            ((float *)dst)[i] = v;
        else if (q->out_signed)
            ((int8_t *)dst)[i] = (int8_t)v;
        else
            ((uint8_t *)dst)[i] = (uint8_t)v;
    }
    free(xq);
    free(acc);
}
