// The int8 sparse kernels for avx2 (sparse/i8-spmm-simd.h).
#define I8_ISA avx2

#include "sparse/i8-spmm-simd.h"
