#ifndef CD_BACKENDS_HIP_BINARY_H
#define CD_BACKENDS_HIP_BINARY_H

// Elementwise Add/Mul/Sub/Div on the device with numpy broadcasting,
// activation fused (Add+Relu of residual blocks, the squeeze-excitation Mul).

#include "backends/hip/vendor-host.h"
#include "kernels/op-desc.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Same values as cd_binary_kind of kernels/cpu/ref.h.
typedef enum {
    CD_HIP_BINARY_ADD = 0,
    CD_HIP_BINARY_MUL = 1,
    CD_HIP_BINARY_SUB = 2,
    CD_HIP_BINARY_DIV = 3,
    CD_HIP_BINARY_MIN = 4, // (the values of cd_binary_kind)
    CD_HIP_BINARY_MAX = 5,
} cd_hip_binary_op;

// dst = act(a op b) where a ([a_rank] a_shape) and b ([b_rank] b_shape)
// broadcast numpy-style (shapes aligned on the right; a dimension of 1
// stretches). dst holds the broadcast shape, C order; it may alias a or b
// when that operand already has the full shape. Ranks 0..8. Returns 0,
// CD_ESHAPE when the shapes do not broadcast, CD_EPARAMS for a bad rank or
// dimension, or the HIP error (logged).
int cd_hip_binary(cd_hip_binary_op op, int a_rank, const int64_t *a_shape, int b_rank, const int64_t *b_shape,
                  const float *a, const float *b, cd_activation act, float *dst, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_BINARY_H
