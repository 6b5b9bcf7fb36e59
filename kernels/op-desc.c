// The output size of a conv, which every kernel and the planner agree on.

#include "kernels/op-desc.h"

int cd_conv_out_dim(int in, int kernel, int stride, int pad_begin, int pad_end, int dilation) {
    int span = dilation * (kernel - 1) + 1;
    return (in + pad_begin + pad_end - span) / stride + 1;
}

void cd_conv_out_dims(cd_conv_desc *d) {
    d->oh = cd_conv_out_dim(d->h, d->r, d->stride_h, d->pad_t, d->pad_b, d->dil_h);
    d->ow = cd_conv_out_dim(d->w, d->s, d->stride_w, d->pad_l, d->pad_r, d->dil_w);
}

cd_conv_desc cd_conv_square(int c, int h, int w, int k, int r, int stride, int pad) {
    cd_conv_desc d = {.n = 1, .c = c, .h = h, .w = w, .k = k, .r = r, .s = r};
    d.stride_h = d.stride_w = stride;
    d.pad_t = d.pad_l = d.pad_b = d.pad_r = pad;
    d.dil_h = d.dil_w = d.groups = 1;
    cd_conv_out_dims(&d);
    return d;
}
