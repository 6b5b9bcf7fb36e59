// Transposes that rotate a run of dims after the batch and keep the dims
// after it in place are, per batch item, the transpose of an A x B matrix
// whose elements are runs of `inner` floats: NCHW <-> NHWC (perm 0,2,3,1 and
// 0,3,1,2; inner 1) and ShuffleNet's channel shuffle (perm 0,2,1,3,4; inner
// H*W). Done here in 32 x 32 tiles spread over the OpenMP team: the fast CPU
// path of CD_BOP_TRANSPOSE; cd_ref_transpose stays the oracle and the path
// for other permutations.

#include "kernels/cpu/ref.h"

#include <stddef.h>
#include <string.h>

enum { TILE = 32 };

int cd_cpu_transpose_rotation(int rank, const int *perm, int *split, int *keep) {
    if (rank < 3 || perm[0] != 0) return 0;
    int k = rank;
    while (k > 1 && perm[k - 1] == k - 1) k--; // dims k.. stay in place
    const int s = perm[1];
    if (k < 3 || s < 2 || s >= k) return 0;
    for (int i = 1; i < k; i++)
        if (perm[i] != (s + i - 1 < k ? s + i - 1 : s + i - k)) return 0;
    *split = s;
    *keep = k;
    return 1;
}

void cd_cpu_transpose_2d(int rank, const int64_t *shape, int split, int keep, const float *src, float *dst) {
    int64_t a = 1, b = 1, in = 1;
    for (int i = 1; i < rank; i++) *(i < split ? &a : i < keep ? &b : &in) *= shape[i];
    const int64_t n = shape[0], ta = (a + TILE - 1) / TILE, tb = (b + TILE - 1) / TILE;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t item = 0; item < n; item++)
        for (int64_t t = 0; t < ta * tb; t++) {
            const float *s = src + item * a * b * in;
            float *d = dst + item * a * b * in;
            const int64_t i0 = t / tb * TILE, j0 = t % tb * TILE;
            const int64_t i1 = i0 + TILE < a ? i0 + TILE : a, j1 = j0 + TILE < b ? j0 + TILE : b;
            if (in == 1) {
                for (int64_t i = i0; i < i1; i++)
                    for (int64_t j = j0; j < j1; j++) d[j * a + i] = s[i * b + j];
            } else {
                for (int64_t i = i0; i < i1; i++)
                    for (int64_t j = j0; j < j1; j++)
                        memcpy(d + (j * a + i) * in, s + (i * b + j) * in, (size_t)in * sizeof(float));
            }
        }
}
