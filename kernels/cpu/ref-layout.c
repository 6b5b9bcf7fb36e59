#include "kernels/cpu/ref.h"

#include "core/limits.h"

#include <string.h>

void cd_ref_transpose(int rank, const int64_t *shape, const int *perm, const float *src, float *dst) {
    int64_t sstride[CD_MAX_RANK], dshape[CD_MAX_RANK], idx[CD_MAX_RANK] = {0};
    int64_t t = 1, total = 1;
    for (int i = rank - 1; i >= 0; i--) {
        sstride[i] = t;
        t *= shape[i];
    }
    // Walk dst in order; the source offset moves by the permuted strides.
    int64_t ps[CD_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        dshape[i] = shape[perm[i]];
        ps[i] = sstride[perm[i]];
        total *= dshape[i];
    }
    int64_t off = 0;
    for (int64_t e = 0; e < total; e++) {
        dst[e] = src[off];
        for (int i = rank - 1; i >= 0; i--) {
            if (++idx[i] < dshape[i]) {
                off += ps[i];
                break;
            }
            off -= ps[i] * (dshape[i] - 1);
            idx[i] = 0;
        }
    }
}

void cd_ref_concat(int rank, int axis, int n, const int64_t *const *shapes, const float *const *srcs, float *dst) {
    int64_t outer = 1, inner = 1, total_axis = 0;
    for (int i = 0; i < axis; i++) outer *= shapes[0][i];
    for (int i = axis + 1; i < rank; i++) inner *= shapes[0][i];
    for (int j = 0; j < n; j++) total_axis += shapes[j][axis];
    int64_t at = 0;
    for (int j = 0; j < n; j++) {
        int64_t chunk = shapes[j][axis] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (o * total_axis * inner) + at, srcs[j] + o * chunk, (size_t)chunk * sizeof(float));
        at += chunk;
    }
}

size_t cd_layout_numel(cd_layout l, int n, int c, int h, int w) {
    return (size_t)n * (size_t)cd_layout_padded_c(l, c) * (size_t)h * (size_t)w;
}

// Offset of element (n, ch, p) of an n x c x (h*w) tensor in layout l.
static size_t layout_index(cd_layout l, size_t in, size_t ch, size_t p, size_t c, size_t hw) {
    if (l == CD_LAYOUT_NHWC) return (in * hw + p) * c + ch;
    const size_t b = (size_t)cd_layout_block(l);
    if (b <= 1) return (in * c + ch) * hw + p;
    const size_t cb = (c + b - 1) / b;
    return ((in * cb + ch / b) * hw + p) * b + ch % b;
}

void cd_ref_reorder(cd_layout from, cd_layout to, int n, int c, int h, int w, const float *src, float *dst) {
    if (from == to) {
        memcpy(dst, src, cd_layout_numel(from, n, c, h, w) * sizeof(float));
        return;
    }
    const size_t hw = (size_t)h * w;
    // Padding channels of a blocked destination are zero (oneDNN's rule).
    if (cd_layout_block(to) > 1) memset(dst, 0, cd_layout_numel(to, n, c, h, w) * sizeof(float));
    for (size_t in = 0; in < (size_t)n; in++)
        for (size_t ch = 0; ch < (size_t)c; ch++)
            for (size_t p = 0; p < hw; p++)
                dst[layout_index(to, in, ch, p, (size_t)c, hw)] = src[layout_index(from, in, ch, p, (size_t)c, hw)];
}
