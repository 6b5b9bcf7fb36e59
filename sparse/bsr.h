#ifndef CD_SPARSE_BSR_H
#define CD_SPARSE_BSR_H

// BSR packing: blocks of NR (4 or 8) consecutive output channels of a group
// that share each input position, so a kernel loads one input vector per
// NR multiply-adds. Channels left over (kpg % NR) become one-channel blocks.
// Layout: sparse/sparse-pack.h.

#include "sparse/sparse-pack.h"

// Packs OIHW weights in blocks of nr (4 or 8) output channels (see
// cd_sparse_pack_build for the other arguments). Returns 0, CD_EPARAMS (nr
// not 4 or 8, bad sizes) or CD_ENOMEM.
int cd_bsr_pack(const float *w, const float *bias, int groups, int kpg, int cols, const int32_t *tap_off, int nr,
                cd_sparse_pack *p);

// Fill ratio of the pack's blocks: nonzeros / stored block weights (1 when
// every stored weight is nonzero; 1 for an empty pack).
double cd_bsr_fill(const cd_sparse_pack *p);

#endif // CD_SPARSE_BSR_H
