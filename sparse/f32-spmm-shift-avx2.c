// The aligned-shift CSR micro-kernel, AVX2 (contract: sparse/spmm-shift.h,
// V = 8; the body is sparse/f32-spmm-shift-simd.h).
#define CD_SIMD_AVX2
// 16 ymm: one set for the shifted taps, folded as soon as each is done, so
// a tile keeps 2 NV + 2 registers live (NV <= 6 leaves room for the weight).
#define CD_SHIFT_FOLD 1
#define CD_SHIFT_NVMAX 6
#include "sparse/f32-spmm-shift-simd.h"
