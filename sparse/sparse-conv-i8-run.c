// Running an int8 sparse conv (built by sparse-conv-i8.c): the prepared u8
// planes of a fold of images, the micro-kernel calls over pixel tiles and
// chunks of rows, and the epilogue of each tile's valid pixels.

#include "sparse/sparse-conv-i8-internal.h"

#include "core/errors.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t cd_sparse_conv_i8_workspace_size(const cd_sparse_conv_i8 *h, int batch) {
    if (batch < 1) return 0;
    return h->prep_bytes + (size_t)h->threads * h->thread_bytes;
}

// The u8 of n input values from element i of src (quantized, copied, or
// shifted by 128 for s8).
static void load_row(const cd_sparse_conv_i8 *h, const void *src, size_t i, size_t n, uint8_t *dst) {
    const cd_conv_quant *q = &h->epi.q;
    if (!q->src_int)
        h->k->quant_row(q, (const float *)src + i, n, dst);
    else if (!q->in_signed)
        memcpy(dst, (const uint8_t *)src + i, n);
    else
        for (size_t j = 0; j < n; j++) dst[j] = (uint8_t)(((const uint8_t *)src)[i + j] ^ 0x80);
}

// The planes of a stride-2 layer's channel (element x0 of src onwards; float
// input is quantized into rowq first, whole), one k->s2_rows call per row
// phase: each input row is read once for both column phases.
static void prep_channel_s2(const cd_sparse_conv_i8 *h, const void *src, size_t x0, uint8_t *chan, uint8_t *rowq) {
    const cd_conv_desc *d = &h->d;
    const size_t hw = (size_t)d->h * d->w;
    const uint8_t *x = (const uint8_t *)src + x0;
    if (!h->epi.q.src_int) {
        h->k->quant_row(&h->epi.q, (const float *)src + x0, hw, rowq);
        x = rowq;
    }
    for (int a = 0; a < d->stride_h; a++) {
        const i8_s2_pass *p = &h->s2[a];
        uint8_t *dst[2] = {NULL, NULL};
        for (int b = 0; b < p->g.nb; b++) {
            dst[b] = chan + p->slot[b] * h->plane;
            if (p->i0) memset(dst[b], h->zp_u8, (size_t)p->i0 * h->wph);
            if (p->i1 < h->hph) memset(dst[b] + (size_t)p->i1 * h->wph, h->zp_u8, (size_t)(h->hph - p->i1) * h->wph);
            dst[b] += (size_t)p->i0 * h->wph;
        }
        if (p->g.nb == 0 || p->i0 == p->i1) continue;
        const size_t y0 = (size_t)p->i0 * d->stride_h + a - d->pad_t;
        h->k->s2_rows(&p->g, x + y0 * d->w, x + hw, (size_t)d->stride_h * d->w, (size_t)(p->i1 - p->i0), dst);
    }
}

// The planes of a stride_w 1 layer's channel (element x0 of src onwards,
// of its image's x_end elements; float input is quantized into rowq first,
// whole): per slot (row phase a), the rows that fall in the input from one
// k->s1_rows call, the others all padding.
static void prep_channel_s1(const cd_sparse_conv_i8 *h, const void *src, size_t x0, size_t x_end, uint8_t *chan,
                            uint8_t *rowq) {
    const cd_conv_desc *d = &h->d;
    const size_t hw = (size_t)d->h * d->w, wph = (size_t)h->wph;
    const uint8_t *x = (const uint8_t *)src + x0, *lo = src, *end = (const uint8_t *)src + x_end;
    if (!h->epi.q.src_int) {
        h->k->quant_row(&h->epi.q, (const float *)src + x0, hw, rowq);
        x = lo = rowq;
        end = rowq + h->rowq_bytes; // all of it readable, the bytes past hw blended away
    }
    const int sh = d->stride_h;
    for (int t = 0; t < h->nslots; t++) {
        uint8_t *p = chan + t * h->plane;
        const int a = h->slot_a[t];
        // Rows i with i*sh + a - pad_t in [0, H) (no divisions at stride 1:
        // a 7x7 layer's channel is a few ns of rows).
        int i0 = d->pad_t, i1 = d->h + d->pad_t;
        if (sh > 1) {
            i0 = d->pad_t > a ? (d->pad_t - a + sh - 1) / sh : 0;
            const int span = d->h + d->pad_t - a;
            i1 = span > 0 ? (span + sh - 1) / sh : 0;
        }
        if (i1 > h->hph) i1 = h->hph;
        if (i0 > i1) i0 = i1;
        if (i0) memset(p, h->zp_u8, (size_t)i0 * wph);
        if (i1 < h->hph) memset(p + (size_t)i1 * wph, h->zp_u8, (size_t)(h->hph - i1) * wph);
        if (i0 == i1) continue;
        const size_t y0 = (size_t)i0 * sh + a - d->pad_t;
        h->k->s1_rows(&h->s1, x + y0 * d->w, lo, end, (size_t)sh * d->w, (size_t)(i1 - i0), p + (size_t)i0 * wph);
    }
}

