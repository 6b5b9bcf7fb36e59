#ifndef CD_TESTS_UNIT_TEST_KERNELS_UTIL_H
#define CD_TESTS_UNIT_TEST_KERNELS_UTIL_H

// Helpers shared by tests/unit/test-kernels-*.c: random data and shapes,
// layout round trips through the reference reorder, and checks that the
// channel padding of the blocked layouts is zero.

#include "backends/cpu/dnnl.h"
#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "tests/unit/check.h"

// Random floats in [lo, hi); never all zero.
static inline float *tk_rand_buf(size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) abort();
    for (size_t i = 0; i < n; i++) p[i] = cd_test_randf(lo, hi);
    return p;
}

// Random floats in [-1, 1).
static inline float *tk_rbuf(size_t n) { return tk_rand_buf(n, -1.0f, 1.0f); }

static inline float *tk_alloc(size_t n) {
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) abort();
    return p;
}

// A random activation of every kind with sensible parameters.
static inline cd_activation tk_act(cd_act kind) {
    cd_activation a = {kind, 0.0f, 0.0f};
    switch (kind) {
    case CD_ACT_CLIP:
        a.alpha = cd_test_randf(-1.0f, 0.0f);
        a.beta = cd_test_randf(0.1f, 1.5f);
        break;
    case CD_ACT_HARDSIGMOID:
        a.alpha = cd_test_randf(0.1f, 0.3f);
        a.beta = cd_test_randf(0.3f, 0.7f);
        break;
    case CD_ACT_LEAKYRELU: a.alpha = cd_test_randf(0.01f, 0.3f); break;
    default: break;
    }
    return a;
}

static inline cd_activation tk_rand_act(void) { return tk_act((cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_LEAKYRELU)); }

// A random activation kind with the usual fixed parameters (Relu6-style
// Clip, the ONNX HardSigmoid defaults, LeakyRelu 0.1).
static inline cd_activation tk_rand_act_fixed(void) {
    cd_activation a = {(cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_LEAKYRELU), 0, 0};
    if (a.kind == CD_ACT_CLIP) a.alpha = 0.0f, a.beta = 6.0f;
    if (a.kind == CD_ACT_HARDSIGMOID) a.alpha = 0.2f, a.beta = 0.5f;
    if (a.kind == CD_ACT_LEAKYRELU) a.alpha = 0.1f;
    return a;
}

// A random batch-1 convolution (oh, ow filled): kind 0 dense, 1 depthwise,
// 2 grouped, 3 pointwise; kernel sizes drawn from ks[0..nks-1]; random
// strides, pads, dilation, activation and residual.
static inline cd_conv_desc tk_rand_conv(int kind, const int *ks, int nks) {
    cd_conv_desc c = {0};
    c.c = cd_test_randi(1, 24);
    c.groups = 1;
    if (kind == 1)
        c.c = cd_test_randi(2, 24), c.groups = c.c, c.k = c.c * cd_test_randi(1, 2); // c = 1 is a plain conv
    else if (kind == 2)
        c.groups = cd_test_randi(2, 3), c.c = c.groups * cd_test_randi(1, 6), c.k = c.groups * cd_test_randi(1, 7);
    else
        c.k = cd_test_randi(1, 40);
    c.r = kind == 3 ? 1 : ks[cd_test_randi(0, nks - 1)];
    c.s = kind == 3 ? 1 : (cd_test_randi(0, 1) ? c.r : ks[cd_test_randi(0, nks - 1)]);
    c.h = cd_test_randi(c.r, c.r + 13);
    c.w = cd_test_randi(c.s, c.s + 13);
    c.stride_h = kind == 3 ? 1 : cd_test_randi(1, 2);
    c.stride_w = kind == 3 ? 1 : cd_test_randi(1, 2);
    c.dil_h = c.dil_w = (kind != 3 && cd_test_randi(0, 3) == 0 && c.h >= 2 * c.r && c.w >= 2 * c.s) ? 2 : 1;
    if (kind != 3) {
        c.pad_t = cd_test_randi(0, c.r / 2);
        c.pad_b = cd_test_randi(0, c.r / 2);
        c.pad_l = cd_test_randi(0, c.s / 2);
        c.pad_r = cd_test_randi(0, c.s / 2);
    }
    c.act = tk_rand_act_fixed();
    c.has_residual = cd_test_randi(0, 1);
    c.n = 1;
    cd_conv_out_dims(&c);
    return c;
}

// Converts an NCHW tensor to layout l (a fresh buffer; plain copy for NCHW).
static inline float *tk_to_layout(cd_layout l, int n, int c, int h, int w, const float *src) {
    float *dst = tk_alloc(cd_layout_numel(l, n, c, h, w));
    cd_ref_reorder(CD_LAYOUT_NCHW, l, n, c, h, w, src, dst);
    return dst;
}

// Converts a tensor in layout l back to NCHW (a fresh buffer).
static inline float *tk_from_layout(cd_layout l, int n, int c, int h, int w, const float *src) {
    float *dst = tk_alloc((size_t)n * c * h * w);
    cd_ref_reorder(l, CD_LAYOUT_NCHW, n, c, h, w, src, dst);
    return dst;
}

// Fails unless every padded channel of a blocked tensor is exactly zero.
static inline void tk_check_padding_zero(cd_layout l, int n, int c, int h, int w, const float *t) {
    const int bs = cd_layout_block(l);
    if (bs <= 1 || c % bs == 0) return;
    int cb = (c + bs - 1) / bs;
    for (int b = 0; b < n; b++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ci = c; ci < cb * bs; ci++) {
                    size_t i = ((((size_t)b * cb + ci / bs) * h + y) * w + x) * bs + ci % bs;
                    if (t[i] != 0.0f)
                        CD_CHECK_FAIL_("padded channel %d of [%d,%d,%d] (%s) is %g, not 0", ci, b, y, x,
                                       cd_layout_name(l), (double)t[i]);
                }
}

static inline const char *tk_layout_name(cd_layout l) { return cd_layout_name(l); }

// Any layout; any blocked layout (both are tested on every CPU: the one
// oneDNN does not run fast here still has to be right).
// A float32 activation layout: NCHW or a blocked one (NHWC holds int8 only).
static inline cd_layout tk_rand_layout(void) { return (cd_layout)cd_test_randi(CD_LAYOUT_NCHW, CD_LAYOUT_NCHW8C); }
static inline cd_layout tk_rand_blocked(void) { return cd_test_randi(0, 1) ? CD_LAYOUT_NCHW16C : CD_LAYOUT_NCHW8C; }

#endif // CD_TESTS_UNIT_TEST_KERNELS_UTIL_H
