#ifndef CD_SPARSE_SPMM_SHIFT_H
#define CD_SPARSE_SPMM_SHIFT_H

// The aligned-shift CSR micro-kernel for stride-1 and stride-2 k x k convolutions on
// padded planes (sparse/sparse-conv.c, MODE_JUNK with a row pitch that is a
// multiple of V floats, V the ISA's vector width: 16 AVX-512, 8 AVX2). Not in
// sparse/spmm-ukernels.inc: it takes a shift pack (sparse/sparse-pack.h,
// cd_sparse_pack_build_shift) whose per-block counts are per column tap, and
// reads past its tile (below), which the list's contract forbids.
//
// A call computes, for `nblk` consecutive one-channel blocks and `mc`
// pixels m, with S = `shifts` (1..3) column taps of column stride
// `stride` (1, or 2 with S >= 2: the taps of a stride-2 conv read its two
// column phase planes, so tap s sits s / 2 lanes on):
//
//   out[b][m] = clamp(bias[b] + sum_s sum_{j of tap s} val[b][j] *
//                     in[off[b][j] + s / stride + m] (+ res[b][m]),  min, max)
//
// `w` walks, per block, its bias then one value per entry; `off` one int32
// offset per entry (the tap's s term left out); `snnz` S entry counts per
// block (entries of tap 0 first, then tap 1, ...). Output/residual strides
// and res == out accumulation are as in sparse/spmm-ukernel.h.
//
// Every load is an aligned full vector: `in + off` must be aligned to a
// vector (4*V bytes) for every entry, and the kernel reads in[off + m] for
// m < roundV(mc) + V (taps s > 0 reach into the vector after a tile). Per
// tile it keeps accumulators per tap (one more vector for s > 0) and combines
// them once per block: out[v] = acc0[v] + alignr(acc1[v+1], acc1[v], 1) + ...
// (AVX2, with half the registers, folds each shifted tap into acc0 as soon
// as its entries are done). Never allocates, never fails, only asserts.

#include "sparse/spmm-ukernel.h"

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

// Runs M(1) .. M(8) by nv (1..8): the shift kernels of every ISA instantiate
// one tile of each compile-time width in vectors and pick it at run time.
#define CD_SHIFT_NV_SWITCH(nv, M) \
    switch (nv) {                 \
    case 1: M(1); break;          \
    case 2: M(2); break;          \
    case 3: M(3); break;          \
    case 4: M(4); break;          \
    case 5: M(5); break;          \
    case 6: M(6); break;          \
    case 7: M(7); break;          \
    default:                      \
        assert((nv) == 8);        \
        M(8);                     \
        break;                    \
    }

typedef void (*cd_f32_spmm_shift_fn)(size_t mc, size_t nblk, int shifts, int stride, const float *in, const float *w,
                                     const int32_t *off, const uint32_t *snnz, const float *res, size_t res_stride,
                                     float *out, size_t out_stride, const cd_spmm_params *params);

// V = 16, in + off 64-byte aligned.
void cd_f32_spmm_shift__avx512f(size_t mc, size_t nblk, int shifts, int stride, const float *in, const float *w,
                                const int32_t *off, const uint32_t *snnz, const float *res, size_t res_stride,
                                float *out, size_t out_stride, const cd_spmm_params *params);
// V = 8, in + off 32-byte aligned.
void cd_f32_spmm_shift__avx2(size_t mc, size_t nblk, int shifts, int stride, const float *in, const float *w,
                             const int32_t *off, const uint32_t *snnz, const float *res, size_t res_stride, float *out,
                             size_t out_stride, const cd_spmm_params *params);

#endif // CD_SPARSE_SPMM_SHIFT_H
