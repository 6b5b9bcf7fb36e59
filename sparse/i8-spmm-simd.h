// The int8 micro-kernels, epilogue and input quantization of the vector
// ISAs (contracts in sparse/i8-spmm.h), written once: i8-spmm-avx2.c,
// i8-spmm-avx512f.c and i8-spmm-avx512vnni.c each define I8_ISA (the name
// suffix) and I8_AVX512 / I8_VNNI as they apply, then include this.
//
// Pixels are in the vector lanes. A quad of nonzeros of a row reads 4 input
// rows of TILE pixels; unpacks interleave them so each 32-bit lane holds the
// 4 inputs of one pixel, in the lane order the unpacks give: vector j's
// 128-bit lane L holds pixels 16L + 4j .. 16L + 4j + 3. The 4 accumulators
// are put back in pixel order once per block (a 128-bit-lane transpose).
// dot4 multiplies u8 quads by s8 quads and adds to s32 lanes: vpdpbusd with
// VNNI, else vpmaddwd on the zero-extended even and odd bytes and the
// sign-extended weights (vpmaddubsw would saturate: 2 * 255 * 128 > 32767),
// except for a block's leading short quads (every weight in [-64, 64]),
// where vpmaddubsw cannot saturate and is used (dot4_short).

#include "sparse/i8-rint-quot.h"
#include "sparse/i8-spmm.h"

#include <immintrin.h>
#include <string.h>

#define I8_CAT2(a, b) a##__##b
#define I8_CAT(a, b) I8_CAT2(a, b)
#define I8_FN(f) I8_CAT(f, I8_ISA)

#ifdef I8_AVX512
typedef __m512i vi;
typedef __m512 vf;
#define TILE 64
#define LANES 16
#define LOADU(p) _mm512_loadu_si512((const void *)(p))
#define STOREU(p, v) _mm512_storeu_si512((void *)(p), v)
#define SET1(x) _mm512_set1_epi32(x)
#define UNPLO8 _mm512_unpacklo_epi8
#define UNPHI8 _mm512_unpackhi_epi8
#define UNPLO16 _mm512_unpacklo_epi16
#define UNPHI16 _mm512_unpackhi_epi16
#define ADD32 _mm512_add_epi32
#define AND _mm512_and_si512
#define OR _mm512_or_si512
#define ASF _mm512_castsi512_ps
#define SRLI16 _mm512_srli_epi16
#define SLLI16 _mm512_slli_epi16
#define SRAI16 _mm512_srai_epi16
#define MADD16 _mm512_madd_epi16
#define MADDUBS _mm512_maddubs_epi16
#define SET1_16 _mm512_set1_epi16
#define SET1F _mm512_set1_ps
#define LOADF _mm512_loadu_ps
#define STOREF _mm512_storeu_ps
#define CVTF _mm512_cvtepi32_ps
#define CVTI _mm512_cvtps_epi32
#define FMADD _mm512_fmadd_ps
#define ADDF _mm512_add_ps
#define SUBF _mm512_sub_ps
#define MULF _mm512_mul_ps
#define DIVF _mm512_div_ps
#define MAXF _mm512_max_ps
#define MINF _mm512_min_ps
#define RINT(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

#define ABSF _mm512_abs_ps
#define FNMADD _mm512_fnmadd_ps
// The lanes where a >= b, as bits.
static inline unsigned ge_bits(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
// The lanes where a < b is false (NaN included), as bits.
static inline unsigned nlt_bits(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ); }

// 4 vectors of s32 n (any), to 64 bytes of clamp(n + zp) in u8 (or s8
// when is_signed) in lane order (pack_b4 leaves them in the packs' order:
// 128-bit lane L holds lanes 4L..4L+3 of v[0], then of v[1], v[2], v[3]): the saturating packs and the saturating
// 16-bit add are the reference's clamp (n beyond s16 stays beyond the
// 8-bit range); with `relu`, at least zp8's bytes (zp): the ReLU before
// the quantization (clamp(rint(y / s) + zp) does not decrease with y, so
// that of max(y, 0) is the max of that of y and zp); the first `left` of
// them stored.
static inline vi pack_b4(const vi v[4], int is_signed, vi zp16, int relu, vi zp8) {
    const vi ab = _mm512_adds_epi16(_mm512_packs_epi32(v[0], v[1]), zp16);
    const vi cd = _mm512_adds_epi16(_mm512_packs_epi32(v[2], v[3]), zp16);
    // 128-bit lane L of x holds 4 bytes of each of v[0..3], lanes 4L..4L+3.
    vi x = is_signed ? _mm512_packs_epi16(ab, cd) : _mm512_packus_epi16(ab, cd);
    if (relu) x = is_signed ? _mm512_max_epi8(x, zp8) : _mm512_max_epu8(x, zp8);
    return x;
}
static inline void store_b4(void *p, size_t left, const vi v[4], int is_signed, vi zp16, int relu, vi zp8) {
    const vi x = pack_b4(v, is_signed, zp16, relu, zp8);
    const vi y = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), x);
    if (left >= 64)
        _mm512_storeu_si512(p, y);
    else
        _mm512_mask_storeu_epi8(p, (((__mmask64)1) << left) - 1, y);
}
// The nearest integers (ties to even) of the lanes, whatever MXCSR says.
#define CVT_RNE(x) _mm512_cvt_roundps_epi32(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

