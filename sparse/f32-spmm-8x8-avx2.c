// Sparse micro-kernel: 8 pixels x 8 output channel(s) per block, AVX2 + FMA.
#define CD_SIMD_AVX2
#include "sparse/f32-spmm-simd.h"

CD_SPMM_SIMD_KERNEL(cd_f32_spmm_ukernel_8x8__avx2, 8, 8)
