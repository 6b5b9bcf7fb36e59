// Building an int8 sparse conv at load (see sparse-conv-i8.h): the
// geometry of the prepared planes, the format choice and the packing of the
// weights into quads with their input offsets. Runs: sparse-conv-i8-run.c.

#include "sparse/sparse-conv-i8-internal.h"

#include "core/errors.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

// Pixels of prepared planes worth folding images for: small planes (7x7,
// 14x14) fold up to MAX_FOLD images so tiles are full and one pass over the
// weights serves them; 56x56 planes do not fold.
#define FOLD_PIXELS 4096
#define MAX_FOLD 16
// Prepared bytes per pass beyond which images are not folded further.
#define FOLD_BYTES (8u << 20)

static int quant_ok(const cd_conv_quant *q) {
    if (!q || !q->w_scale || !(q->in_scale > 0.0f)) return 0;
    if (q->in_zp < cd_quant_qmin(q->in_signed) || q->in_zp > cd_quant_qmax(q->in_signed)) return 0;
    if (q->dst_int && !(q->out_scale > 0.0f)) return 0;
    if (q->res_int && (!(q->res_scale > 0.0f) || q->res_zp < cd_quant_qmin(q->res_signed) ||
                       q->res_zp > cd_quant_qmax(q->res_signed)))
        return 0;
    if (q->mid_scale > 0.0f && (q->mid_zp < cd_quant_qmin(q->mid_signed) || q->mid_zp > cd_quant_qmax(q->mid_signed)))
        return 0;
    if (q->out_scale > 0.0f && (q->out_zp < cd_quant_qmin(q->out_signed) || q->out_zp > cd_quant_qmax(q->out_signed)))
        return 0;
    return 1;
}

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

// The stride-2 passes (i8_s2_pass) of a layer with stride_w 2. Returns 0
// or CD_ENOMEM.
static int plan_s2(cd_sparse_conv_i8 *h) {
    const cd_conv_desc *d = &h->d;
    h->s2 = calloc((size_t)d->stride_h, sizeof *h->s2);
    if (!h->s2) return CD_ENOMEM;
    for (int a = 0; a < d->stride_h; a++) {
        i8_s2_pass *p = &h->s2[a];
        const int sh = d->stride_h;
        p->i0 = d->pad_t > a ? (d->pad_t - a + sh - 1) / sh : 0;
        const int span = d->h + d->pad_t - a;
        p->i1 = span > 0 ? (span + sh - 1) / sh : 0;
        if (p->i1 > h->hph) p->i1 = h->hph;
        if (p->i0 > p->i1) p->i0 = p->i1;
        p->g.w = d->w;
        p->g.wph = h->wph;
        p->g.zp = (uint8_t)h->zp_u8;
        p->g.flip = h->epi.q.src_int && h->epi.q.in_signed ? 0x80 : 0;
        for (int t = 0; t < h->nslots; t++) {
            if (h->slot_a[t] != a) continue;
            const int b = h->slot_b[t], nb = p->g.nb++;
            // Plane columns j with 2j + b - pad_l in [0, W).
            int j0 = d->pad_l > b ? (d->pad_l - b + 1) / 2 : 0;
            const int wspan = d->w + d->pad_l - b;
            int j1 = wspan > 0 ? (wspan + 1) / 2 : 0;
            if (j1 > h->wph) j1 = h->wph;
            if (j0 > j1) j0 = j1;
            p->slot[nb] = t;
            p->g.j0[nb] = j0;
            p->g.j1[nb] = j1;
            p->g.first[nb] = 2 * j0 + b - d->pad_l; // 0 or 1
        }
    }
    return 0;
}

