// The vector body of cd_cpu_fakequant (fakequant.h), built with AVX2 flags.

#include "backends/cpu/fakequant.h"
#include "kernels/op-desc.h"

#include <immintrin.h>

void cd_cpu_fakequant_avx2(size_t n, float scale, float zero_point, float qmin, float qmax, const float *src,
                           float *dst) {
    const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero_point);
    const __m256 lo = _mm256_set1_ps(qmin), hi = _mm256_set1_ps(qmax);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        // rintf in the default rounding mode: half to even, as the scalar code.
        __m256 q = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(src + i), s), _MM_FROUND_CUR_DIRECTION);
        q = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(q, z), lo), hi);
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_sub_ps(q, z), s));
    }
    for (; i < n; i++) dst[i] = cd_fakequant_apply(src[i], scale, zero_point, qmin, qmax);
}
