#include "kernels/cpu/ref.h"

#include <float.h>

static int pool_out_dim(int in, int k, int stride, int pb, int pe, int dil, int ceil_mode) {
    int span = dil * (k - 1) + 1;
    int num = in + pb + pe - span;
    int out = (ceil_mode ? (num + stride - 1) / stride : num / stride) + 1;
    // ONNX/PyTorch rule: the last window must start inside the input or the
    // begin padding.
    if (ceil_mode && (out - 1) * stride >= in + pb) out--;
    return out;
}

void cd_pool_out_dims(cd_pool_desc *d) {
    d->oh = pool_out_dim(d->h, d->kh, d->stride_h, d->pad_t, d->pad_b, d->dil_h, d->ceil_mode);
    d->ow = pool_out_dim(d->w, d->kw, d->stride_w, d->pad_l, d->pad_r, d->dil_w, d->ceil_mode);
}

void cd_ref_pool2d(const cd_pool_desc *d, const float *src, float *dst) {
    for (int n = 0; n < d->n; n++)
        for (int c = 0; c < d->c; c++) {
            const float *plane = src + ((size_t)n * d->c + c) * d->h * d->w;
            for (int oh = 0; oh < d->oh; oh++)
                for (int ow = 0; ow < d->ow; ow++) {
                    double acc = 0.0;
                    float mx = -FLT_MAX;
                    int count = 0, padded = 0;
                    for (int r = 0; r < d->kh; r++) {
                        int ih = oh * d->stride_h - d->pad_t + r * d->dil_h;
                        for (int s = 0; s < d->kw; s++) {
                            int iw = ow * d->stride_w - d->pad_l + s * d->dil_w;
                            // Windows may run past the padded input in ceil
                            // mode; those cells count for neither divisor.
                            if (ih < -d->pad_t || ih >= d->h + d->pad_b || iw < -d->pad_l || iw >= d->w + d->pad_r)
                                continue;
                            padded++;
                            if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w) continue;
                            float v = plane[(size_t)ih * d->w + iw];
                            acc += v;
                            if (v > mx) mx = v;
                            count++;
                        }
                    }
                    float out;
                    if (d->kind == CD_POOL_MAX)
                        out = mx;
                    else
                        out = (float)(acc / (d->count_include_pad ? padded : (count ? count : 1)));
                    dst[(((size_t)n * d->c + c) * d->oh + oh) * d->ow + ow] = out;
                }
        }
}
