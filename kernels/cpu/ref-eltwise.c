#include "kernels/cpu/ref.h"

#include "core/limits.h"

#include <math.h>

float cd_ref_binary_op(cd_binary_kind kind, float a, float b) {
    switch (kind) {
    case CD_BINARY_ADD: return a + b;
    case CD_BINARY_MUL: return a * b;
    case CD_BINARY_SUB: return a - b;
    case CD_BINARY_DIV: return a / b;
    case CD_BINARY_MIN: return b < a ? b : a;
    case CD_BINARY_MAX: return b > a ? b : a;
    }
    return 0.0f;
}

void cd_ref_binary(cd_binary_kind kind, int rank, const int64_t *a_shape, const float *a, const int64_t *b_shape,
                   const float *b, const int64_t *dst_shape, cd_activation act, float *dst) {
    // Strides of a and b in dst's index space (0 along broadcast dims).
    int64_t sa[CD_MAX_RANK], sb[CD_MAX_RANK], idx[CD_MAX_RANK] = {0};
    int64_t ta = 1, tb = 1, total = 1;
    for (int i = rank - 1; i >= 0; i--) {
        sa[i] = a_shape[i] == 1 ? 0 : ta;
        sb[i] = b_shape[i] == 1 ? 0 : tb;
        ta *= a_shape[i];
        tb *= b_shape[i];
        total *= dst_shape[i];
    }
    int64_t oa = 0, ob = 0;
    for (int64_t e = 0; e < total; e++) {
        dst[e] = cd_act_apply(act, cd_ref_binary_op(kind, a[oa], b[ob]));
        // Advance the multi-index (odometer), keeping the operand offsets.
        for (int i = rank - 1; i >= 0; i--) {
            if (++idx[i] < dst_shape[i]) {
                oa += sa[i];
                ob += sb[i];
                break;
            }
            oa -= sa[i] * (dst_shape[i] - 1);
            ob -= sb[i] * (dst_shape[i] - 1);
            idx[i] = 0;
        }
    }
}

void cd_ref_activation(cd_activation act, size_t n, const float *src, float *dst) {
    for (size_t i = 0; i < n; i++) dst[i] = cd_act_apply(act, src[i]);
}

void cd_ref_fakequant(const cd_fakequant_desc *d, size_t n, size_t inner, const float *scale, const float *zero_point,
                      const float *src, float *dst) {
    const size_t ch = d->channels > 1 ? (size_t)d->channels : 1;
    if (!inner) inner = 1;
    for (size_t i = 0; i < n; i++) {
        size_t c = ch > 1 ? i / inner % ch : 0;
        dst[i] = cd_fakequant_apply(src[i], scale[c], zero_point[c], d->qmin, d->qmax);
    }
}

void cd_ref_fakequant_dynamic(const cd_fakequant_desc *d, size_t items, size_t per_item, const float *src, float *dst) {
    for (size_t it = 0; it < items; it++) {
        const float *x = src + it * per_item;
        float mn = 0.0f, mx = 0.0f, scale, zp;
        for (size_t i = 0; i < per_item; i++) {
            mn = fminf(mn, x[i]);
            mx = fmaxf(mx, x[i]);
        }
        cd_dynquant_params(mn, mx, d->qmin, d->qmax, &scale, &zp);
        for (size_t i = 0; i < per_item; i++)
            dst[it * per_item + i] = cd_fakequant_apply(x[i], scale, zp, d->qmin, d->qmax);
    }
}

void cd_ref_softmax(size_t outer, size_t len, size_t inner, const float *src, float *dst) {
    for (size_t o = 0; o < outer; o++)
        for (size_t in = 0; in < inner; in++) {
            const float *s = src + o * len * inner + in;
            float *d = dst + o * len * inner + in;
            float mx = -INFINITY;
            for (size_t i = 0; i < len; i++) mx = fmaxf(mx, s[i * inner]);
            double sum = 0.0;
            for (size_t i = 0; i < len; i++) sum += exp((double)s[i * inner] - mx);
            for (size_t i = 0; i < len; i++) d[i * inner] = (float)(exp((double)s[i * inner] - mx) / sum);
        }
}
