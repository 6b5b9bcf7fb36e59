// Sparse micro-kernel: 8 pixels x 8 output channel(s) per block, AVX2 + FMA.
#include "sparse/f32-spmm-avx2.h"

CD_SPMM_AVX2_KERNEL(cd_f32_spmm_ukernel_8x8__avx2, 8, 8)