// Pixel order back from the unpacks: out v = lanes v of a[0..3].
static inline void unpermute_store(const vi a[4], int32_t *acc) {
    const vi t0 = _mm512_shuffle_i32x4(a[0], a[1], 0x44), t1 = _mm512_shuffle_i32x4(a[2], a[3], 0x44);
    const vi t2 = _mm512_shuffle_i32x4(a[0], a[1], 0xEE), t3 = _mm512_shuffle_i32x4(a[2], a[3], 0xEE);
    STOREU(acc, _mm512_shuffle_i32x4(t0, t1, 0x88));
    STOREU(acc + 16, _mm512_shuffle_i32x4(t0, t1, 0xDD));
    STOREU(acc + 32, _mm512_shuffle_i32x4(t2, t3, 0x88));
    STOREU(acc + 48, _mm512_shuffle_i32x4(t2, t3, 0xDD));
}

// The first `left` lanes (all when left >= 16) of a load or store.
typedef __mmask16 lanes;
static inline lanes lanes_of(size_t left) { return left >= 16 ? (lanes)0xFFFF : (lanes)((1u << left) - 1); }
static inline vi load_i(const int32_t *p, lanes m) { return _mm512_maskz_loadu_epi32(m, p); }
static inline vf load_f(const float *p, lanes m) { return _mm512_maskz_loadu_ps(m, p); }
static inline void store_f(float *p, lanes m, vf v) { _mm512_mask_storeu_ps(p, m, v); }
// The low bytes of the integers of v (in range for the type).
static inline void store_b(void *p, lanes m, vi v) { _mm512_mask_cvtepi32_storeu_epi8(p, m, v); }
// The integers of `left` bytes (u8, or s8 when is_signed) as s32 lanes.
static inline vi load_b(const void *p, lanes m, int is_signed) {
    const __m128i x = _mm_maskz_loadu_epi8(m, p);
    return is_signed ? _mm512_cvtepi8_epi32(x) : _mm512_cvtepu8_epi32(x);
}
// The same, all lanes: plain loads.
static inline vi load_i_all(const int32_t *p) { return LOADU(p); }
static inline vf load_f_all(const float *p) { return LOADF(p); }
static inline vi load_b_all(const void *p, int is_signed) {
    const __m128i x = _mm_loadu_si128((const __m128i *)p);
    return is_signed ? _mm512_cvtepi8_epi32(x) : _mm512_cvtepu8_epi32(x);
}
#else
typedef __m256i vi;
typedef __m256 vf;
#define TILE 32
#define LANES 8
#define LOADU(p) _mm256_loadu_si256((const __m256i *)(p))
#define STOREU(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define SET1(x) _mm256_set1_epi32(x)
#define UNPLO8 _mm256_unpacklo_epi8
#define UNPHI8 _mm256_unpackhi_epi8
#define UNPLO16 _mm256_unpacklo_epi16
#define UNPHI16 _mm256_unpackhi_epi16
#define ADD32 _mm256_add_epi32
#define AND _mm256_and_si256
#define OR _mm256_or_si256
#define ASF _mm256_castsi256_ps
#define SRLI16 _mm256_srli_epi16
#define SLLI16 _mm256_slli_epi16
#define SRAI16 _mm256_srai_epi16
#define MADD16 _mm256_madd_epi16
#define MADDUBS _mm256_maddubs_epi16
#define SET1_16 _mm256_set1_epi16
#define SET1F _mm256_set1_ps
#define LOADF _mm256_loadu_ps
#define STOREF _mm256_storeu_ps
#define CVTF _mm256_cvtepi32_ps
#define CVTI _mm256_cvtps_epi32
#define FMADD _mm256_fmadd_ps
#define ADDF _mm256_add_ps
#define SUBF _mm256_sub_ps
#define MULF _mm256_mul_ps
#define DIVF _mm256_div_ps
#define MAXF _mm256_max_ps
#define MINF _mm256_min_ps
#define RINT(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

#define ABSF(v) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v)
#define FNMADD _mm256_fnmadd_ps
// The lanes where a >= b, as bits.
static inline unsigned ge_bits(vf a, vf b) { return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GE_OQ)); }
// The lanes where a < b is false (NaN included), as bits.
static inline unsigned nlt_bits(vf a, vf b) { return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_NLT_UQ)); }

