// Running a prepared sparse conv (see sparse-conv.c for how it is built):
// the workspace, the phase planes of each band, the passes of micro-kernel
// calls over them, and the epilogue (bias, residual, activation).

#include "sparse/sparse-conv-internal.h"

#include "core/errors.h"
#include "sparse/band-rows.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t fc_folds(int batch) { return (size_t)(batch + FC_FOLD - 1) / FC_FOLD; }

// Floats of one thread's slot (prepared modes): one band of one group's
// planes, then (MODE_JUNK) its output rows for the group's channels. Each
// work item prepares its band in its thread's slot right before using it,
// so a thread keeps reusing the same memory, which stays in L2.
static size_t slot_floats(const cd_sparse_conv *h) {
    return h->band_stride + (h->mode == MODE_JUNK ? (size_t)h->kpg * h->band_out : 0);
}

// FC: the transposed folds, then K x FC_FOLD outputs per fold.
static size_t fc_in_floats(const cd_sparse_conv *h, int batch) {
    return fc_folds(batch) * h->d.groups * h->group_in + h->in_slack;
}

size_t cd_sparse_conv_workspace_size(const cd_sparse_conv *h, int batch) {
    if (batch < 1 || h->mode == MODE_DIRECT) return 0;
    if (h->mode == MODE_FC)
        return align64(fc_in_floats(h, batch) * sizeof(float)) +
               align64(fc_folds(batch) * h->d.k * FC_FOLD * sizeof(float));
    return (size_t)h->threads * slot_floats(h) * sizeof(float);
}

// Writes the zero-padded phase planes of band `band` of input channel `ch`
// (0..batch*C-1): plane rows i = 0..hph-1 are the band's phase rows
// band*band_rows + i.
static void prep_channel(const cd_sparse_conv *h, const float *src, size_t src_floats, float *base, size_t ch,
                         int band) {
    const cd_conv_desc *d = &h->d;
    const float *x = src + ch * d->h * d->w;
    const int i0 = band * h->band_rows;
    if (h->im2col) {
        // (A plane's floats past OH*OW are never read: MODE_PLANE passes
        // cover OH*OW pixels with masked tails, sparse/spmm-ukernel.h.)
        const long o = (long)(x - src);
        for (int r = 0; r < d->r; r++)
            for (int s = 0; s < d->s; s++)
                h->paths->im2col_tap(base + (size_t)(r * d->s + s) * h->plane, d->oh, d->ow, x, d->h, d->w, -o,
                                     (long)src_floats - o, r * d->dil_h - d->pad_t, d->stride_h,
                                     s * d->dil_w - d->pad_l, d->stride_w, h->row_masks + s * h->masks_per_slot);
        return;
    }
    if (h->nslots == 1 && d->r == 1 && d->s == 1 && h->wph == d->w && d->h == d->oh && d->stride_h == 1 &&
        d->stride_w == 1 && !d->pad_t && !d->pad_l) {
        // Unpadded rows (1x1): one copy, zeros up to the padded size.
        const int rows = d->h - i0 < h->hph ? d->h - i0 : h->hph;
        const size_t n = (size_t)rows * d->w;
        memcpy(base, x + (size_t)i0 * d->w, sizeof(float) * n);
        memset(base + n, 0, sizeof(float) * (h->plane - n));
        return;
    }
    for (int t = 0; t < h->nslots; t++) {
        float *p = base + t * h->plane;
        const int a = h->slot_a[t], b = h->slot_b[t];
        for (int i = 0; i < h->hph; i++) {
            float *row = p + (size_t)i * h->wph;
            const int y = (i0 + i) * d->stride_h + a - d->pad_t;
            if (y < 0 || y >= d->h) {
                memset(row, 0, sizeof(float) * h->wph);
                continue;
            }
            const float *xr = x + (size_t)y * d->w;
            if (h->row_masks) {
                const long o = (long)(xr - src);
                h->paths->phase_row(row, (size_t)h->wph, xr, -o, (long)src_floats - o, b - d->pad_l, d->stride_w,
                                    h->row_masks + t * h->masks_per_slot);
            } else if (d->stride_w == 1) {
                // Columns j map to x = j + b - pad_l: zeros, a copy, zeros.
                int j0 = d->pad_l - b, j1 = d->w + d->pad_l - b;
                if (j0 < 0) j0 = 0;
                if (j0 > h->wph) j0 = h->wph;
                if (j1 > h->wph) j1 = h->wph;
                if (j1 < j0) j1 = j0;
                memset(row, 0, sizeof(float) * j0);
                memcpy(row + j0, xr + (j0 + b - d->pad_l), sizeof(float) * (j1 - j0));
                memset(row + j1, 0, sizeof(float) * (h->wph - j1));
            } else {
                // Columns j with 0 <= j*sw + b - pad_l < W: a strided copy
                // between zeros.
                const int sw = d->stride_w, sh = b - d->pad_l;
                int j0 = sh >= 0 ? 0 : (-sh + sw - 1) / sw;
                int j1 = d->w - 1 - sh >= 0 ? (d->w - 1 - sh) / sw + 1 : 0;
                if (j0 > h->wph) j0 = h->wph;
                if (j1 > h->wph) j1 = h->wph;
                if (j1 < j0) j1 = j0;
                memset(row, 0, sizeof(float) * j0);
#pragma omp simd
                for (int j = j0; j < j1; j++) row[j] = xr[j * sw + sh];
                memset(row + j1, 0, sizeof(float) * (h->wph - j1));
            }
        }
        memset(p + (size_t)h->hph * h->wph, 0, sizeof(float) * (h->plane - (size_t)h->hph * h->wph));
    }
}

