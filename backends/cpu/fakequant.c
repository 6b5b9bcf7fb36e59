// cd_cpu_fakequant (fakequant.h): the vector body where the CPU runs AVX2
// (under the ISA cap), chunks of it over the calling OpenMP team.

#include "backends/cpu/fakequant.h"
#include "core/one-thread.h"
#include "kernels/cpu/ref.h"
#include "kernels/op-desc.h"
#include "sparse/spmm-ukernel.h"

#include <math.h>
#include <omp.h>

#define CHUNK 16384 // elements per task: 64 KiB in, 64 KiB out

void cd_cpu_minmax(size_t n, const float *src, float *mn, float *mx) {
    float lo = 0.0f, hi = 0.0f; // the range holds 0 anyway (cd_dynquant_params)
    const long chunks = (long)((n + CHUNK - 1) / CHUNK);
    if (chunks <= 1 || cd_one_thread()) { // no OpenMP region (core/one-thread.h)
        for (size_t i = 0; i < n; i++) lo = fminf(lo, src[i]), hi = fmaxf(hi, src[i]);
        *mn = lo;
        *mx = hi;
        return;
    }
#pragma omp parallel for schedule(static) reduction(min : lo) reduction(max : hi)
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
    // One chunk, or one thread: no OpenMP region (core/one-thread.h; the
    // 2048 values after ResNet-50's pool take 1-2 us, a region after the AMX
    // convs cost 67-123 us).
    if (chunks <= 1 || cd_one_thread()) {
        if (vec) {
            cd_cpu_fakequant_avx2(n, scale, zero_point, qmin, qmax, src, dst);
        } else {
            for (size_t i = 0; i < n; i++) dst[i] = cd_fakequant_apply(src[i], scale, zero_point, qmin, qmax);
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        size_t b = (size_t)c * CHUNK, e = b + CHUNK < n ? b + CHUNK : n;
        if (vec) {
            cd_cpu_fakequant_avx2(e - b, scale, zero_point, qmin, qmax, src + b, dst + b);
        } else {
            for (size_t i = b; i < e; i++) dst[i] = cd_fakequant_apply(src[i], scale, zero_point, qmin, qmax);
        }
    }
}

void cd_cpu_fakequant_op(const cd_fakequant_desc *d, int batch, size_t per, size_t inner, const float *scale,
                         const float *zero_point, int ref, const float *src, float *dst) {
    const size_t n = per * (size_t)batch;
    if (d->dynamic) {
        if (ref) {
            cd_ref_fakequant_dynamic(d, (size_t)batch, per, src, dst);
            return;
        }
        for (int b = 0; b < batch; b++) {
            const float *x = src + (size_t)b * per;
            float mn, mx, s, zp;
            cd_cpu_minmax(per, x, &mn, &mx);
            cd_dynquant_params(mn, mx, d->qmin, d->qmax, &s, &zp);
            cd_cpu_fakequant(per, s, zp, d->qmin, d->qmax, x, dst + (size_t)b * per);
        }
        return;
    }
    if (d->channels == 1 && !ref) {
        cd_cpu_fakequant(n, scale[0], zero_point[0], d->qmin, d->qmax, src, dst);
        return;
    }
    cd_ref_fakequant(d, n, inner, scale, zero_point, src, dst);
}
