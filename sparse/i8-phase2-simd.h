// The stride-2 phase-plane rows of the vector ISAs (contract in
// sparse/i8-spmm.h, cd_i8_s2_rows), included by sparse/i8-spmm-simd.h.
// The former path copied each row once per phase, gathered the even bytes
// of that copy and filled the pads with two memsets per plane row: half the
// time of ResNet-50's stride-2 int8 layers at 90% sparsity. AVX-512 makes
// each plane row, pads included, from one masked load, a shuffle and one
// store (1x1 s2 and 3x3 s2 planes 5-7x faster than the former path; a
// first version that split a row once for both phases and wrote the pads
// with their own masked stores was 2.4x: bench/results/sparse-i8-chain.md).
// AVX2, without byte-masked loads and stores, splits each row once for both
// phases into a stack row and copies it with overlapping whole-vector stores.

#ifdef I8_AVX512
// Bits [lo, hi) of a 64-bit mask (none when hi <= lo).
static inline __mmask64 s2_bits(int lo, int hi) {
    if (lo < 0) lo = 0;
    if (hi > 64) hi = 64;
    if (hi <= lo) return 0;
    const uint64_t upto_hi = hi >= 64 ? ~0ull : (1ull << hi) - 1;
    return (__mmask64)(upto_hi & ~((1ull << lo) - 1));
}

// Plane row j is row byte 2j - e (e = 2*j0 - first): 32 plane bytes are
// the even bytes of one load of 64 from row + 64k - e whose lanes outside
// the gathered bytes are masked off and take the zero point, so one
// masked load, a shuffle and one store make a whole row with its pads.
// The loads' masks (the same for every row) are made once per call.
void I8_FN(cd_i8_s2_rows)(const cd_i8_s2_rows *g, const uint8_t *src, const uint8_t *src_end, size_t src_stride,
                          size_t nrows, uint8_t *const dst[2]) {
    (void)src_end; // masked loads read only the gathered bytes
    // Per 128-bit lane: its 8 even bytes (a qword), then its 8 odd ones;
    // then the even qwords to the low half.
    const __m512i split = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    const __m512i evens = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), flip = _mm512_set1_epi8((char)g->flip);
    // Masked-off lanes load zp ^ flip: zp after the flip.
    const __m512i pad = _mm512_set1_epi8((char)(g->zp ^ g->flip));
    const int chunks = (g->wph + 31) / 32;
    for (int b = 0; b < g->nb; b++) {
        const int e = 2 * g->j0[b] - g->first[b], qhi = 2 * g->j1[b] - e - 1 < g->w ? 2 * g->j1[b] - e - 1 : g->w;
        for (int k = 0; k < chunks; k++) {
            const long base = 64L * k - e; // row byte of lane 0
            const __mmask64 m = s2_bits((int)(base < 0 ? -base : 0), (int)(qhi - base < 64 ? qhi - base : 64));
            const int n = g->wph - 32 * k < 32 ? g->wph - 32 * k : 32;
            const __mmask32 sm = (__mmask32)s2_bits(0, n);
            for (size_t i = 0; i < nrows; i++) {
                const __m512i x = _mm512_xor_si512(_mm512_mask_loadu_epi8(pad, m, src + i * src_stride + base), flip);
                const __m512i y = _mm512_permutexvar_epi64(evens, _mm512_shuffle_epi8(x, split));
                _mm256_mask_storeu_epi8(dst[b] + i * (size_t)g->wph + 32 * k, sm, _mm512_castsi512_si256(y));
            }
        }
    }
}
#else
// dst[0 .. n) = src[0 .. n) with whole-vector stores inside it only (no
// byte-masked stores in AVX2): overlapping ones for the tails.
static inline void s2_copy_exact(uint8_t *dst, const uint8_t *src, int n) {
    if (n >= 16) {
        int i = 0;
        for (; i + 16 <= n; i += 16)
            _mm_storeu_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
        if (i < n) _mm_storeu_si128((__m128i *)(dst + n - 16), _mm_loadu_si128((const __m128i *)(src + n - 16)));
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else {
        for (int i = 0; i < n; i++) dst[i] = src[i];
    }
}

// The largest input row the AVX2 body builds in its stack buffers; wider
// rows take the portable one.
#define S2_MAX_ROW 1024

void I8_FN(cd_i8_s2_rows)(const cd_i8_s2_rows *g, const uint8_t *src, const uint8_t *src_end, size_t src_stride,
                          size_t nrows, uint8_t *const dst[2]) {
    if (g->w > S2_MAX_ROW || g->wph > S2_MAX_ROW) {
        cd_i8_s2_rows__scalar(g, src, src_end, src_stride, nrows, dst);
        return;
    }
    // ph: the row's even bytes at 0, odd bytes at S2_MAX_ROW / 2 + 32;
    // built: a plane row with room for the last chunk's spill.
    uint8_t ph[S2_MAX_ROW + 64] __attribute__((aligned(32))), built[S2_MAX_ROW + 64] __attribute__((aligned(32)));
    uint8_t tail[32] __attribute__((aligned(32)));
    const __m256i zp = _mm256_set1_epi8((char)g->zp), flip = _mm256_set1_epi8((char)g->flip);
    // Per 128-bit lane: its 8 even bytes, then its 8 odd ones.
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                           14, 1, 3, 5, 7, 9, 11, 13, 15);
    const int odd0 = S2_MAX_ROW / 2 + 32;
    for (size_t i = 0; i < nrows; i++) {
        const uint8_t *row = src + i * src_stride;
        for (int c = 0; c < g->w; c += 32) {
            __m256i x;
            if (row + c + 32 <= src_end) {
                x = _mm256_loadu_si256((const __m256i *)(row + c));
            } else { // the tensor ends within 32 bytes: read only what it has
                memset(tail, 0, sizeof tail);
                memcpy(tail, row + c, (size_t)(g->w - c));
                x = _mm256_load_si256((const __m256i *)tail);
            }
            x = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(_mm256_xor_si256(x, flip), split), 0xD8);
            _mm_store_si128((__m128i *)(ph + c / 2), _mm256_castsi256_si128(x));
            _mm_storeu_si128((__m128i *)(ph + odd0 + c / 2), _mm256_extracti128_si256(x, 1));
        }
        for (int b = 0; b < g->nb; b++) {
            const uint8_t *from = ph + (g->first[b] ? odd0 : 0);
            const int j0 = g->j0[b], j1 = g->j1[b];
            for (int j = 0; j < j0; j += 32) _mm256_storeu_si256((__m256i *)(built + j), zp);
            for (int j = 0; j < j1 - j0; j += 32)
                _mm256_storeu_si256((__m256i *)(built + j0 + j), _mm256_loadu_si256((const __m256i *)(from + j)));
            for (int j = j1; j < g->wph; j += 32) _mm256_storeu_si256((__m256i *)(built + j), zp);
            s2_copy_exact(dst[b] + i * (size_t)g->wph, built, g->wph);
        }
    }
}
#undef S2_MAX_ROW
#endif
