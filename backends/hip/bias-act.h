#ifndef CD_BACKENDS_HIP_BIAS_ACT_H
#define CD_BACKENDS_HIP_BIAS_ACT_H

// Fused epilogue on the device: per-channel bias, optional residual, activation.

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst[i,c,j] = act(src[i,c,j] + bias[c] + residual[i,c,j]) over an
// [n, c, inner] tensor (NCHW: inner = H*W; a fully-connected output: inner 1).
// bias and residual may be NULL; dst may be src (in place) or residual.
// Returns 0, CD_EPARAMS for negative sizes, or the HIP error (logged).
int cd_hip_bias_act(int64_t n, int64_t c, int64_t inner, const float *src, const float *bias, const float *residual,
                    cd_activation act, float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_BIAS_ACT_H
