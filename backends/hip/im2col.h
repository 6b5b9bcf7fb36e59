#ifndef CD_BACKENDS_HIP_IM2COL_H
#define CD_BACKENDS_HIP_IM2COL_H

// im2col on the device for one group of a convolution, every image of the
// batch at once.

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#ifdef __cplusplus
extern "C" {
#endif

// Writes col[n][(c*R + r)*S + s][oh*OW + ow] = src[n, group*C/G + c, ih, iw]
// (0 where (ih, iw) falls in the padding) for c < C/G, every n < d->n.
// src is NCHW (d->n images), col holds d->n * (C/G)*R*S * OH*OW floats;
// d->oh/d->ow must be set. Returns 0, CD_EPARAMS for a bad descriptor or
// group, or the HIP error (logged) of the launch.
int cd_hip_im2col(const cd_conv_desc *d, int group, const float *src, float *col, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_IM2COL_H
