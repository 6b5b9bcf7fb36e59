// The stride-1 plane rows of the vector ISAs (contract in sparse/i8-spmm.h,
// cd_i8_s1_rows), included by sparse/i8-spmm-simd.h after
// sparse/i8-phase2-simd.h (s2_bits, s2_copy_exact). The former path wrote
// each plane row with two memsets for the pads and a memcpy (or an xor loop
// for s8) for the input bytes, three calls per 58-byte row of a 3x3 @56
// layer. AVX-512 makes each 64 bytes of a plane row, pads included, from one
// masked load whose off lanes take the zero point and one masked store; AVX2
// the same with whole loads inside the tensor, a blend for the pads and
// whole stores inside the rows being written. The stride-2 scheme
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
// As the AVX-512 body, 32 plane bytes per load, with whole loads where they
// stay inside [src_lo, src_end) (the lanes outside the row blended to the zero
// point) and whole stores where they stay inside the rows being written:
// rows and chunks go in order, so what a store writes past its bytes is
// rewritten by the next ones. The edges go through a stack copy.
void I8_FN(cd_i8_s1_rows)(const cd_i8_s1_rows *g, const uint8_t *src, const uint8_t *src_lo, const uint8_t *src_end,
                          size_t src_stride, size_t nrows, uint8_t *dst) {
    const __m256i lane = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                          22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    const __m256i zp = _mm256_set1_epi8((char)g->zp), flip = _mm256_set1_epi8((char)g->flip);
    uint8_t tmp[32] __attribute__((aligned(32)));
    const uint8_t *lim = dst + nrows * (size_t)g->wph;
    for (size_t i = 0; i < nrows; i++) {
        const uint8_t *row = src + i * src_stride;
        uint8_t *out = dst + i * (size_t)g->wph;
        for (int j = 0; j < g->wph; j += 32) {
            const long base = (long)j - g->j0; // row byte of lane 0
            const long lo = base < 0 ? -base : 0, hi = g->w - base < 32 ? g->w - base : 32;
            __m256i x = zp;
            if (hi > lo) {
                const uint8_t *p = row + base;
                if (p >= src_lo && p + 32 <= src_end) {
                    x = _mm256_loadu_si256((const __m256i *)p);
                } else {
                    memcpy(tmp + lo, p + lo, (size_t)(hi - lo));
                    x = _mm256_load_si256((const __m256i *)tmp);
                }
                const __m256i in = _mm256_and_si256(_mm256_cmpgt_epi8(lane, _mm256_set1_epi8((char)(lo - 1))),
                                                    _mm256_cmpgt_epi8(_mm256_set1_epi8((char)hi), lane));
                x = _mm256_blendv_epi8(zp, _mm256_xor_si256(x, flip), in);
            }
            if (out + j + 32 <= lim) {
                _mm256_storeu_si256((__m256i *)(out + j), x);
            } else {
                _mm256_store_si256((__m256i *)tmp, x);
                const int n = (int)(lim - (out + j));
                s2_copy_exact(out + j, tmp, n);
            }
        }
    }
}
#endif
