#include "sparse/sparse-conv.h"
#include "sparse/sparse-conv-internal.h"

#include "core/errors.h"
#include "sparse/analysis.h"
#include "sparse/band-rows.h"
#include "sparse/bsr.h"
#include "sparse/csr.h"
#include "sparse/spmm-shift.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Input rows one pass may keep in L1: about 32 KiB of the 48 KiB, the rest
// for weights and outputs.
#define L1_INPUT_BYTES 32768
// The same for k x k planes: their mostly cache-line-split loads touch twice
// the lines (measured best on ResNet-50 3x3 layers: 14x14 1.3x faster than
// with the 1x1 budget, the others flat).
#define L1_INPUT_BYTES_KXK 16384
// Pixels per pass when the input channels are split into column blocks.
#define CB_TILE 64
// The same for the aligned-shift path: its kernel's 8-vector tiles (the
// 4-vector ones load 5 vectors per 4 for taps s > 0). Measured on ResNet-50
// 3x3 at 90%, 1 thread, with the 32 KiB budget: 128 beats 64 by ~1.25x and
// 96/256 by 5-15%; 24 and 48 KiB budgets are within noise / ~10% slower.
#define CB_TILE_SHIFT 128
// Input-channel blocks are grown beyond the L1 budget so that one visit of
// an output row covers about VISIT_NNZ nonzeros (each visit costs fixed work:
// accumulators set up, output loaded and stored), when a group's input (or
// band) fits VISIT_MAX_INPUT and a pass keeps within VISIT_CAP_BYTES. Measured
// on ResNet-50 at 90%, 1 thread: 1x1 @7 2.9 -> 3.6x, @14 3.7 -> 4.1x, 3x3
// s2 @28 2.2 -> 2.8x, s2 @14 2.0 -> 2.6x; bigger inputs (56x56, 512>128 @28)
// lost with bigger blocks, so they keep the L1 budget.
#define VISIT_NNZ 32
#define VISIT_CAP_BYTES 65536
#define VISIT_MAX_INPUT (1u << 20)
// k x k layers with at most this many output pixels (7x7) and rows of at
// most 16 run on im2col planes (one aligned plane per channel and tap).
#define IM2COL_MAX_PIXELS 64
// ... when denser than this: the planes are R*S times the input to write,
// which at 90% cost more than the aligned loads save (ResNet-50 3x3 @7 and
// s2 @14, 1 thread, A/B: 60-80% 0.72-1.47x -> 0.91-1.66x, 90% 2.7x -> 2.2x).
#define IM2COL_MIN_DENSITY 0.15
// Prepared input planes per band (k x k): well inside the 2 MiB L2.
#define BAND_BYTES (640 * 1024)

static const isa_paths k_isa_paths[] = {
    [CD_SPARSE_ISA_SCALAR] = {.vec = 8},
    [CD_SPARSE_ISA_AVX2] = {8, 0, cd_f32_phase_row__avx2, cd_f32_im2col_tap__avx2, cd_f32_copy_rows__avx2,
                            cd_f32_spmm_shift__avx2, "cd_f32_spmm_shift__avx2"},
    [CD_SPARSE_ISA_AVX512F] = {16, 1, cd_f32_phase_row__avx512f, cd_f32_im2col_tap__avx512f, cd_f32_copy_rows__avx512f,
                               cd_f32_spmm_shift__avx512f, "cd_f32_spmm_shift__avx512f"},
};

const char *cd_sparse_format_name(cd_sparse_format f) {
    switch (f) {
    case CD_SPARSE_FMT_AUTO: return "auto";
    case CD_SPARSE_FMT_CSR: return "csr";
    case CD_SPARSE_FMT_BSR4: return "bsr4";
    case CD_SPARSE_FMT_BSR8: return "bsr8";
    }
    return "unknown";
}

static int format_nr(cd_sparse_format f) { return f == CD_SPARSE_FMT_BSR8 ? 8 : f == CD_SPARSE_FMT_BSR4 ? 4 : 1; }

