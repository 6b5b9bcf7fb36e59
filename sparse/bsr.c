#include "sparse/bsr.h"

#include "core/errors.h"

#include <string.h>

int cd_bsr_pack(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off, int nr,
                cd_sparse_pack *p) {
    if (nr != 4 && nr != 8) {
        memset(p, 0, sizeof *p);
        return CD_EPARAMS;
    }
    return cd_sparse_pack_build(w, bias, groups, kpg, cols, tap_off, nr, p);
}

double cd_bsr_fill(const cd_sparse_pack *p) {
    const size_t stored = cd_sparse_pack_stored(p);
    return stored ? (double)p->nnz / (double)stored : 1.0;
}
