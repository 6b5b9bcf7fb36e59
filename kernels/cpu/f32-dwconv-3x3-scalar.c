// Portable depthwise 3x3 micro-kernel: a run of output rows of one 16-channel
// block.

#include "kernels/cpu/dwconv.h"

void cd_f32_dwconv3x3_row__scalar(const cd_dwconv3x3_row_args *a) {
    for (int y = a->y; y < a->y + a->ny; y++)
    for (int x = 0; x < a->ow; x++) {
        float acc[16];
        for (int l = 0; l < 16; l++) acc[l] = a->bias[l];
        for (int r = 0; r < 3; r++) {
            int ih = y * a->stride_h - a->pad_t + r;
            if (ih < 0 || ih >= a->h) continue;
            for (int s = 0; s < 3; s++) {
                int iw = x * a->stride_w - a->pad_l + s;
                if (iw < 0 || iw >= a->w) continue;
                const float *in = a->src + ((size_t)ih * a->w + iw) * 16;
                const float *wt = a->wts + (r * 3 + s) * 16;
                for (int l = 0; l < 16; l++) acc[l] += in[l] * wt[l];
            }
        }
        float *out = a->dst + ((size_t)(y - a->y) * a->ow + x) * 16;
        for (int l = 0; l < 16; l++) {
            float v = acc[l] < a->lo ? a->lo : acc[l];
            out[l] = v > a->hi ? a->hi : v;
        }
    }
}
