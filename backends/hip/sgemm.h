#ifndef CD_BACKENDS_HIP_SGEMM_H
#define CD_BACKENDS_HIP_SGEMM_H

// Tiled shared-memory SGEMM on the device, batched and strided, for
// convolutions (W x im2col) and fully-connected layers (X x W^T).

#include "backends/hip/vendor-host.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// C[b] = alpha * A[b] x B[b] + beta * C[b] for b < batch, where
//   A[b](i, p) = a[b*a_bs + i*a_rs + p*a_cs]   (m x k)
//   B[b](p, j) = b[b*b_bs + p*b_rs + j*b_cs]   (k x n)
//   C[b](i, j) = c[b*c_bs + i*ldc + j]         (m x n)
// Element strides make transposes free (A^T: swap a_rs and a_cs). A batch
// stride of 0 shares that operand across the batch.
typedef struct {
    int m, n, k;
    int batch; // >= 1
    ptrdiff_t a_rs, a_cs, a_bs;
    ptrdiff_t b_rs, b_cs, b_bs;
    ptrdiff_t ldc, c_bs;
    float alpha;
    float beta; // 0: C is not read (may hold garbage)
} cd_hip_gemm_desc;

// Runs the product on the device. Returns 0, CD_EPARAMS for a bad descriptor,
// or the HIP error (logged) of the launch.
int cd_hip_sgemm(const cd_hip_gemm_desc *g, const float *a, const float *b, float *c, hipStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_SGEMM_H
