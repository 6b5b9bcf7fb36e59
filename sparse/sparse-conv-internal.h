#ifndef CD_SPARSE_SPARSE_CONV_INTERNAL_H
#define CD_SPARSE_SPARSE_CONV_INTERNAL_H

// What the two halves of the sparse conv share: sparse-conv.c builds a
// cd_sparse_conv at load (format, geometry, packing), sparse-conv-run.c runs
// it per request. Internal to sparse/.

#include "sparse/sparse-conv.h"
#include "sparse/sparse-pack.h"
#include "sparse/spmm-shift.h"
#include "sparse/spmm-ukernel.h"

#include <stddef.h>
#include <stdint.h>

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
    void (*im2col_tap)(float *dst, int oh, int ow, const float *x, int h, int w, long lo, long hi, int y0,
                       int row_stride, int sh, int stride, const uint16_t *masks);
    void (*copy_rows)(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, size_t rows, size_t cols);
    cd_f32_spmm_shift_fn shift;
    const char *shift_name;
} isa_paths;

struct cd_sparse_conv {
    cd_conv_desc d; // the layer, oh/ow filled
    int cpg, kpg;   // channels per group in / out
    cd_sparse_format format;
    cd_sparse_isa isa;
    const isa_paths *paths;            // k_isa_paths[isa]
    int ncb;                           // input-channel (column) blocks, each packed apart
    int cb;                            // input channels per column block (last may be fewer)
    cd_sparse_pack *packs;             // [ncb] packed weights; bias lives in packs[0]
    size_t tile;                       // pixels per pass over the column blocks
    int vec;                           // floats per vector of the ISA (16 AVX-512, else 8)
    const cd_spmm_ukernel_info *kmain; // kernel for the pack's main blocks
    const cd_spmm_ukernel_info *ktail; // one-channel kernel for leftover rows
    conv_mode mode;
    int nslots;                 // phase planes per channel
    int slot_a[64], slot_b[64]; // row/column phase of each slot
    int hph, wph;               // phase plane rows (of one band) and columns
    int band_rows;              // output rows per band (prepared modes)
    int nbands;                 // bands per image: each is prepared and run
                                // apart, so its planes stay in L2
    int threads;                // OpenMP threads at create: bands and
                                // workspace slots are laid out for them
    size_t band_out;            // floats per output channel of a band's
                                // scratch (MODE_JUNK: band_rows*wph, to 16)
    uint16_t *row_masks;        // vector plane rows: the window masks of
                                // each slot (im2col: of each column tap;
                                // sparse/band-rows.h), or NULL
    size_t masks_per_slot;      // masks per slot (or column tap)
    size_t plane;               // floats per phase plane (padded to 16)
    size_t chan_stride;         // floats per input channel (nslots planes)
    size_t group_in;            // floats of one group's prepared input (one band)
    size_t in_slack;            // floats read past a group's (band's) input
    size_t band_stride;         // floats from one prepared band to the next:
                                // group_in + in_slack, rounded to 16
    int shift;                  // > 0: aligned-shift path (sparse/spmm-shift.h),
                                // S column taps; tap offsets without the s term
    int shift_stride;           // its column stride (1 or 2)
    int im2col;                 // 1: MODE_PLANE on one plane per (channel,
                                // tap) of the output's size (small outputs)
    cd_spmm_params kparams;     // clamp the kernels apply
    int post_act;               // 1: apply d.act after the kernel (non-clamp acts)
};

// Planes, channels and bands are padded to 16 floats (64 bytes) on every
// ISA: whole vectors of AVX-512 and AVX2 alike.
static inline size_t round16(size_t x) { return (x + 15) & ~(size_t)15; }
static inline size_t round_vec(size_t x, int vec) { return (x + vec - 1) / vec * vec; }
static inline size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

#endif // CD_SPARSE_SPARSE_CONV_INTERNAL_H
