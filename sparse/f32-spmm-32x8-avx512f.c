// Sparse micro-kernel: 32 pixels x 8 output channel(s) per block, AVX-512.
#define CD_SIMD_AVX512F
#include "sparse/f32-spmm-simd.h"

CD_SPMM_SIMD_KERNEL(cd_f32_spmm_ukernel_32x8__avx512f, 32, 8)
