// The behaviour kernels/op-desc.h defines (its one function).

#include "kernels/op-desc.h"

#include <math.h>

float cd_act_apply(cd_activation act, float x) {
    switch (act.kind) {
    case CD_ACT_NONE: return x;
    case CD_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case CD_ACT_CLIP: return fminf(fmaxf(x, act.alpha), act.beta);
    case CD_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case CD_ACT_HARDSIGMOID: return fmaxf(0.0f, fminf(1.0f, act.alpha * x + act.beta));
    case CD_ACT_HARDSWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case CD_ACT_LEAKYRELU: return x >= 0.0f ? x : act.alpha * x;
    }
    return x;
}

int cd_conv_out_dim(int in, int kernel, int stride, int pad_begin, int pad_end,
                    int dilation) {
    int span = dilation * (kernel - 1) + 1;
    return (in + pad_begin + pad_end - span) / stride + 1;
}

void cd_conv_out_dims(cd_conv_desc *d) {
    d->oh = cd_conv_out_dim(d->h, d->r, d->stride_h, d->pad_t, d->pad_b, d->dil_h);
    d->ow = cd_conv_out_dim(d->w, d->s, d->stride_w, d->pad_l, d->pad_r, d->dil_w);
}
