// Sparse micro-kernel: 16 pixels x 4 output channel(s) per block, AVX2 + FMA.
#include "sparse/f32-spmm-avx2.h"

CD_SPMM_AVX2_KERNEL(cd_f32_spmm_ukernel_16x4__avx2, 16, 4)
