#ifndef CD_BACKENDS_HIP_GLOBAL_POOL_H
#define CD_BACKENDS_HIP_GLOBAL_POOL_H

// Global average/max pooling on the device (GlobalAveragePool, GlobalMaxPool).

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst[p] = mean (CD_POOL_AVG) or max (CD_POOL_MAX) of src[p*hw .. p*hw+hw)
// for each of the `planes` planes (N*C for NCHW). hw >= 1. Returns 0,
// CD_EPARAMS, or the HIP error (logged).
int cd_hip_global_pool(cd_pool_kind kind, int64_t planes, int64_t hw, const float *src, float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_GLOBAL_POOL_H