// The first left (< 32) bytes of y to p, and the first left (< 8) bytes at
// p as the low bytes of an integer: power-of-two pieces, no memcpy call (a
// call in the epilogue's loop makes every ymm register caller-saved).
static inline void store_tail(void *p, size_t left, __m256i y) {
    uint8_t *d = p;
    __m128i x = _mm256_castsi256_si128(y);
    if (left & 16) {
        _mm_storeu_si128((__m128i *)d, x);
        x = _mm256_extracti128_si256(y, 1);
        d += 16;
    }
    if (left & 8) {
        _mm_storel_epi64((__m128i *)d, x);
        x = _mm_srli_si128(x, 8);
        d += 8;
    }
    uint64_t b = (uint64_t)_mm_cvtsi128_si64(x);
    if (left & 4) {
        const uint32_t t = (uint32_t)b;
        memcpy(d, &t, 4);
        b >>= 32;
        d += 4;
    }
    if (left & 2) {
        const uint16_t t = (uint16_t)b;
        memcpy(d, &t, 2);
        b >>= 16;
        d += 2;
    }
    if (left & 1) *d = (uint8_t)b;
}
static inline uint64_t load_tail(const void *p, size_t left) {
    const uint8_t *s = p;
    uint64_t b = 0;
    unsigned o = 0;
    if (left & 4) {
        uint32_t t;
        memcpy(&t, s, 4);
        b = t;
        o = 4;
    }
    if (left & 2) {
        uint16_t t;
        memcpy(&t, s + o, 2);
        b |= (uint64_t)t << (8 * o);
        o += 2;
    }
    if (left & 1) b |= (uint64_t)s[o] << (8 * o);
    return b;
}

// 4 vectors of s32 n (any), to 32 bytes of clamp(n + zp) in u8 (or s8
// when is_signed) in lane order, at least zp with `relu` (as the AVX-512
// one); the first `left` of them stored.
static inline void store_b4(void *p, size_t left, const vi v[4], int is_signed, vi zp16, int relu, vi zp8) {
    const vi ab = _mm256_adds_epi16(_mm256_packs_epi32(v[0], v[1]), zp16);
    const vi cd = _mm256_adds_epi16(_mm256_packs_epi32(v[2], v[3]), zp16);
    // 128-bit lane L of x holds 4 bytes of each of v[0..3], lanes 4L..4L+3.
    vi x = is_signed ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
    if (relu) x = is_signed ? _mm256_max_epi8(x, zp8) : _mm256_max_epu8(x, zp8);
    const vi y = _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if (left >= 32) {
        _mm256_storeu_si256((__m256i *)p, y);
        return;
    }
    store_tail(p, left, y);
}
// The nearest integers (ties to even) of the lanes: vcvtps2dq rounds as
// MXCSR says, round-to-nearest-even unless a caller changed it (none does).
#define CVT_RNE(x) _mm256_cvtps_epi32(x)

// Pixel order back from the unpacks (two 128-bit lanes: 16 pixels each).
static inline void unpermute_store(const vi a[4], int32_t *acc) {
    STOREU(acc, _mm256_permute2x128_si256(a[0], a[1], 0x20));
    STOREU(acc + 8, _mm256_permute2x128_si256(a[2], a[3], 0x20));
    STOREU(acc + 16, _mm256_permute2x128_si256(a[0], a[1], 0x31));
    STOREU(acc + 24, _mm256_permute2x128_si256(a[2], a[3], 0x31));
}

// The first `left` lanes (all when left >= 8) of a load or store: a lane
// mask, and the count for the byte stores.
typedef struct {
    __m256i mask;
    size_t left;
} lanes;
static inline lanes lanes_of(size_t left) {
    lanes l = {
        _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : (int)left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
        left};
    return l;
}
static inline vi load_i(const int32_t *p, lanes m) { return _mm256_maskload_epi32((const int *)p, m.mask); }
static inline vf load_f(const float *p, lanes m) { return _mm256_maskload_ps(p, m.mask); }
static inline void store_f(float *p, lanes m, vf v) { _mm256_maskstore_ps(p, m.mask, v); }
// The low bytes of the integers of v (in -128..255, so the saturating packs
// keep them; u8 and s8 alike once truncated to a byte).
static inline void store_b(void *p, lanes m, vi v) {
    const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    const __m128i p8 = _mm_shuffle_epi8(p16, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1));
    if (m.left >= 8) {
        _mm_storel_epi64((__m128i *)p, p8);
        return;
    }
    store_tail(p, m.left, _mm256_castsi128_si256(p8));
}
// The integers of `left` bytes (u8, or s8 when is_signed) as s32 lanes.
static inline vi load_b(const void *p, lanes m, int is_signed) {
    const __m128i v =
        m.left >= 8 ? _mm_loadl_epi64((const __m128i *)p) : _mm_cvtsi64_si128((int64_t)load_tail(p, m.left));
    return is_signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
}
// The same, all lanes: plain loads.
static inline vi load_i_all(const int32_t *p) { return LOADU(p); }
static inline vf load_f_all(const float *p) { return LOADF(p); }
static inline vi load_b_all(const void *p, int is_signed) {
    const __m128i v = _mm_loadl_epi64((const __m128i *)p);
    return is_signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
}
#endif

