// The stride-2 phase-plane rows of the vector ISAs (contract in
// sparse/i8-spmm.h, cd_i8_s2_rows), included by sparse/i8-spmm-simd.h.
// The former path copied each row once per phase, gathered the even bytes
// of that copy and filled the pads with two memsets per plane row: half the
// time of ResNet-50's stride-2 int8 layers at 90% sparsity. AVX-512 makes
// each plane row, pads included, from one masked load, a shuffle and one
// store (1x1 s2 and 3x3 s2 planes 4-7x faster than the former path; a
// first version that split a row once for both phases and wrote the pads
// with their own masked stores was 2.4x: bench/results/sparse-i8-chain.md).
// AVX2 (no byte-masked loads or stores) does the same with whole loads and
// stores where they stay inside the tensor and the rows being written.

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

// As the AVX-512 body, 16 plane bytes per load of 32, with whole loads
// where they stay inside [src, src_end) (other lanes replaced by the zero
// point) and whole 16-byte stores where they stay inside the rows being
// written: rows and chunks go in order, so what a store writes past its
// bytes is rewritten by the next ones. The edges go through a stack copy.
void I8_FN(cd_i8_s2_rows)(const cd_i8_s2_rows *g, const uint8_t *src, const uint8_t *src_end, size_t src_stride,
                          size_t nrows, uint8_t *const dst[2]) {
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                           14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i lane = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                          22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    const __m256i zp = _mm256_set1_epi8((char)g->zp), flip = _mm256_set1_epi8((char)g->flip);
    uint8_t tmp[32] __attribute__((aligned(32)));
    for (int b = 0; b < g->nb; b++) {
        const int e = 2 * g->j0[b] - g->first[b], qhi = 2 * g->j1[b] - e - 1 < g->w ? 2 * g->j1[b] - e - 1 : g->w;
        const uint8_t *lim = dst[b] + nrows * (size_t)g->wph;
        for (size_t i = 0; i < nrows; i++) {
            const uint8_t *row = src + i * src_stride;
            uint8_t *out = dst[b] + i * (size_t)g->wph;
            for (int j = 0; j < g->wph; j += 16) {
                const long base = 2L * j - e; // row byte of lane 0
                const long lo = base < 0 ? -base : 0, hi = qhi - base < 32 ? qhi - base : 32;
                __m256i x = zp;
                if (hi > lo) {
                    const uint8_t *p = row + base;
                    if (p >= src && p + 32 <= src_end) {
                        x = _mm256_loadu_si256((const __m256i *)p);
                    } else {
                        memcpy(tmp + lo, p + lo, (size_t)(hi - lo));
                        x = _mm256_load_si256((const __m256i *)tmp);
                    }
                    const __m256i in = _mm256_and_si256(_mm256_cmpgt_epi8(lane, _mm256_set1_epi8((char)(lo - 1))),
                                                        _mm256_cmpgt_epi8(_mm256_set1_epi8((char)hi), lane));
                    x = _mm256_blendv_epi8(zp, _mm256_xor_si256(x, flip), in);
                }
                x = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(x, split), 0xD8); // evens to the low half
                const __m128i v = _mm256_castsi256_si128(x);
                if (out + j + 16 <= lim) {
                    _mm_storeu_si128((__m128i *)(out + j), v);
                } else {
                    _mm_store_si128((__m128i *)tmp, v);
                    s2_copy_exact(out + j, tmp, (int)(lim - (out + j)));
                }
            }
        }
    }
}
#endif
