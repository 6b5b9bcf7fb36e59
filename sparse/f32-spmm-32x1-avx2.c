// Sparse micro-kernel: 32 pixels x 1 output channel(s) per block, AVX2 + FMA.
#define CD_SIMD_AVX2
#include "sparse/f32-spmm-simd.h"

CD_SPMM_SIMD_KERNEL(cd_f32_spmm_ukernel_32x1__avx2, 32, 1)