#ifdef I8_VNNI
typedef vi wvec; // the weight word in every lane
static inline wvec wprep(int32_t word) { return SET1(word); }
static inline vi dot4(vi acc, vi q, wvec w) { return _mm512_dpbusd_epi32(acc, q, w); }
#else
typedef struct {
    vi even, odd; // the sign-extended weights of bytes 0, 2 and of bytes 1, 3
} wvec;
static inline wvec wprep(int32_t word) {
    const vi w = SET1(word);
    wvec r = {SRAI16(SLLI16(w, 8), 8), SRAI16(w, 8)};
    return r;
}
static inline vi dot4(vi acc, vi q, wvec w) {
    const vi even = AND(q, SET1(0x00FF00FF)), odd = SRLI16(q, 8);
    return ADD32(acc, ADD32(MADD16(even, w.even), MADD16(odd, w.odd)));
}
#endif

#ifndef I8_VNNI
// dot4 of a short quad (every weight in [-64, 64]): vpmaddubsw's pair sums
// are at most 2 * 255 * 64 = 32640 in magnitude, so nothing saturates.
static inline vi dot4_short(vi acc, vi q, vi w) { return ADD32(acc, MADD16(MADDUBS(q, w), SET1_16(1))); }
#endif

// The 4 input rows of a quad, interleaved into 4 vectors of pixel quads.
static inline void interleave(const uint8_t *in, const int32_t *off, vi q[4]) {
    const vi x0 = LOADU(in + off[0]), x1 = LOADU(in + off[1]), x2 = LOADU(in + off[2]), x3 = LOADU(in + off[3]);
    const vi l01 = UNPLO8(x0, x1), h01 = UNPHI8(x0, x1), l23 = UNPLO8(x2, x3), h23 = UNPHI8(x2, x3);
    q[0] = UNPLO16(l01, l23);
    q[1] = UNPHI16(l01, l23);
    q[2] = UNPLO16(h01, h23);
    q[3] = UNPHI16(h01, h23);
}

static inline int32_t word_at(const int8_t *w) {
    int32_t x;
    memcpy(&x, w, sizeof x);
    return x;
}

// Block b of a CSR call: its 4 accumulator vectors (in the unpacks' lane
// order) from the quads at *offp, *wp, which it advances. Two sets of
// accumulators, even and odd quads: vpdpbusd's latency would otherwise
// bound long rows (4 chains of one dependent add per quad).
static inline __attribute__((always_inline)) void csr_block(const uint8_t *in, const int32_t **offp, const int8_t **wp,
                                                            uint32_t nq, uint32_t nqs, int32_t init, vi a[4]) {
    const int32_t *off = *offp;
    const int8_t *w = *wp;
    vi o[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        a[j] = SET1(init);
        o[j] = SET1(0);
    }
    uint32_t k = nq;
#ifndef I8_VNNI
    for (uint32_t ks = nqs; ks > 0; ks--, k--, off += 4, w += 4) {
        vi q[4];
        interleave(in, off, q);
        const vi ws = SET1(word_at(w));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) a[j] = dot4_short(a[j], q[j], ws);
    }
#else
    (void)nqs;
#endif
    for (; k >= 2; k -= 2, off += 8, w += 8) {
        vi q[4], r[4];
        interleave(in, off, q);
        interleave(in, off + 4, r);
        const wvec wq = wprep(word_at(w)), wr = wprep(word_at(w + 4));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            a[j] = dot4(a[j], q[j], wq);
            o[j] = dot4(o[j], r[j], wr);
        }
    }
    if (k) {
        vi q[4];
        interleave(in, off, q);
        const wvec wq = wprep(word_at(w));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) a[j] = dot4(a[j], q[j], wq);
        off += 4;
        w += 4;
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) a[j] = ADD32(a[j], o[j]);
    *offp = off;
    *wp = w;
}

// Block b of a BSR4 call: its 4 rows' accumulators, as csr_block.
static inline __attribute__((always_inline)) void bsr4_block(const uint8_t *in, const int32_t **offp, const int8_t **wp,
                                                             uint32_t nq, uint32_t nqs, const int32_t *init,
                                                             vi a[4][4]) {
    const int32_t *off = *offp;
    const int8_t *w = *wp;
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) a[i][j] = SET1(init[i]);
    uint32_t k = nq;
#ifndef I8_VNNI
    for (uint32_t ks = nqs; ks > 0; ks--, k--, off += 4, w += 16) {
        vi q[4];
        interleave(in, off, q);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const vi ws = SET1(word_at(w + 4 * i));
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) a[i][j] = dot4_short(a[i][j], q[j], ws);
        }
    }
#else
    (void)nqs;
#endif
    for (; k > 0; k--, off += 4, w += 16) {
        vi q[4];
        interleave(in, off, q);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const wvec wv = wprep(word_at(w + 4 * i));
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) a[i][j] = dot4(a[i][j], q[j], wv);
        }
    }
    *offp = off;
    *wp = w;
}

