// Reference Resize and ConvTranspose: plain loops over the ONNX formulas,
// the oracle of the backends' kernels. Slow on purpose.

#include "kernels/cpu/ref.h"

#include <string.h>

void cd_ref_resize(const cd_resize_desc *d, int batch, const float *src, float *dst) {
    const size_t plane = (size_t)d->h * d->w, oplane = (size_t)d->oh * d->ow;
    for (size_t p = 0; p < (size_t)batch * d->c; p++) {
        const float *x = src + p * plane;
        float *y = dst + p * oplane;
        for (int oy = 0; oy < d->oh; oy++) {
            const float sy = cd_resize_src_coord(d->coord, oy, d->scale_h, d->oh, d->h);
            for (int ox = 0; ox < d->ow; ox++) {
                const float sx = cd_resize_src_coord(d->coord, ox, d->scale_w, d->ow, d->w);
                float v;
                if (d->mode == CD_RESIZE_NEAREST) {
                    v = x[(size_t)cd_resize_nearest_index(d->nearest, sy, d->h) * d->w +
                          cd_resize_nearest_index(d->nearest, sx, d->w)];
                } else {
                    int y0, y1, x0, x1;
                    float ly, lx;
                    cd_resize_linear_index(sy, d->h, &y0, &y1, &ly);
                    cd_resize_linear_index(sx, d->w, &x0, &x1, &lx);
                    const float *r0 = x + (size_t)y0 * d->w, *r1 = x + (size_t)y1 * d->w;
                    v = (1.0f - lx) * (1.0f - ly) * r0[x0] + lx * (1.0f - ly) * r0[x1] + (1.0f - lx) * ly * r1[x0] +
                        lx * ly * r1[x1];
                }
                y[(size_t)oy * d->ow + ox] = v;
            }
        }
    }
}

// Scatter form: every input pixel adds its weighted copies into the output.
void cd_ref_deconv(const cd_deconv_desc *d, int batch, const float *src, const float *w, const float *bias,
                   float *dst) {
    const int cpg = d->c / d->groups, kpg = d->k / d->groups;
    const size_t oplane = (size_t)d->oh * d->ow, plane = (size_t)d->h * d->w;
    for (int n = 0; n < batch; n++) {
        float *y = dst + (size_t)n * d->k * oplane;
        for (int k = 0; k < d->k; k++)
            for (size_t i = 0; i < oplane; i++) y[(size_t)k * oplane + i] = bias ? bias[k] : 0.0f;
        for (int ci = 0; ci < d->c; ci++) {
            const int g = ci / cpg;
            const float *x = src + ((size_t)n * d->c + ci) * plane;
            for (int ko = 0; ko < kpg; ko++) {
                const float *wk = w + ((size_t)ci * kpg + ko) * d->r * d->s;
                float *yk = y + (size_t)(g * kpg + ko) * oplane;
                for (int i = 0; i < d->h; i++)
                    for (int j = 0; j < d->w; j++) {
                        const float xv = x[(size_t)i * d->w + j];
                        for (int kr = 0; kr < d->r; kr++) {
                            const int oy = i * d->stride_h + kr * d->dil_h - d->pad_t;
                            if (oy < 0 || oy >= d->oh) continue;
                            for (int ks = 0; ks < d->s; ks++) {
                                const int ox = j * d->stride_w + ks * d->dil_w - d->pad_l;
                                if (ox < 0 || ox >= d->ow) continue;
                                yk[(size_t)oy * d->ow + ox] += xv * wk[kr * d->s + ks];
                            }
                        }
                    }
            }
        }
        for (size_t i = 0; i < (size_t)d->k * oplane; i++) y[i] = cd_act_apply(d->act, y[i]);
    }
}