int cd_sparse_conv_available(cd_sparse_format format, cd_sparse_isa isa) {
    if (isa == CD_SPARSE_ISA_AUTO) isa = cd_sparse_isa_best();
    if (format == CD_SPARSE_FMT_AUTO) format = CD_SPARSE_FMT_CSR;
    return cd_spmm_ukernel_find(isa, format_nr(format)) != NULL && cd_spmm_ukernel_find(isa, 1) != NULL;
}

int cd_sparse_conv_desc_ok(const cd_conv_desc *d) {
    if (d->c < 1 || d->h < 1 || d->w < 1 || d->k < 1 || d->r < 1 || d->s < 1) return 0;
    if (d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1) return 0;
    if (d->pad_t < 0 || d->pad_l < 0 || d->pad_b < 0 || d->pad_r < 0) return 0;
    if (d->groups < 1 || d->c % d->groups || d->k % d->groups) return 0;
    if (d->stride_h * d->stride_w > 64) return 0;
    // Keep every derived size far from int overflow.
    if ((int64_t)d->h + d->pad_t + d->pad_b > (1 << 20) || (int64_t)d->w + d->pad_l + d->pad_r > (1 << 20)) return 0;
    if ((int64_t)d->dil_h * (d->r - 1) > (1 << 20) || (int64_t)d->dil_w * (d->s - 1) > (1 << 20)) return 0;
    return 1;
}

// Chooses the format from the weights' output-channel block structure by
// relative cost per stored weight, measured on AVX-512 (1 thread, ResNet-50
// and MobileNetV2 layers at 50-90%, bench/sparse-conv-layers.c): a BSR4
// weight costs 1, a BSR8 weight 0.75 (1x1) or 0.9 (k x k), a CSR weight 1.6
// (1x1) or 2.1 (k x k: its one input load per multiply-add is mostly a
// cache-line-split load on shifted planes, which BSR pays once per 4 or 8
// weights), but 1.35 (stride 1) or 1.5 (stride 2) on the aligned-shift path
// (`shift`; ResNet-50 3x3 at 50/60/70%, CSR vs BSR4 and BSR8 forced: CSR
// 1.3-1.9x faster than BSR4 there, so CSR from 50%). A BSR format stores
// nnz / fill weights. Unstructured weights go CSR from about 55-60%
// sparsity (50% on the shift path); 4x1 / 8x1 blocks go BSR.
static cd_sparse_format auto_format(const cd_conv_desc *d, int kpg, int cpg, const float *w, int shift) {
    cd_sparse_analysis a;
    if (cd_sparse_analyze(w, d->k, cpg, d->r, d->s, d->groups, &a) != 0 || a.nnz == 0) return CD_SPARSE_FMT_CSR;
    const int pointwise = d->r == 1 && d->s == 1;
    cd_sparse_format best = CD_SPARSE_FMT_CSR;
    double cost = pointwise ? 1.6 : !shift ? 2.1 : d->stride_w == 1 ? 1.35 : 1.5;
    if (kpg >= 4 && 1.0 / a.blocks[1].fill < cost) {
        best = CD_SPARSE_FMT_BSR4;
        cost = 1.0 / a.blocks[1].fill;
    }
    if (kpg >= 8 && (pointwise ? 0.75 : 0.9) / a.blocks[2].fill < cost) best = CD_SPARSE_FMT_BSR8;
    return best;
}

// One call per row wastes the partial vector of every row and pays a pass
// over the weights per 64-pixel tile of each row; one call over the padded
// rows (pitch wph) computes wph-OW junk columns per row and copies out (about
// 10% on top). Costs in vectors, a pass over the weights counted as one.
static int junk_beats_rows(const cd_conv_desc *d, int wph, int vec) {
    const size_t rows_cost = (size_t)d->oh * ((d->ow + vec - 1) / vec + (d->ow + 63) / 64);
    const size_t jp = (size_t)d->oh * wph;
    const size_t junk_cost = (jp + vec - 1) / vec * 11 / 10 + (jp + 63) / 64;
    return junk_cost < rows_cost;
}

