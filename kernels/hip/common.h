#ifndef CD_KERNELS_HIP_COMMON_H
#define CD_KERNELS_HIP_COMMON_H

// Device helpers shared by the kernels in kernels/hip/*.hip. Include after
// kernels/hip/vendor.h.

#include "kernels/op-desc.h"

// The activation of kernels/op-desc.h (cd_act_apply, as cd_ref_act).
static __device__ __forceinline__ float cd_hip_act(cd_activation act, float x) {
    return cd_act_apply(act, x);
}

// Index of this thread in a 1-D grid-stride loop, and the loop's stride.
static __device__ __forceinline__ size_t cd_hip_global_id(void) {
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}
static __device__ __forceinline__ size_t cd_hip_grid_stride(void) {
    return (size_t)gridDim.x * blockDim.x;
}

#endif // CD_KERNELS_HIP_COMMON_H
