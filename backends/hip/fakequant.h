#ifndef CD_BACKENDS_HIP_FAKEQUANT_H
#define CD_BACKENDS_HIP_FAKEQUANT_H

// Fake quantization on the device: the QuantizeLinear -> DequantizeLinear
// pair of a QDQ model, in float (kernels/op-desc.h cd_fakequant_apply).

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst[i] = fakequant(src[i]) over total elements with the parameters of
// channel i / inner % channels (channels 1: per tensor). scale and
// zero_point are device arrays of channels values. dst may be src.
// Returns 0, CD_EPARAMS for a bad size, or the HIP error (logged).
int cd_hip_fakequant(int64_t total, int64_t channels, int64_t inner, const float *src, const float *scale,
                     const float *zero_point, float qmin, float qmax, float *dst, hipStream_t stream);

// The dynamic form (DynamicQuantizeLinear): items of per_item elements,
// each with the parameters of its own range (cd_dynquant_params).
int cd_hip_fakequant_dynamic(int64_t items, int64_t per_item, const float *src, float qmin, float qmax, float *dst,
                             hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_FAKEQUANT_H
