// Sparse micro-kernel: 16 pixels x 4 output channel(s) per block, AVX2 + FMA.
#define CD_SIMD_AVX2
#include "sparse/f32-spmm-simd.h"

CD_SPMM_SIMD_KERNEL(cd_f32_spmm_ukernel_16x4__avx2, 16, 4)
