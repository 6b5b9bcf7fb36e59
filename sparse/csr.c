#include "sparse/csr.h"

int cd_csr_pack(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off,
                cd_sparse_pack *p) {
    return cd_sparse_pack_build(w, bias, groups, kpg, cols, tap_off, 1, p);
}
