// The reference kernels of kernels/cpu/ref-*.c against independent naive
// formulas on fresh random shapes.

#include "core/limits.h"
#include "kernels/cpu/ref.h"
#include "tests/unit/act-oracle.h"
#include "tests/unit/check.h"

static float *rbuf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) abort();
    for (size_t i = 0; i < n; i++) p[i] = cd_test_randf(-2.0f, 2.0f);
    return p;
}

static float *zbuf(size_t n) {
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) abort();
    return p;
}

// cd_conv_square: the plain conv every caller builds on, at random sizes.
CD_TEST(conv_square_is_the_plain_conv) {
    int c = cd_test_randi(1, 64), k = cd_test_randi(1, 64), r = cd_test_randi(1, 5);
    int h = cd_test_randi(r, 40), w = cd_test_randi(r, 40), stride = cd_test_randi(1, 3), pad = cd_test_randi(0, r - 1);
    cd_conv_desc d = cd_conv_square(c, h, w, k, r, stride, pad);
    CHECK(d.n == 1 && d.c == c && d.h == h && d.w == w && d.k == k && d.r == r && d.s == r);
    CHECK(d.stride_h == stride && d.stride_w == stride);
    CHECK(d.pad_t == pad && d.pad_l == pad && d.pad_b == pad && d.pad_r == pad);
    CHECK(d.dil_h == 1 && d.dil_w == 1 && d.groups == 1);
    CHECK(d.act.kind == CD_ACT_NONE && !d.has_residual);
    CHECK_EQ(d.oh, (h + 2 * pad - r) / stride + 1);
    CHECK_EQ(d.ow, (w + 2 * pad - r) / stride + 1);
}

// Gemm equals a 1x1 convolution on [m, k, 1, 1] (a different kernel, same math).
CD_TEST(ref_gemm_equals_1x1_conv) {
    int m = cd_test_randi(1, 9), n = cd_test_randi(1, 40), k = cd_test_randi(1, 70);
    float *a = rbuf((size_t)m * k), *w = rbuf((size_t)n * k), *b = rbuf((size_t)n);
    float *got = zbuf((size_t)m * n), *want = zbuf((size_t)m * n);
    cd_activation act = {CD_ACT_RELU, 0, 0};
    cd_ref_gemm(m, n, k, a, w, b, act, got);
    cd_conv_desc d = cd_conv_square(k, 1, 1, n, 1, 1, 0);
    d.n = m;
    d.act = act;
    cd_ref_conv2d(&d, a, w, b, NULL, want);
    CHECK_CLOSE_F32(got, want, (size_t)m * n, 1e-5);
    free(a), free(w), free(b), free(got), free(want);
}

CD_TEST(ref_gemm_no_bias_m_by_hand) {
    // 2x3 times (2x3)^T: hand-computed.
    float a[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, -1, 2, 1, 0}, out[4];
    cd_activation none = {CD_ACT_NONE, 0, 0};
    cd_ref_gemm(2, 2, 3, a, w, NULL, none, out);
    float want[4] = {-2, 4, -2, 13};
    CHECK_CLOSE_F32(out, want, 4, 0);
}

// Binary with broadcasting vs unravel-and-modulo indexing.
CD_TEST(ref_binary_broadcast_random_shapes) {
    for (int iter = 0; iter < 20; iter++) {
        int rank = cd_test_randi(1, 5);
        int64_t ds[CD_MAX_RANK], as[CD_MAX_RANK], bs[CD_MAX_RANK];
        size_t total = 1, na = 1, nb = 1;
        for (int i = 0; i < rank; i++) {
            ds[i] = cd_test_randi(1, 5);
            as[i] = cd_test_randi(0, 2) == 0 ? 1 : ds[i];
            bs[i] = cd_test_randi(0, 2) == 0 ? 1 : ds[i];
            total *= (size_t)ds[i];
            na *= (size_t)as[i];
            nb *= (size_t)bs[i];
        }
        float *a = rbuf(na), *b = rbuf(nb), *got = zbuf(total);
        cd_binary_kind kind = (cd_binary_kind)cd_test_randi(0, 3);
        if (kind == CD_BINARY_DIV)
            for (size_t i = 0; i < nb; i++) b[i] = b[i] >= 0 ? b[i] + 0.5f : b[i] - 0.5f;
        cd_activation act = {cd_test_randi(0, 1) ? CD_ACT_RELU : CD_ACT_NONE, 0, 0};
        cd_ref_binary(kind, rank, as, a, bs, b, ds, act, got);
        for (size_t e = 0; e < total; e++) {
            size_t rem = e, ia = 0, ib = 0, sa = 1, sb = 1;
            for (int i = rank - 1; i >= 0; i--) {
                size_t idx = rem % (size_t)ds[i];
                rem /= (size_t)ds[i];
                ia += (as[i] == 1 ? 0 : idx) * sa;
                ib += (bs[i] == 1 ? 0 : idx) * sb;
                sa *= (size_t)as[i];
                sb *= (size_t)bs[i];
            }
            float x = a[ia], y = b[ib];
            float v = kind == CD_BINARY_ADD   ? x + y
                      : kind == CD_BINARY_MUL ? x * y
                      : kind == CD_BINARY_SUB ? x - y
                                              : x / y;
            if (act.kind == CD_ACT_RELU && v < 0) v = 0;
            CHECK_CLOSE_F32(&got[e], &v, 1, 1e-6);
        }
        free(a), free(b), free(got);
    }
}