// Aligned-shift path: a MODE_JUNK layer with S = 2..3 column taps at
// column stride 1 or 2 (any row stride: row phases are planes of their
// own) whose pitch pads to a multiple of the vector (vec floats) for at most
// 1/8 more columns (stride 1: 56: 58 -> 64, 28: 30 -> 32, 14: 16; not 7:
// 9 -> 16; stride 2, 3x3: 28: 29 -> 32, 14: 15 -> 16; the same with vec 8,
// which also takes e.g. 22 -> 24). Then planes, channels and tiles start on
// vector boundaries and every tap offset without its lane shift s / stride
// is aligned. d has oh/ow filled.
static int shift_geometry(const cd_conv_desc *d, int vec) {
    const int S = d->s, sw = d->stride_w;
    if (!(sw == 1 || (sw == 2 && S >= 2)) || d->dil_w != 1 || S < 2 || S > 3) return 0;
    const int wph = d->ow + (S - 1) / sw;
    return junk_beats_rows(d, wph, vec) && round_vec((size_t)wph, vec) * 8 <= (size_t)wph * 9;
}

// Whether create should take the aligned-shift path where the geometry
// allows it (plan_geometry checks the geometry): CSR on an ISA with the
// kernel (AVX-512, AVX2), and
// opt->shift: 1 forces it, -1 turns it off, 0 follows the measured rule:
// 3x3 only, the one shape measured (bench/sparse-conv-layers --ab-shift,
// ResNet-50 3x3, batch 1, 1 thread, speedup over oneDNN path off -> on at
// 80/90/95%: @56 1.5/2.5/3.7 -> 2.2/3.4/4.8, @28 1.6/2.9/4.8 -> 2.4/4.1/6.3,
// @14 1.5/2.7/4.6 -> 2.2/3.8/6.2; stride 2 @56 -> 28, two runs: 1.25/1.75/2.29
// -> 1.48/2.02/2.39 and 1.30/1.82/2.10 -> 1.49/2.08/2.32; @7 falls outside
// the geometry), and outputs at least 14 wide: on AVX2 (same layers, the
// path on vs off at 80/90%, docs/SPARSITY.md) @28, @14, s2 @56 and s2 @28
// gained 1.12-1.28x, but s2 @14 (7 wide: one 8-float vector per row, tiles
// too short to hide the FMA latency) went 0.68 -> 0.76 ms at 90%.
// 2x2, 1x3, 3x2 run correctly when forced but were not measured.
static int shift_wanted(const cd_conv_desc *d, cd_sparse_format fmt, cd_sparse_isa isa,
                        const cd_sparse_conv_options *opt) {
    const int mode = opt ? opt->shift : 0;
    if (mode < 0 || fmt != CD_SPARSE_FMT_CSR || !k_isa_paths[isa].shift) return 0;
    if (mode > 0) return 1;
    return d->r == 3 && d->s == 3 && d->ow >= 14;
}

// Whether create should lay a small-output k x k layer out as im2col planes
// (h->im2col): AVX-512 or AVX2 (the planes are built by sparse/band-rows.h), column
// stride 1 or 2, at most IM2COL_MAX_PIXELS output pixels in rows of <= 16;
// by default CSR only (BSR4 at 50%, where the cost model picks it: 0.63x ->
// 0.52x with im2col: its 4 multiply-adds per load gain little from aligned
// loads) and denser than IM2COL_MIN_DENSITY. d has oh/ow filled.
static int im2col_wanted(const cd_conv_desc *d, cd_sparse_format fmt, cd_sparse_isa isa,
                         const cd_sparse_conv_options *opt, double density) {
    const int mode = opt ? opt->im2col : 0;
    if (mode < 0 || !k_isa_paths[isa].im2col_tap) return 0;
    if (mode == 0 && fmt != CD_SPARSE_FMT_CSR) return 0; // BSR: measured slower at 50%
    if (!(d->r * d->s > 1 && d->stride_w <= 2 && d->ow <= 16 && (size_t)d->oh * d->ow <= IM2COL_MAX_PIXELS)) return 0;
    return mode > 0 || density > IM2COL_MIN_DENSITY;
}

