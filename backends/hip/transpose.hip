#include "backends/hip/vendor.h"

#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"
#include "backends/hip/transpose.h"

#define CD_HIP_TRANSPOSE_MAX_RANK 8

// Output dims and, per output dim, the source element stride; by value.
typedef struct {
    int rank;
    int64_t dims[CD_HIP_TRANSPOSE_MAX_RANK];
    int64_t src_str[CD_HIP_TRANSPOSE_MAX_RANK];
} transpose_args;

// One thread per output element (grid-stride): writes are contiguous, reads
// gather through the permuted strides.
__global__ void cd_hip_transpose_kernel(transpose_args a, size_t total, const float *__restrict__ src,
                                        float *__restrict__ dst) {
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        size_t rest = i;
        int64_t si = 0;
        for (int d = a.rank - 1; d >= 0; d--) {
            int64_t x = (int64_t)(rest % (size_t)a.dims[d]);
            rest /= (size_t)a.dims[d];
            si += x * a.src_str[d];
        }
        dst[i] = src[si];
    }
}

int cd_hip_transpose(int rank, const int64_t *shape, const int *perm, const float *src, float *dst,
                     hipStream_t stream) {
    if (rank < 1 || rank > CD_HIP_TRANSPOSE_MAX_RANK) return CD_EPARAMS;
    int64_t str[CD_HIP_TRANSPOSE_MAX_RANK];
    int seen[CD_HIP_TRANSPOSE_MAX_RANK] = {0};
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (shape[d] < 0) return CD_EPARAMS;
        str[d] = s;
        s *= shape[d];
    }
    transpose_args a;
    a.rank = rank;
    size_t total = 1;
    for (int i = 0; i < rank; i++) {
        if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]]++) return CD_EPARAMS;
        a.dims[i] = shape[perm[i]];
        a.src_str[i] = str[perm[i]];
        total *= (size_t)a.dims[i];
    }
    if (total == 0) return 0;
    cd_hip_geometry g;
    int rc = cd_hip_geometry_get(&g);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_transpose_kernel, dim3(cd_hip_grid_1d(&g, total, g.block_1d)), dim3(g.block_1d), 0, stream, a,
                  total, src, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
