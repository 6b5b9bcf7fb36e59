#ifndef CD_BACKENDS_HIP_SOFTMAX_H
#define CD_BACKENDS_HIP_SOFTMAX_H

// Softmax on the device along one axis of a tensor viewed as [outer, len, inner].

#include "backends/hip/vendor-host.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst[o, j, i] = exp(src[o, j, i] - max_j) / sum_j exp(src[o, j, i] - max_j)
// for the C-order tensor [outer, len, inner] (ONNX opset 13 Softmax on axis a:
// outer = prod(dims < a), len = dims[a], inner = prod(dims > a); the older
// opsets' flattening is inner = 1, len = prod(dims >= axis)). dst may be src.
// Returns 0, CD_EPARAMS, or the HIP error (logged).
int cd_hip_softmax(int64_t outer, int64_t len, int64_t inner, const float *src, float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_SOFTMAX_H