// Prepares band `band` of group g of image img into `slot`: every
// channel's planes and the zeroed slack the kernels may read past them.
static void prep_band(const cd_sparse_conv *h, const float *src, size_t src_floats, float *slot, size_t img, int g,
                      int band) {
    const size_t c0 = img * h->d.c + (size_t)g * h->cpg;
    for (int c = 0; c < h->cpg; c++) prep_channel(h, src, src_floats, slot + c * h->chan_stride, c0 + c, band);
    memset(slot + h->group_in, 0, sizeof(float) * (h->band_stride - h->group_in));
}

static void apply_act(cd_activation act, float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = cd_act_apply(act, p[i]);
}

// dst[i] = act(src[i] (+ res[i])): the copy-out of MODE_JUNK and MODE_FC.
// Clamp-type activations take a vectorised path.
static void finish(const cd_sparse_conv *h, float *dst, const float *src, const float *res, size_t n) {
    if (h->post_act) {
        for (size_t i = 0; i < n; i++) dst[i] = cd_act_apply(h->d.act, res ? src[i] + res[i] : src[i]);
        return;
    }
    const float lo = h->kparams.min, hi = h->kparams.max;
    if (res) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float v = src[i] + res[i];
            v = v < lo ? lo : v;
            dst[i] = v > hi ? hi : v;
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float v = src[i];
            v = v < lo ? lo : v;
            dst[i] = v > hi ? hi : v;
        }
    }
}

// Everything one work item needs besides its indices.
typedef struct {
    const cd_sparse_conv *h;
    const float *src;
    const float *res;
    float *dst;
    const float *xin; // DIRECT: src; FC: the transposed folds
    float *scr;       // FC: output scratch
    float *ws;        // prepared modes: the threads' slots (slot_floats each)
    int batch;
    size_t mchunk; // pixels per item (DIRECT)
    size_t nmc;    // pixel chunks (DIRECT) or bands (prepared modes) per unit
    size_t bchunk; // blocks per item
    size_t nbc;    // block chunks per group
} run_ctx;

// One pass over every column block for mc pixels: out = clamp(bias + sum
// over blocks (+ res)), block 0 adding bias and res, later blocks adding onto
// out, the clamp `last` applied by the final block. w/off/nnz of block gb are
// taken from each column block's pack.
static void run_pass(const cd_sparse_conv *h, const cd_spmm_ukernel_info *uk, size_t gb, size_t nblk, size_t mc,
                     const float *in, const float *res, size_t res_stride, float *out, size_t out_stride,
                     const cd_spmm_params *last) {
    static const cd_spmm_params none = {-INFINITY, INFINITY};
    for (int b = 0; b < h->ncb; b++) {
        const cd_sparse_pack *p = &h->packs[b];
        if (h->shift) {
            h->paths->shift(mc, nblk, h->shift, h->shift_stride, in, p->values + p->vfirst[gb],
                            p->offsets + p->first[gb], p->shift_nnz + gb * h->shift, b == 0 ? res : out,
                            b == 0 ? res_stride : out_stride, out, out_stride, b == h->ncb - 1 ? last : &none);
            continue;
        }
        uk->fn(mc, nblk, in, p->values + p->vfirst[gb], p->offsets + p->first[gb], p->nnz_map + gb, b == 0 ? res : out,
               b == 0 ? res_stride : out_stride, out, out_stride, b == h->ncb - 1 ? last : &none);
    }
}

