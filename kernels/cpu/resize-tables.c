// Resize over precomputed index and weight tables (resize-tables.h).

#include "kernels/cpu/resize-tables.h"

#include "core/errors.h"

#include <stdlib.h>
#include <string.h>

struct cd_resize_tables {
    cd_resize_desc d;
    int *y0, *y1, *x0, *x1; // per output row / column (nearest: y0, x0 only)
    float *ly, *lx;         // linear: the weight of y1 / x1
};

void cd_resize_tables_free(cd_resize_tables *t) {
    if (!t) return;
    free(t->y0);
    free(t->y1);
    free(t->x0);
    free(t->x1);
    free(t->ly);
    free(t->lx);
    free(t);
}

int cd_resize_tables_create(const cd_resize_desc *d, cd_resize_tables **out) {
    *out = NULL;
    if (d->c < 1 || d->h < 1 || d->w < 1 || d->oh < 1 || d->ow < 1) return CD_EPARAMS;
    cd_resize_tables *t = calloc(1, sizeof *t);
    if (!t) return CD_ENOMEM;
    t->d = *d;
    t->y0 = malloc(sizeof(int) * (size_t)d->oh);
    t->y1 = malloc(sizeof(int) * (size_t)d->oh);
    t->ly = malloc(sizeof(float) * (size_t)d->oh);
    t->x0 = malloc(sizeof(int) * (size_t)d->ow);
    t->x1 = malloc(sizeof(int) * (size_t)d->ow);
    t->lx = malloc(sizeof(float) * (size_t)d->ow);
    if (!t->y0 || !t->y1 || !t->ly || !t->x0 || !t->x1 || !t->lx) {
        cd_resize_tables_free(t);
        return CD_ENOMEM;
    }
    for (int y = 0; y < d->oh; y++) {
        const float s = cd_resize_src_coord(d->coord, y, d->scale_h, d->oh, d->h);
        if (d->mode == CD_RESIZE_NEAREST)
            t->y0[y] = t->y1[y] = cd_resize_nearest_index(d->nearest, s, d->h), t->ly[y] = 0.0f;
        else
            cd_resize_linear_index(s, d->h, &t->y0[y], &t->y1[y], &t->ly[y]);
    }
    for (int x = 0; x < d->ow; x++) {
        const float s = cd_resize_src_coord(d->coord, x, d->scale_w, d->ow, d->w);
        if (d->mode == CD_RESIZE_NEAREST)
            t->x0[x] = t->x1[x] = cd_resize_nearest_index(d->nearest, s, d->w), t->lx[x] = 0.0f;
        else
            cd_resize_linear_index(s, d->w, &t->x0[x], &t->x1[x], &t->lx[x]);
    }
    *out = t;
    return 0;
}

size_t cd_resize_tables_scratch_floats(const cd_resize_tables *t) {
    return t->d.mode == CD_RESIZE_LINEAR ? (size_t)t->d.w : 0;
}

static void nearest_plane(const cd_resize_tables *t, const float *x, float *y) {
    const cd_resize_desc *d = &t->d;
    for (int oy = 0; oy < d->oh; oy++) {
        float *row = y + (size_t)oy * d->ow;
        if (oy > 0 && t->y0[oy] == t->y0[oy - 1]) { // the same source row: copy the last output row
            memcpy(row, row - d->ow, sizeof(float) * (size_t)d->ow);
            continue;
        }
        const float *src = x + (size_t)t->y0[oy] * d->w;
        for (int ox = 0; ox < d->ow; ox++) row[ox] = src[t->x0[ox]];
    }
}

static void linear_plane(const cd_resize_tables *t, const float *x, float *y, float *mix) {
    const cd_resize_desc *d = &t->d;
    for (int oy = 0; oy < d->oh; oy++) {
        const float *r0 = x + (size_t)t->y0[oy] * d->w, *r1 = x + (size_t)t->y1[oy] * d->w;
        const float b = t->ly[oy], a = 1.0f - b;
        for (int i = 0; i < d->w; i++) mix[i] = a * r0[i] + b * r1[i];
        float *row = y + (size_t)oy * d->ow;
        for (int ox = 0; ox < d->ow; ox++) row[ox] = (1.0f - t->lx[ox]) * mix[t->x0[ox]] + t->lx[ox] * mix[t->x1[ox]];
    }
}

void cd_resize_tables_run(const cd_resize_tables *t, int batch, const float *src, float *dst, float *scratch) {
    const cd_resize_desc *d = &t->d;
    const size_t plane = (size_t)d->h * d->w, oplane = (size_t)d->oh * d->ow;
    for (size_t p = 0; p < (size_t)batch * d->c; p++) {
        if (d->mode == CD_RESIZE_NEAREST)
            nearest_plane(t, src + p * plane, dst + p * oplane);
        else
            linear_plane(t, src + p * plane, dst + p * oplane, scratch);
    }
}
