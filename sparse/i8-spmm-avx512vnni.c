// The int8 sparse kernels for avx512vnni (sparse/i8-spmm-simd.h).
#define I8_ISA avx512vnni
#define I8_AVX512
#define I8_VNNI
#include "sparse/i8-spmm-simd.h"