// Pixels per pass over the column blocks for a span of n pixels: the whole
// span with one column block; else about h->tile pixels, balanced so that
// no pass is a small remainder (196 pixels: 80 + 64 + 52, not 64+64+64+4),
// in whole vectors so every pass starts aligned.
static size_t pass_len(const cd_sparse_conv *h, size_t n) {
    if (h->ncb == 1 || n <= h->tile) return n;
    const size_t vec = (size_t)h->vec, nv = (n + vec - 1) / vec, tv = h->tile / vec;
    size_t np = (2 * nv + tv) / (2 * tv); // round(nv / tv)
    if (np < 1) np = 1;
    return (nv + np - 1) / np * vec;
}

// Runs blocks [b0, b1) of group g (all main or all tail) for one unit
// (image, or FC fold) over pixel chunk (DIRECT) or band (others) mi; a
// prepared band is in `slot` (its planes, then MODE_JUNK's output rows).
static void run_blocks(const run_ctx *x, size_t unit, int g, int b0, int b1, size_t mi, const float *slot) {
    const cd_sparse_conv *h = x->h;
    const cd_conv_desc *d = &h->d;
    const cd_sparse_pack *p = &h->packs[0];
    const int main_part = b0 < p->main_blocks;
    const cd_spmm_ukernel_info *uk = main_part ? h->kmain : h->ktail;
    const int nb = main_part ? p->nr : 1;
    const size_t gb = (size_t)g * p->blocks + b0;
    const size_t nblk = (size_t)(b1 - b0);
    const size_t k0 =
        (size_t)g * h->kpg + (main_part ? (size_t)b0 * p->nr : (size_t)p->main_blocks * p->nr + (b0 - p->main_blocks));
    const size_t nch = nblk * nb;
    const size_t ohw = (size_t)d->oh * d->ow;
    const cd_spmm_params none = {-INFINITY, INFINITY};
    // Prepared modes: the band's planes, and its output rows [r0, r1).
    const float *in =
        h->mode == MODE_DIRECT || h->mode == MODE_FC ? x->xin + (unit * d->groups + g) * h->group_in : slot;
    const size_t r0 = mi * (size_t)h->band_rows;
    const size_t r1 = r0 + h->band_rows < (size_t)d->oh ? r0 + h->band_rows : (size_t)d->oh;

    switch (h->mode) {
    case MODE_DIRECT:
    case MODE_PLANE: {
        // DIRECT: pixels [m0, m1) of the planes (in + m); PLANE: the band's
        // pixels, read from its own planes (in + m - m0).
        const size_t m0 = h->mode == MODE_DIRECT ? mi * x->mchunk : r0 * d->ow;
        const size_t m1 = h->mode == MODE_DIRECT ? (m0 + x->mchunk < ohw ? m0 + x->mchunk : ohw) : r1 * d->ow;
        const size_t base = h->mode == MODE_DIRECT ? 0 : m0;
        const size_t o = (unit * d->k + k0) * ohw;
        const size_t tile = pass_len(h, m1 - m0);
        for (size_t m = m0; m < m1; m += tile) {
            const size_t mc = tile < m1 - m ? tile : m1 - m;
            run_pass(h, uk, gb, nblk, mc, in + (m - base), x->res ? x->res + o + m : NULL, ohw, x->dst + o + m, ohw,
                     &h->kparams);
        }
        if (h->post_act)
            for (size_t i = 0; i < nch; i++) apply_act(d->act, x->dst + o + i * ohw + m0, m1 - m0);
        break;
    }
    case MODE_ROWS: {
        for (size_t r = r0; r < r1; r++) {
            const size_t o = (unit * d->k + k0) * ohw + r * d->ow;
            run_pass(h, uk, gb, nblk, d->ow, in + (r - r0) * h->wph, x->res ? x->res + o : NULL, ohw, x->dst + o, ohw,
                     &h->kparams);
            if (h->post_act)
                for (size_t i = 0; i < nch; i++) apply_act(d->act, x->dst + o + i * ohw, d->ow);
        }
        break;
    }
    case MODE_JUNK: {
        // The band's rows, (r1-r0)*wph pixels per channel computed into the
        // slot's output rows (band_out floats per channel) from the band's
        // planes, then copied out without the wph-OW junk columns.
        const size_t jp = h->band_out, n = (r1 - r0) * h->wph;
        float *s = (float *)slot + h->band_stride + (k0 - (size_t)g * h->kpg) * jp;
        // Without residual the kernel applies the clamp itself and copying
        // out is a plain row copy.
        const int plain = !x->res && !h->post_act;
        const size_t tile = pass_len(h, n);
        for (size_t m = 0; m < n; m += tile)
            run_pass(h, uk, gb, nblk, tile < n - m ? tile : n - m, in + m, NULL, 0, s + m, jp,
                     plain ? &h->kparams : &none);
        for (size_t i = 0; i < nch; i++) {
            const size_t o = (unit * d->k + k0 + i) * ohw;
            if (plain && h->paths->copy_rows) {
                h->paths->copy_rows(x->dst + o + r0 * d->ow, (size_t)d->ow, s + i * jp, (size_t)h->wph, r1 - r0,
                                    (size_t)d->ow);
                continue;
            }
            for (size_t r = r0; r < r1; r++) {
                const float *sr = s + i * jp + (r - r0) * h->wph;
                float *dr = x->dst + o + r * d->ow;
                if (plain)
                    memcpy(dr, sr, sizeof(float) * d->ow);
                else
                    finish(h, dr, sr, x->res ? x->res + o + r * d->ow : NULL, d->ow);
            }
        }
        break;
    }
    case MODE_FC: {
        const size_t n0 = unit * FC_FOLD;
        const size_t cnt = (size_t)x->batch - n0 < FC_FOLD ? (size_t)x->batch - n0 : FC_FOLD;
        float *s = x->scr + (unit * d->k + k0) * FC_FOLD;
        run_pass(h, uk, gb, nblk, cnt, in, NULL, 0, s, FC_FOLD, &none);
        for (size_t i = 0; i < nch; i++)
            for (size_t n = 0; n < cnt; n++) {
                const size_t o = (n0 + n) * d->k + k0 + i;
                const float v = s[i * FC_FOLD + n];
                x->dst[o] = cd_act_apply(d->act, x->res ? v + x->res[o] : v);
            }
        break;
    }
    }
}

