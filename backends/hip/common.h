#ifndef CD_BACKENDS_HIP_COMMON_H
#define CD_BACKENDS_HIP_COMMON_H

// Device helpers shared by the kernels in backends/hip/*.hip. Include after
// backends/hip/vendor.h.

#include "kernels/op-desc.h"

// The activation of kernels/op-desc.h, the same formulas as cd_act_apply.
static __device__ __forceinline__ float cd_hip_act(cd_activation act, float x) {
    switch (act.kind) {
    case CD_ACT_NONE: return x;
    case CD_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case CD_ACT_CLIP: return fminf(fmaxf(x, act.alpha), act.beta);
    case CD_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case CD_ACT_HARDSIGMOID: return fmaxf(0.0f, fminf(1.0f, act.alpha * x + act.beta));
    case CD_ACT_HARDSWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case CD_ACT_LEAKYRELU: return x >= 0.0f ? x : act.alpha * x;
    }
    return x;
}

// Index of this thread in a 1-D grid-stride loop, and the loop's stride.
static __device__ __forceinline__ size_t cd_hip_global_id(void) {
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}
static __device__ __forceinline__ size_t cd_hip_grid_stride(void) {
    return (size_t)gridDim.x * blockDim.x;
}

#endif // CD_BACKENDS_HIP_COMMON_H
