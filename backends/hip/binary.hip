#include "backends/hip/vendor.h"

#include "backends/hip/binary.h"
#include "backends/hip/check.h"
#include "backends/hip/common.h"
#include "backends/hip/device.h"

#define CD_HIP_BINARY_MAX_RANK 8

// Broadcast geometry, passed by value: the output dims and, per output
// dimension, each operand's element stride (0 where it broadcasts).
typedef struct {
    int rank;
    int op;
    int64_t dims[CD_HIP_BINARY_MAX_RANK];
    int64_t a_str[CD_HIP_BINARY_MAX_RANK];
    int64_t b_str[CD_HIP_BINARY_MAX_RANK];
} binary_args;

// One thread per output element (grid-stride). No __restrict__: dst may alias.
__global__ void cd_hip_binary_kernel(binary_args g, size_t total, const float *a, const float *b, cd_activation act,
                                     float *dst) {
    for (size_t i = cd_hip_global_id(); i < total; i += cd_hip_grid_stride()) {
        size_t rest = i;
        int64_t ai = 0, bi = 0;
        for (int d = g.rank - 1; d >= 0; d--) {
            int64_t x = (int64_t)(rest % (size_t)g.dims[d]);
            rest /= (size_t)g.dims[d];
            ai += x * g.a_str[d];
            bi += x * g.b_str[d];
        }
        float x = a[ai], y = b[bi], v;
        switch (g.op) {
        case CD_HIP_BINARY_MUL: v = x * y; break;
        case CD_HIP_BINARY_SUB: v = x - y; break;
        case CD_HIP_BINARY_DIV: v = x / y; break;
        case CD_HIP_BINARY_MIN: v = y < x ? y : x; break;
        case CD_HIP_BINARY_MAX: v = y > x ? y : x; break;
        default: v = x + y; break;
        }
        dst[i] = cd_hip_act(act, v);
    }
}

int cd_hip_binary(cd_hip_binary_op op, int a_rank, const int64_t *a_shape, int b_rank, const int64_t *b_shape,
                  const float *a, const float *b, cd_activation act, float *dst, hipStream_t stream) {
    if (a_rank < 0 || b_rank < 0 || a_rank > CD_HIP_BINARY_MAX_RANK || b_rank > CD_HIP_BINARY_MAX_RANK ||
        op < CD_HIP_BINARY_ADD || op > CD_HIP_BINARY_MAX)
        return CD_EPARAMS;
    binary_args g;
    g.op = op;
    g.rank = a_rank > b_rank ? a_rank : b_rank;
    int64_t a_next = 1, b_next = 1; // element stride of the next-outer dimension
    size_t total = 1;
    for (int d = g.rank - 1; d >= 0; d--) {
        int ad = d - (g.rank - a_rank), bd = d - (g.rank - b_rank);
        int64_t ax = ad >= 0 ? a_shape[ad] : 1, bx = bd >= 0 ? b_shape[bd] : 1;
        if (ax < 0 || bx < 0) return CD_EPARAMS;
        if (ax != bx && ax != 1 && bx != 1) return CD_ESHAPE;
        g.dims[d] = ax == 1 ? bx : ax;
        g.a_str[d] = ax == 1 ? 0 : a_next;
        g.b_str[d] = bx == 1 ? 0 : b_next;
        a_next *= ax;
        b_next *= bx;
        total *= (size_t)g.dims[d];
    }
    if (total == 0) return 0;
    cd_hip_geometry geo;
    int rc = cd_hip_geometry_get(&geo);
    if (rc) return rc;
    CD_HIP_LAUNCH(cd_hip_binary_kernel, dim3(cd_hip_grid_1d(&geo, total, geo.block_1d)), dim3(geo.block_1d), 0, stream,
                  g, total, a, b, act, dst);
    CD_HIP_CHECK(hipGetLastError());
    return 0;
}