// The planes: used stride phases, their size, the fold. Returns 0 or
// CD_ENOMEM / CD_EUNSUPPORTED (offsets beyond int32).
static int plan_planes(cd_sparse_conv_i8 *h) {
    const cd_conv_desc *d = &h->d;
    const int sh = d->stride_h, sw = d->stride_w;
    int used[64] = {0};
    for (int r = 0; r < d->r; r++)
        for (int s = 0; s < d->s; s++) used[(r * d->dil_h % sh) * sw + s * d->dil_w % sw] = 1;
    h->slot_a = malloc(sizeof(int) * sh * sw);
    h->slot_b = malloc(sizeof(int) * sh * sw);
    if (!h->slot_a || !h->slot_b) return CD_ENOMEM;
    for (int i = 0; i < sh * sw; i++)
        if (used[i]) {
            h->slot_a[h->nslots] = i / sw;
            h->slot_b[h->nslots] = i % sw;
            h->nslots++;
        }
    // Padded sizes, grown to cover every tap of every output (an output
    // size rounded up can reach past the bottom or right padding).
    int hp = d->h + d->pad_t + d->pad_b, wp = d->w + d->pad_l + d->pad_r;
    const int need_h = (d->oh - 1) * sh + (d->r - 1) * d->dil_h + 1,
              need_w = (d->ow - 1) * sw + (d->s - 1) * d->dil_w + 1;
    if (hp < need_h) hp = need_h;
    if (wp < need_w) wp = need_w;
    h->hph = (hp + sh - 1) / sh;
    h->wph = (wp + sw - 1) / sw;
    h->img_plane = (size_t)h->hph * h->wph;
    const size_t per_image = (size_t)d->c * h->nslots * h->img_plane;
    int fold = (int)(FOLD_PIXELS / h->img_plane);
    if (fold > MAX_FOLD) fold = MAX_FOLD;
    while (fold > 1 && (size_t)fold * per_image > FOLD_BYTES) fold--;
    h->fold = fold < 1 ? 1 : fold;
    h->plane = align64((size_t)h->fold * h->img_plane);
    h->chan_stride = h->nslots * h->plane;
    // An odd number of cache lines from channel to channel: with a multiple
    // of 4 KiB (16x16 planes folded 16 times) every channel's rows fell in
    // the same L1 sets (ResNet-50 3x3 @14, 90%: 1.06 -> 0.33 ms, VNNI).
    if (h->chan_stride / 64 % 2 == 0) h->chan_stride += 64;
    h->group_in = (size_t)h->cpg * h->chan_stride;
    const int qa = (d->r - 1) * d->dil_h / sh, qb = (d->s - 1) * d->dil_w / sw;
    h->slack = (size_t)qa * h->wph + qb + 2 * (size_t)h->k->tile + 64;
    if (h->group_in + h->slack > INT32_MAX) return CD_EUNSUPPORTED;
    h->prep_bytes = align64((size_t)d->groups * h->group_in + h->slack);
    // Per thread: the accumulator tile, a row of u8, the runs of a tile
    // (sparse-conv-i8-run.c; at most one per pixel).
    // Stride-1 and -2 layers on float input quantize a whole channel there
    // first.
    const size_t row_bytes = sw <= 2 && !h->direct ? (size_t)d->h * d->w : (size_t)d->w;
    h->rowq_bytes = align64(row_bytes + 64);
    h->thread_bytes =
        align64(sizeof(int32_t) * I8_CHUNK_ROWS * h->k->tile) + h->rowq_bytes + align64(sizeof(cd_i8_run) * h->k->tile);
    if (sw == 1 && !h->direct && d->pad_l + d->w <= h->wph) {
        // One column phase: plane column j is input column j - pad_l
        // (wph >= W + pad_l + pad_r, see above).
        h->s1 = (cd_i8_s1_rows){.w = d->w, .wph = h->wph, .j0 = d->pad_l, .zp = (uint8_t)h->zp_u8};
        h->s1.flip = h->epi.q.src_int && h->epi.q.in_signed ? 0x80 : 0;
        h->s1_on = 1;
    }
    return sw == 2 ? plan_s2(h) : 0;
}

// The input offset of weight column (c, r, s) of a group.
static int32_t column_offset(const cd_sparse_conv_i8 *h, int c, int r, int s) {
    const cd_conv_desc *d = &h->d;
    const int ar = r * d->dil_h, as = s * d->dil_w;
    const int a = ar % d->stride_h, b = as % d->stride_w;
    int slot = 0;
    while (h->slot_a[slot] != a || h->slot_b[slot] != b) slot++;
    return (int32_t)((size_t)c * h->chan_stride + slot * h->plane + (size_t)(ar / d->stride_h) * h->wph +
                     as / d->stride_w);
}

// Column t of the block of nr rows at row k: 0 when all its weights are
// zero, 2 when the block's kernels take it as short (the ISA gains from
// short quads and every weight is in [-64, 64], sparse/i8-spmm.h), else 1.
static int column_kind(const cd_sparse_conv_i8 *h, const int8_t *wq, size_t taps, int k, int nr, size_t t) {
    int any = 0, small = 1;
    for (int i = 0; i < nr; i++) {
        const int v = wq[(size_t)(k + i) * taps + t];
        any |= v != 0;
        small &= v >= -64 && v <= 64;
    }
    return !any ? 0 : small && h->k->short_quads ? 2 : 1;
}

