// The Winograd conv's body (backends/cpu/winograd-simd.h) built for AVX-512 F.
#define CD_SIMD_AVX512F
#include "backends/cpu/winograd-simd.h"
