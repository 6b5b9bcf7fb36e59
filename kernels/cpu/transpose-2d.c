// Transposes whose permutation rotates the dims after the batch (NCHW <->
// NHWC: perm 0,2,3,1 and 0,3,1,2) are, per batch item, the transpose of an
// A x B matrix: done here in 32 x 32 tiles, the tiles spread over the
// OpenMP team. The fast CPU path of CD_BOP_TRANSPOSE (ConvNeXt's permutes);
// cd_ref_transpose stays the oracle and the path for other permutations.

#include "kernels/cpu/ref.h"

#include <stddef.h>

enum { TILE = 32 };

int cd_cpu_transpose_split(int rank, const int *perm) {
    if (rank < 3 || perm[0] != 0) return 0;
    const int s = perm[1];
    if (s < 2) return 0;
    for (int i = 1; i < rank; i++)
        if (perm[i] != (s + i - 1 < rank ? s + i - 1 : s + i - rank)) return 0;
    return s;
}

void cd_cpu_transpose_2d(int rank, const int64_t *shape, int split, const float *src, float *dst) {
    int64_t a = 1, b = 1;
    for (int i = 1; i < rank; i++) *(i < split ? &a : &b) *= shape[i];
    const int64_t n = shape[0], ta = (a + TILE - 1) / TILE, tb = (b + TILE - 1) / TILE;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t item = 0; item < n; item++)
        for (int64_t t = 0; t < ta * tb; t++) {
            const float *s = src + item * a * b;
            float *d = dst + item * a * b;
            const int64_t i0 = t / tb * TILE, j0 = t % tb * TILE;
            const int64_t i1 = i0 + TILE < a ? i0 + TILE : a, j1 = j0 + TILE < b ? j0 + TILE : b;
            for (int64_t i = i0; i < i1; i++)
                for (int64_t j = j0; j < j1; j++) d[j * a + i] = s[i * b + j];
        }
}