// Quads of a row (CSR) or of a block of 4 rows (BSR4: the union of their
// columns) starting at row k: the short columns' quads, then the others'.
static size_t block_quads(const cd_sparse_conv_i8 *h, const int8_t *wq, int k, int nr) {
    const size_t taps = (size_t)h->cpg * h->d.r * h->d.s;
    size_t cols[3] = {0};
    for (size_t t = 0; t < taps; t++) cols[column_kind(h, wq, taps, k, nr, t)]++;
    return (cols[2] + 3) / 4 + (cols[1] + 3) / 4;
}

// The cheaper format by a per-quad cost measured on ResNet-50's layers at
// 90% (bench/sparse-i8-layers --format csr|bsr4, 1 thread, batch 1): a BSR4
// quad (4 rows) costs ~2.2 CSR quads with VNNI (u90: CSR 1.1-1.5x faster;
// 4x1 blocks: BSR4 1.1-2.2x), ~2.6 with the 16-bit emulation.
static cd_sparse_format auto_format(const cd_sparse_conv_i8 *h, const int8_t *wq) {
    if (h->kpg < 4) return CD_SPARSE_FMT_CSR;
    const double bsr_cost = h->isa == CD_SPARSE_ISA_AVX512VNNI ? 2.2 : 2.6;
    double csr = 0, bsr = 0;
    for (int g = 0; g < h->d.groups; g++)
        for (int kl = 0; kl + 4 <= h->kpg; kl += 4) {
            const int k = g * h->kpg + kl;
            for (int i = 0; i < 4; i++) csr += (double)block_quads(h, wq, k + i, 1);
            bsr += bsr_cost * (double)block_quads(h, wq, k, 4);
        }
    return bsr < csr ? CD_SPARSE_FMT_BSR4 : CD_SPARSE_FMT_CSR;
}

// Appends the columns of one kind (column_kind) of the block of nr rows
// at row k as quads from quad q0 and weight byte w0, the last quad padded
// with zero weights at a repeated valid offset. Returns the quad count.
static uint32_t pack_kind(cd_sparse_conv_i8 *h, const int8_t *wq, int k, int nr, int kind, size_t q0, size_t w0) {
    const cd_conv_desc *d = &h->d;
    const size_t taps = (size_t)h->cpg * d->r * d->s;
    uint32_t n = 0; // columns so far
    int32_t first = 0;
    for (size_t t = 0; t < taps; t++) {
        if (column_kind(h, wq, taps, k, nr, t) != kind) continue;
        const int c = (int)(t / ((size_t)d->r * d->s)), r = (int)(t / d->s % d->r), s = (int)(t % d->s);
        const int32_t o = column_offset(h, c, r, s);
        if (n == 0) first = o;
        const size_t q = q0 + n / 4, j = n % 4;
        h->off[4 * q + j] = o;
        for (int i = 0; i < nr; i++) h->w[w0 + (n / 4) * 4 * nr + 4 * i + j] = wq[(size_t)(k + i) * taps + t];
        for (int i = 0; i < nr; i++) h->nnz += wq[(size_t)(k + i) * taps + t] != 0;
        n++;
    }
    for (; n % 4; n++) {
        const size_t q = q0 + n / 4, j = n % 4;
        h->off[4 * q + j] = first;
        for (int i = 0; i < nr; i++) h->w[w0 + (n / 4) * 4 * nr + 4 * i + j] = 0;
    }
    h->entries += n;
    return n / 4;
}

// Appends the blocks of rows [k, k + nblk*nr) (one group) to the stream:
// per block its short quads, then the others.
static void pack_blocks(cd_sparse_conv_i8 *h, const int8_t *wq, int k, int nblk, int nr, size_t *blk, size_t *quad,
                        size_t *wb) {
    for (int b = 0; b < nblk; b++, k += nr) {
        const uint32_t ns = pack_kind(h, wq, k, nr, 2, *quad, *wb);
        const uint32_t nl = pack_kind(h, wq, k, nr, 1, *quad + ns, *wb + (size_t)ns * 4 * nr);
        h->nq[*blk] = ns + nl;
        h->nqs[*blk] = ns;
        (*blk)++;
        *quad += ns + nl;
        *wb += (size_t)(ns + nl) * 4 * nr;
    }
}

