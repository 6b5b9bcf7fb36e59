#ifndef CD_BACKENDS_HIP_PAD_SLICE_H
#define CD_BACKENDS_HIP_PAD_SLICE_H

// Pad, Slice and Tile on the device (cd_ref_pad, cd_ref_slice, cd_ref_tile): one gather kernel,
// each dst element reading the source element its per-dim mapping names.

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst (dst_shape) = src (src_shape) padded as d says. Shapes C order with
// the batch, rank 1..CD_MAX_RANK. Returns 0, CD_EPARAMS, or the HIP error.
int cd_hip_pad(const cd_pad_desc *d, int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape,
               float *dst, hipStream_t stream);

// dst (dst_shape) = the strided selection d of src (src_shape). Returns 0,
// CD_EPARAMS, or the HIP error.
int cd_hip_slice(const cd_slice_desc *d, int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape,
                 float *dst, hipStream_t stream);

// dst (dst_shape) = src (src_shape) repeated (cd_ref_tile: Tile, Expand).
// Returns 0, CD_EPARAMS, or the HIP error.
int cd_hip_tile(int rank, const int64_t *src_shape, const float *src, const int64_t *dst_shape, float *dst,
                hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_PAD_SLICE_H
