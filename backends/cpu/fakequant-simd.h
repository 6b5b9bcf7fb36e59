#ifndef CD_BACKENDS_CPU_FAKEQUANT_SIMD_H
#define CD_BACKENDS_CPU_FAKEQUANT_SIMD_H

// The FakeQuant of one vector (kernels/op-desc.h cd_fakequant_apply, op for
// op: y / scale rounded in the current mode, half to even; + zp; clamped to
// [qmin, qmax]; - zp; times scale), in sparse/f32-simd.h's vocabulary: the
// one body of the FakeQuant pass (fakequant-avx2.c) and of the depthwise
// kernel's epilogue (dw3x3-simd.h), whose results must be the pass's bit for
// bit. The includer picks the ISA first.

#include "sparse/f32-simd.h"

// A FakeQuant's parameters, broadcast.
typedef struct {
    cd_vf s, z, lo, hi;
} cd_fq_vec;

static inline CD_V_AI cd_fq_vec cd_fq_vec_of(float scale, float zero_point, float qmin, float qmax) {
    return (cd_fq_vec){cd_v_set1(scale), cd_v_set1(zero_point), cd_v_set1(qmin), cd_v_set1(qmax)};
}

static inline CD_V_AI cd_vf cd_fq_apply(const cd_fq_vec *f, cd_vf y) {
#if defined(CD_SIMD_AVX512F)
    cd_vf q = _mm512_roundscale_ps(_mm512_div_ps(y, f->s), _MM_FROUND_CUR_DIRECTION);
#else
    cd_vf q = _mm256_round_ps(_mm256_div_ps(y, f->s), _MM_FROUND_CUR_DIRECTION);
#endif
    q = cd_v_min(cd_v_max(cd_v_add(q, f->z), f->lo), f->hi);
    return CD_V_(mul_ps)(CD_V_(sub_ps)(q, f->z), f->s);
}

#endif // CD_BACKENDS_CPU_FAKEQUANT_SIMD_H
