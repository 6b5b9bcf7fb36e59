#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/softmax.h"

// Tree reduction of part[0..blockDim.x) (a power of two) into part[0];
// every thread of the block must call it. Leaves a barrier behind it.
static __device__ void cd_hip_softmax_reduce(float *part, int is_max) {
    const int tid = (int)threadIdx.x;
    for (int half = (int)blockDim.x / 2; half > 0; half /= 2) {
        if (tid < half) part[tid] = is_max ? fmaxf(part[tid], part[tid + half]) : part[tid] + part[tid + half];
        __syncthreads();
    }
}

// One block per row (o, i) of `len` elements at stride `inner` (grid-stride
// over rows): block max, then block sum of exponentials, then the scaling.
// No __restrict__: dst may alias src.
__global__ void cd_hip_softmax_kernel(int64_t rows, int64_t len, int64_t inner, const float *src, float *dst) {
    CD_HIP_DYNAMIC_SHARED(float, part);
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t base = row / inner * len * inner + row % inner;
        float mx = -INFINITY;
        for (int64_t j = tid; j < len; j += nt) mx = fmaxf(mx, src[base + j * inner]);
        part[tid] = mx;
        __syncthreads();
        cd_hip_softmax_reduce(part, 1);
        mx = part[0];
        __syncthreads(); // everyone has read the max before part is reused
        float sum = 0.0f;
        for (int64_t j = tid; j < len; j += nt) sum += expf(src[base + j * inner] - mx);
        part[tid] = sum;
        __syncthreads();
        cd_hip_softmax_reduce(part, 0);
        const float scale = 1.0f / part[0];
        for (int64_t j = tid; j < len; j += nt) dst[base + j * inner] = expf(src[base + j * inner] - mx) * scale;
        __syncthreads(); // part[0] is read before the next row overwrites it
    }
}

int cd_hip_softmax(int64_t outer, int64_t len, int64_t inner, const float *src, float *dst, hipStream_t stream) {
    if (outer < 0 || len < 1 || inner < 1) return CD_EPARAMS;
    int64_t rows = outer * inner;
    if (rows == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    int block = g.block_reduce;
    while (block > g.warp_size && block / 2 >= len) block /= 2;
    unsigned blocks = rows < g.max_grid[0] ? (unsigned)rows : (unsigned)g.max_grid[0];
    CD_HIP_LAUNCH(cd_hip_softmax_kernel, dim3(blocks), dim3(block), (size_t)block * sizeof(float), stream, rows, len,
                  inner, src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