// Packs all rows: per group, BSR4 blocks (format BSR4) then CSR rows, in
// chunks of I8_CHUNK_ROWS rows. Returns 0 or CD_ENOMEM.
static int pack(cd_sparse_conv_i8 *h, const int8_t *wq) {
    const cd_conv_desc *d = &h->d;
    const int nr_main = h->format == CD_SPARSE_FMT_BSR4 ? 4 : 1;
    const int main_rows = h->kpg / nr_main * nr_main;
    size_t quads = 0, blocks = 0, wbytes = 0;
    int nchunks = 0;
    for (int g = 0; g < d->groups; g++) {
        const int k0 = g * h->kpg;
        for (int kl = 0; kl < main_rows; kl += nr_main) {
            const size_t q = block_quads(h, wq, k0 + kl, nr_main);
            quads += q;
            wbytes += q * 4 * nr_main;
            blocks++;
        }
        for (int kl = main_rows; kl < h->kpg; kl++) {
            const size_t q = block_quads(h, wq, k0 + kl, 1);
            quads += q;
            wbytes += q * 4;
            blocks++;
        }
        nchunks += (main_rows + I8_CHUNK_ROWS - 1) / I8_CHUNK_ROWS + (h->kpg > main_rows);
    }
    h->off = malloc(sizeof(int32_t) * 4 * (quads ? quads : 1));
    h->w = malloc(wbytes ? wbytes : 1);
    h->nq = malloc(sizeof(uint32_t) * blocks);
    h->nqs = malloc(sizeof(uint32_t) * blocks);
    h->chunks = malloc(sizeof(i8_chunk) * (nchunks ? nchunks : 1));
    if (!h->off || !h->w || !h->nq || !h->nqs || !h->chunks) return CD_ENOMEM;
    size_t blk = 0, quad = 0, wb = 0;
    for (int g = 0; g < d->groups; g++) {
        const int k0 = g * h->kpg;
        for (int kl = 0; kl < h->kpg;) {
            const int nr = kl < main_rows ? nr_main : 1;
            const int end = kl < main_rows ? main_rows : h->kpg;
            const int rows = end - kl < I8_CHUNK_ROWS ? end - kl : I8_CHUNK_ROWS;
            i8_chunk *c = &h->chunks[h->nchunks++];
            *c = (i8_chunk){
                .group = g, .row0 = k0 + kl, .nr = nr, .nblk = rows / nr, .blk0 = blk, .quad0 = quad, .w0 = wb};
            pack_blocks(h, wq, k0 + kl, rows / nr, nr, &blk, &quad, &wb);
            kl += rows;
        }
    }
    h->packed_bytes = sizeof(int32_t) * 4 * quads + wbytes + 2 * sizeof(uint32_t) * blocks;
    return 0;
}

