#ifndef CD_BACKENDS_HIP_DWCONV_H
#define CD_BACKENDS_HIP_DWCONV_H

// Direct depthwise convolution on the device, bias, residual and activation
// fused (MobileNet's 3x3/5x5 depthwise layers).

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#ifdef __cplusplus
extern "C" {
#endif

// The convolution of cd_ref_conv2d for d->groups == d->c and d->k a multiple
// of d->c (channel multiplier k/c; output channel k reads input channel
// k / (k/c)). w is OIHW [k, 1, r, s]; bias (k) and residual (shaped like dst)
// may be NULL; d->oh/d->ow must be set. Returns 0, CD_EUNSUPPORTED when the
// convolution is not depthwise, CD_EPARAMS for a bad descriptor, or the HIP
// error (logged).
int cd_hip_dwconv(const cd_conv_desc *d, const float *src, const float *w, const float *bias, const float *residual,
                  float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_DWCONV_H
