#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/fakequant.h"

// One thread per element (grid-stride). No __restrict__: dst may alias src.
__global__ void cd_hip_fakequant_kernel(size_t total, size_t channels, size_t inner, const float *src,
                                        const float *scale, const float *zero_point, float qmin, float qmax,
                                        float *dst) {
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        size_t c = channels > 1 ? i / inner % channels : 0;
        dst[i] = cd_fakequant_apply(src[i], scale[c], zero_point[c], qmin, qmax);
    }
}

int cd_hip_fakequant(int64_t total, int64_t channels, int64_t inner, const float *src, const float *scale,
                     const float *zero_point, float qmin, float qmax, float *dst, hipStream_t stream) {
    if (total < 0 || channels < 1 || inner < 1) return CD_EPARAMS;
    if (total == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_fakequant_kernel, dim3(cd_hip_grid_1d(&g, (size_t)total, g.block_1d)), dim3(g.block_1d), 0,
                  stream, (size_t)total, (size_t)channels, (size_t)inner, src, scale, zero_point, qmin, qmax, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}

// One block per item (grid-stride over items): its minimum and maximum by a
// tree in shared memory (blockDim.x a power of two), then the item
// quantized with them.
__global__ void cd_hip_fakequant_dynamic_kernel(int64_t items, int64_t per_item, const float *src, float qmin,
                                                float qmax, float *dst) {
    CD_HIP_DYNAMIC_SHARED(float, part); // blockDim.x minima, then as many maxima
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    for (int64_t it = blockIdx.x; it < items; it += gridDim.x) {
        const float *x = src + it * per_item;
        float lo = 0.0f, hi = 0.0f;
        for (int64_t j = tid; j < per_item; j += nt) {
            lo = fminf(lo, x[j]);
            hi = fmaxf(hi, x[j]);
        }
        part[tid] = lo;
        part[nt + tid] = hi;
        __syncthreads();
        for (int half = nt / 2; half > 0; half /= 2) {
            if (tid < half) {
                part[tid] = fminf(part[tid], part[tid + half]);
                part[nt + tid] = fmaxf(part[nt + tid], part[nt + tid + half]);
            }
            __syncthreads();
        }
        float scale, zp;
        cd_dynquant_params(part[0], part[nt], qmin, qmax, &scale, &zp);
        for (int64_t j = tid; j < per_item; j += nt)
            dst[it * per_item + j] = cd_fakequant_apply(x[j], scale, zp, qmin, qmax);
        __syncthreads(); // part is read before the next item overwrites it
    }
}

int cd_hip_fakequant_dynamic(int64_t items, int64_t per_item, const float *src, float qmin, float qmax, float *dst,
                             hipStream_t stream) {
    if (items < 0 || per_item < 0) return CD_EPARAMS;
    if (items == 0 || per_item == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    int block = g.block_reduce;
    while (block > g.warp_size && block / 2 >= per_item) block /= 2;
    unsigned blocks = items < g.max_grid[0] ? (unsigned)items : (unsigned)g.max_grid[0];
    CD_HIP_LAUNCH(cd_hip_fakequant_dynamic_kernel, dim3(blocks), dim3(block), 2 * (size_t)block * sizeof(float), stream,
                  items, per_item, src, qmin, qmax, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
