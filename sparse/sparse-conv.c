#include "sparse/sparse-conv.h"

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

// How the pixels of one image/group are fed to the micro-kernels.
typedef enum {
    MODE_DIRECT, // input is src itself (1x1, stride 1, no pad); M = H*W per call
    MODE_PLANE,  // phase planes as wide as the output: M = OH*OW contiguous
    MODE_ROWS,   // phase planes wider than the output: one call per output row
    MODE_JUNK,   // as ROWS, but one call over OH*wph pixels into scratch (the
                 // wph-OW extra columns per row are discarded when copied out)
    MODE_FC,     // 1x1 kernel on a 1x1 input: the batch is the pixel axis
} conv_mode;

// Images folded into one FC call (the pixel axis of MODE_FC).
#define FC_FOLD 16

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

// What an ISA brings besides its micro-kernels: the vector width the
// geometry aligns to, the band rows of sparse/band-rows.h and the
// aligned-shift kernel of sparse/spmm-shift.h. NULL: the portable plane
// rows and row copies, and neither the aligned-shift nor the im2col layout.
typedef struct {
    int vec; // floats per vector
    // Vector plane rows at column stride 1 too (else only stride 2 and the
    // im2col taps): on AVX2 the portable memset/copy rows were faster there
    // (ResNet-50 3x3 @56, 90%, 1 thread, two A/B runs: 0.53 -> 0.50 ms
    // without them; @28 and @14 within noise), the stride-2 rows are not
    // (the compiler's copy is scalar loads).
    int rows_stride1;
    void (*phase_row)(float *row, size_t n, const float *x, long lo, long hi, int sh, int stride,
                      const uint16_t *masks);
    void (*im2col_tap)(float *dst, int oh, int ow, const float *x, int h, int w, long lo, long hi,
                       int y0, int row_stride, int sh, int stride, const uint16_t *masks);
    void (*copy_rows)(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, size_t rows,
                      size_t cols);
    cd_f32_spmm_shift_fn shift;
    const char *shift_name;
} isa_paths;

static const isa_paths k_isa_paths[] = {
    [CD_SPARSE_ISA_SCALAR] = {.vec = 8},
    [CD_SPARSE_ISA_AVX2] = {8, 0, cd_f32_phase_row__avx2, cd_f32_im2col_tap__avx2,
                            cd_f32_copy_rows__avx2, cd_f32_spmm_shift__avx2,
                            "cd_f32_spmm_shift__avx2"},
    [CD_SPARSE_ISA_AVX512F] = {16, 1, cd_f32_phase_row__avx512f, cd_f32_im2col_tap__avx512f,
                               cd_f32_copy_rows__avx512f, cd_f32_spmm_shift__avx512f,
                               "cd_f32_spmm_shift__avx512f"},
};

