// The layout of a model's activations in an exec's arena at a batch
// (model.h, cd_model_arena_layout): the plan's at max_batch (plan.c), a
// batch-1 lane exec's at 1 (batch-lanes.c).

#include "runtime/model.h"

#include "core/checked.h"
#include "core/errors.h"
#include "runtime/arena.h"

#include <stdint.h>
#include <stdlib.h>

// A root that holds activations: not a constant, touched by some layer.
static int arena_root(const cd_model *m, int i) {
    const cd_ptensor *t = &m->tensors[i];
    return t->root == i && !t->t.is_const && t->first != -2;
}

int cd_model_arena_layout(const cd_model *m, int batch, size_t *offsets, size_t *bytes) {
    cd_arena_buf *bufs = calloc((size_t)m->ntensors + 1, sizeof *bufs);
    if (!bufs) return CD_ENOMEM;
    int nb = 0;
    for (int i = 0; i < m->ntensors; i++) {
        if (!arena_root(m, i)) continue;
        const cd_ptensor *t = &m->tensors[i];
        // Alias storage is sized by the largest view (equal bytes in NCHW).
        size_t size;
        if (cd_ck_mul_size(t->item_bytes, (size_t)batch, &size)) {
            free(bufs);
            return CD_ETOO_LARGE;
        }
        bufs[nb++] = (cd_arena_buf){size, t->first < 0 ? 0 : t->first, t->last, 0};
    }
    *bytes = cd_arena_plan(bufs, nb, 64);
    nb = 0;
    for (int i = 0; i < m->ntensors && offsets; i++)
        if (arena_root(m, i)) offsets[i] = bufs[nb++].offset;
    free(bufs);
    return *bytes == SIZE_MAX ? CD_ETOO_LARGE : 0;
}
