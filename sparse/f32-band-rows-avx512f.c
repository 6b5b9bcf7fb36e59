// Band rows in and out, AVX-512 (contract: sparse/band-rows.h, V = 16; the
// body is sparse/f32-band-rows-simd.h).
#define CD_SIMD_AVX512F
#include "sparse/f32-band-rows-simd.h"
