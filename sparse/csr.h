#ifndef CD_SPARSE_CSR_H
#define CD_SPARSE_CSR_H

// CSR packing: one block per output channel (XNNPACK-style: per channel its
// bias, nonzero count, values and input offsets). Layout: sparse/sparse-pack.h.

#include "sparse/sparse-pack.h"

// Packs OIHW weights as CSR (see cd_sparse_pack_build for the arguments).
// Returns 0, CD_EPARAMS or CD_ENOMEM.
int cd_csr_pack(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off,
                cd_sparse_pack *p);

#endif // CD_SPARSE_CSR_H
