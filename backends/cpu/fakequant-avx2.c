// The vector body of cd_cpu_fakequant (fakequant.h), built with AVX2 flags.

#define CD_SIMD_AVX2
#include "backends/cpu/fakequant-simd.h"
#include "backends/cpu/fakequant.h"
#include "kernels/op-desc.h"

void cd_cpu_fakequant_avx2(size_t n, float scale, float zero_point, float qmin, float qmax, const float *src,
                           float *dst) {
    const cd_fq_vec f = cd_fq_vec_of(scale, zero_point, qmin, qmax);
    size_t i = 0;
    for (; i + CD_VN <= n; i += CD_VN) cd_v_storeu(dst + i, cd_fq_apply(&f, cd_v_loadu(src + i)));
    for (; i < n; i++) dst[i] = cd_fakequant_apply(src[i], scale, zero_point, qmin, qmax);
}
