// cd_cpu_fakequant (fakequant.h): the vector body where the CPU runs AVX2
// (under the ISA cap), chunks of it over the calling OpenMP team.

#include "backends/cpu/fakequant.h"
#include "kernels/op-desc.h"
#include "sparse/spmm-ukernel.h"

#include <omp.h>

#define CHUNK 16384 // elements per task: 64 KiB in, 64 KiB out

void cd_cpu_minmax(size_t n, const float *src, float *mn, float *mx) {
    float lo = 0.0f, hi = 0.0f; // the range holds 0 anyway (cd_dynquant_params)
    const long chunks = (long)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(static) if (chunks > 1) reduction(min : lo) reduction(max : hi)
    for (long c = 0; c < chunks; c++) {
        size_t b = (size_t)c * CHUNK, e = b + CHUNK < n ? b + CHUNK : n;
        float l = lo, h = hi;
        for (size_t i = b; i < e; i++) { // fminf/fmaxf: a NaN is skipped
            l = fminf(l, src[i]);
            h = fmaxf(h, src[i]);
        }
        lo = fminf(lo, l);
        hi = fmaxf(hi, h);
    }
    *mn = lo;
    *mx = hi;
}

void cd_cpu_fakequant(size_t n, float scale, float zero_point, float qmin, float qmax, const float *src, float *dst) {
    const int vec = cd_sparse_isa_supported(CD_SPARSE_ISA_AVX2);
    const long chunks = (long)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (long c = 0; c < chunks; c++) {
        size_t b = (size_t)c * CHUNK, e = b + CHUNK < n ? b + CHUNK : n;
        if (vec) {
            cd_cpu_fakequant_avx2(e - b, scale, zero_point, qmin, qmax, src + b, dst + b);
        } else {
            for (size_t i = b; i < e; i++) dst[i] = cd_fakequant_apply(src[i], scale, zero_point, qmin, qmax);
        }
    }
}