// Runs work item `it`: (unit, group, block chunk, pixel chunk or band).
static void run_item(const run_ctx *x, size_t it) {
    const cd_sparse_conv *h = x->h;
    const size_t mi = it % x->nmc;
    it /= x->nmc;
    const size_t bc = it % x->nbc;
    it /= x->nbc;
    const int g = (int)(it % h->d.groups);
    const size_t unit = it / h->d.groups;
    // Prepared modes: the band goes into this thread's slot right before use
    // (a band split into block chunks is prepared by each of them).
    float *slot = NULL;
    if (x->ws) {
        slot = x->ws + (size_t)omp_get_thread_num() * slot_floats(h);
        prep_band(h, x->src, (size_t)x->batch * h->d.c * h->d.h * h->d.w, slot, unit, g, (int)mi);
    }
    const int mb = h->packs[0].main_blocks;
    int b0 = (int)(bc * x->bchunk);
    int b1 = (int)((bc + 1) * x->bchunk);
    if (b1 > h->packs[0].blocks) b1 = h->packs[0].blocks;
    if (b0 < mb) run_blocks(x, unit, g, b0, b1 < mb ? b1 : mb, mi, slot);
    if (b1 > mb) run_blocks(x, unit, g, b0 > mb ? b0 : mb, b1, mi, slot);
}

