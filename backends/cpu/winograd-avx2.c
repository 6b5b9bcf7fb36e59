// The Winograd conv's body (backends/cpu/winograd-simd.h) built for AVX2 + FMA.
#define CD_SIMD_AVX2
#include "backends/cpu/winograd-simd.h"
