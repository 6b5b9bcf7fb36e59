#ifndef CD_BACKENDS_HIP_REORDER_H
#define CD_BACKENDS_HIP_REORDER_H

// Layout conversion NCHW <-> NCHW16C on the device (the runtime's reorder
// layers; kernels/op-desc.h describes the layouts).

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#ifdef __cplusplus
extern "C" {
#endif

// dst (layout `to`) = src (layout `from`) for an n x c x h x w activation
// (cd_ref_reorder): NCHW16C pads c to a multiple of 16, the padding channels
// are written as 0. from == to is a plain copy. Returns 0, CD_EPARAMS for bad
// sizes or layouts, or the HIP error (logged).
int cd_hip_reorder(cd_layout from, cd_layout to, int n, int c, int h, int w, const float *src, float *dst,
                   hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_REORDER_H
