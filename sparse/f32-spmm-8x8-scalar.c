// Sparse micro-kernel: 8 pixels x 8 output channel(s) per block, portable C.
#include "sparse/f32-spmm-scalar.h"

CD_SPMM_SCALAR_KERNEL(cd_f32_spmm_ukernel_8x8__scalar, 8)
