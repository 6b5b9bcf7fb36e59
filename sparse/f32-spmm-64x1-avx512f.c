// Sparse micro-kernel: 64 pixels x 1 output channel(s) per block, AVX-512.
#include "sparse/f32-spmm-avx512f.h"

CD_SPMM_AVX512F_KERNEL(cd_f32_spmm_ukernel_64x1__avx512f, 64, 1)
