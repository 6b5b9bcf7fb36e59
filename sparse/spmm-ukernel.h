#ifndef CD_SPARSE_SPMM_UKERNEL_H
#define CD_SPARSE_SPMM_UKERNEL_H

// The sparse-times-dense micro-kernel contract shared by every ISA variant
// (sparse/f32-spmm-*.c) and the drivers that call them (sparse/sparse-conv.c).
//
// A call computes, for `nblk` consecutive blocks of NR output channels each
// (NR is fixed per kernel: 1 for CSR, 4 or 8 for BSR) and `mc` consecutive
// pixels m:
//
//   out[b*NR + i][m] = clamp(bias[b][i] + sum_j val[b][j][i] * in[off[b][j] + m]
//                            (+ res[b*NR + i][m]),  min, max)
//
// Sparse weights come in the packed stream of sparse/sparse-pack.h: `w`
// walks, for each block, NR biases then NR values per nonzero block entry;
// `off` walks one int32 input element offset per nonzero block entry;
// `nnz` holds the entry count of each block. Output channel i of the call
// lives at out + i*out_stride (elements); the residual, when not NULL, at
// res + i*res_stride. Pixels are contiguous in input, output and residual.
// res may be out itself (same stride) to accumulate onto an earlier partial
// result: each element is read before it is written. (A kernel may then leave
// the rows of a block with no entries and zero biases untouched.)
//
// Micro-kernels never allocate and never fail; they only assert. They read
// in[off + m] for m < mc exactly (masked tails), never beyond.

#include "core/isa-cap.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    float min; // lower clamp (-INFINITY for none)
    float max; // upper clamp (+INFINITY for none)
} cd_spmm_params;

typedef void (*cd_f32_spmm_ukernel_fn)(size_t mc, size_t nblk, const float *in, const float *w, const int32_t *off,
                                       const uint32_t *nnz, const float *res, size_t res_stride, float *out,
                                       size_t out_stride, const cd_spmm_params *params);

// Instruction sets a micro-kernel may need. Ordered: a higher value implies
// the machine also runs every lower one.
typedef enum {
    CD_SPARSE_ISA_AUTO = 0,       // pick the best one the CPU supports
    CD_SPARSE_ISA_SCALAR = 1,     // portable C
    CD_SPARSE_ISA_AVX2 = 2,       // AVX2 + FMA
    CD_SPARSE_ISA_AVX512F = 3,    // AVX-512 F/VL/BW/DQ + FMA
    CD_SPARSE_ISA_AVX512VNNI = 4, // AVX512F + VNNI (vpdpbusd): only the int8
                                  // kernels use it; f32 code runs its AVX512F
                                  // kernels there (cd_sparse_isa_f32)
} cd_sparse_isa;

// The level whose f32 kernels run at `isa`: AVX512F for VNNI (the f32 code
// has nothing VNNI-specific), `isa` itself otherwise.
static inline cd_sparse_isa cd_sparse_isa_f32(cd_sparse_isa isa) {
    return isa == CD_SPARSE_ISA_AVX512VNNI ? CD_SPARSE_ISA_AVX512F : isa;
}

// One registered micro-kernel (a row of sparse/spmm-ukernels.inc).
typedef struct {
    const char *name; // e.g. "cd_f32_spmm_ukernel_64x1__avx512f"
    cd_f32_spmm_ukernel_fn fn;
    cd_sparse_isa isa; // what it needs
    int mr;            // pixels per register tile
    int nr;            // output channels per block
} cd_spmm_ukernel_info;

// Declarations of every micro-kernel in the list.
#define CD_SPMM_UKERNEL(name, isa, mr, nr)                                                                      \
    void name(size_t mc, size_t nblk, const float *in, const float *w, const int32_t *off, const uint32_t *nnz, \
              const float *res, size_t res_stride, float *out, size_t out_stride, const cd_spmm_params *params);
#include "sparse/spmm-ukernels.inc"
#undef CD_SPMM_UKERNEL

// All registered micro-kernels, in list order; *count receives the length.
const cd_spmm_ukernel_info *cd_spmm_ukernels(size_t *count);

// The one switch that caps our own instruction sets: a cd_isa_cap
// (core/isa-cap.h), set by cd_sparse_isa_set_cap (the runtime's options:
// cd_runtime_options.max_isa, CONVD_MAX_ISA for the tools, --max-isa for
// the daemon, each parsed once where it is read) and taken on first use of
// the functions below. An ISA above the cap counts as unsupported
// everywhere, so one AVX-512 machine runs (and tests) every lower level as
// a machine without it would.

// Sets the cap (CD_ISA_CAP_NONE: none). Effective only before the first use
// of the functions below.
void cd_sparse_isa_set_cap(cd_isa_cap cap);

// True when this CPU can run code built for `isa` (CPUID) and `isa` is not
// above the cap.
int cd_sparse_isa_supported(cd_sparse_isa isa);

// The best instruction set this CPU runs under the cap. Logged once
// (core/log.h) on first use.
cd_sparse_isa cd_sparse_isa_best(void);

// 1 when the cap lowered cd_sparse_isa_best() below what the CPU runs.
int cd_sparse_isa_capped(void);

// "scalar", "avx2", "avx512f", "avx512vnni" ("auto" for CD_SPARSE_ISA_AUTO).
const char *cd_sparse_isa_name(cd_sparse_isa isa);

// The f32 micro-kernel for `isa` (VNNI: the AVX512F ones) and block height
// `nr`, or NULL when the list has none (or the CPU cannot run that ISA).
const cd_spmm_ukernel_info *cd_spmm_ukernel_find(cd_sparse_isa isa, int nr);

#endif // CD_SPARSE_SPMM_UKERNEL_H
