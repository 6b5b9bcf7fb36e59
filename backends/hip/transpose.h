#ifndef CD_BACKENDS_HIP_TRANSPOSE_H
#define CD_BACKENDS_HIP_TRANSPOSE_H

// Transpose (ONNX Transpose, any permutation) on the device.

#include "backends/hip/vendor-host.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst = src with its dimensions permuted: dst dim i is src dim perm[i]
// (cd_ref_transpose). shape is src's, C order, rank 1..8. Returns 0,
// CD_EPARAMS for a bad rank, dimension or permutation, or the HIP error
// (logged).
int cd_hip_transpose(int rank, const int64_t *shape, const int *perm, const float *src, float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_TRANSPOSE_H
