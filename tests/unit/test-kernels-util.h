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
static inline cd_layout tk_rand_layout(void) { return (cd_layout)cd_test_randi(0, CD_LAYOUT_COUNT - 1); }
static inline cd_layout tk_rand_blocked(void) { return cd_test_randi(0, 1) ? CD_LAYOUT_NCHW16C : CD_LAYOUT_NCHW8C; }

#endif // CD_TESTS_UNIT_TEST_KERNELS_UTIL_H