CD_TEST(ref_activation_formulas) {
    float x[7] = {-7.0f, -3.0f, -0.5f, 0.0f, 0.5f, 3.0f, 7.0f}, y[7];
    cd_activation hs = {CD_ACT_HARDSWISH, 0, 0};
    cd_ref_activation(hs, 7, x, y);
    for (int i = 0; i < 7; i++) {
        float r = x[i] <= -3 ? 0 : x[i] >= 3 ? x[i] : x[i] * (x[i] + 3) / 6;
        CHECK_CLOSE_F32(&y[i], &r, 1, 1e-6);
    }
    cd_activation lr = {CD_ACT_LEAKYRELU, 0.1f, 0};
    cd_ref_activation(lr, 7, x, x); // in place
    CHECK(fabsf(x[0] + 0.7f) < 1e-6f && x[6] == 7.0f);
}

// Known values pin the test's own formulas (act-oracle.h) before they judge.
CD_TEST(ref_activation_oracle_known_values) {
    const struct {
        cd_activation act;
        float x, want;
    } k[] = {
        {{CD_ACT_NONE, 0, 0}, -1.5f, -1.5f},
        {{CD_ACT_RELU, 0, 0}, -2.0f, 0.0f},
        {{CD_ACT_RELU, 0, 0}, 2.5f, 2.5f},
        {{CD_ACT_CLIP, 0, 6}, 7.0f, 6.0f},
        {{CD_ACT_CLIP, 0, 6}, -1.0f, 0.0f},
        {{CD_ACT_CLIP, -0.5f, 0.7f}, 0.25f, 0.25f},
        {{CD_ACT_SIGMOID, 0, 0}, 0.0f, 0.5f},
        {{CD_ACT_SIGMOID, 0, 0}, 2.0f, 0.880797078f},
        {{CD_ACT_SIGMOID, 0, 0}, -100.0f, 0.0f},
        {{CD_ACT_HARDSIGMOID, 0.2f, 0.5f}, 1.0f, 0.7f},
        {{CD_ACT_HARDSIGMOID, 0.2f, 0.5f}, 3.0f, 1.0f},
        {{CD_ACT_HARDSWISH, 0, 0}, 1.0f, 2.0f / 3.0f},
        {{CD_ACT_HARDSWISH, 0, 0}, -4.0f, 0.0f},
        {{CD_ACT_HARDSWISH, 0, 0}, 4.0f, 4.0f},
        {{CD_ACT_LEAKYRELU, 0.1f, 0}, -7.0f, -0.7f},
        {{CD_ACT_LEAKYRELU, 0.1f, 0}, 7.0f, 7.0f},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const float got = act_oracle(k[i].act, k[i].x);
        CHECK_CLOSE_F32(&got, &k[i].want, 1, 1e-6);
    }
}