// Channel strides that are a multiple of 4 KiB put every channel's rows in
// the same L1 sets (12 ways): ResNet-50's 3x3 stride-2 @56 planes were
// exactly 4 KiB per channel. One more line spreads them (that layer at 90%,
// two A/B runs: 2.26x / 2.32x -> 2.58x / 2.52x). Padding 1 KiB multiples
// too made the 3x3 @14 layer (1 KiB planes) 3x slower at 70-90%.
static size_t spread_channels(size_t chan_floats) { return chan_floats % 1024 == 0 ? chan_floats + 16 : chan_floats; }

// Lays out the prepared input and picks the mode; fills tap_off[cpg*R*S].
// want_shift: take the aligned-shift path (h->shift) when the geometry allows;
// want_im2col: else the im2col layout.
static void plan_geometry(cd_sparse_conv *h, int32_t *tap_off, int vec, int want_shift, int want_im2col) {
    const cd_conv_desc *d = &h->d;
    const int R = d->r, S = d->s;
    if (R == 1 && S == 1 && d->h == 1 && d->w == 1 && !d->pad_t && !d->pad_l && !d->pad_b && !d->pad_r) {
        h->mode = MODE_FC;
        h->nbands = 1;
        h->chan_stride = FC_FOLD;
        h->group_in = (size_t)h->cpg * FC_FOLD;
        for (int c = 0; c < h->cpg; c++) tap_off[c] = c * FC_FOLD;
        return;
    }
    // Straight on the caller's planes when every plane starts on a vector
    // boundary; otherwise (14x14, 7x7) a copy into planes padded to 16 floats
    // (MODE_PLANE below) is cheaper than the cache-line-split loads it saves:
    // an AVX-512 pass over unaligned rows takes ~1.7x as long (measured).
    if (R == 1 && S == 1 && d->stride_h == 1 && d->stride_w == 1 && !d->pad_t && !d->pad_l && !d->pad_b && !d->pad_r &&
        ((size_t)d->h * d->w) % (size_t)vec == 0) {
        h->mode = MODE_DIRECT;
        h->nbands = 1;
        h->band_rows = d->oh;
        h->hph = d->h;
        h->wph = d->w;
        h->chan_stride = (size_t)d->h * d->w;
        h->group_in = (size_t)h->cpg * h->chan_stride;
        for (int c = 0; c < h->cpg; c++) tap_off[c] = (int32_t)(c * h->chan_stride);
        return;
    }
    const int sh = d->stride_h, sw = d->stride_w;
    // Slots: phase planes keyed by row phase a and column phase b. (Planes
    // pre-shifted per column tap so that every load is aligned were tried:
    // S times the planes to prepare and S times the L1 footprint per input
    // channel cost more than the split loads they save.)
    const int nb = sw;
    int slot_of[64];
    for (int i = 0; i < 64; i++) slot_of[i] = -1;
    h->nslots = 0;
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++) {
            const int a = (r * d->dil_h) % sh, b = (s * d->dil_w) % sw;
            if (slot_of[a * nb + b] < 0) {
                slot_of[a * nb + b] = h->nslots;
                h->slot_a[h->nslots] = a;
                h->slot_b[h->nslots] = b;
                h->nslots++;
            }
        }
    const int halo = ((R - 1) * d->dil_h) / sh;
    h->wph = d->ow + ((S - 1) * d->dil_w) / sw;
    h->shift = 0;
    if (want_shift && shift_geometry(d, vec)) {
        h->wph = (int)round_vec((size_t)h->wph, vec);
        h->shift = S;
        h->shift_stride = sw;
    }
    if (want_im2col && !h->shift) {
        // One plane of OH*OW pixels (to 16) per channel and tap, so every
        // tap's load is aligned and no junk column is computed; the kernel
        // then runs as on 1x1 planes (MODE_PLANE, one band).
        h->im2col = 1;
        h->mode = MODE_PLANE;
        h->nbands = 1;
        h->band_rows = h->hph = d->oh;
        h->wph = d->ow;
        h->plane = round16((size_t)d->oh * d->ow);
        h->chan_stride = spread_channels((size_t)R * S * h->plane);
        h->group_in = (size_t)h->cpg * h->chan_stride;
        for (int c = 0; c < h->cpg; c++)
            for (int t = 0; t < R * S; t++)
                tap_off[c * R * S + t] = (int32_t)(c * h->chan_stride + (size_t)t * h->plane);
        return;
    }
    // Bands of output rows: for k x k at most BAND_BYTES of prepared planes
    // (plus halo rows) each, so a band's planes, scratch and output stay in
    // L2 between its preparation and its use; else the whole map. Threads
    // share a band by its output channels (run_item's block chunks), not by
    // rows: a band per thread made every thread stream all the weights over
    // shorter passes, each rounded up to 16 pixels (7x7 in bands of 4 and 3
    // rows: 96 lanes for 63 pixels). One band ran ResNet-50's 90% 7x7, 14x14
    // and 28x28 layers 1.05-1.9x faster at 2 threads, and none slower
    // (bench/sparse-conv-layers --threads 2, A/B in one run). Each chunk
    // prepares the band itself: one preparation shared by the threads was
    // slower (1x1 at 14x14: 0.127 against 0.101 ms), as half of the planes
    // then sit in the other core's L2.
    int rows = d->oh;
    if (halo > 0) {
        const size_t row_bytes = (size_t)h->cpg * h->nslots * h->wph * sizeof(float);
        const int fit = (int)(BAND_BYTES / row_bytes) - halo;
        if (rows > fit) rows = fit < 4 ? 4 : fit;
        if (rows > d->oh) rows = d->oh;
    }
    if (rows < 1) rows = 1;
    h->nbands = (d->oh + rows - 1) / rows;
    h->band_rows = (d->oh + h->nbands - 1) / h->nbands; // balanced
    h->nbands = (d->oh + h->band_rows - 1) / h->band_rows;
    h->hph = h->band_rows + halo;
    h->plane = round16((size_t)h->hph * h->wph);
    h->band_out = round16((size_t)h->band_rows * h->wph);
    h->chan_stride = spread_channels(h->plane * h->nslots);
    h->group_in = (size_t)h->cpg * h->chan_stride;
    for (int c = 0; c < h->cpg; c++)
        for (int r = 0; r < R; r++)
            for (int s = 0; s < S; s++) {
                const int a = (r * d->dil_h) % sh, b = (s * d->dil_w) % sw;
                const size_t o = c * h->chan_stride + slot_of[a * nb + b] * h->plane +
                                 (size_t)((r * d->dil_h) / sh) * h->wph + (h->shift ? 0 : (s * d->dil_w) / sw);
                tap_off[(c * R + r) * S + s] = (int32_t)o;
            }
    if (h->wph == d->ow) {
        h->mode = MODE_PLANE;
        return;
    }
    h->mode = h->shift || junk_beats_rows(d, h->wph, vec) ? MODE_JUNK : MODE_ROWS;
}

