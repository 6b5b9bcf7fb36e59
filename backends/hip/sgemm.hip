#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/sgemm.h"

// Classic shared-memory tiling: a block of T x T threads computes a T x T
// tile of C; for each step of T along k it stages a T x T tile of A and one
// of B in shared memory (2 T^2 floats, dynamic), synchronises, and
// accumulates. Out-of-range rows, columns and k are staged as zeros, so any
// m, n, k work. T comes from the device (cd_hip_geometry.gemm_tile) and is
// blockDim.x == blockDim.y here.
__global__ void cd_hip_sgemm_kernel(cd_hip_gemm_desc p, const float *__restrict__ a, const float *__restrict__ b,
                                    float *__restrict__ c) {
    CD_HIP_DYNAMIC_SHARED(float, smem);
    const int t = (int)blockDim.x;
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    float *as = smem;         // as[ty][kk]: A(row, k0 + kk)
    float *bs = smem + t * t; // bs[kk][tx]: B(k0 + kk, col)
    const int row = (int)blockIdx.y * t + ty;
    const int col = (int)blockIdx.x * t + tx;
    const size_t z = blockIdx.z;
    a += z * p.a_bs;
    b += z * p.b_bs;
    c += z * p.c_bs;
    float acc = 0.0f;
    for (int k0 = 0; k0 < p.k; k0 += t) {
        int ka = k0 + tx, kb = k0 + ty;
        as[ty * t + tx] = row < p.m && ka < p.k ? a[row * p.a_rs + ka * p.a_cs] : 0.0f;
        bs[ty * t + tx] = kb < p.k && col < p.n ? b[kb * p.b_rs + col * p.b_cs] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < t; kk++) acc += as[ty * t + kk] * bs[kk * t + tx];
        __syncthreads();
    }
    if (row < p.m && col < p.n) {
        float *out = &c[row * p.ldc + col];
        *out = p.beta != 0.0f ? p.alpha * acc + p.beta * *out : p.alpha * acc;
    }
}

int cd_hip_sgemm(const cd_hip_gemm_desc *g, const float *a, const float *b, float *c, hipStream_t stream) {
    if (!g || g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 1) return CD_EPARAMS;
    if (g->m == 0 || g->n == 0) return 0;
    cd_hip_geometry geo;
    int rc = cd_hip_geometry_get(&geo);
    if (rc) return rc;
    const int t = geo.gemm_tile;
    const size_t shared = 2 * (size_t)t * t * sizeof(float);
    unsigned gx = (unsigned)((g->n + t - 1) / t), gy = (unsigned)((g->m + t - 1) / t);
    if (gx > (unsigned)geo.max_grid[0] || gy > (unsigned)geo.max_grid[1]) return CD_EPARAMS;
    // The batch rides on grid z; a batch beyond the device's z limit is split.
    for (int b0 = 0; b0 < g->batch; b0 += geo.max_grid[2]) {
        int nb = g->batch - b0 < geo.max_grid[2] ? g->batch - b0 : geo.max_grid[2];
        const float *ab = a + b0 * g->a_bs;
        const float *bb = b + b0 * g->b_bs;
        float *cb = c + b0 * g->c_bs;
        cd_hip_gemm_desc p = *g;
        CD_HIP_LAUNCH(cd_hip_sgemm_kernel, dim3(gx, gy, (unsigned)nb), dim3(t, t), shared, stream, p, ab, bb, cb);
        CD_HIP_CHECK(hipGetLastError());
    }
    return 0;
}
