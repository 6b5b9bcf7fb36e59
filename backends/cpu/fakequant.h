#ifndef CD_BACKENDS_CPU_FAKEQUANT_H
#define CD_BACKENDS_CPU_FAKEQUANT_H

// The CPU backend's fake quantization of n elements with one scale and zero
// point (kernels/op-desc.h cd_fakequant_apply, bit for bit: the same
// division, round-half-even, clamp and multiply), vectorized and split over
// the calling OpenMP team. A QDQ model runs one per quantized activation;
// the reference loop (a libm rintf per element) cost ~10 ns an element.

#include <stddef.h>

void cd_cpu_fakequant(size_t n, float scale, float zero_point, float qmin, float qmax, const float *src, float *dst);

// The minimum and maximum of n elements (0 for none; NaN skipped), over the
// calling OpenMP team: DynamicQuantizeLinear's range.
void cd_cpu_minmax(size_t n, const float *src, float *mn, float *mx);

// The AVX2 body (fakequant-avx2.c); only where the CPU runs AVX2.
void cd_cpu_fakequant_avx2(size_t n, float scale, float zero_point, float qmin, float qmax, const float *src,
                           float *dst);

#endif // CD_BACKENDS_CPU_FAKEQUANT_H