void I8_FN(cd_i8_spmm_csr)(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                           const uint32_t *nqs, const int32_t *init, int32_t *acc) {
    for (size_t b = 0; b < nblk; b++, acc += TILE) {
        vi a[4];
        csr_block(in, &off, &w, nq[b], nqs[b], init[b], a);
        unpermute_store(a, acc);
    }
}

void I8_FN(cd_i8_spmm_bsr4)(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                            const uint32_t *nqs, const int32_t *init, int32_t *acc) {
    for (size_t b = 0; b < nblk; b++, acc += 4 * TILE) {
        vi a[4][4];
        bsr4_block(in, &off, &w, nq[b], nqs[b], init + 4 * b, a);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) unpermute_store(a[i], acc + i * TILE);
    }
}

// rintf(y / s) in every lane, as the reference computes it. Built with
// -DI8_DIVFREE, the division-free form of sparse/i8-rint-quot.h with its
// per-lane correction (slower here: vroundps and the fnmadd window cost
// more than the division; bench/results/sparse-i8-chain.md). Returns y / s
// itself with the division: the callers round it (RINT, or CVT_RNE
// straight to integers), which then gives rintf(y / s). The epilogue's
// integer paths use quot_near/DIVF instead (below).
static inline __attribute__((always_inline)) vf quot(vf y, vf r, float s) {
#ifndef I8_DIVFREE
    (void)r;
    return DIVF(y, SET1F(s));
#else
    const vf z = MULF(y, r), n = RINT(z);
    unsigned near = ge_bits(ABSF(SUBF(z, n)), FNMADD(ABSF(z), SET1F(CD_I8_QUOT_SLOPE), SET1F(0.5f)));
    if (__builtin_expect(near == 0, 1)) return n;
    float ya[LANES], za[LANES], na[LANES];
    STOREF(ya, y);
    STOREF(za, z);
    STOREF(na, n);
    for (; near; near &= near - 1) {
        const int i = __builtin_ctz(near);
        na[i] = cd_i8_rint_quot_fix(ya[i], s, za[i]);
    }
    return LOADF(na);
#endif
}

// The epilogue's constants and flags, set once per call.
typedef struct {
    vf zero, lo, hi, vs, vr, vzp, qmin, qmax;
    vf ms, mr, mlo, mhi; // the mid rounding (q.mid_scale > 0): its range less its zero point
    vf rs, rzp;          // an integer residual's scale and zero point (q.res_int)
    float s, m_s;        // out_scale, mid_scale
    int res_signed, out_signed;
    vi zp16;  // out_zp in every 16-bit lane
    vi zp8;   // out_zp in every byte
    vf big;   // 2^20
    vf magic; // 1.5 * 2^23: x + magic, for |x| <= 2^22, is magic + rint(x) exactly
    vi fbits; // the bits of 2^23: fbits | u, for u in 0..255, is the float 2^23 + u
    vf rzp23; // 2^23 + res_zp (u8 residuals)
    vf near;  // 0.5 - 2^-11
} epi_consts;

// How a run's vectors are computed; the common case gets its own copy of
// the loop (flags as constants: no per-vector tests of the layer's kind).
// RES_U8 is RES_INT known unsigned (a residual block's skip tensor).
typedef enum { RES_NONE, RES_FLOAT, RES_INT, RES_U8 } res_mode;

