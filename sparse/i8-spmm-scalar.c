// The portable int8 micro-kernels, epilogue and input quantization
// (contracts in sparse/i8-spmm.h). The epilogue and the quantization are
// written exactly as kernels/cpu/ref-conv-i8.c computes them (the same
// op-desc.h functions): the vector versions run their tails here.

#include "sparse/i8-spmm.h"

#include <string.h>

// Unsigned arithmetic: the s32 sums wrap as the vector ones do (signed
// overflow would be undefined), exact whenever the true sum fits.
static void block_rows(int nr, const uint8_t *in, const int32_t *off, const int8_t *w, uint32_t nq, const int32_t *init,
                       int32_t *acc) {
    uint32_t a[4][CD_I8_SCALAR_TILE];
    for (int i = 0; i < nr; i++)
        for (int m = 0; m < CD_I8_SCALAR_TILE; m++) a[i][m] = (uint32_t)init[i];
    for (uint32_t q = 0; q < nq; q++, off += 4, w += 4 * nr)
        for (int j = 0; j < 4; j++) {
            const uint8_t *x = in + off[j];
            for (int i = 0; i < nr; i++) {
                const int32_t wij = w[4 * i + j];
                for (int m = 0; m < CD_I8_SCALAR_TILE; m++) a[i][m] += (uint32_t)(wij * (int32_t)x[m]);
            }
        }
    for (int i = 0; i < nr; i++)
        for (int m = 0; m < CD_I8_SCALAR_TILE; m++) acc[i * CD_I8_SCALAR_TILE + m] = (int32_t)a[i][m];
}

static void spmm(int nr, size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                 const int32_t *init, int32_t *acc) {
    for (size_t b = 0; b < nblk; b++) {
        block_rows(nr, in, off, w, nq[b], init + b * nr, acc + b * nr * CD_I8_SCALAR_TILE);
        off += 4 * (size_t)nq[b];
        w += 4 * (size_t)nr * nq[b];
    }
}

void cd_i8_spmm_csr__scalar(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                            const uint32_t *nqs, const int32_t *init, int32_t *acc) {
    spmm(1, nblk, in, off, w, nq, init, acc);
}

void cd_i8_spmm_bsr4__scalar(size_t nblk, const uint8_t *in, const int32_t *off, const int8_t *w, const uint32_t *nq,
                             const uint32_t *nqs, const int32_t *init, int32_t *acc) {
    spmm(4, nblk, in, off, w, nq, init, acc);
}

// Residual element i as a float: its grid value when stored as integers
// (kernels/cpu/ref-conv-i8.c's residual_at).
static float residual_at(const cd_conv_quant *q, const void *res, size_t i) {
    if (!q->res_int) return ((const float *)res)[i];
    const float r = q->res_signed ? (float)((const int8_t *)res)[i] : (float)((const uint8_t *)res)[i];
    return (r - (float)q->res_zp) * q->res_scale;
}

void cd_i8_epilogue__scalar(const cd_i8_epilogue *e, float mult, float bias, const int32_t *acc, size_t n,
                            const void *res, void *dst) {
    for (size_t i = 0; i < n; i++) {
        // fmaf(0, 0, y0) is y0: the residual and act of cd_conv_quant_y after the mid rounding.
        const float y0 = cd_conv_quant_mid(&e->q, fmaf((float)acc[i], mult, bias));
        const float y = cd_conv_quant_y(0, 0.0f, y0, res ? residual_at(&e->q, res, i) : 0.0f, e->has_residual, e->act);
        const float v = cd_conv_quant_out(&e->q, y);
        if (!e->q.dst_int)
            ((float *)dst)[i] = v;
        else if (e->q.out_signed)
            ((int8_t *)dst)[i] = (int8_t)v;
        else
            ((uint8_t *)dst)[i] = (uint8_t)v;
    }
}

void cd_i8_epilogue_rows__scalar(const cd_i8_epilogue *e, const float *mult, const float *bias, int nrows,
                                 const int32_t *acc, size_t acc_stride, const cd_i8_run *runs, int nruns,
                                 const void *res, void *dst, size_t row_stride) {
    const size_t esize = e->q.dst_int ? 1 : sizeof(float), rsize = e->q.res_int ? 1 : sizeof(float);
    for (int r = 0; r < nrows; r++)
        for (int i = 0; i < nruns; i++) {
            const size_t o = (size_t)r * row_stride + runs[i].out, ro = (size_t)r * row_stride + runs[i].res;
            cd_i8_epilogue__scalar(e, mult[r], bias[r], acc + (size_t)r * acc_stride + runs[i].m, runs[i].len,
                                   res ? (const char *)res + ro * rsize : NULL, (char *)dst + o * esize);
        }
}

void cd_i8_quant_row__scalar(const cd_conv_quant *q, const float *x, size_t n, uint8_t *dst) {
    const int32_t shift = q->in_signed ? 128 : 0;
    for (size_t i = 0; i < n; i++) dst[i] = (uint8_t)(cd_conv_quant_in(q, x[i]) + shift);
}

void cd_i8_s2_rows__scalar(const cd_i8_s2_rows *g, const uint8_t *src, const uint8_t *src_end, size_t src_stride,
                           size_t nrows, uint8_t *const dst[2]) {
    (void)src_end;
    for (size_t i = 0; i < nrows; i++) {
        const uint8_t *row = src + i * src_stride;
        for (int b = 0; b < g->nb; b++) {
            uint8_t *out = dst[b] + i * (size_t)g->wph;
            const int j0 = g->j0[b], j1 = g->j1[b];
            for (int j = 0; j < j0; j++) out[j] = g->zp;
            for (int j = j0; j < j1; j++) out[j] = (uint8_t)(row[2 * (j - j0) + g->first[b]] ^ g->flip);
            for (int j = j1; j < g->wph; j++) out[j] = g->zp;
        }
    }
}

void cd_i8_s1_rows__scalar(const cd_i8_s1_rows *g, const uint8_t *src, const uint8_t *src_lo, const uint8_t *src_end,
                           size_t src_stride, size_t nrows, uint8_t *dst) {
    (void)src_lo;
    (void)src_end;
    for (size_t i = 0; i < nrows; i++) {
        const uint8_t *row = src + i * src_stride;
        uint8_t *out = dst + i * (size_t)g->wph;
        memset(out, g->zp, (size_t)g->j0);
        if (!g->flip)
            memcpy(out + g->j0, row, (size_t)g->w);
        else
            for (int j = 0; j < g->w; j++) out[g->j0 + j] = (uint8_t)(row[j] ^ g->flip);
        memset(out + g->j0 + g->w, g->zp, (size_t)(g->wph - g->j0 - g->w));
    }
}
