#ifndef CD_BACKENDS_HIP_COMMON_H
#define CD_BACKENDS_HIP_COMMON_H

// Device helpers shared by the kernels in backends/hip/*.hip. Include after
// backends/hip/vendor.h.

#include "kernels/op-desc.h"

// The activation of kernels/op-desc.h, the one definition (cd_act_apply).
static __device__ __forceinline__ float cd_hip_act(cd_activation act, float x) { return cd_act_apply(act, x); }

// Index of this thread in a 1-D grid-stride loop, and the loop's stride.
static __device__ __forceinline__ size_t cd_hip_global_id(void) {
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}
static __device__ __forceinline__ size_t cd_hip_grid_stride(void) { return (size_t)gridDim.x * blockDim.x; }

#endif // CD_BACKENDS_HIP_COMMON_H