// The window masks of the vector plane rows (sparse/band-rows.h), when the
// layout has plane rows and the ISA builds them: one set per slot for
// rows of wph outputs, or for im2col one per column tap s for rows of OW
// outputs; they depend on the row's column shift only. Returns 0 or
// CD_ENOMEM.
static int row_masks_build(cd_sparse_conv *h) {
    const cd_conv_desc *d = &h->d;
    if (!h->paths->phase_row || h->mode == MODE_DIRECT || h->mode == MODE_FC || d->stride_w > 2) return 0;
    if (d->stride_w == 1 && !h->im2col && !h->paths->rows_stride1) return 0;
    const size_t n = h->im2col ? (size_t)d->ow : (size_t)h->wph;
    const int keys = h->im2col ? d->s : h->nslots;
    const size_t vec = (size_t)h->vec;
    h->masks_per_slot = (size_t)d->stride_w * ((n + vec - 1) / vec);
    h->row_masks = malloc(sizeof *h->row_masks * h->masks_per_slot * keys);
    if (!h->row_masks) return CD_ENOMEM;
    for (int t = 0; t < keys; t++)
        cd_phase_row_masks(h->row_masks + t * h->masks_per_slot, n, d->w,
                           (h->im2col ? t * d->dil_w : h->slot_b[t]) - d->pad_l, d->stride_w, h->vec);
    return 0;
}

