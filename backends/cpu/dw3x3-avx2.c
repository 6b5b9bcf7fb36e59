// Depthwise 3x3, AVX2, nChw8c (contract: backends/cpu/dw3x3.h; the body is
// backends/cpu/dw3x3-simd.h).
#define CD_SIMD_AVX2
#include "backends/cpu/dw3x3-simd.h"