// Writes the planes of input channel ch (of all C) of image n into the
// slots of image index fi of the fold. rowq: a thread's rowq_bytes.
static void prep_channel(const cd_sparse_conv_i8 *h, const void *src, int n, int ch, int fi, uint8_t *base,
                         uint8_t *rowq) {
    const cd_conv_desc *d = &h->d;
    const int g = ch / h->cpg, c = ch % h->cpg;
    const size_t x0 = ((size_t)n * d->c + ch) * d->h * d->w;
    uint8_t *chan = base + g * h->group_in + c * h->chan_stride + fi * h->img_plane;
    const uint8_t zp = (uint8_t)h->zp_u8;
    if (h->direct) {
        load_row(h, src, x0, (size_t)d->h * d->w, chan);
        return;
    }
    if (h->s2) {
        prep_channel_s2(h, src, x0, chan, rowq);
        return;
    }
    if (h->s1_on) {
        prep_channel_s1(h, src, x0, ((size_t)n + 1) * d->c * d->h * d->w, chan, rowq);
        return;
    }
    for (int t = 0; t < h->nslots; t++) {
        uint8_t *p = chan + t * h->plane;
        const int a = h->slot_a[t], b = h->slot_b[t];
        // Columns j of the plane that fall in the input: j*sw + b - pad_l in [0, W).
        const int sw = d->stride_w;
        int j0 = d->pad_l - b > 0 ? (d->pad_l - b + sw - 1) / sw : 0;
        const int span = d->w + d->pad_l - b;
        int j1 = span > 0 ? (span + sw - 1) / sw : 0; // first j past the input
        if (j1 > h->wph) j1 = h->wph;
        if (j0 > j1) j0 = j1;
        for (int i = 0; i < h->hph; i++) {
            uint8_t *row = p + (size_t)i * h->wph;
            const int y = i * d->stride_h + a - d->pad_t;
            if (y < 0 || y >= d->h || j0 == j1) {
                memset(row, zp, h->wph);
                continue;
            }
            memset(row, zp, j0);
            memset(row + j1, zp, h->wph - j1);
            const size_t xr = x0 + (size_t)y * d->w;
            const int first = j0 * sw + b - d->pad_l;
            if (sw == 1) {
                load_row(h, src, xr + first, j1 - j0, row + j0);
            } else {
                const int last = (j1 - 1) * sw + b - d->pad_l;
                load_row(h, src, xr + first, last - first + 1, rowq);
                for (int j = j0; j < j1; j++) row[j] = rowq[(j - j0) * sw];
            }
        }
    }
}

// The runs of valid pixels among plane pixels [p0, p1) of a fold (junk
// columns and rows dropped; rows contiguous when there are none). The same
// for every output channel, so a work item finds them once. Returns the count
// (at most p1 - p0).
static int tile_runs(const cd_sparse_conv_i8 *h, size_t p0, size_t p1, cd_i8_run *runs) {
    const cd_conv_desc *d = &h->d;
    const size_t opix = (size_t)d->oh * d->ow, kopix = (size_t)d->k * opix;
    int n = 0;
    size_t p = p0;
    while (p < p1) {
        const size_t i = p / h->img_plane, rem = p - i * h->img_plane;
        const size_t y = rem / h->wph, x = rem - y * h->wph;
        if (y >= (size_t)d->oh) {
            p = (i + 1) * h->img_plane;
            continue;
        }
        if (x >= (size_t)d->ow) {
            p += h->wph - x;
            continue;
        }
        size_t len = (size_t)h->wph == (size_t)d->ow ? opix - rem : (size_t)d->ow - x;
        if (len > p1 - p) len = p1 - p;
        const size_t out = i * kopix + y * d->ow + x;
        runs[n++] = (cd_i8_run){(uint32_t)(p - p0), (uint32_t)len, out, h->border ? out - i * kopix : out};
        p += len;
    }
    return n;
}