// cd_ref_activation for every kind against the test's own formulas, on
// random inputs with the kinks (0, +-3, the clip bounds) and large values.
CD_TEST(ref_activation_every_kind_vs_formulas) {
    enum { N = 512 };
    for (int kind = CD_ACT_NONE; kind <= CD_ACT_ORACLE_LAST; kind++) {
        cd_activation act = {(cd_act)kind, 0, 0};
        if (kind == CD_ACT_CLIP) act.alpha = cd_test_randf(-1.0f, 0.0f), act.beta = cd_test_randf(0.5f, 6.0f);
        if (kind == CD_ACT_HARDSIGMOID) act.alpha = cd_test_randf(0.1f, 0.5f), act.beta = cd_test_randf(0.2f, 0.8f);
        if (kind == CD_ACT_LEAKYRELU) act.alpha = cd_test_randf(0.01f, 0.3f);
        if (kind == CD_ACT_POW) act.alpha = (float)cd_test_randi(2, 3);
        float x[N], y[N], want[N];
        const float edges[] = {0.0f, -0.0f, 3.0f, -3.0f, act.alpha, act.beta, 80.0f, -80.0f};
        for (int i = 0; i < N; i++)
            x[i] = i < (int)(sizeof edges / sizeof edges[0]) ? edges[i] : cd_test_randf(-10.0f, 10.0f);
        if (kind == CD_ACT_SQRT) // (a NaN never compares equal)
            for (int i = 0; i < N; i++) x[i] = fabsf(x[i]);
        for (int i = 0; i < N; i++) want[i] = act_oracle(act, x[i]);
        cd_ref_activation(act, N, x, y);
        CHECK_CLOSE_F32(y, want, N, 1e-6);
    }
}

CD_TEST(ref_softmax_rows_sum_to_one_inner_axis) {
    size_t outer = (size_t)cd_test_randi(1, 4), len = (size_t)cd_test_randi(1, 30), inner = (size_t)cd_test_randi(1, 6);
    size_t n = outer * len * inner;
    float *x = rbuf(n), *y = zbuf(n);
    for (size_t i = 0; i < n; i++) x[i] *= 20.0f; // large values: the max-subtraction matters
    cd_ref_softmax(outer, len, inner, x, y);
    for (size_t o = 0; o < outer; o++)
        for (size_t in = 0; in < inner; in++) {
            double sum = 0, mx = -1e30;
            for (size_t i = 0; i < len; i++) mx = fmax(mx, x[(o * len + i) * inner + in]);
            for (size_t i = 0; i < len; i++) sum += exp(x[(o * len + i) * inner + in] - mx);
            double tot = 0;
            for (size_t i = 0; i < len; i++) {
                float want = (float)(exp(x[(o * len + i) * inner + in] - mx) / sum);
                CHECK_CLOSE_F32(&y[(o * len + i) * inner + in], &want, 1, 1e-6);
                tot += y[(o * len + i) * inner + in];
            }
            CHECK(fabs(tot - 1.0) < 1e-5);
        }
    free(x), free(y);
}