// Rounding without the divider. vdivps (about 1.9 ns per ymm one in a
// stream on the Intel Xeon measured, twice that per zmm) bounds the
// epilogue once its other costs are gone, so the integer paths round
// z = y * r (r = 1/s in float) as
// n = (z + 1.5 * 2^23) - 1.5 * 2^23 (rint(z) for |z| <= 2^22: the sum
// lies where floats are the integers and rounds to nearest even, 1.5 *
// 2^23 being even; +0 for a zero) and check |n - z| < 0.5 - 2^-11 (exact:
// n and z are within a factor 2 of each other or n is 0). When it holds
// and |z| < 1024, n = rintf(fl(y / s)) (sparse/i8-rint-quot.h: z is
// within 0.76 |z| 2^-22 of fl(y / s), here below 2^-12, and 2^-11 from
// every half-integer); for |z| >= 1024 both are beyond 1023 with the same
// sign, which every 8-bit clamp makes equal (beyond 2^22, n is z's
// magnitude, same sign). When it fails (about 1 lane in 1000; NaN too),
// the vector takes the division. True when the vector needs it:
static inline __attribute__((always_inline)) int quot_near(const epi_consts *c, vf n, vf z) {
    return __builtin_expect(nlt_bits(ABSF(SUBF(n, z)), c->near) != 0, 0);
}
// n of the above.
static inline __attribute__((always_inline)) vf round_magic(const epi_consts *c, vf z) {
    return SUBF(ADDF(z, c->magic), c->magic);
}
// n = rint(z) as above and whether the vector needs the division (*near).
// At AVX-512 one vreduceps gives z - rint(z) (ties to even, exact), which
// is the check's difference itself: 2 ops fewer on the two FP pipes than
// the magic add, its subtraction and the difference.
static inline __attribute__((always_inline)) vf round_near(const epi_consts *c, vf z, int *near) {
#ifdef I8_AVX512
    const vf f = _mm512_reduce_ps(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *near = __builtin_expect(nlt_bits(ABSF(f), c->near) != 0, 0);
    return SUBF(z, f);
#else
    const vf n = round_magic(c, z);
    *near = quot_near(c, n, z);
    return n;
#endif
}

// The epilogue of the lanes m of accumulators i.. of a run (all lanes,
// with plain loads, when `full`): y, or with `quant` the output's integer
// (clamped) as a float, or with quant 2 its quotient for epi_block.
// epi_val takes the accumulators a themselves (lanes i.. of the run).
static inline __attribute__((always_inline)) vf epi_val(const epi_consts *c, int mid, res_mode rm, cd_act kind,
                                                        int quant, int full, vf vm, vf vb, vi a, size_t i, lanes m,
                                                        const void *res) {
    vf y = FMADD(CVTF(a), vm, vb);
    // (clamp(n + zp) - zp) * scale is clamp(n, qmin - zp, qmax - zp) * scale
    // (small integers, exact in float), and clamp(rint(x)) is rint(clamp(x))
    // (the bounds are integers), rounded as round_magic (no vroundps: it
    // shares the two multiply pipes with max, min, mul, fma and the
    // conversions). The clamp before the check: a z clamped to a bound is
    // an integer (not near) and fl(y / s) is within 2^-12 of it or beyond,
    // so rounds to that bound or beyond too.
    if (mid) {
        const vf x = MINF(MAXF(MULF(y, c->mr), c->mlo), c->mhi);
        int near;
        vf n = round_near(c, x, &near);
        if (near) n = round_magic(c, MINF(MAXF(DIVF(y, SET1F(c->m_s)), c->mlo), c->mhi));
        y = MULF(n, c->ms);
    }
    // (r - zp) * scale, then the add: ref-conv-i8.c's order (no fma).
    if (rm == RES_U8) {
        // r - zp as (2^23 + r) - (2^23 + zp): exact, an OR (any pipe) and a
        // subtraction (the add pipes) instead of a conversion.
        const void *r = (const uint8_t *)res + i;
        const vi b = full ? load_b_all(r, 0) : load_b(r, m, 0);
        y = ADDF(y, MULF(SUBF(ASF(OR(b, c->fbits)), c->rzp23), c->rs));
    } else if (rm == RES_INT) {
        const void *r = (const uint8_t *)res + i;
        const vi b = full ? load_b_all(r, c->res_signed) : load_b(r, m, c->res_signed);
        y = ADDF(y, MULF(SUBF(CVTF(b), c->rzp), c->rs));
    } else if (rm == RES_FLOAT) {
        y = ADDF(y, full ? load_f_all((const float *)res + i) : load_f((const float *)res + i, m));
    }
    // max(y, 0) is y > 0 ? y : 0 (maxps returns its second operand
    // unless the first is greater), as cd_act_apply's ReLU; for integers
    // out (quant 2) store_b4 applies it to the bytes, 4 vectors at once.
    if (kind == CD_ACT_RELU && quant != 2)
        y = MAXF(y, c->zero);
    else if (kind == CD_ACT_CLIP)
        y = MINF(MAXF(y, c->lo), c->hi);
    // y / s, or an integer-valued float rounding as it (above): epi_block
    // rounds and clamps it. The divider takes it, except where the layer
    // has no mid grid at AVX-512 (whose zmm division is twice as slow);
    // measured: at AVX2 the residual block is slower with both quotients
    // division-free (the multiply pipes, not the divider, then bound it).
    if (quant == 2) {
#ifdef I8_AVX512
        if (!mid) {
            // z itself when not near: the caller's conversion rounds it
            // to nearest even, i.e. to n.
            const vf z = MULF(y, c->vr);
            int near;
            (void)round_near(c, z, &near);
            return near ? DIVF(y, SET1F(c->s)) : z;
        }
#endif
        return DIVF(y, SET1F(c->s));
    }
    if (!quant) return y;
    return MINF(MAXF(ADDF(RINT(quot(y, c->vr, c->s)), c->vzp), c->qmin), c->qmax);
}
static inline __attribute__((always_inline)) vf epi_vec(const epi_consts *c, int mid, res_mode rm, cd_act kind,
                                                        int quant, int full, vf vm, vf vb, const int32_t *acc, size_t i,
                                                        lanes m, const void *res) {
    return epi_val(c, mid, rm, kind, quant, full, vm, vb, full ? load_i_all(acc + i) : load_i(acc + i, m), i, m, res);
}

// 4 vectors from accumulator i on of a run (the first `left` pixels) to
// the integers of the output.
static inline __attribute__((always_inline)) void epi_block(const epi_consts *c, int mid, res_mode rm, cd_act kind,
                                                            int full, vf vm, vf vb, const int32_t *acc, size_t i,
                                                            size_t left, const void *res, void *dst) {
    // Only the vectors the run reaches (a 7-pixel run is one).
    vi v[4] = {SET1(0), SET1(0), SET1(0), SET1(0)};
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const size_t k = (size_t)j * LANES;
        if (!full && k >= left) break;
        // Below 2^20 the conversion is exact and saturates right in
        // store_b4; above it would give INT_MIN.
        const vf x = epi_vec(c, mid, rm, kind, 2, full, vm, vb, acc, i + k, lanes_of(left - k), res);
        v[j] = CVT_RNE(MINF(x, c->big));
    }
    store_b4((uint8_t *)dst + i, full ? 4 * LANES : left, v, c->out_signed, c->zp16, kind == CD_ACT_RELU, c->zp8);
}

