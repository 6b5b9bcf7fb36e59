#include "kernels/cpu/ref.h"

void cd_ref_gemm(int m, int n, int k, const float *src, const float *w, const float *bias, cd_activation act,
                 float *dst) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            // Double accumulation: the reference is the accurate side.
            double acc = bias ? bias[j] : 0.0;
            const float *a = src + (size_t)i * k, *b = w + (size_t)j * k;
            for (int p = 0; p < k; p++) acc += (double)a[p] * (double)b[p];
            dst[(size_t)i * n + j] = cd_act_apply(act, (float)acc);
        }
}
