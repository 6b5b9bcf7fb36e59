// Depthwise 3x3, AVX-512, nChw16c (contract: backends/cpu/dw3x3.h; the body
// is backends/cpu/dw3x3-simd.h).
#define CD_SIMD_AVX512F
#include "backends/cpu/dw3x3-simd.h"
