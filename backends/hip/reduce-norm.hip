#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/reduce-norm.h"

// The kept dims (dst order) and the reduced dims, each with its size and
// source element stride.
typedef struct {
    int kind, nkeep, nred;
    int64_t count; // elements reduced into each output
    int64_t keep_dims[CD_MAX_RANK], keep_str[CD_MAX_RANK];
    int64_t red_dims[CD_MAX_RANK], red_str[CD_MAX_RANK];
} reduce_args;

// One thread per output element (grid-stride), walking its reduced elements.
__global__ void cd_hip_reduce_kernel(reduce_args a, size_t total, const float *__restrict__ src,
                                     float *__restrict__ dst) {
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        size_t rest = i;
        int64_t base = 0;
        for (int d = a.nkeep - 1; d >= 0; d--) {
            base += (int64_t)(rest % (size_t)a.keep_dims[d]) * a.keep_str[d];
            rest /= (size_t)a.keep_dims[d];
        }
        float acc = a.kind == CD_REDUCE_MAX ? -INFINITY : 0.0f;
        for (int64_t j = 0; j < a.count; j++) {
            int64_t r = j, off = base;
            for (int d = a.nred - 1; d >= 0; d--) {
                off += (r % a.red_dims[d]) * a.red_str[d];
                r /= a.red_dims[d];
            }
            const float v = src[off];
            if (a.kind == CD_REDUCE_MAX)
                acc = v > acc || v != v ? v : acc;
            else
                acc += v;
        }
        dst[i] = a.kind == CD_REDUCE_MEAN ? acc / (float)a.count : acc;
    }
}

int cd_hip_reduce(const cd_reduce_desc *d, int rank, const int64_t *src_shape, const float *src, float *dst,
                  hipStream_t stream) {
    if (rank < 1 || rank > CD_MAX_RANK) return CD_EPARAMS;
    reduce_args a;
    a.kind = (int)d->kind;
    a.nkeep = a.nred = 0;
    a.count = 1;
    int64_t str[CD_MAX_RANK], s = 1;
    size_t total = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (src_shape[i] < 1) return CD_EPARAMS;
        str[i] = s;
        s *= src_shape[i];
    }
    for (int i = 0; i < rank; i++) {
        if ((d->mask >> i) & 1u) {
            a.red_dims[a.nred] = src_shape[i];
            a.red_str[a.nred++] = str[i];
            a.count *= src_shape[i];
        } else {
            a.keep_dims[a.nkeep] = src_shape[i];
            a.keep_str[a.nkeep++] = str[i];
            total *= (size_t)src_shape[i];
        }
    }
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_reduce_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream, a,
                  total, src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}

// Tree sum of part[0..blockDim.x) (a power of two) into part[0]; every
// thread of the block calls it. Leaves a barrier behind it.
static __device__ void cd_hip_norm_sum(float *part) {
    const int tid = (int)threadIdx.x;
    for (int half = (int)blockDim.x / 2; half > 0; half /= 2) {
        if (tid < half) part[tid] += part[tid + half];
        __syncthreads();
    }
}

// One block per row (grid-stride over rows): the mean, the variance of the
// centred values (two passes, as the reference), then the scaling.
__global__ void cd_hip_layernorm_kernel(int64_t rows, int64_t len, float eps, const float *src, const float *gamma,
                                        const float *beta, float *dst) {
    CD_HIP_DYNAMIC_SHARED(float, part);
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *x = src + row * len;
        float *y = dst + row * len;
        float sum = 0.0f;
        for (int64_t j = tid; j < len; j += nt) sum += x[j];
        part[tid] = sum;
        __syncthreads();
        cd_hip_norm_sum(part);
        const float mean = part[0] / (float)len;
        __syncthreads(); // everyone has read the mean before part is reused
        float sq = 0.0f;
        for (int64_t j = tid; j < len; j += nt) sq += (x[j] - mean) * (x[j] - mean);
        part[tid] = sq;
        __syncthreads();
        cd_hip_norm_sum(part);
        const float inv = 1.0f / sqrtf(part[0] / (float)len + eps);
        for (int64_t j = tid; j < len; j += nt) y[j] = (x[j] - mean) * inv * gamma[j] + (beta ? beta[j] : 0.0f);
        __syncthreads(); // part[0] is read before the next row overwrites it
    }
}

int cd_hip_layernorm(const cd_layernorm_desc *d, int64_t rows, const float *src, const float *gamma, const float *beta,
                     float *dst, hipStream_t stream) {
    if (rows < 0 || d->len < 1 || !gamma) return CD_EPARAMS;
    if (rows == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    int block = g.block_reduce;
    while (block > g.warp_size && block / 2 >= d->len) block /= 2;
    unsigned blocks = rows < g.max_grid[0] ? (unsigned)rows : (unsigned)g.max_grid[0];
    CD_HIP_LAUNCH(cd_hip_layernorm_kernel, dim3(blocks), dim3(block), (size_t)block * sizeof(float), stream, rows,
                  d->len, d->eps, src, gamma, beta, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
