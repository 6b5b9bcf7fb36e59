#ifndef CD_BACKENDS_HIP_POOL2D_H
#define CD_BACKENDS_HIP_POOL2D_H

// Windowed max/average pooling on the device (MaxPool, AveragePool).

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#ifdef __cplusplus
extern "C" {
#endif

// The pooling of cd_ref_pool2d (NCHW; ceil_mode windows; count_include_pad
// for averages). d->oh/d->ow must be set (cd_pool_out_dims). Returns 0,
// CD_EPARAMS for a bad descriptor, or the HIP error (logged).
int cd_hip_pool2d(const cd_pool_desc *d, const float *src, float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_POOL2D_H