struct cd_sparse_conv {
    cd_conv_desc d;              // the layer, oh/ow filled
    int cpg, kpg;                // channels per group in / out
    cd_sparse_format format;
    cd_sparse_isa isa;
    const isa_paths *paths;      // k_isa_paths[isa]
    int ncb;                     // input-channel (column) blocks, each packed apart
    int cb;                      // input channels per column block (last may be fewer)
    cd_sparse_pack *packs;       // [ncb] packed weights; bias lives in packs[0]
    size_t tile;                 // pixels per pass over the column blocks
    int vec;                     // floats per vector of the ISA (16 AVX-512, else 8)
    const cd_spmm_ukernel_info *kmain; // kernel for the pack's main blocks
    const cd_spmm_ukernel_info *ktail; // one-channel kernel for leftover rows
    conv_mode mode;
    int nslots;                  // phase planes per channel
    int slot_a[64], slot_b[64];  // row/column phase of each slot
    int hph, wph;                // phase plane rows (of one band) and columns
    int band_rows;               // output rows per band (prepared modes)
    int nbands;                  // bands per image: each is prepared and run
                                 // apart, so its planes stay in L2
    int threads;                 // OpenMP threads at create: bands and
                                 // workspace slots are laid out for them
    size_t band_out;             // floats per output channel of a band's
                                 // scratch (MODE_JUNK: band_rows*wph, to 16)
    uint16_t *row_masks;         // vector plane rows: the window masks of
                                 // each slot (im2col: of each column tap;
                                 // sparse/band-rows.h), or NULL
    size_t masks_per_slot;       // masks per slot (or column tap)
    size_t plane;                // floats per phase plane (padded to 16)
    size_t chan_stride;          // floats per input channel (nslots planes)
    size_t group_in;             // floats of one group's prepared input (one band)
    size_t in_slack;             // floats read past a group's (band's) input
    size_t band_stride;          // floats from one prepared band to the next:
                                 // group_in + in_slack, rounded to 16
    int shift;                   // > 0: aligned-shift path (sparse/spmm-shift.h),
                                 // S column taps; tap offsets without the s term
    int shift_stride;            // its column stride (1 or 2)
    int im2col;                  // 1: MODE_PLANE on one plane per (channel,
                                 // tap) of the output's size (small outputs)
    cd_spmm_params kparams;      // clamp the kernels apply
    int post_act;                // 1: apply d.act after the kernel (non-clamp acts)
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

static int format_nr(cd_sparse_format f) {
    return f == CD_SPARSE_FMT_BSR8 ? 8 : f == CD_SPARSE_FMT_BSR4 ? 4 : 1;
}

int cd_sparse_conv_available(cd_sparse_format format, cd_sparse_isa isa) {
    if (isa == CD_SPARSE_ISA_AUTO) isa = cd_sparse_isa_best();
    if (format == CD_SPARSE_FMT_AUTO) format = CD_SPARSE_FMT_CSR;
    return cd_spmm_ukernel_find(isa, format_nr(format)) != NULL &&
           cd_spmm_ukernel_find(isa, 1) != NULL;
}

// Planes, channels and bands are padded to 16 floats (64 bytes) on every
// ISA: whole vectors of AVX-512 and AVX2 alike.
static size_t round16(size_t x) { return (x + 15) & ~(size_t)15; }
static size_t round_vec(size_t x, int vec) { return (x + vec - 1) / vec * vec; }
static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static int desc_ok(const cd_conv_desc *d) {
    if (d->c < 1 || d->h < 1 || d->w < 1 || d->k < 1 || d->r < 1 || d->s < 1) return 0;
    if (d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1) return 0;
    if (d->pad_t < 0 || d->pad_l < 0 || d->pad_b < 0 || d->pad_r < 0) return 0;
    if (d->groups < 1 || d->c % d->groups || d->k % d->groups) return 0;
    if (d->stride_h * d->stride_w > 64) return 0;
    // Keep every derived size far from int overflow.
    if ((int64_t)d->h + d->pad_t + d->pad_b > (1 << 20) || (int64_t)d->w + d->pad_l + d->pad_r > (1 << 20))
        return 0;
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
static cd_sparse_format auto_format(const cd_conv_desc *d, int kpg, int cpg, const float *w,
                                    int shift) {
    cd_sparse_analysis a;
    if (cd_sparse_analyze(w, d->k, cpg, d->r, d->s, d->groups, &a) != 0 || a.nnz == 0)
        return CD_SPARSE_FMT_CSR;
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
    if (!(d->r * d->s > 1 && d->stride_w <= 2 && d->ow <= 16 &&
          (size_t)d->oh * d->ow <= IM2COL_MAX_PIXELS))
        return 0;
    return mode > 0 || density > IM2COL_MIN_DENSITY;
}

// Channel strides that are a multiple of 4 KiB put every channel's rows in
// the same L1 sets (12 ways): ResNet-50's 3x3 stride-2 @56 planes were
// exactly 4 KiB per channel. One more line spreads them (that layer at 90%,
// two A/B runs: 2.26x / 2.32x -> 2.58x / 2.52x). Padding 1 KiB multiples
// too made the 3x3 @14 layer (1 KiB planes) 3x slower at 70-90%.
static size_t spread_channels(size_t chan_floats) {
    return chan_floats % 1024 == 0 ? chan_floats + 16 : chan_floats;
}

// Lays out the prepared input and picks the mode; fills tap_off[cpg*R*S].
// want_shift: take the aligned-shift path (h->shift) when the geometry allows;
// want_im2col: else the im2col layout.
static void plan_geometry(cd_sparse_conv *h, int32_t *tap_off, int vec, int want_shift,
                          int want_im2col) {
    const cd_conv_desc *d = &h->d;
    const int R = d->r, S = d->s;
    if (R == 1 && S == 1 && d->h == 1 && d->w == 1 && !d->pad_t && !d->pad_l && !d->pad_b &&
        !d->pad_r) {
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
    if (R == 1 && S == 1 && d->stride_h == 1 && d->stride_w == 1 && !d->pad_t && !d->pad_l &&
        !d->pad_b && !d->pad_r && ((size_t)d->h * d->w) % (size_t)vec == 0) {
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
    // Bands of output rows: at least one per thread; for k x k at most
    // BAND_BYTES of prepared planes (plus halo rows) each, so a band's planes,
    // scratch and output stay in L2 between its preparation and its use.
    const int threads = h->threads;
    int rows = (d->oh + threads - 1) / threads;
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
                                 (size_t)((r * d->dil_h) / sh) * h->wph +
                                 (h->shift ? 0 : (s * d->dil_w) / sw);
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
    if (!h->paths->phase_row || h->mode == MODE_DIRECT || h->mode == MODE_FC || d->stride_w > 2)
        return 0;
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

int cd_sparse_conv_create(const cd_conv_desc *d, const float *w, const float *bias,
                          const cd_sparse_conv_options *opt, cd_sparse_conv **out) {
    *out = NULL;
    if (!d || !w || !desc_ok(d)) return CD_EPARAMS;
    cd_conv_desc dd = *d;
    cd_conv_out_dims(&dd);
    if (dd.oh < 1 || dd.ow < 1) return CD_EPARAMS;
    if ((int64_t)dd.k * (d->c / d->groups) * d->r * d->s > INT32_MAX) return CD_EUNSUPPORTED;

    cd_sparse_isa isa = opt ? opt->isa : CD_SPARSE_ISA_AUTO;
    if (isa == CD_SPARSE_ISA_AUTO) isa = cd_sparse_isa_best();
    if (isa < CD_SPARSE_ISA_SCALAR || isa > CD_SPARSE_ISA_AVX512F) return CD_EPARAMS;
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
    const int64_t est = (int64_t)h->cpg * (2 * hph * wph + 16) * slots +
                        (int64_t)h->cpg * dd.h * dd.w + hph * wph + FC_FOLD * (int64_t)h->cpg;
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
                memcpy(sub + (size_t)k * nc * rs, w + ((size_t)k * h->cpg + c0) * rs,
                       sizeof(float) * nc * rs);
            wb = sub;
        }
        const float *bb = b == 0 ? bias : NULL;
        rc = h->shift ? cd_sparse_pack_build_shift(wb, bb, dd.groups, h->kpg, nc * rs,
                                                   tap_off + (size_t)c0 * rs, h->shift, &h->packs[b])
             : format_nr(fmt) == 1
                 ? cd_csr_pack(wb, bb, dd.groups, h->kpg, nc * rs, tap_off + (size_t)c0 * rs, &h->packs[b])
                 : cd_bsr_pack(wb, bb, dd.groups, h->kpg, nc * rs, tap_off + (size_t)c0 * rs,
                               format_nr(fmt), &h->packs[b]);
    }
    free(sub);
    free(tap_off);
    if (rc != 0) {
        cd_sparse_conv_free(h);
        return rc;
    }

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
static void prep_channel(const cd_sparse_conv *h, const float *src, size_t src_floats, float *base,
                         size_t ch, int band) {
    const cd_conv_desc *d = &h->d;
    const float *x = src + ch * d->h * d->w;
    const int i0 = band * h->band_rows;
    if (h->im2col) {
        // (A plane's floats past OH*OW are never read: MODE_PLANE passes
        // cover OH*OW pixels with masked tails, sparse/spmm-ukernel.h.)
        const long o = (long)(x - src);
        for (int r = 0; r < d->r; r++)
            for (int s = 0; s < d->s; s++)
                h->paths->im2col_tap(base + (size_t)(r * d->s + s) * h->plane, d->oh, d->ow, x, d->h,
                                     d->w, -o, (long)src_floats - o, r * d->dil_h - d->pad_t,
                                     d->stride_h, s * d->dil_w - d->pad_l, d->stride_w,
                                     h->row_masks + s * h->masks_per_slot);
        return;
    }
    if (h->nslots == 1 && d->r == 1 && d->s == 1 && h->wph == d->w && d->h == d->oh &&
        d->stride_h == 1 && d->stride_w == 1 && !d->pad_t && !d->pad_l) {
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
                h->paths->phase_row(row, (size_t)h->wph, xr, -o, (long)src_floats - o, b - d->pad_l,
                                    d->stride_w, h->row_masks + t * h->masks_per_slot);
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
static void prep_band(const cd_sparse_conv *h, const float *src, size_t src_floats, float *slot,
                      size_t img, int g, int band) {
    const size_t c0 = img * h->d.c + (size_t)g * h->cpg;
    for (int c = 0; c < h->cpg; c++)
        prep_channel(h, src, src_floats, slot + c * h->chan_stride, c0 + c, band);
    memset(slot + h->group_in, 0, sizeof(float) * (h->band_stride - h->group_in));
}

static void apply_act(cd_activation act, float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = cd_act_apply(act, p[i]);
}

// dst[i] = act(src[i] (+ res[i])): the copy-out of MODE_JUNK and MODE_FC.
// Clamp-type activations take a vectorised path.
static void finish(const cd_sparse_conv *h, float *dst, const float *src, const float *res,
                   size_t n) {
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
    size_t mchunk;    // pixels per item (DIRECT)
    size_t nmc;       // pixel chunks (DIRECT) or bands (prepared modes) per unit
    size_t bchunk;    // blocks per item
    size_t nbc;       // block chunks per group
} run_ctx;

// One pass over every column block for mc pixels: out = clamp(bias + sum
// over blocks (+ res)), block 0 adding bias and res, later blocks adding onto
// out, the clamp `last` applied by the final block. w/off/nnz of block gb are
// taken from each column block's pack.
static void run_pass(const cd_sparse_conv *h, const cd_spmm_ukernel_info *uk, size_t gb,
                     size_t nblk, size_t mc, const float *in, const float *res, size_t res_stride,
                     float *out, size_t out_stride, const cd_spmm_params *last) {
    static const cd_spmm_params none = {-INFINITY, INFINITY};
    for (int b = 0; b < h->ncb; b++) {
        const cd_sparse_pack *p = &h->packs[b];
        if (h->shift) {
            h->paths->shift(mc, nblk, h->shift, h->shift_stride, in, p->values + p->vfirst[gb],
                            p->offsets + p->first[gb], p->shift_nnz + gb * h->shift,
                            b == 0 ? res : out, b == 0 ? res_stride : out_stride, out, out_stride,
                            b == h->ncb - 1 ? last : &none);
            continue;
        }
        uk->fn(mc, nblk, in, p->values + p->vfirst[gb], p->offsets + p->first[gb], p->nnz_map + gb,
               b == 0 ? res : out, b == 0 ? res_stride : out_stride, out, out_stride,
               b == h->ncb - 1 ? last : &none);
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
static void run_blocks(const run_ctx *x, size_t unit, int g, int b0, int b1, size_t mi,
                       const float *slot) {
    const cd_sparse_conv *h = x->h;
    const cd_conv_desc *d = &h->d;
    const cd_sparse_pack *p = &h->packs[0];
    const int main_part = b0 < p->main_blocks;
    const cd_spmm_ukernel_info *uk = main_part ? h->kmain : h->ktail;
    const int nb = main_part ? p->nr : 1;
    const size_t gb = (size_t)g * p->blocks + b0;
    const size_t nblk = (size_t)(b1 - b0);
    const size_t k0 = (size_t)g * h->kpg + (main_part ? (size_t)b0 * p->nr
                                                      : (size_t)p->main_blocks * p->nr + (b0 - p->main_blocks));
    const size_t nch = nblk * nb;
    const size_t ohw = (size_t)d->oh * d->ow;
    const cd_spmm_params none = {-INFINITY, INFINITY};
    // Prepared modes: the band's planes, and its output rows [r0, r1).
    const float *in = h->mode == MODE_DIRECT || h->mode == MODE_FC
                          ? x->xin + (unit * d->groups + g) * h->group_in
                          : slot;
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
            run_pass(h, uk, gb, nblk, mc, in + (m - base), x->res ? x->res + o + m : NULL, ohw,
                     x->dst + o + m, ohw, &h->kparams);
        }
        if (h->post_act)
            for (size_t i = 0; i < nch; i++) apply_act(d->act, x->dst + o + i * ohw + m0, m1 - m0);
        break;
    }
    case MODE_ROWS: {
        for (size_t r = r0; r < r1; r++) {
            const size_t o = (unit * d->k + k0) * ohw + r * d->ow;
            run_pass(h, uk, gb, nblk, d->ow, in + (r - r0) * h->wph, x->res ? x->res + o : NULL, ohw,
                     x->dst + o, ohw, &h->kparams);
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
                h->paths->copy_rows(x->dst + o + r0 * d->ow, (size_t)d->ow, s + i * jp, (size_t)h->wph,
                                    r1 - r0, (size_t)d->ow);
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

int cd_sparse_conv_run_ws(const cd_sparse_conv *h, const float *src, const float *residual,
                          float *dst, int batch, void *ws) {
    if (!h || !src || !dst || batch < 1) return CD_EPARAMS;
    if (h->d.has_residual && !residual) return CD_EPARAMS;
    if (cd_sparse_conv_workspace_size(h, batch) && !ws) return CD_EPARAMS;
    const cd_conv_desc *d = &h->d;
    run_ctx x = {.h = h, .src = src, .res = h->d.has_residual ? residual : NULL, .dst = dst,
                 .batch = batch};
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

#pragma omp parallel num_threads(threads)
    {
        if (h->mode == MODE_FC) {
            // Transpose each fold to [group][channel][image] (FC_FOLD images).
#pragma omp for schedule(static)
            for (size_t c = 0; c < (size_t)d->c; c++) {
                const size_t g = c / h->cpg, cl = c % h->cpg;
                for (size_t n = 0; n < (size_t)batch; n++)
                    xin[(n / FC_FOLD * d->groups + g) * h->group_in + cl * FC_FOLD + n % FC_FOLD] =
                        src[n * d->c + c];
            }
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t it = 0; it < items; it++) run_item(&x, it);
    }
    return 0;
}

int cd_sparse_conv_run(const cd_sparse_conv *h, const float *src, const float *residual,
                       float *dst, int batch) {
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
