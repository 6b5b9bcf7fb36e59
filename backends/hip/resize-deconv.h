#ifndef CD_BACKENDS_HIP_RESIZE_DECONV_H
#define CD_BACKENDS_HIP_RESIZE_DECONV_H

// Resize and ConvTranspose on the device (cd_ref_resize, cd_ref_deconv):
// both gather kernels, one thread per output element.

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst = src resized as d says (batch items, NCHW). Returns 0, CD_EPARAMS, or
// the HIP error.
int cd_hip_resize(const cd_resize_desc *d, int batch, const float *src, float *dst, hipStream_t stream);

// dst = act(ConvTranspose(src, w) + bias) (batch items, NCHW); w ([c][k /
// groups][r][s]) and bias (k or NULL) are device arrays. Returns 0,
// CD_EPARAMS, or the HIP error.
int cd_hip_deconv(const cd_deconv_desc *d, int batch, const float *src, const float *w, const float *bias, float *dst,
                  hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_RESIZE_DECONV_H
