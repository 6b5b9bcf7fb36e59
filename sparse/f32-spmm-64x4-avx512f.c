// Sparse micro-kernel: 64 pixels x 4 output channel(s) per block, AVX-512.
#define CD_SIMD_AVX512F
#include "sparse/f32-spmm-simd.h"

CD_SPMM_SIMD_KERNEL(cd_f32_spmm_ukernel_64x4__avx512f, 64, 4)