// Pixels one call reads past its input base (offset 0 of a group's band).
static size_t read_extent(const cd_sparse_conv *h) {
    switch (h->mode) {
    case MODE_DIRECT:
    case MODE_PLANE: return (size_t)h->band_rows * h->d.ow;
    case MODE_ROWS: return (size_t)(h->band_rows - 1) * h->wph + h->d.ow;
    case MODE_JUNK: return (size_t)h->band_rows * h->wph;
    case MODE_FC: return FC_FOLD;
    }
    return 0;
}

// Input-channel blocking: sets h->cb, h->ncb and h->tile (pixels per pass)
// for a layer of nz nonzeros in wtotal weights.
static void choose_cin_blocks(cd_sparse_conv *h, cd_sparse_format fmt, size_t nz, size_t wtotal,
                              const cd_sparse_conv_options *opt) {
    const cd_conv_desc dd = h->d;
    // Input-channel blocking: a pass of CB_TILE pixels over one column block
    // must keep the input it reads in L1; later blocks accumulate onto the
    // output of earlier ones. (More column blocks mean more, shorter visits
    // of each output row: measured, the L1 budget below is the best trade.)
    const size_t px = h->mode == MODE_FC ? FC_FOLD : h->shift ? CB_TILE_SHIFT : CB_TILE;
    // Floats of one input channel a pass touches: a row of px pixels, or for
    // k x k every phase plane from the pass's first row to R-1 (dilated,
    // strided) rows below its last.
    size_t per_c = px, budget = L1_INPUT_BYTES;
    if (h->im2col) {
        per_c = (size_t)dd.r * dd.s * h->plane; // aligned: the 1x1 budget
    } else if (h->mode != MODE_DIRECT && h->mode != MODE_FC && (dd.r > 1 || dd.s > 1)) {
        per_c = (size_t)h->nslots * (px + (size_t)((dd.r - 1) * dd.dil_h / dd.stride_h) * h->wph);
        // Aligned loads touch half the lines of split ones: the 1x1 budget.
        budget = h->shift ? L1_INPUT_BYTES : L1_INPUT_BYTES_KXK;
    }
    // BSR loads one input vector per NR multiply-adds and gains nothing from
    // the split (measured): only CSR is blocked.
    int cb = format_nr(fmt) == 1 ? (int)(budget / (per_c * sizeof(float))) : h->cpg;
    if (format_nr(fmt) == 1) {
        // Visits of ~VISIT_NNZ nonzeros when the input is small enough to
        // stay in L2 (the bigger block then reads from L2, not L3).
        if (nz && h->group_in * sizeof(float) <= VISIT_MAX_INPUT) {
            const double per_visit = (double)nz / wtotal * dd.r * dd.s; // nonzeros per channel
            double want = VISIT_NNZ / per_visit + 1;
            const double cap = (double)VISIT_CAP_BYTES / (double)(per_c * sizeof(float));
            if (want > cap) want = cap;
            if (want > h->cpg) want = h->cpg;
            if (want > cb) cb = (int)want;
        }
    }
    if (opt && opt->cin_block > 0) cb = opt->cin_block;
    if (cb < 1) cb = 1;
    h->ncb = (h->cpg + cb - 1) / cb;
    h->cb = (h->cpg + h->ncb - 1) / h->ncb; // balanced
    h->ncb = (h->cpg + h->cb - 1) / h->cb;
    h->tile = px;
}

