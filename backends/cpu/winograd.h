// Our own Winograd 3x3 f32 convolution, F(2x2,3x3) and F(4x4,3x3), in the
// CPU's blocked activation layout (nChw16c / nChw8c). backends/cpu/dnnl-conv.c
// offers it beside oneDNN's direct conv (cd_wino_offer) and keeps whichever
// runs the layer faster; its kernel string then reads
// "dnnl:winograd:F4x4:avx512f". The design is written at the top of
// backends/cpu/winograd.c.
#ifndef CD_BACKENDS_CPU_WINOGRAD_H
#define CD_BACKENDS_CPU_WINOGRAD_H

#include "backends/cpu/dnnl.h"
#include "kernels/op-desc.h"
#include "sparse/spmm-ukernel.h"

#include <stddef.h>

typedef struct cd_wino cd_wino;

// 1 when d is a conv Winograd can run: 3x3, stride 1, dilation 1, one group,
// any padding, src and dst in the same blocked layout.
int cd_wino_qualifies(const cd_conv_desc *d, cd_layout src, cd_layout dst);

// Creates the conv for output tile m (2 or 4) on isa (SCALAR: the plain
// reference loops; AVX2; AVX512F, which needs a 16-channel block): the
// weights (OIHW, d->k x d->c x 3 x 3) and bias (K floats or NULL) are
// transformed and copied now. 0, CD_EPARAMS (not qualified, bad m),
// CD_EUNSUPPORTED (this CPU or the cap lacks isa) or CD_ENOMEM.
int cd_wino_create(const cd_conv_desc *d, cd_layout l, int m, cd_sparse_isa isa, const float *w, const float *bias,
                   cd_wino **out);
void cd_wino_free(cd_wino *wg);

// Scratch a run of `batch` items needs (64-byte aligned, the caller's).
size_t cd_wino_scratch_bytes(const cd_wino *wg, int batch);
// dst = act(conv(src) + bias (+ res)), all in the blocked layout, batch items;
// res may be dst itself. Padding channels of dst are written as 0. Runs on
// the calling OpenMP team (it opens parallel regions). Never fails.
void cd_wino_run(const cd_wino *wg, int batch, const float *src, const float *res, float *dst, void *scratch);

// Bytes of the transformed weights and bias.
size_t cd_wino_weight_bytes(const cd_wino *wg);
// "winograd:F4x4:avx512f".
const char *cd_wino_name(const cd_wino *wg);

// The hook of dnnl-conv.c: when d qualifies and mode allows (0 auto, 1 off,
// 2 on, 3 F2 only, 4 F4 only: the CPU backend's switch, CONVD_WINOGRAD), times each tile against op (oneDNN's
// conv of d, built for batch 1) at batch 1 on random input and sets *out to
// the fastest Winograd when it beats oneDNN (always when forced on), else
// NULL. 0 or CD_ENOMEM.
int cd_wino_offer(cd_dnnl_op *op, const cd_conv_desc *d, cd_layout src, cd_layout dst, const float *w,
                  const float *bias, int mode, cd_wino **out);

// ---- the transforms, for the ISA bodies and the tests ----------------------

// The tile sizes offered: F(2x2,3x3) and F(4x4,3x3). F(6x6,3x3) is not built
// (not measured here: its published f32 error, ~12 bits, is at the 1e-4 bound).
#define CD_WINO_MAX_T 6
// Input tile t = m + 2. Matrices row-major: BT t x t, G t x 3, AT m x t.
typedef struct {
    int m, t;
    const float *bt, *g, *at;
} cd_wino_mats;
// The matrices of tile m (2 or 4), or NULL.
const cd_wino_mats *cd_wino_mats_for(int m);

#endif // CD_BACKENDS_CPU_WINOGRAD_H