// The epilogue (or the raw accumulators) of output channels kk .. kk+nrows-1
// over a tile's runs, for the fold starting at image n0.
static void write_out(const cd_sparse_conv_i8 *h, int kk, int nrows, const int32_t *acc, const cd_i8_run *runs,
                      int nruns, int n0, const void *residual, void *dst, int32_t *acc_out) {
    const cd_conv_desc *d = &h->d;
    const size_t opix = (size_t)d->oh * d->ow, tile = (size_t)h->k->tile;
    const size_t base = ((size_t)n0 * d->k + kk) * opix;
    if (acc_out) {
        for (int r = 0; r < nrows; r++)
            for (int i = 0; i < nruns; i++)
                memcpy(acc_out + base + r * opix + runs[i].out, acc + r * tile + runs[i].m,
                       sizeof(int32_t) * runs[i].len);
        return;
    }
    const size_t esize = h->epi.q.dst_int ? 1 : sizeof(float), rsize = h->epi.q.res_int ? 1 : sizeof(float);
    const void *res = d->has_residual ? (const char *)residual + base * rsize : NULL;
    if (h->border && nruns) { // the map, the residual of every image (the runs' res)
        res = h->border + (size_t)kk * opix;
        // The next tile's stretch of these rows of the map, fetched ahead: the
        // tiles walk all K rows at once, more streams than the hardware
        // prefetcher follows, and a cold map cost more than the conv.
        const size_t next = runs[nruns - 1].res + runs[nruns - 1].len;
        for (int r = 0; r < nrows; r++)
            for (size_t j = 0; j < tile && next + j < opix; j += 16)
                __builtin_prefetch((const float *)res + (size_t)r * opix + next + j);
    }
    h->k->epilogue(&h->epi, h->mult + kk, h->bias + kk, nrows, acc, tile, runs, nruns, res, (char *)dst + base * esize,
                   opix);
}

// A thread's slot of the workspace: its accumulators, quantized rows and
// the runs of the tile it last wrote.
typedef struct {
    int32_t *acc;
    uint8_t *rowq;
    cd_i8_run *runs;
    size_t runs_tile; // the tile runs[] describes (SIZE_MAX: none yet)
    int nruns;
} i8_thread;

static i8_thread thread_state(const cd_sparse_conv_i8 *h, uint8_t *base, int tid) {
    uint8_t *mine = base + h->prep_bytes + (size_t)tid * h->thread_bytes;
    uint8_t *rowq = mine + ((sizeof(int32_t) * I8_CHUNK_ROWS * h->k->tile + 63) & ~(size_t)63);
    return (i8_thread){(int32_t *)mine, rowq, (cd_i8_run *)(rowq + h->rowq_bytes), SIZE_MAX, 0};
}

// Work item `it` (tile, chunk of output rows) of the fold at image n0, whose
// first m pixels are computed.
static void run_item(const cd_sparse_conv_i8 *h, i8_thread *t, long it, size_t m, int n0, const uint8_t *base,
                     const void *residual, void *dst, int32_t *acc_out) {
    const size_t tile = (size_t)h->k->tile, ti = (size_t)(it / h->nchunks);
    const i8_chunk *c = &h->chunks[it % h->nchunks];
    const uint8_t *in = base + c->group * h->group_in + ti * tile;
    if (t->runs_tile != ti) {
        const size_t p0 = ti * tile, p1 = p0 + tile < m ? p0 + tile : m;
        t->nruns = tile_runs(h, p0, p1, t->runs);
        t->runs_tile = ti;
    }
    const int32_t *off = h->off + 4 * c->quad0;
    const int8_t *w = h->w + c->w0;
    const uint32_t *nq = h->nq + c->blk0, *nqs = h->nqs + c->blk0;
    const int32_t *init = h->init + c->row0;
    // The plain epilogue inside the kernel (sparse/i8-spmm.h cd_i8_out).
    if (h->fused_out && !acc_out) {
        const size_t opix = (size_t)h->d.oh * h->d.ow;
        const cd_i8_out o = {
            &h->epi, h->mult + c->row0, h->bias + c->row0, (uint8_t *)dst + ((size_t)n0 * h->d.k + c->row0) * opix,
            opix,    t->runs,           t->nruns};
        (c->nr == 1 ? h->k->csr_out : h->k->bsr4_out)((size_t)c->nblk, in, off, w, nq, nqs, init, &o);
        return;
    }
    const cd_i8_spmm_fn fn = c->nr == 1 ? h->k->csr : h->k->bsr4;
    fn((size_t)c->nblk, in, off, w, nq, nqs, init, t->acc);
    write_out(h, c->row0, c->nblk * c->nr, t->acc, t->runs, t->nruns, n0, residual, dst, acc_out);
}

