#ifndef CD_KERNELS_CPU_DWCONV_H
#define CD_KERNELS_CPU_DWCONV_H

// A simple own depthwise 3x3 convolution on NCHW16C activations (MobileNet's
// depthwise layers), measured against oneDNN's jit_dw kernel by
// bench/conv-dense-layers. It does NOT win (docs/PERFORMANCE.md, "Dense conv
// kernels": equal within noise on 112x112 and 56x56 planes, 1.2-2x slower on
// 28x28 and smaller planes): depthwise layers should run on oneDNN
// (cd_dnnl_conv_create handles groups == c). Kept only because the CPU backend
// already links it (CD_DWCONV=own); once the backend defaults to oneDNN and
// drops it, this kernel can move to bench/ or go.
//
// Covers: groups == c == k, 3x3, stride 1 or 2 (each axis), pads 0..2,
// dilation 1, activations NONE / RELU / CLIP (the clamp-type ones), no
// residual, src and dst NCHW16C (channel padding zero in, written zero out).
// The micro-kernel computes a run of output rows of one 16-channel block; the
// AVX-512 one is picked at run time by CPUID, a portable C one otherwise.
// Threads: OpenMP over (batch, channel block, output row), team size
// cd_dnnl_get_threads(). A kernel object is read-only after create and may be
// run by several threads at once.

#include "kernels/op-desc.h"

#include <stddef.h>

// Arguments of one micro-kernel call: output rows y .. y + ny - 1 of one
// channel block.
typedef struct {
    const float *src;  // input plane of the block: [h][w][16]
    const float *wts;  // packed weights of the block: [9][16] (r * 3 + s)
    const float *bias; // [16]
    float *dst;        // output rows: [ny][ow][16]
    int h, w;          // input plane size
    int y;             // first output row
    int ny;            // number of output rows (dst holds ny rows of ow)
    int ow;            // output row length
    int stride_h, stride_w;
    int pad_t, pad_l;
    float lo, hi;      // output clamp (activation): [-inf, inf] for NONE
} cd_dwconv3x3_row_args;

void cd_f32_dwconv3x3_row__scalar(const cd_dwconv3x3_row_args *a);
void cd_f32_dwconv3x3_row__avx512f(const cd_dwconv3x3_row_args *a);

typedef void (*cd_dwconv3x3_row_fn)(const cd_dwconv3x3_row_args *a);

typedef struct cd_dwconv3x3 cd_dwconv3x3;

// 1 when the descriptor and layouts are in the covered set above.
int cd_dwconv3x3_supports(const cd_conv_desc *d, cd_layout src, cd_layout dst);

// Packs w (C x 1 x 3 x 3) and bias (C or NULL) into [cb][9][16] / [cb][16]
// blocks. force_portable selects the C micro-kernel (tests, benchmarks).
// 0, CD_EPARAMS (not supported) or CD_ENOMEM.
int cd_dwconv3x3_create(const cd_conv_desc *d, const float *w, const float *bias,
                        int force_portable, cd_dwconv3x3 **out);

// dst = act(dwconv(src) + bias) for batch items (NCHW16C both). 0 or CD_EPARAMS.
int cd_dwconv3x3_run(const cd_dwconv3x3 *k, int batch, const float *src, float *dst);

// "avx512f" or "scalar": the micro-kernel this object runs.
const char *cd_dwconv3x3_isa(const cd_dwconv3x3 *k);

void cd_dwconv3x3_free(cd_dwconv3x3 *k);

#endif // CD_KERNELS_CPU_DWCONV_H