// One run of one row. Whole blocks of 4 vectors use plain loads and one
// store; the tail runs masked (lanes_of), not through the scalar code:
// rows of 56 or 7 pixels would spend most of their time there.
static inline __attribute__((always_inline)) void epi_run(const epi_consts *c, int mid, res_mode rm, cd_act kind,
                                                          int quant, int to_int, vf vm, vf vb, const int32_t *acc,
                                                          size_t n, const void *res, void *dst) {
    if (quant && to_int) {
        size_t i = 0;
        for (; i + 4 * LANES <= n; i += 4 * LANES) epi_block(c, mid, rm, kind, 1, vm, vb, acc, i, 4 * LANES, res, dst);
        if (i < n) epi_block(c, mid, rm, kind, 0, vm, vb, acc, i, n - i, res, dst);
        return;
    }
    for (size_t i = 0; i < n; i += LANES) {
        const lanes m = lanes_of(n - i);
        const vf v = epi_vec(c, mid, rm, kind, quant, 0, vm, vb, acc, i, m, res);
        store_f((float *)dst + i, m, quant ? MULF(SUBF(v, c->vzp), c->vs) : v);
    }
}

// Whole blocks of two rows at once (integers out): each vector's chain is
// long (a division among some 20 ops), and 8 of them side by side keep
// more of it in the out-of-order window than 4.
static inline __attribute__((always_inline)) void epi_block2(const epi_consts *c, int mid, res_mode rm, cd_act kind,
                                                             const vf vm[2], const vf vb[2],
                                                             const int32_t *const acc[2], size_t i,
                                                             const void *const res[2], void *const dst[2]) {
    vi v[2][4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const vf x =
                epi_vec(c, mid, rm, kind, 2, 1, vm[h], vb[h], acc[h], i + (size_t)j * LANES, lanes_of(LANES), res[h]);
            v[h][j] = CVT_RNE(MINF(x, c->big));
        }
    store_b4((uint8_t *)dst[0] + i, 4 * LANES, v[0], c->out_signed, c->zp16, kind == CD_ACT_RELU, c->zp8);
    store_b4((uint8_t *)dst[1] + i, 4 * LANES, v[1], c->out_signed, c->zp16, kind == CD_ACT_RELU, c->zp8);
}

// The rows x runs loop for one set of flags; integers out, rows in pairs.
static inline __attribute__((always_inline)) void epi_rows(const epi_consts *c, int mid, res_mode rm, cd_act kind,
                                                           int quant, int to_int, const float *mult, const float *bias,
                                                           int nrows, const int32_t *acc, size_t acc_stride,
                                                           const cd_i8_run *runs, int nruns, const void *res, void *dst,
                                                           size_t row_stride) {
    const size_t esize = to_int ? 1 : sizeof(float), rsize = rm == RES_FLOAT ? sizeof(float) : 1;
    int r = 0;
    if (quant && to_int) {
        for (; r + 2 <= nrows; r += 2) {
            const vf vm[2] = {SET1F(mult[r]), SET1F(mult[r + 1])}, vb[2] = {SET1F(bias[r]), SET1F(bias[r + 1])};
            for (int i = 0; i < nruns; i++) {
                const size_t o = (size_t)r * row_stride + runs[i].out, n = runs[i].len;
                const size_t ro = (size_t)r * row_stride + runs[i].res;
                const int32_t *a0 = acc + (size_t)r * acc_stride + runs[i].m;
                const int32_t *const a[2] = {a0, a0 + acc_stride};
                const char *r0 = rm != RES_NONE ? (const char *)res + ro * rsize : NULL;
                const void *const rr[2] = {r0, r0 ? r0 + row_stride * rsize : NULL};
                void *const d[2] = {(char *)dst + o * esize, (char *)dst + (o + row_stride) * esize};
                size_t j = 0;
                for (; j + 4 * LANES <= n; j += 4 * LANES) epi_block2(c, mid, rm, kind, vm, vb, a, j, rr, d);
                if (j < n)
#pragma GCC unroll 2
                    for (int h = 0; h < 2; h++)
                        epi_block(c, mid, rm, kind, 0, vm[h], vb[h], a[h], j, n - j, rr[h], d[h]);
            }
        }
    }
    for (; r < nrows; r++) {
        const vf vm = SET1F(mult[r]), vb = SET1F(bias[r]);
        for (int i = 0; i < nruns; i++) {
            const size_t o = (size_t)r * row_stride + runs[i].out, ro = (size_t)r * row_stride + runs[i].res;
            epi_run(c, mid, rm, kind, quant, to_int, vm, vb, acc + (size_t)r * acc_stride + runs[i].m, runs[i].len,
                    rm != RES_NONE ? (const char *)res + ro * rsize : NULL, (char *)dst + o * esize);
        }
    }
}