// Packs the weights (and the bias, into the first block) of every
// input-channel block. Returns 0 or a negative code.
static int pack_blocks(cd_sparse_conv *h, const float *w, const float *bias, cd_sparse_format fmt,
                       const int32_t *tap_off) {
    const cd_conv_desc dd = h->d;
    int rc = 0;
    h->packs = calloc((size_t)h->ncb, sizeof *h->packs);
    const int rs = dd.r * dd.s;
    float *sub = h->ncb > 1 ? malloc(sizeof(float) * dd.k * (size_t)h->cb * rs) : NULL;
    if (!h->packs || (h->ncb > 1 && !sub)) rc = CD_ENOMEM;
    for (int b = 0; b < h->ncb && rc == 0; b++) {
        const int c0 = b * h->cb, nc = c0 + h->cb <= h->cpg ? h->cb : h->cpg - c0;
        const float *wb = w;
        if (h->ncb > 1) {
            for (int k = 0; k < dd.k; k++)
                memcpy(sub + (size_t)k * nc * rs, w + ((size_t)k * h->cpg + c0) * rs, sizeof(float) * nc * rs);
            wb = sub;
        }
        const float *bb = b == 0 ? bias : NULL;
        rc = h->shift ? cd_sparse_pack_build_shift(wb, bb, dd.groups, h->kpg, nc * rs, tap_off + (size_t)c0 * rs,
                                                   h->shift, &h->packs[b])
             : format_nr(fmt) == 1
                 ? cd_csr_pack(wb, bb, dd.groups, h->kpg, nc * rs, tap_off + (size_t)c0 * rs, &h->packs[b])
                 : cd_bsr_pack(wb, bb, dd.groups, h->kpg, nc * rs, tap_off + (size_t)c0 * rs, format_nr(fmt),
                               &h->packs[b]);
    }
    free(sub);
    return rc;
}

// The clamp the kernels apply for the layer's activation (others after).
static void set_clamp(cd_sparse_conv *h) {
    const cd_conv_desc dd = h->d;
    h->kparams.min = -INFINITY;
    h->kparams.max = INFINITY;
    switch (dd.act.kind) {
    case CD_ACT_NONE: break;
    case CD_ACT_RELU: h->kparams.min = 0.0f; break;
    case CD_ACT_CLIP:
        h->kparams.min = dd.act.alpha;
        h->kparams.max = dd.act.beta;
        break;
    default: h->post_act = 1; break;
    }
}