int cd_sparse_conv_i8_create(const cd_conv_desc *d, const int8_t *wq, const float *bias, const cd_conv_quant *q,
                             const cd_sparse_conv_options *opt, cd_sparse_conv_i8 **out) {
    *out = NULL;
    if (!d || !wq || !cd_sparse_conv_desc_ok(d) || !quant_ok(q)) return CD_EPARAMS;
    cd_conv_desc dd = *d;
    cd_conv_out_dims(&dd);
    if (dd.oh < 1 || dd.ow < 1) return CD_EPARAMS;
    if ((int64_t)dd.k * (d->c / d->groups) * d->r * d->s > INT32_MAX) return CD_EUNSUPPORTED;
    // A border map takes the residual's place in the epilogue: not both, nor
    // behind the rounding of a QDQ residual block.
    if (d->border && (d->has_residual || q->mid_scale > 0.0f)) return CD_EUNSUPPORTED;
    cd_sparse_isa isa = opt ? opt->isa : CD_SPARSE_ISA_AUTO;
    if (isa == CD_SPARSE_ISA_AUTO) isa = cd_sparse_isa_best();
    if (isa < CD_SPARSE_ISA_SCALAR || isa > CD_SPARSE_ISA_AVX512VNNI) return CD_EPARAMS;
    cd_sparse_format fmt = opt ? opt->format : CD_SPARSE_FMT_AUTO;
    if (fmt < CD_SPARSE_FMT_AUTO || fmt > CD_SPARSE_FMT_BSR8) return CD_EPARAMS;
    if (fmt == CD_SPARSE_FMT_BSR8) return CD_EUNSUPPORTED;
    const cd_i8_isa_info *k = cd_i8_isa(isa);
    if (!k) return CD_EUNSUPPORTED;

    cd_sparse_conv_i8 *h = calloc(1, sizeof *h);
    if (!h) return CD_ENOMEM;
    h->d = dd;
    h->cpg = d->c / d->groups;
    h->kpg = d->k / d->groups;
    h->isa = isa;
    h->k = k;
    h->threads = omp_get_max_threads();
    h->direct = d->r == 1 && d->s == 1 && d->stride_h == 1 && d->stride_w == 1 && !d->pad_t && !d->pad_l && !d->pad_b &&
                !d->pad_r;
    h->epi.q = *q;
    h->epi.q.w_scale = NULL;
    h->epi.act = d->act;
    h->epi.has_residual = d->has_residual || d->border;
    if (d->border) h->epi.q.res_int = 0; // the map is float
    h->epi.qmin = cd_quant_qmin(q->out_signed);
    h->epi.qmax = cd_quant_qmax(q->out_signed);
    // A border map is a residual (has_residual): it keeps the epilogue outside.
    h->fused_out = k->csr_out && k->bsr4_out && cd_i8_out_plain(&h->epi);
    h->zp_u8 = q->in_zp + (q->in_signed ? 128 : 0);
    int rc = plan_planes(h);
    h->mult = malloc(sizeof(float) * dd.k);
    h->bias = malloc(sizeof(float) * dd.k);
    h->init = malloc(sizeof(int32_t) * dd.k);
    const size_t map_n = d->border ? (size_t)dd.k * dd.oh * dd.ow : 0;
    if (map_n && (h->border = malloc(sizeof(float) * map_n))) memcpy(h->border, d->border, sizeof(float) * map_n);
    h->d.border = h->border; // the caller's map is read here only
    if (!rc && (!h->mult || !h->bias || !h->init || (map_n && !h->border))) rc = CD_ENOMEM;
    if (rc) {
        cd_sparse_conv_i8_free(h);
        return rc;
    }
    const size_t taps = (size_t)h->cpg * d->r * d->s;
    for (int kk = 0; kk < dd.k; kk++) {
        h->mult[kk] = q->in_scale * q->w_scale[kk];
        h->bias[kk] = bias ? bias[kk] : 0.0f;
        int64_t sum = 0;
        for (size_t t = 0; t < taps; t++) sum += wq[(size_t)kk * taps + t];
        h->init[kk] = (int32_t)(uint32_t)(uint64_t)(-(int64_t)h->zp_u8 * sum);
    }
    h->format = fmt == CD_SPARSE_FMT_AUTO ? auto_format(h, wq) : fmt;
    rc = pack(h, wq);
    if (rc) {
        cd_sparse_conv_i8_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

int cd_sparse_conv_i8_get_info(const cd_sparse_conv_i8 *h, cd_sparse_conv_info *info) {
    memset(info, 0, sizeof *info);
    info->format = h->format;
    info->isa = h->isa;
    info->kernel = h->format == CD_SPARSE_FMT_BSR4 ? h->k->name4 : h->k->name1;
    info->tail_kernel = h->format == CD_SPARSE_FMT_BSR4 && h->kpg % 4 ? h->k->name1 : NULL;
    info->mode = h->direct ? "direct" : "planes";
    info->nnz = h->nnz;
    info->entries = h->entries;
    const size_t stored = h->entries * (h->format == CD_SPARSE_FMT_BSR4 ? 4 : 1);
    info->fill = stored ? (double)h->nnz / (double)stored : 1.0;
    info->packed_bytes = h->packed_bytes + (h->border ? sizeof(float) * h->d.k * h->d.oh * h->d.ow : 0);
    info->cin_blocks = 1;
    info->bands = 1;
    return 0;
}

int cd_sparse_conv_i8_fold(const cd_sparse_conv_i8 *h) { return h->fold; }

void cd_sparse_conv_i8_free(cd_sparse_conv_i8 *h) {
    if (!h) return;
    free(h->slot_a);
    free(h->slot_b);
    free(h->s2);
    free(h->mult);
    free(h->bias);
    free(h->init);
    free(h->border);
    free(h->off);
    free(h->w);
    free(h->nq);
    free(h->nqs);
    free(h->chunks);
    free(h);
}