CD_TEST(ref_transpose_random_perm_vs_unravel) {
    int rank = cd_test_randi(1, 6);
    int64_t shape[CD_MAX_RANK];
    int perm[CD_MAX_RANK];
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        shape[i] = cd_test_randi(1, 4);
        n *= (size_t)shape[i];
        perm[i] = i;
    }
    for (int i = rank - 1; i > 0; i--) { // Fisher-Yates
        int j = cd_test_randi(0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    float *x = rbuf(n), *y = zbuf(n);
    cd_ref_transpose(rank, shape, perm, x, y);
    int64_t dshape[CD_MAX_RANK];
    for (int i = 0; i < rank; i++) dshape[i] = shape[perm[i]];
    for (size_t e = 0; e < n; e++) {
        int64_t idx[CD_MAX_RANK], src[CD_MAX_RANK];
        size_t rem = e;
        for (int i = rank - 1; i >= 0; i--) {
            idx[i] = (int64_t)(rem % (size_t)dshape[i]);
            rem /= (size_t)dshape[i];
        }
        for (int i = 0; i < rank; i++) src[perm[i]] = idx[i];
        size_t off = 0;
        for (int i = 0; i < rank; i++) off = off * (size_t)shape[i] + (size_t)src[i];
        CHECK(y[e] == x[off]);
    }
    free(x), free(y);
}

CD_TEST(ref_concat_axis_random) {
    int rank = cd_test_randi(1, 4), axis = cd_test_randi(0, rank - 1), n = cd_test_randi(1, 4);
    int64_t shapes[4][CD_MAX_RANK], dshape[CD_MAX_RANK];
    const int64_t *sp[4];
    const float *src[4];
    float *bufs[4];
    for (int i = 0; i < rank; i++) dshape[i] = cd_test_randi(1, 4);
    dshape[axis] = 0;
    for (int j = 0; j < n; j++) {
        size_t cnt = 1;
        for (int i = 0; i < rank; i++) {
            shapes[j][i] = i == axis ? cd_test_randi(1, 3) : dshape[i];
            cnt *= (size_t)shapes[j][i];
        }
        dshape[axis] += shapes[j][axis];
        bufs[j] = rbuf(cnt);
        sp[j] = shapes[j];
        src[j] = bufs[j];
    }
    size_t total = 1;
    for (int i = 0; i < rank; i++) total *= (size_t)dshape[i];
    float *y = zbuf(total);
    cd_ref_concat(rank, axis, n, sp, src, y);
    for (size_t e = 0; e < total; e++) {
        int64_t idx[CD_MAX_RANK] = {0};
        size_t rem = e;
        for (int i = rank - 1; i >= 0; i--) {
            idx[i] = (int64_t)(rem % (size_t)dshape[i]);
            rem /= (size_t)dshape[i];
        }
        int j = 0;
        while (idx[axis] >= shapes[j][axis]) idx[axis] -= shapes[j++][axis];
        size_t off = 0;
        for (int i = 0; i < rank; i++) off = off * (size_t)shapes[j][i] + (size_t)idx[i];
        CHECK(y[e] == bufs[j][off]);
    }
    for (int j = 0; j < n; j++) free(bufs[j]);
    free(y);
}

CD_TEST(ref_reorder_round_trip_16c_8c_c_not_multiple_of_block) {
    const cd_layout ls[2] = {CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW8C};
    for (int li = 0; li < 2; li++) {
        const cd_layout l = ls[li];
        const int bs = cd_layout_block(l);
        int n = cd_test_randi(1, 3), c = cd_test_randi(1, 40), h = cd_test_randi(1, 6), w = cd_test_randi(1, 6);
        if (c % bs == 0) c++;
        const int cb = (c + bs - 1) / bs;
        size_t plain = (size_t)n * c * h * w, blocked = cd_layout_numel(l, n, c, h, w);
        CHECK_EQ(blocked, (size_t)n * cb * bs * h * w);
        float *x = rbuf(plain), *b = rbuf(blocked), *y = zbuf(plain);
        cd_ref_reorder(CD_LAYOUT_NCHW, l, n, c, h, w, x, b);
        // nChw{bs}c index of (n, ch, hh, ww) and zero padding.
        for (int in = 0; in < n; in++)
            for (int ch = 0; ch < cb * bs; ch++)
                for (int p = 0; p < h * w; p++) {
                    size_t bi = (((size_t)in * cb + ch / bs) * h * w + p) * bs + ch % bs;
                    float want = ch < c ? x[((size_t)in * c + ch) * h * w + p] : 0.0f;
                    CHECK(b[bi] == want);
                }
        cd_ref_reorder(l, CD_LAYOUT_NCHW, n, c, h, w, b, y);
        CHECK_CLOSE_F32(y, x, plain, 0);
        // Blocked to the other blocked layout and back.
        const cd_layout o = ls[1 - li];
        float *z = rbuf(cd_layout_numel(o, n, c, h, w)), *b2 = rbuf(blocked);
        cd_ref_reorder(l, o, n, c, h, w, b, z);
        cd_ref_reorder(o, l, n, c, h, w, z, b2);
        CHECK_CLOSE_F32(b2, b, blocked, 0);
        free(x), free(b), free(y), free(z), free(b2);
    }
}

// NHWC (the int8 storage layout): element (n, c, h, w) at ((n * H + h) * W + w) * C + c,
// no padding; to a blocked layout and back unchanged.
CD_TEST(ref_reorder_nhwc_index_and_round_trip_through_blocked) {
    int n = cd_test_randi(1, 3), c = cd_test_randi(1, 40), h = cd_test_randi(1, 6), w = cd_test_randi(1, 6);
    size_t plain = (size_t)n * c * h * w;
    CHECK_EQ(cd_layout_numel(CD_LAYOUT_NHWC, n, c, h, w), plain);
    float *x = rbuf(plain), *t = rbuf(plain), *y = zbuf(plain);
    float *b = rbuf(cd_layout_numel(CD_LAYOUT_NCHW16C, n, c, h, w));
    cd_ref_reorder(CD_LAYOUT_NCHW, CD_LAYOUT_NHWC, n, c, h, w, x, t);
    for (int in = 0; in < n; in++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < h * w; p++)
                CHECK(t[((size_t)in * h * w + p) * c + ch] == x[((size_t)in * c + ch) * h * w + p]);
    cd_ref_reorder(CD_LAYOUT_NHWC, CD_LAYOUT_NCHW16C, n, c, h, w, t, b);
    cd_ref_reorder(CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW, n, c, h, w, b, y);
    CHECK_CLOSE_F32(y, x, plain, 0);
    free(x), free(t), free(y), free(b);
}

// ---- fake quantization (QuantizeLinear -> DequantizeLinear) ---------------------

// The ONNX definition written out independently: q = saturate(round half to
// even(x / scale) + zp), y = (q - zp) * scale, in double, the rounding by hand.
static float fq_formula(float x, float scale, int zp, int qmin, int qmax) {
    double v = (double)(x / scale); // the division in float, as ONNX and onnxruntime do it
    double fl = floor(v), frac = v - fl;
    double r = frac > 0.5 ? fl + 1 : frac < 0.5 ? fl : (fmod(fl, 2.0) == 0.0 ? fl : fl + 1);
    double q = r + zp;
    if (q < qmin) q = qmin;
    if (q > qmax) q = qmax;
    return (float)((q - zp) * (double)scale);
}

static void fq_check(int channels, int axis, int qmin, int qmax) {
    int64_t s[4] = {cd_test_randi(1, 3), cd_test_randi(1, 12), cd_test_randi(1, 6), cd_test_randi(1, 6)};
    size_t n = (size_t)(s[0] * s[1] * s[2] * s[3]), inner = 1;
    for (int i = axis + 1; i < 4; i++) inner *= (size_t)s[i];
    if (channels > 1) channels = (int)s[axis];
    float *scale = zbuf((size_t)channels), *zp = zbuf((size_t)channels), *x = rbuf(n), *got = zbuf(n);
    for (int c = 0; c < channels; c++) {
        scale[c] = cd_test_randf(0.01f, 0.1f);
        zp[c] = (float)cd_test_randi(qmin, qmax);
    }
    for (size_t i = 0; i < n; i++) {
        size_t c = channels > 1 ? i / inner % (size_t)channels : 0;
        switch (i % 4) {
        case 0: x[i] = (float)cd_test_randi(-400, 400) * 0.5f * scale[c]; break; // halves: ties both ways
        case 1: x[i] = cd_test_randf(-1e4f, 1e4f); break;                        // saturates
        default: x[i] *= 3.0f; break;
        }
    }
    cd_fakequant_desc d = {channels, axis, (float)qmin, (float)qmax};
    cd_ref_fakequant(&d, n, inner, scale, zp, x, got);
    for (size_t i = 0; i < n; i++) {
        size_t c = channels > 1 ? i / inner % (size_t)channels : 0;
        float want = fq_formula(x[i], scale[c], (int)zp[c], qmin, qmax);
        if (got[i] != want)
            CD_CHECK_FAIL_("fakequant [%zu] x=%.9g scale=%.9g zp=%g: got %.9g, want %.9g", i, (double)x[i],
                           (double)scale[c], (double)zp[c], (double)got[i], (double)want);
        float lo = ((float)qmin - zp[c]) * scale[c], hi = ((float)qmax - zp[c]) * scale[c];
        CHECK(got[i] >= lo && got[i] <= hi);
    }
    free(scale);
    free(zp);
    free(x);
    free(got);
}

CD_TEST(ref_fakequant_u8_per_tensor_round_half_even_saturates) { fq_check(1, 1, 0, 255); }
CD_TEST(ref_fakequant_s8_per_tensor_round_half_even_saturates) { fq_check(1, 1, -128, 127); }
CD_TEST(ref_fakequant_s8_per_channel_axis1) { fq_check(2, 1, -128, 127); }
CD_TEST(ref_fakequant_u8_per_channel_last_axis) { fq_check(2, 3, 0, 255); }

// Exact values by hand: 2.5 -> 2 and 3.5 -> 4 (half to even), zero point
// 128, saturation at both ends of u8 and s8.
CD_TEST(ref_fakequant_by_hand) {
    const float x[] = {2.5f, 3.5f, -2.5f, 1000.0f, -1000.0f, 0.0f};
    float got[6], scale = 1.0f, zp = 128.0f;
    cd_fakequant_desc u8 = {1, 1, 0.0f, 255.0f}, s8 = {1, 1, -128.0f, 127.0f};
    cd_ref_fakequant(&u8, 6, 1, &scale, &zp, x, got);
    const float want_u8[] = {2.0f, 4.0f, -2.0f, 127.0f, -128.0f, 0.0f};
    CHECK_CLOSE_F32(got, want_u8, 6, 0.0);
    zp = 0.0f;
    cd_ref_fakequant(&s8, 6, 1, &scale, &zp, x, got);
    const float want_s8[] = {2.0f, 4.0f, -2.0f, 127.0f, -128.0f, 0.0f};
    CHECK_CLOSE_F32(got, want_s8, 6, 0.0);
}

// The int8 conv reference against the f32 reference on the same numbers:
// grid inputs, dequantized weights; the f32 result, quantized with the
// epilogue's rule, equals the int8 result but where y sits within rounding
// of a half step (f32 sums in another order), which a bound of one step
// allows. And the s32 accumulators by hand on a 1x1 case.
CD_TEST(ref_conv_i8_matches_f32_reference) {
    int c = cd_test_randi(1, 24), k = cd_test_randi(1, 24), r = cd_test_randi(1, 3);
    int h = cd_test_randi(r, 12), w = cd_test_randi(r, 12);
    cd_conv_desc d = cd_conv_square(c, h, w, k, r, cd_test_randi(1, 2), cd_test_randi(0, r - 1));
    d.n = cd_test_randi(1, 2);
    d.act.kind = cd_test_randi(0, 1) ? CD_ACT_RELU : CD_ACT_NONE;
    int sgn = cd_test_randi(0, 1), zp = sgn ? cd_test_randi(-20, 20) : cd_test_randi(0, 255);
    float *wsc = rbuf((size_t)k);
    for (int i = 0; i < k; i++) wsc[i] = 0.001f + fabsf(wsc[i]) * 0.01f;
    cd_conv_quant q = {0.02f, zp, sgn, 0, wsc, 0.05f, cd_test_randi(0, 255), 0, 0};
    size_t nin = (size_t)d.n * c * h * w, nw = (size_t)k * c * r * r, nout = (size_t)d.n * k * d.oh * d.ow;
    float *x = rbuf(nin), *wf = zbuf(nw), *bias = rbuf((size_t)k), *got = zbuf(nout), *want = zbuf(nout);
    int8_t *wq = malloc(nw);
    for (size_t i = 0; i < nin; i++) // grid values of the input's type
        x[i] = (float)(cd_test_randi((int)cd_quant_qmin(sgn), (int)cd_quant_qmax(sgn)) - zp) * q.in_scale;
    for (size_t i = 0; i < nw; i++) {
        wq[i] = cd_test_randi(0, 3) ? 0 : (int8_t)cd_test_randi(-128, 127); // sparse, with both extremes possible
        wf[i] = (float)wq[i] * wsc[i / ((size_t)c * r * r)];
    }
    cd_ref_conv2d_i8(&d, &q, x, wq, bias, NULL, got);
    cd_ref_conv2d(&d, x, wf, bias, NULL, want);
    for (size_t i = 0; i < nout; i++) {
        float v = cd_conv_quant_out(&q, want[i]);
        if (fabsf(got[i] - v) > q.out_scale * 1.001f)
            CD_CHECK_FAIL_("[%zu]: int8 %.9g, f32 then quantized %.9g", i, (double)got[i], (double)v);
        CHECK(fmodf(fabsf(got[i]) / q.out_scale + 0.25f, 1.0f) < 0.5f); // on the output grid
    }
    uint8_t xs[4] = {0, 255, 7, 128};
    int8_t ws[2] = {-128, 127};
    int32_t acc[2];
    cd_conv_desc one = cd_conv_square(2, 1, 2, 1, 1, 1, 0);
    int32_t xi[4] = {xs[0], xs[1], xs[2], xs[3]}; // c0: 0, 255; c1: 7, 128; zp 3
    cd_ref_conv2d_i8_acc(&one, xi, 3, ws, acc);
    CHECK_EQ(acc[0], (0 - 3) * -128 + (7 - 3) * 127);
    CHECK_EQ(acc[1], (255 - 3) * -128 + (128 - 3) * 127);
    free(wsc), free(x), free(wf), free(bias), free(got), free(want), free(wq);
}