int cd_sparse_conv_create(const cd_conv_desc *d, const float *w, const float *bias, const cd_sparse_conv_options *opt,
                          cd_sparse_conv **out) {
    *out = NULL;
    if (!d || !w || !cd_sparse_conv_desc_ok(d)) return CD_EPARAMS;
    cd_conv_desc dd = *d;
    cd_conv_out_dims(&dd);
    if (dd.oh < 1 || dd.ow < 1) return CD_EPARAMS;
    if ((int64_t)dd.k * (d->c / d->groups) * d->r * d->s > INT32_MAX) return CD_EUNSUPPORTED;

    cd_sparse_isa isa = opt ? opt->isa : CD_SPARSE_ISA_AUTO;
    if (isa == CD_SPARSE_ISA_AUTO) isa = cd_sparse_isa_best();
    if (isa < CD_SPARSE_ISA_SCALAR || isa > CD_SPARSE_ISA_AVX512VNNI) return CD_EPARAMS;
    if (!cd_sparse_isa_supported(isa)) return CD_EUNSUPPORTED;
    isa = cd_sparse_isa_f32(isa); // a VNNI machine runs the AVX512F f32 kernels
    cd_sparse_format fmt = opt ? opt->format : CD_SPARSE_FMT_AUTO;
    if (fmt < CD_SPARSE_FMT_AUTO || fmt > CD_SPARSE_FMT_BSR8) return CD_EPARAMS;

    cd_sparse_conv *h = calloc(1, sizeof *h);
    if (!h) return CD_ENOMEM;
    h->d = dd;
    h->cpg = d->c / d->groups;
    h->kpg = d->k / d->groups;
    const int vec = k_isa_paths[isa].vec;
    if (fmt == CD_SPARSE_FMT_AUTO)
        fmt = auto_format(&dd, h->kpg, h->cpg, w,
                          shift_wanted(&dd, CD_SPARSE_FMT_CSR, isa, opt) && shift_geometry(&dd, vec));
    h->format = fmt;
    h->isa = isa;
    h->paths = &k_isa_paths[isa];
    h->kmain = cd_spmm_ukernel_find(isa, format_nr(fmt));
    h->ktail = cd_spmm_ukernel_find(isa, 1);
    if (!h->kmain || !h->ktail) {
        free(h);
        return CD_EUNSUPPORTED;
    }

    // Check the prepared-input geometry fits 32-bit offsets before laying it out.
    const int64_t hph = dd.oh + (int64_t)((dd.r - 1) * dd.dil_h) / dd.stride_h;
    const int64_t wph = dd.ow + (int64_t)((dd.s - 1) * dd.dil_w) / dd.stride_w;
    const int64_t slots = (int64_t)dd.stride_h * dd.stride_w;
    // (Bands repeat up to R-1 halo rows each: at most twice the rows.)
    const int64_t est = (int64_t)h->cpg * (2 * hph * wph + 16) * slots + (int64_t)h->cpg * dd.h * dd.w + hph * wph +
                        FC_FOLD * (int64_t)h->cpg;
    if (est > INT32_MAX / 2) {
        free(h);
        return CD_EUNSUPPORTED;
    }

    const int cols = h->cpg * dd.r * dd.s;
    int32_t *tap_off = malloc(sizeof *tap_off * cols);
    if (!tap_off) {
        free(h);
        return CD_ENOMEM;
    }
    h->vec = vec;
    h->threads = omp_get_max_threads();
    const size_t wtotal = (size_t)dd.k * h->cpg * dd.r * dd.s;
    size_t nz = 0;
    for (size_t j = 0; j < wtotal; j++) nz += w[j] != 0.0f;
    plan_geometry(h, tap_off, h->vec, shift_wanted(&dd, fmt, isa, opt),
                  im2col_wanted(&dd, fmt, isa, opt, (double)nz / (double)wtotal));
    if (row_masks_build(h) != 0) {
        free(tap_off);
        free(h);
        return CD_ENOMEM;
    }
    int32_t max_tap = 0;
    for (int j = 0; j < cols; j++) max_tap = tap_off[j] > max_tap ? tap_off[j] : max_tap;
    // (The aligned-shift kernel reads one vector past each tile.)
    const size_t need = (size_t)max_tap + read_extent(h) + (h->shift ? (size_t)h->vec : 0);
    h->in_slack = need > h->group_in ? need - h->group_in : 0;
    h->band_stride = round16(h->group_in + h->in_slack);

    choose_cin_blocks(h, fmt, nz, wtotal, opt);
    int rc = pack_blocks(h, w, bias, fmt, tap_off);
    free(tap_off);
    if (rc != 0) {
        cd_sparse_conv_free(h);
        return rc;
    }

    set_clamp(h);
    *out = h;
    return 0;
}

void cd_sparse_conv_free(cd_sparse_conv *h) {
    if (!h) return;
    if (h->packs)
        for (int b = 0; b < h->ncb; b++) cd_sparse_pack_free(&h->packs[b]);
    free(h->packs);
    free(h->row_masks);
    free(h);
}

int cd_sparse_conv_get_info(const cd_sparse_conv *h, cd_sparse_conv_info *info) {
    static const char *const modes[] = {"direct", "plane", "rows", "junk", "fc"};
    memset(info, 0, sizeof *info);
    info->format = h->format;
    info->isa = h->isa;
    info->kernel = h->shift ? h->paths->shift_name : h->kmain->name;
    info->shift = h->shift;
    info->tail_kernel = h->packs[0].tail_rows ? h->ktail->name : NULL;
    info->mode = h->im2col ? "im2col" : modes[h->mode];
    info->cin_blocks = h->ncb;
    info->bands = h->mode == MODE_DIRECT || h->mode == MODE_FC ? 1 : h->nbands;
    size_t stored = 0;
    for (int b = 0; b < h->ncb; b++) {
        const cd_sparse_pack *p = &h->packs[b];
        info->nnz += p->nnz;
        info->entries += p->entries;
        info->packed_bytes += cd_sparse_pack_bytes(p);
        stored += cd_sparse_pack_stored(p);
    }
    info->fill = stored ? (double)info->nnz / (double)stored : 1.0;
    return 0;
}
