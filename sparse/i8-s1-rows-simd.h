// The stride-1 plane rows of the vector ISAs (contract in sparse/i8-spmm.h,
// cd_i8_s1_rows), included by sparse/i8-spmm-simd.h after
// sparse/i8-phase2-simd.h (s2_bits, s2_copy_exact). The former path wrote
// each plane row with two memsets for the pads and a memcpy (or an xor loop
// for s8) for the input bytes, three calls per 58-byte row of a 3x3 @56
// layer. AVX-512 makes each 64 bytes of a plane row, pads included, from one
// masked load whose off lanes take the zero point and one masked store; AVX2
// each 32 (or 16) with whole loads inside the tensor, a blend for the pads and whole
// stores inside the row. The stride-2 scheme
// (sparse/i8-phase2-simd.h) without the gather.

#ifdef I8_AVX512
// Plane row byte 64k + l is row byte 64k + l - j0: lanes outside [0, w) of
// the row are masked off and load zp ^ flip. The masks are the same for
// every row and made once per chunk.
void I8_FN(cd_i8_s1_rows)(const cd_i8_s1_rows *g, const uint8_t *src, const uint8_t *src_lo, const uint8_t *src_end,
                          size_t src_stride, size_t nrows, uint8_t *dst) {
    (void)src_lo; // masked loads read only the row's bytes
    (void)src_end;
    const __m512i flip = _mm512_set1_epi8((char)g->flip), pad = _mm512_set1_epi8((char)(g->zp ^ g->flip));
    const size_t wph = (size_t)g->wph;
    for (int k = 0; 64 * k < g->wph; k++) {
        const long base = 64L * k - g->j0; // row byte of lane 0
        const __mmask64 m = s2_bits((int)(base < 0 ? -base : 0), (int)(g->w - base < 64 ? g->w - base : 64));
        const __mmask64 sm = s2_bits(0, g->wph - 64 * k);
        const uint8_t *in = src + base;
        uint8_t *out = dst + 64 * (size_t)k;
        for (size_t i = 0; i < nrows; i++, in += src_stride, out += wph)
            _mm512_mask_storeu_epi8(out, sm, _mm512_xor_si512(_mm512_mask_loadu_epi8(pad, m, in), flip));
    }
}
#else
// Plane bytes [j, j + 16) of a row: lanes whose row byte j + l - j0 is in
// [0, w) from a whole load where it stays inside [src_lo, src_end) (else
// through a stack copy of those bytes), the others zp; in is the lane mask.
static inline __m128i s1_chunk(const cd_i8_s1_rows *g, const uint8_t *row, int j, __m128i in, const uint8_t *src_lo,
                               const uint8_t *src_end) {
    const long base = (long)j - g->j0; // row byte of lane 0
    const uint8_t *p = row + base;
    __m128i x;
    if (p >= src_lo && p + 16 <= src_end) {
        x = _mm_loadu_si128((const __m128i *)p);
    } else {
        uint8_t tmp[16] __attribute__((aligned(16))) = {0};
        const long lo = base < 0 ? -base : 0, hi = g->w - base < 16 ? g->w - base : 16;
        if (hi > lo) memcpy(tmp + lo, p + lo, (size_t)(hi - lo));
        x = _mm_load_si128((const __m128i *)tmp);
    }
    return _mm_blendv_epi8(_mm_set1_epi8((char)g->zp), _mm_xor_si128(x, _mm_set1_epi8((char)g->flip)), in);
}

// The lane mask of plane bytes [j, j + 16): row byte j + l - j0 in [0, w).
static inline __m128i s1_lanes(const cd_i8_s1_rows *g, int j) {
    const __m128i lane = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const long base = (long)j - g->j0;
    long lo = base < 0 ? -base : 0, hi = g->w - base < 16 ? g->w - base : 16;
    if (lo > 16) lo = 16;
    if (hi < 0) hi = 0;
    return _mm_and_si128(_mm_cmpgt_epi8(lane, _mm_set1_epi8((char)(lo - 1))),
                         _mm_cmpgt_epi8(_mm_set1_epi8((char)hi), lane));
}