// The threads of a run: the caller's team size, at most those of create
// (the workspace has a slot for each).
static int run_threads(const cd_sparse_conv_i8 *h) {
    const int n = omp_get_max_threads();
    return n < h->threads ? n : h->threads;
}

static int run(const cd_sparse_conv_i8 *h, const void *src, const void *residual, void *dst, int32_t *acc_out,
               int batch, void *ws) {
    const cd_conv_desc *d = &h->d;
    if (!src || batch < 1 || !ws || (!dst && !acc_out)) return CD_EPARAMS;
    if (!acc_out && d->has_residual && !residual) return CD_EPARAMS;
    uint8_t *base = ws;
    const int tile = h->k->tile, threads = run_threads(h);
    // The slack past the planes is read by junk pixels only: keep it defined.
    memset(base + (size_t)d->groups * h->group_in, h->zp_u8, h->prep_bytes - (size_t)d->groups * h->group_in);
    for (int n0 = 0; n0 < batch; n0 += h->fold) {
        const int nf = batch - n0 < h->fold ? batch - n0 : h->fold;
        // Pixels to compute: the last image's junk rows below its last
        // output pixel are dropped (a 7x7 3x3 layer's 9x9 plane needs 61 of
        // its 81 pixels: one tile of 64 instead of two).
        const size_t m = (size_t)(nf - 1) * h->img_plane + (size_t)(d->oh - 1) * h->wph + (size_t)d->ow,
                     ntiles = (m + tile - 1) / tile;
        const long items = (long)ntiles * h->nchunks;
        const long nprep = (long)nf * d->c;
        // One thread: no OpenMP region (core/one-thread.h).
        if (threads == 1) {
            i8_thread t = thread_state(h, base, 0);
            for (long it = 0; it < nprep; it++)
                prep_channel(h, src, n0 + (int)(it / d->c), (int)(it % d->c), (int)(it / d->c), base, t.rowq);
            for (long it = 0; it < items; it++) run_item(h, &t, it, m, n0, base, residual, dst, acc_out);
            continue;
        }
#pragma omp parallel num_threads(threads)
        {
            i8_thread t = thread_state(h, base, omp_get_thread_num());
#pragma omp for schedule(static)
            for (long it = 0; it < nprep; it++)
                prep_channel(h, src, n0 + (int)(it / d->c), (int)(it % d->c), (int)(it / d->c), base, t.rowq);
#pragma omp for schedule(static)
            for (long it = 0; it < items; it++) run_item(h, &t, it, m, n0, base, residual, dst, acc_out);
        }
    }
    return 0;
}

int cd_sparse_conv_i8_prepare_ws(const cd_sparse_conv_i8 *h, const void *src, int batch, void *ws) {
    if (!src || batch < 1 || !ws) return CD_EPARAMS;
    uint8_t *base = ws;
    const cd_conv_desc *d = &h->d;
    const int threads = run_threads(h);
    for (int n0 = 0; n0 < batch; n0 += h->fold) {
        const int nf = batch - n0 < h->fold ? batch - n0 : h->fold;
        const long nprep = (long)nf * d->c;
        if (threads == 1) {
            uint8_t *rowq = thread_state(h, base, 0).rowq;
            for (long it = 0; it < nprep; it++)
                prep_channel(h, src, n0 + (int)(it / d->c), (int)(it % d->c), (int)(it / d->c), base, rowq);
            continue;
        }
#pragma omp parallel num_threads(threads)
        {
            uint8_t *rowq = thread_state(h, base, omp_get_thread_num()).rowq;
#pragma omp for schedule(static)
            for (long it = 0; it < nprep; it++)
                prep_channel(h, src, n0 + (int)(it / d->c), (int)(it % d->c), (int)(it / d->c), base, rowq);
        }
    }
    return 0;
}

int cd_sparse_conv_i8_run_ws(const cd_sparse_conv_i8 *h, const void *src, const void *residual, void *dst, int batch,
                             void *ws) {
    if (!dst) return CD_EPARAMS;
    return run(h, src, residual, dst, NULL, batch, ws);
}

int cd_sparse_conv_i8_run_acc(const cd_sparse_conv_i8 *h, const void *src, int32_t *acc, int batch, void *ws) {
    if (!acc) return CD_EPARAMS;
    return run(h, src, NULL, NULL, acc, batch, ws);
}
