#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/global-pool.h"

#include <float.h>

// One block per plane (grid-stride over planes): each thread reduces a
// strided slice into a register, then a shared-memory tree halves the
// block's partial results; blockDim.x is a power of two.
__global__ void cd_hip_global_pool_kernel(int is_max, int64_t planes, int64_t hw, const float *__restrict__ src,
                                          float *__restrict__ dst) {
    CD_HIP_DYNAMIC_SHARED(float, part);
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
        const float *x = src + p * hw;
        float v = is_max ? -FLT_MAX : 0.0f;
        for (int64_t j = tid; j < hw; j += nt) v = is_max ? fmaxf(v, x[j]) : v + x[j];
        part[tid] = v;
        __syncthreads();
        for (int half = nt / 2; half > 0; half /= 2) {
            if (tid < half) part[tid] = is_max ? fmaxf(part[tid], part[tid + half]) : part[tid] + part[tid + half];
            __syncthreads();
        }
        if (tid == 0) dst[p] = is_max ? part[0] : part[0] / (float)hw;
        __syncthreads(); // part[0] is read before the next plane overwrites it
    }
}

int cd_hip_global_pool(cd_pool_kind kind, int64_t planes, int64_t hw, const float *src, float *dst,
                       hipStream_t stream) {
    if (planes < 0 || hw < 1 || (kind != CD_POOL_MAX && kind != CD_POOL_AVG)) return CD_EPARAMS;
    if (planes == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    // Small planes need no more threads than they have elements.
    int block = g.block_reduce;
    while (block > g.warp_size && block / 2 >= hw) block /= 2;
    unsigned blocks = planes < g.max_grid[0] ? (unsigned)planes : (unsigned)g.max_grid[0];
    CD_HIP_LAUNCH(cd_hip_global_pool_kernel, dim3(blocks), dim3(block), (size_t)block * sizeof(float), stream,
                  kind == CD_POOL_MAX ? 1 : 0, planes, hw, src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
