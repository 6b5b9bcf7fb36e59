// A conv's kernel cropped to the taps that can read the input.
//
// With a dilation as large as the input (DeepLabV3's ASPP: 3x3 at dilation
// 24 or 36 on a 14x14 map, pads equal to the dilation), every output
// position reads only zero padding through the off-centre taps: the conv
// equals a 1x1 conv with the centre weights, and runs as one (a 1x1 kernel
// instead of oneDNN's gemm path for large dilations, 9x fewer flops). In
// general, per spatial dim, a tap k reads input row o*stride - pad_begin +
// k*dil for the output rows o; taps for which that row is outside the input
// at every o are dropped from both ends of the kernel, and the padding is
// shifted so that the taps left read the same rows. Plans are made per input
// size, so the rewrite holds for the size the lowering sees.

#include "runtime/lower-internal.h"

// Does tap k of one dim read the input (size in) at some output row?
static int tap_live(int k, int in, int out, int stride, int pad_begin, int dil) {
    // Rows read: k*dil - pad_begin + o*stride, o = 0..out-1 (increasing in o).
    const int64_t first = (int64_t)k * dil - pad_begin;
    const int64_t last = first + (int64_t)(out - 1) * stride;
    if (last < 0 || first >= in) return 0;
    // Some row in [0, in) must be hit: the first o with row >= 0.
    const int64_t o = first >= 0 ? 0 : (-first + stride - 1) / stride;
    return first + o * stride < in && o < out;
}

// The live taps of one dim as [*lo, *hi]; 0 when none is live.
static int live_range(int taps, int in, int out, int stride, int pad_begin, int dil, int *lo, int *hi) {
    *lo = -1, *hi = -1;
    for (int k = 0; k < taps; k++)
        if (tap_live(k, in, out, stride, pad_begin, dil)) {
            if (*lo < 0) *lo = k;
            *hi = k;
        }
    return *lo >= 0;
}

// The new end padding that keeps out rows with taps at dil; -1 if negative.
static int end_pad(int in, int out, int stride, int pad_begin, int taps, int dil) {
    const int64_t p = (int64_t)(out - 1) * stride + (int64_t)(taps - 1) * dil + 1 - in - pad_begin;
    return p >= 0 && p <= INT32_MAX ? (int)p : -1;
}

int cd_conv_crop_dead_taps(cd_conv_desc *d, float **w) {
    int y0, y1, x0, x1;
    if (!live_range(d->r, d->h, d->oh, d->stride_h, d->pad_t, d->dil_h, &y0, &y1) ||
        !live_range(d->s, d->w, d->ow, d->stride_w, d->pad_l, d->dil_w, &x0, &x1))
        return 0; // an all-padding conv: left as it is (it computes its bias)
    const int r = y1 - y0 + 1, s = x1 - x0 + 1;
    if (r == d->r && s == d->s) return 0;
    const int pt = d->pad_t - y0 * d->dil_h, pl = d->pad_l - x0 * d->dil_w;
    const int dh = r == 1 ? 1 : d->dil_h, dw = s == 1 ? 1 : d->dil_w;
    const int pb = end_pad(d->h, d->oh, d->stride_h, pt, r, dh), pr = end_pad(d->w, d->ow, d->stride_w, pl, s, dw);
    if (pt < 0 || pl < 0 || pb < 0 || pr < 0) return 0; // the kernels take no negative padding
    const size_t planes = (size_t)d->k * (size_t)(d->c / d->groups);
    float *cw = malloc(planes * (size_t)r * (size_t)s * sizeof(float));
    if (!cw) return CD_ENOMEM;
    for (size_t p = 0; p < planes; p++)
        for (int i = 0; i < r; i++)
            for (int j = 0; j < s; j++)
                cw[(p * (size_t)r + (size_t)i) * (size_t)s + (size_t)j] =
                    (*w)[(p * (size_t)d->r + (size_t)(y0 + i)) * (size_t)d->s + (size_t)(x0 + j)];
    free(*w);
    *w = cw;
    const int oh = d->oh, ow = d->ow;
    d->r = r, d->s = s, d->dil_h = dh, d->dil_w = dw;
    d->pad_t = pt, d->pad_l = pl, d->pad_b = pb, d->pad_r = pr;
    cd_conv_out_dims(d);
    return d->oh == oh && d->ow == ow ? 0 : CD_EINTERNAL;
}
