// Sparse micro-kernel: 32 pixels x 8 output channel(s) per block, AVX-512.
#include "sparse/f32-spmm-avx512f.h"

CD_SPMM_AVX512F_KERNEL(cd_f32_spmm_ukernel_32x8__avx512f, 32, 8)
