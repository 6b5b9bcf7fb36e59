#ifndef CD_BACKENDS_HIP_CONV2D_H
#define CD_BACKENDS_HIP_CONV2D_H

// A whole dense convolution on the device, composed from the kernels:
// direct depthwise (dwconv), or im2col + tiled SGEMM per group (1x1 stride-1
// unpadded convolutions skip im2col and multiply the activations directly),
// then the fused bias + residual + activation epilogue.

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Device scratch bytes cd_hip_conv2d needs for d (0 when it needs none).
size_t cd_hip_conv2d_workspace(const cd_conv_desc *d);

// dst = the convolution of cd_ref_conv2d (NCHW, OIHW weights, groups,
// strides, pads, dilations; bias and residual optional, residual used when
// d->has_residual; activation d->act). d->oh/d->ow must be set; workspace
// holds at least cd_hip_conv2d_workspace(d) bytes of device memory. Returns 0,
// CD_EPARAMS for a bad descriptor or a short workspace, or the HIP error
// (logged).
int cd_hip_conv2d(const cd_conv_desc *d, const float *src, const float *w, const float *bias, const float *residual,
                  float *dst, void *workspace, size_t workspace_bytes, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_CONV2D_H
