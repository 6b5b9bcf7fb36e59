// The int8 sparse kernels for avx512f (sparse/i8-spmm-simd.h).
#define I8_ISA avx512f
#define I8_AVX512
#include "sparse/i8-spmm-simd.h"
