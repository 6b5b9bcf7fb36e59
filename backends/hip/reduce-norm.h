#ifndef CD_BACKENDS_HIP_REDUCE_NORM_H
#define CD_BACKENDS_HIP_REDUCE_NORM_H

// Reductions (ReduceSum/Mean/Max over any dims) and layer normalization on
// the device (cd_ref_reduce, cd_ref_layernorm).

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst = the reduction d of src (src_shape, C order with the batch, rank 1..
// CD_MAX_RANK) over the dims in d->mask; dst holds the kept dims in order.
// Returns 0, CD_EPARAMS, or the HIP error.
int cd_hip_reduce(const cd_reduce_desc *d, int rank, const int64_t *src_shape, const float *src, float *dst,
                  hipStream_t stream);

// Layer normalization of rows rows of d->len: gamma and beta (NULL: none)
// are device arrays of d->len. Returns 0, CD_EPARAMS, or the HIP error.
int cd_hip_layernorm(const cd_layernorm_desc *d, int64_t rows, const float *src, const float *gamma, const float *beta,
                     float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_REDUCE_NORM_H