// MODE_FC: input channel c of every image into the folds' layout,
// [fold][group][channel][image] (FC_FOLD images a fold).
static void fc_transpose(const cd_sparse_conv *h, const float *src, int batch, float *xin, size_t c) {
    const cd_conv_desc *d = &h->d;
    const size_t g = c / h->cpg, cl = c % h->cpg;
    for (size_t n = 0; n < (size_t)batch; n++)
        xin[(n / FC_FOLD * d->groups + g) * h->group_in + cl * FC_FOLD + n % FC_FOLD] = src[n * d->c + c];
}

int cd_sparse_conv_run_ws(const cd_sparse_conv *h, const float *src, const float *residual, float *dst, int batch,
                          void *ws) {
    if (!h || !src || !dst || batch < 1) return CD_EPARAMS;
    if (h->d.has_residual && !residual) return CD_EPARAMS;
    if (cd_sparse_conv_workspace_size(h, batch) && !ws) return CD_EPARAMS;
    const cd_conv_desc *d = &h->d;
    run_ctx x = {.h = h, .src = src, .res = h->d.has_residual ? residual : NULL, .dst = dst, .batch = batch};
    const size_t units = h->mode == MODE_FC ? fc_folds(batch) : (size_t)batch;
    float *xin = ws;
    x.xin = h->mode == MODE_DIRECT ? src : h->mode == MODE_FC ? xin : NULL;
    if (h->mode == MODE_FC)
        x.scr = (float *)((char *)ws + align64(fc_in_floats(h, batch) * sizeof(float)));
    else if (h->mode != MODE_DIRECT)
        x.ws = ws;

    // DIRECT: pixel chunks, one per thread at least (each thread then
    // streams only its own part of the input), of at least 8 vectors, at
    // most ~1024 pixels, multiples of 16 pixels so every pass starts
    // aligned. Prepared modes: the bands laid out at create. At most the
    // threads of create: the workspace has a slot for each of them.
    int threads = omp_get_max_threads();
    if (threads > h->threads) threads = h->threads;
    const size_t ohw = (size_t)d->oh * d->ow;
    x.mchunk = 1;
    x.nmc = h->mode == MODE_FC ? 1 : (size_t)h->nbands;
    if (h->mode == MODE_DIRECT) {
        size_t n = (ohw + 1023) / 1024;
        const size_t per_unit = ((size_t)threads + units * d->groups - 1) / (units * d->groups);
        if (n < per_unit) n = per_unit;
        const size_t vmax = (ohw + 127) / 128; // chunks of >= 8 vectors
        if (n > vmax) n = vmax;
        if (n < 1) n = 1;
        x.mchunk = round16((ohw + n - 1) / n);
        x.nmc = (ohw + x.mchunk - 1) / x.mchunk;
    }
    // Block chunks only when there are fewer pixel chunks than threads: every
    // block chunk streams the whole input of its pixels again.
    const size_t base = units * d->groups * x.nmc;
    const size_t blocks = (size_t)h->packs[0].blocks;
    size_t split = base >= (size_t)threads ? 1 : ((size_t)threads + base - 1) / base;
    if (split > blocks) split = blocks;
    x.bchunk = (blocks + split - 1) / split;
    x.nbc = (blocks + x.bchunk - 1) / x.bchunk;
    const size_t items = base * x.nbc;

    // One thread: no OpenMP region (core/one-thread.h).
    if (threads == 1) {
        for (size_t c = 0; h->mode == MODE_FC && c < (size_t)d->c; c++) fc_transpose(h, src, batch, xin, c);
        for (size_t it = 0; it < items; it++) run_item(&x, it);
        return 0;
    }
#pragma omp parallel num_threads(threads)
    {
        if (h->mode == MODE_FC) {
#pragma omp for schedule(static)
            for (size_t c = 0; c < (size_t)d->c; c++) fc_transpose(h, src, batch, xin, c);
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t it = 0; it < items; it++) run_item(&x, it);
    }
    return 0;
}

int cd_sparse_conv_run(const cd_sparse_conv *h, const float *src, const float *residual, float *dst, int batch) {
    if (!h || batch < 1) return CD_EPARAMS;
    const size_t n = cd_sparse_conv_workspace_size(h, batch);
    void *ws = NULL;
    if (n) {
        ws = aligned_alloc(64, n);
        if (!ws) return CD_ENOMEM;
    }
    int rc = cd_sparse_conv_run_ws(h, src, residual, dst, batch, ws);
    free(ws);
    return rc;
}
