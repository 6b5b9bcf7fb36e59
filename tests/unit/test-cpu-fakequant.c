// The CPU backend's vector fake quantization (backends/cpu/fakequant.h)
// against the one scalar definition, cd_fakequant_apply: bit for bit, on
// random values, exact half steps (round half to even), saturation at both
// ends, and lengths with tails.

#include "backends/cpu/fakequant.h"
#include "kernels/op-desc.h"
#include "sparse/spmm-ukernel.h"
#include "tests/unit/check.h"

#include <omp.h>

static void check_fakequant(void (*fn)(size_t, float, float, float, float, const float *, float *)) {
    int sgn = cd_test_randi(0, 1);
    float qmin = cd_quant_qmin(sgn), qmax = cd_quant_qmax(sgn);
    float scale = cd_test_randf(0.001f, 0.2f), zp = (float)(sgn ? cd_test_randi(-10, 10) : cd_test_randi(0, 255));
    size_t n = (size_t)cd_test_randi(1, 70000);
    float *x = malloc(n * sizeof *x), *got = malloc(n * sizeof *got);
    if (!x || !got) abort();
    for (size_t i = 0; i < n; i++) {
        int kind = cd_test_randi(0, 3);
        float k = (float)cd_test_randi(-300, 300);
        x[i] = kind == 0 ? (k + 0.5f) * scale : kind == 1 ? k * scale : cd_test_randf(-400.0f, 400.0f) * scale;
    }
    fn(n, scale, zp, qmin, qmax, x, got);
    for (size_t i = 0; i < n; i++) {
        float want = cd_fakequant_apply(x[i], scale, zp, qmin, qmax);
        if (memcmp(&want, &got[i], sizeof want) != 0) {
            CD_CHECK_FAIL_("[%zu of %zu] x=%.9g scale=%.9g zp=%g: got %.9g, want %.9g", i, n, (double)x[i],
                           (double)scale, (double)zp, (double)got[i], (double)want);
            break;
        }
    }
    free(x);
    free(got);
}

CD_TEST(cpu_fakequant_equals_the_scalar_definition) { check_fakequant(cd_cpu_fakequant); }

// One thread runs every chunk without an OpenMP region: the same values.
CD_TEST(cpu_fakequant_on_one_thread_equals_the_scalar_definition) {
    const int team = omp_get_max_threads();
    omp_set_num_threads(1);
    check_fakequant(cd_cpu_fakequant);
    omp_set_num_threads(team);
}

CD_TEST(cpu_fakequant_avx2_body_equals_the_scalar_definition) {
    if (!cd_sparse_isa_supported(CD_SPARSE_ISA_AVX2))
        CD_SKIP("the AVX2 body needs AVX2: this CPU lacks it or CONVD_MAX_ISA caps this run below it");
    check_fakequant(cd_cpu_fakequant_avx2);
}
