// Band rows in and out, AVX2 (contract: sparse/band-rows.h, V = 8; the body
// is sparse/f32-band-rows-simd.h).
#define CD_SIMD_AVX2
#include "sparse/f32-band-rows-simd.h"
