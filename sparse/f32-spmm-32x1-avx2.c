// Sparse micro-kernel: 32 pixels x 1 output channel(s) per block, AVX2 + FMA.
#include "sparse/f32-spmm-avx2.h"

CD_SPMM_AVX2_KERNEL(cd_f32_spmm_ukernel_32x1__avx2, 32, 1)
