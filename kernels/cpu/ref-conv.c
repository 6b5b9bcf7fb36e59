#include "kernels/cpu/ref.h"

#include <math.h>

void cd_ref_conv2d(const cd_conv_desc *d, const float *src, const float *w, const float *bias, const float *residual,
                   float *dst) {
    const int cpg = d->c / d->groups; // input channels per group
    const int kpg = d->k / d->groups; // output channels per group
    for (int n = 0; n < d->n; n++)
        for (int k = 0; k < d->k; k++) {
            const int g = k / kpg;
            for (int oh = 0; oh < d->oh; oh++)
                for (int ow = 0; ow < d->ow; ow++) {
                    // Accumulate in double so the reference is the accurate side.
                    double acc = bias ? bias[k] : 0.0;
                    for (int c = 0; c < cpg; c++)
                        for (int r = 0; r < d->r; r++) {
                            int ih = oh * d->stride_h - d->pad_t + r * d->dil_h;
                            if (ih < 0 || ih >= d->h) continue;
                            for (int s = 0; s < d->s; s++) {
                                int iw = ow * d->stride_w - d->pad_l + s * d->dil_w;
                                if (iw < 0 || iw >= d->w) continue;
                                size_t si = (((size_t)n * d->c + g * cpg + c) * d->h + ih) * d->w + iw;
                                size_t wi = (((size_t)k * cpg + c) * d->r + r) * d->s + s;
                                acc += (double)src[si] * (double)w[wi];
                            }
                        }
                    size_t di = (((size_t)n * d->k + k) * d->oh + oh) * d->ow + ow;
                    if (d->border) acc += d->border[((size_t)k * d->oh + oh) * d->ow + ow];
                    if (d->has_residual && residual) acc += residual[di];
                    dst[di] = cd_act_apply(d->act, (float)acc);
                }
        }
}