// s1_chunk and s1_lanes for 32 bytes.
static inline __m256i s1_chunk32(const cd_i8_s1_rows *g, const uint8_t *row, int j, __m256i in, const uint8_t *src_lo,
                                 const uint8_t *src_end) {
    const long base = (long)j - g->j0;
    const uint8_t *p = row + base;
    __m256i x;
    if (p >= src_lo && p + 32 <= src_end) {
        x = _mm256_loadu_si256((const __m256i *)p);
    } else {
        uint8_t tmp[32] __attribute__((aligned(32))) = {0};
        const long lo = base < 0 ? -base : 0, hi = g->w - base < 32 ? g->w - base : 32;
        if (hi > lo) memcpy(tmp + lo, p + lo, (size_t)(hi - lo));
        x = _mm256_load_si256((const __m256i *)tmp);
    }
    return _mm256_blendv_epi8(_mm256_set1_epi8((char)g->zp), _mm256_xor_si256(x, _mm256_set1_epi8((char)g->flip)), in);
}

static inline __m256i s1_lanes32(const cd_i8_s1_rows *g, int j) {
    const __m256i lane = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                          22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    const long base = (long)j - g->j0;
    long lo = base < 0 ? -base : 0, hi = g->w - base < 32 ? g->w - base : 32;
    if (lo > 32) lo = 32;
    if (hi < 0) hi = 0;
    return _mm256_and_si256(_mm256_cmpgt_epi8(lane, _mm256_set1_epi8((char)(lo - 1))),
                            _mm256_cmpgt_epi8(_mm256_set1_epi8((char)hi), lane));
}

// As the AVX-512 body, 32 plane bytes per load (16 in rows narrower than 32): whole loads inside the
// tensor, blends for the pads (the lane masks made once per chunk), whole
// stores inside each row, the last chunk of a row moved back to end at the row's
// end (overlapping the one before with the same bytes). Rows narrower than
// 16 bytes go through a stack copy.
void I8_FN(cd_i8_s1_rows)(const cd_i8_s1_rows *g, const uint8_t *src, const uint8_t *src_lo, const uint8_t *src_end,
                          size_t src_stride, size_t nrows, uint8_t *dst) {
    const size_t wph = (size_t)g->wph;
    if (g->wph < 16) {
        const __m128i in = s1_lanes(g, 0);
        uint8_t tmp[32] __attribute__((aligned(16))); // 32: s2_copy_exact's n >= 16 branch, never taken here
        for (size_t i = 0; i < nrows; i++) {
            _mm_store_si128((__m128i *)tmp, s1_chunk(g, src + i * src_stride, 0, in, src_lo, src_end));
            s2_copy_exact(dst + i * wph, tmp, g->wph);
        }
        return;
    }
    if (g->wph >= 32) {
        for (int c = 0; c < g->wph; c += 32) {
            const int j = c + 32 <= g->wph ? c : g->wph - 32;
            const __m256i in = s1_lanes32(g, j);
            const uint8_t *row = src;
            uint8_t *out = dst + j;
            for (size_t i = 0; i < nrows; i++, row += src_stride, out += wph)
                _mm256_storeu_si256((__m256i *)out, s1_chunk32(g, row, j, in, src_lo, src_end));
        }
        return;
    }
    for (int c = 0; c < g->wph; c += 16) {
        const int j = c + 16 <= g->wph ? c : g->wph - 16;
        const __m128i in = s1_lanes(g, j);
        const uint8_t *row = src;
        uint8_t *out = dst + j;
        for (size_t i = 0; i < nrows; i++, row += src_stride, out += wph)
            _mm_storeu_si128((__m128i *)out, s1_chunk(g, row, j, in, src_lo, src_end));
    }
}
#endif
