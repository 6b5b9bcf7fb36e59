#ifndef CD_BACKENDS_HIP_CONCAT_H
#define CD_BACKENDS_HIP_CONCAT_H

// Concatenation along one axis on the device (ONNX Concat).

#include "backends/hip/vendor-host.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Concatenates n C-order arrays viewed as [outer, cols[j]] (cols[j] = the
// extent of array j along the axis times the product of the dims after it)
// into dst viewed as [outer, sum cols]: row o of dst is row o of srcs[0],
// then row o of srcs[1], ... (cd_ref_concat). One launch per source, all on
// `stream`. Returns 0, CD_EPARAMS for negative sizes, or the HIP error
// (logged).
int cd_hip_concat(int n, int64_t outer, const int64_t *cols, const float *const *srcs, float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_CONCAT_H