// 1 / s, or 0 for an unused scale (0).
static inline float recip(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }

// The epilogue's constants for e.
static inline epi_consts epi_consts_of(const cd_i8_epilogue *e) {
    const cd_conv_quant *q = &e->q;
    const epi_consts c = {SET1F(0.0f),
                          SET1F(e->act.alpha),
                          SET1F(e->act.beta),
                          SET1F(q->out_scale),
                          SET1F(recip(q->out_scale)),
                          SET1F((float)q->out_zp),
                          SET1F(e->qmin),
                          SET1F(e->qmax),
                          SET1F(q->mid_scale),
                          SET1F(recip(q->mid_scale)),
                          SET1F(cd_quant_qmin(q->mid_signed) - (float)q->mid_zp),
                          SET1F(cd_quant_qmax(q->mid_signed) - (float)q->mid_zp),
                          SET1F(q->res_scale),
                          SET1F((float)q->res_zp),
                          q->out_scale,
                          q->mid_scale,
                          q->res_signed,
                          q->out_signed,
                          SET1_16((short)q->out_zp),
                          SET1((int)((uint32_t)(q->out_zp & 0xFF) * 0x01010101u)),
                          SET1F(0x1p20f),
                          SET1F(0x1.8p23f),
                          SET1(0x4B000000),
                          SET1F(0x1p23f + (float)q->res_zp),
                          SET1F(0.5f - 0x1p-11f)};
    return c;
}

void I8_FN(cd_i8_epilogue_rows)(const cd_i8_epilogue *e, const float *mult, const float *bias, int nrows,
                                const int32_t *acc, size_t acc_stride, const cd_i8_run *runs, int nruns,
                                const void *res, void *dst, size_t row_stride) {
    const cd_act kind = e->act.kind;
    if (kind != CD_ACT_NONE && kind != CD_ACT_RELU && kind != CD_ACT_CLIP) {
        cd_i8_epilogue_rows__scalar(e, mult, bias, nrows, acc, acc_stride, runs, nruns, res, dst, row_stride);
        return;
    }
    const cd_conv_quant *q = &e->q;
    const epi_consts c = epi_consts_of(e);
    const int mid = q->mid_scale > 0.0f, quant = q->out_scale > 0.0f, to_int = q->dst_int;
    const res_mode rm = !res ? RES_NONE : q->res_int ? RES_INT : RES_FLOAT;
    // A plain conv's u8/s8 output (most layers) and a residual block's
    // (conv, its own grid, the u8/s8 skip, ReLU): their own loops.
    if (!mid && rm == RES_NONE && quant && to_int && kind == CD_ACT_RELU)
        epi_rows(&c, 0, RES_NONE, CD_ACT_RELU, 1, 1, mult, bias, nrows, acc, acc_stride, runs, nruns, res, dst,
                 row_stride);
    else if (mid && rm == RES_INT && !q->res_signed && quant && to_int && kind == CD_ACT_RELU)
        epi_rows(&c, 1, RES_U8, CD_ACT_RELU, 1, 1, mult, bias, nrows, acc, acc_stride, runs, nruns, res, dst,
                 row_stride);
    else if (mid && rm == RES_INT && quant && to_int && kind == CD_ACT_RELU)
        epi_rows(&c, 1, RES_INT, CD_ACT_RELU, 1, 1, mult, bias, nrows, acc, acc_stride, runs, nruns, res, dst,
                 row_stride);
    else
        epi_rows(&c, mid, rm, kind, quant, to_int, mult, bias, nrows, acc, acc_stride, runs, nruns, res, dst,
                 row_stride);
}

#include "sparse/i8-spmm-out-simd.h"

void I8_FN(cd_i8_quant_row)(const cd_conv_quant *q, const float *x, size_t n, uint8_t *dst) {
    const vf vr = SET1F(recip(q->in_scale)), vzp = SET1F((float)q->in_zp);
    const vf qmin = SET1F(cd_quant_qmin(q->in_signed)), qmax = SET1F(cd_quant_qmax(q->in_signed));
    const vi shift = SET1(q->in_signed ? 128 : 0);
    for (size_t i = 0; i < n; i += LANES) {
        const lanes m = lanes_of(n - i);
        const vf v = MINF(MAXF(ADDF(RINT(quot(load_f(x + i, m), vr, q->in_scale)), vzp), qmin), qmax);
        store_b(dst + i, m, ADD32(CVTI(v), shift));
    }
}

#include "sparse/i8-phase2-simd.h"
#include "sparse/i8-s1-rows-simd.h"
