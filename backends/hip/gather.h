#ifndef CD_BACKENDS_HIP_GATHER_H
#define CD_BACKENDS_HIP_GATHER_H

// Gather along one axis on the device (cd_ref_gather): one thread per dst
// element reads the source element its index names.

#include "backends/hip/vendor-host.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst[o][j][i] = src[o][idx[j]][i] for o < outer, j < nidx, i < inner; src
// has len rows per o; idx is device memory holding nidx indices in [0, len).
// Returns 0, CD_EPARAMS, or the HIP error.
int cd_hip_gather(int64_t outer, int64_t len, int64_t inner, int64_t nidx, const int64_t *idx, const float *src,
                  float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_GATHER_H
