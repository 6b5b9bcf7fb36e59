#include "kernels/cpu/ref.h"

#include "proto/limits.h"

#include <string.h>

void cd_ref_transpose(int rank, const int64_t *shape, const int *perm,
                      const float *src, float *dst) {
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

void cd_ref_concat(int rank, int axis, int n, const int64_t *const *shapes,
                   const float *const *srcs, float *dst) {
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
    size_t cp = l == CD_LAYOUT_NCHW16C ? (size_t)(c + 15) / 16 * 16 : (size_t)c;
    return (size_t)n * cp * (size_t)h * (size_t)w;
}

void cd_ref_reorder(cd_layout from, cd_layout to, int n, int c, int h, int w,
                    const float *src, float *dst) {
    if (from == to) {
        memcpy(dst, src, cd_layout_numel(from, n, c, h, w) * sizeof(float));
        return;
    }
    const size_t hw = (size_t)h * w, cb = (size_t)(c + 15) / 16;
    for (int in = 0; in < n; in++)
        for (size_t b = 0; b < cb; b++)
            for (size_t p = 0; p < hw; p++)
                for (int j = 0; j < 16; j++) {
                    size_t ch = b * 16 + j;
                    size_t blk = (((size_t)in * cb + b) * hw + p) * 16 + j;
                    if (from == CD_LAYOUT_NCHW) {
                        dst[blk] = ch < (size_t)c ? src[((size_t)in * c + ch) * hw + p] : 0.0f;
                    } else if (ch < (size_t)c) {
                        dst[((size_t)in * c + ch) * hw + p] = src[blk];
                    }
                }
}
