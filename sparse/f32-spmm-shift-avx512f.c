// The aligned-shift CSR micro-kernel, AVX-512 (contract: sparse/spmm-shift.h,
// V = 16; the body is sparse/f32-spmm-shift-simd.h).
#define CD_SIMD_AVX512F
// 32 zmm: taps 1 and 2 keep their own sets to the end of the block, and
// tiles of 8 vectors keep 8 + 9 + 9 of them and the weight in registers
// (measured on ResNet-50 3x3 at 80-95%, 1 thread: 1.3x faster than tiles of
// 4, whose shifted taps load 5 vectors per 4).
#define CD_SHIFT_FOLD 0
#define CD_SHIFT_NVMAX 8
#include "sparse/f32-spmm-shift-simd.h"
