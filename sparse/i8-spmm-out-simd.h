// The int8 kernels with the plain epilogue inside (sparse/i8-spmm.h
// cd_i8_out), at the AVX-512 levels: part of sparse/i8-spmm-simd.h's one
// body (its vocabulary, csr_block/bsr4_block and epilogue), included by it.

#ifdef I8_AVX512
// The kernels with the plain epilogue (cd_i8_out_plain) in one pass: a block
// row's 4 accumulator vectors in the unpacks' lane order go through the
// epilogue in registers, and pack_b4 puts their bytes in pixel order (its
// 128-bit lane L: pixels 16L .. 16L+15, in the order the unpacks left
// them), so neither the accumulators' store and reload nor either
// permutation remains; each run takes its bytes with one masked store.

// The bytes m .. m+len-1 of a tile: run r's.
static inline __mmask64 run_mask(const cd_i8_run *r) {
    return (r->len >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << r->len) - 1)) << r->m;
}

// The epilogue of nr (1 or 2) rows, row0 and row0 + 1, from their
// accumulators a[h]: two rows side by side keep twice the independent
// chains in the out-of-order window (epi_block2's reason).
static inline __attribute__((always_inline)) void out_rows(const epi_consts *c, cd_act kind, const cd_i8_out *o,
                                                           size_t row0, int nr, vi a[2][4]) {
    vf vm[2], vb[2];
    vi v[2][4];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        if (h >= nr) break;
        vm[h] = SET1F(o->mult[row0 + h]);
        vb[h] = SET1F(o->bias[row0 + h]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            if (h >= nr) break;
            v[h][j] = CVT_RNE(
                MINF(epi_val(c, 0, RES_NONE, kind, 2, 1, vm[h], vb[h], a[h][j], 0, lanes_of(LANES), NULL), c->big));
        }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        if (h >= nr) break;
        const vi x = pack_b4(v[h], c->out_signed, c->zp16, kind == CD_ACT_RELU, c->zp8);
        const uintptr_t d = (uintptr_t)(o->dst + (row0 + h) * o->row_stride);
        for (int i = 0; i < o->nruns; i++) {
            const cd_i8_run *r = &o->runs[i];
            // Byte m of x is the run's first output: the base may lie
            // before the tensor, where the mask stores nothing.
            _mm512_mask_storeu_epi8((void *)(d + r->out - r->m), run_mask(r), x);
        }
    }
}

static inline __attribute__((always_inline)) void csr_out(size_t nblk, const uint8_t *in, const int32_t *off,
                                                          const int8_t *w, const uint32_t *nq, const uint32_t *nqs,
                                                          const int32_t *init, const cd_i8_out *o, cd_act kind) {
    const epi_consts c = epi_consts_of(o->e);
    size_t b = 0;
    for (; b + 2 <= nblk; b += 2) {
        vi a[2][4];
        csr_block(in, &off, &w, nq[b], nqs[b], init[b], a[0]);
        csr_block(in, &off, &w, nq[b + 1], nqs[b + 1], init[b + 1], a[1]);
        out_rows(&c, kind, o, b, 2, a);
    }
    if (b < nblk) {
        vi a[2][4];
        csr_block(in, &off, &w, nq[b], nqs[b], init[b], a[0]);
        out_rows(&c, kind, o, b, 1, a);
    }
}

static inline __attribute__((always_inline)) void bsr4_out(size_t nblk, const uint8_t *in, const int32_t *off,
                                                           const int8_t *w, const uint32_t *nq, const uint32_t *nqs,
                                                           const int32_t *init, const cd_i8_out *o, cd_act kind) {
    const epi_consts c = epi_consts_of(o->e);
    for (size_t b = 0; b < nblk; b++) {
        vi a[4][4];
        bsr4_block(in, &off, &w, nq[b], nqs[b], init + 4 * b, a);
        out_rows(&c, kind, o, 4 * b, 2, a);
        out_rows(&c, kind, o, 4 * b + 2, 2, a + 2);
    }
}

// One copy of the loop per activation (a constant inside it).
void I8_FN(cd_i8_spmm_csr_out)(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                               const uint32_t *nqs, const int32_t *init, const cd_i8_out *o) {
    if (o->e->act.kind == CD_ACT_RELU)
        csr_out(nblk, in, off, w, nq, nqs, init, o, CD_ACT_RELU);
    else
        csr_out(nblk, in, off, w, nq, nqs, init, o, CD_ACT_NONE);
}

void I8_FN(cd_i8_spmm_bsr4_out)(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                                const uint32_t *nqs, const int32_t *init, const cd_i8_out *o) {
    if (o->e->act.kind == CD_ACT_RELU)
        bsr4_out(nblk, in, off, w, nq, nqs, init, o, CD_ACT_RELU);
    else
        bsr4_out(nblk, in, off, w, nq, nqs, init, o, CD_ACT_NONE);
}
#endif
