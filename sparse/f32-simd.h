#ifndef CD_SPARSE_F32_SIMD_H
#define CD_SPARSE_F32_SIMD_H

// The float vector vocabulary in which the kernel bodies shared by AVX2 and
// AVX-512 are written once (sparse/f32-*-simd.h), so a fix lands in both. An
// includer defines CD_SIMD_AVX2 or CD_SIMD_AVX512F first and is built with
// that ISA's flags (the Makefile gives them by file name: *-avx2.c,
// *-avx512f.c). What differs between the ISAs beyond this is written where it
// matters, with why.
//
//   cd_vf            a vector of CD_VN floats (8 AVX2, 16 AVX-512)
//   cd_vmask         a lane mask (AVX2: a vector, all ones in a set lane;
//                    AVX-512: a k register), from cd_v_first or cd_v_bits
//   CD_VREGS         vector registers (16, 32): bounds the accumulators of a tile
//   CD_SIMD_FN(f)    f with the ISA's suffix (f__avx2, f__avx512f)
//
// Both ISAs define the same functions; each contract is written at its
// AVX-512 definition, the AVX2 comments say where that ISA differs.

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define CD_V_AI __attribute__((always_inline))

#if defined(CD_SIMD_AVX512F)
typedef __m512 cd_vf;
typedef __mmask16 cd_vmask;
#define CD_VN 16
#define CD_VREGS 32
#define CD_V_(op) _mm512_##op
#define CD_SIMD_FN(f) f##__avx512f

// The first n (0..16) lanes.
static inline CD_V_AI cd_vmask cd_v_first(size_t n) { return (cd_vmask)((1u << n) - 1u); }
// The float at p in every lane.
static inline CD_V_AI cd_vf cd_v_bcast(const float *p) { return _mm512_set1_ps(*p); }
// The lanes of the set bits of m (bit k: lane k).
static inline CD_V_AI cd_vmask cd_v_bits(unsigned m) { return (cd_vmask)m; }
// v with the lanes outside bits m zeroed.
static inline CD_V_AI cd_vf cd_v_keep(cd_vf v, unsigned m) { return _mm512_maskz_mov_ps((cd_vmask)m, v); }
// Loads lanes in m, zeroes the rest; memory outside m is never touched.
static inline CD_V_AI cd_vf cd_v_maskz_loadu(cd_vmask m, const float *p) { return _mm512_maskz_loadu_ps(m, p); }
static inline CD_V_AI void cd_v_mask_storeu(float *p, cd_vmask m, cd_vf v) { _mm512_mask_storeu_ps(p, m, v); }

// Lanes 0, 2, .., 14 of a then of b.
static inline CD_V_AI cd_vf cd_v_evens(cd_vf a, cd_vf b) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(a, even, b);
}

// a shifted down by S (1..3) lanes, the top S lanes from next.
static inline CD_V_AI cd_vf cd_v_shift_down(cd_vf a, cd_vf next, const int S) {
    const __m512i x = _mm512_castps_si512(a), n = _mm512_castps_si512(next);
    return _mm512_castsi512_ps(S == 1   ? _mm512_alignr_epi32(n, x, 1)
                               : S == 2 ? _mm512_alignr_epi32(n, x, 2)
                                        : _mm512_alignr_epi32(n, x, 3));
}

#elif defined(CD_SIMD_AVX2)
typedef __m256 cd_vf;
typedef __m256i cd_vmask;
#define CD_VN 8
#define CD_VREGS 16
#define CD_V_(op) _mm256_##op
#define CD_SIMD_FN(f) f##__avx2

static inline CD_V_AI cd_vmask cd_v_first(size_t n) {
    static const int32_t t[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(t + 8 - n));
}

// vbroadcastss from memory, which set1 of a load does not always get (one
// more instruction per weight in a tile's inner loop).
static inline CD_V_AI cd_vf cd_v_bcast(const float *p) { return _mm256_broadcast_ss(p); }

static inline CD_V_AI cd_vmask cd_v_bits(unsigned m) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), bit), bit);
}

// No zero-masking move: an AND with the lanes, skipped for a full window.
static inline CD_V_AI cd_vf cd_v_keep(cd_vf v, unsigned m) {
    return m == 0xffu ? v : _mm256_and_ps(v, _mm256_castsi256_ps(cd_v_bits(m)));
}

// vmaskmovps, the one masked access AVX2 has.
static inline CD_V_AI cd_vf cd_v_maskz_loadu(cd_vmask m, const float *p) { return _mm256_maskload_ps(p, m); }
static inline CD_V_AI void cd_v_mask_storeu(float *p, cd_vmask m, cd_vf v) { _mm256_maskstore_ps(p, m, v); }

// No two-source permute: shuffle the even lanes of each half, then order
// the 64-bit pairs.
static inline CD_V_AI cd_vf cd_v_evens(cd_vf a, cd_vf b) {
    const __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); // a0 a2 b0 b2 | a4 a6 b4 b6
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

// vpalignr shifts within 128-bit halves, so it takes (a's high half,
// next's low half) as the upper source.
static inline CD_V_AI cd_vf cd_v_shift_down(cd_vf a, cd_vf next, const int S) {
    const __m256i x = _mm256_castps_si256(a);
    const __m256i t = _mm256_castps_si256(_mm256_permute2f128_ps(a, next, 0x21));
    return _mm256_castsi256_ps(S == 1   ? _mm256_alignr_epi8(t, x, 4)
                               : S == 2 ? _mm256_alignr_epi8(t, x, 8)
                                        : _mm256_alignr_epi8(t, x, 12));
}

#else
#error "define CD_SIMD_AVX2 or CD_SIMD_AVX512F before including sparse/f32-simd.h"
#endif

// The same operation in either ISA.
static inline CD_V_AI cd_vf cd_v_loadu(const float *p) { return CD_V_(loadu_ps)(p); }
static inline CD_V_AI cd_vf cd_v_load(const float *p) { return CD_V_(load_ps)(p); } // aligned to a vector
static inline CD_V_AI void cd_v_storeu(float *p, cd_vf v) { CD_V_(storeu_ps)(p, v); }
static inline CD_V_AI cd_vf cd_v_set1(float x) { return CD_V_(set1_ps)(x); }
static inline CD_V_AI cd_vf cd_v_zero(void) { return CD_V_(setzero_ps)(); }
static inline CD_V_AI cd_vf cd_v_add(cd_vf a, cd_vf b) { return CD_V_(add_ps)(a, b); }
static inline CD_V_AI cd_vf cd_v_fmadd(cd_vf a, cd_vf b, cd_vf c) { return CD_V_(fmadd_ps)(a, b, c); } // a*b + c
static inline CD_V_AI cd_vf cd_v_min(cd_vf a, cd_vf b) { return CD_V_(min_ps)(a, b); }
static inline CD_V_AI cd_vf cd_v_max(cd_vf a, cd_vf b) { return CD_V_(max_ps)(a, b); }

// Stores the first n (0..CD_VN) lanes of v, nothing else.
static inline CD_V_AI void cd_v_storen(float *p, size_t n, cd_vf v) { cd_v_mask_storeu(p, cd_v_first(n), v); }

#endif // CD_SPARSE_F32_SIMD_H
