// Our own Winograd 3x3 f32 convolution, F(2x2,3x3), F(4x4,3x3) and
// F(6x6,3x3) (built, not offered: below), in the CPU's blocked activation
// layout (nChw16c / nChw8c). backends/cpu/dnnl-conv.c offers F2 and F4 beside
// oneDNN's direct conv and oneDNN's own Winograd (cd_wino_offer) and keeps
// whichever runs the layer faster; its kernel string then reads "dnnl:winograd:F4x4:avx512f" (oneDNN's
// Winograd: "dnnl:jit_wino_4x3:avx512_core"). The design is written at the
// top of backends/cpu/winograd.c.
//
// Error, relative L2 against the direct reference (tests/unit/
// test-winograd.c; ResNet's 3x3 layers 64@56 .. 512@7, plain conv, inputs
// over 1e-3..1e3 or N(0,1), 22 seeds, AVX-512 and AVX2 bodies alike): F2 <=
// 7e-7, F4 <= 3.8e-6, F6 <= 8.7e-6, all well within the project's f32 bound
// of 1e-4. But F6 is NOT offered (winograd-choose.c): an activation that
// clips or squashes (Clip, Sigmoid, HardSigmoid, ...) shrinks the output's
// norm and not the error, and on random small convs with inputs over
// 1e-3..1e3 F6 measured up to 1.1e-4 there (F4 2.6e-5, F2 2e-6); and its
// error per element is ~2x F4's (winograd-choose.c). Forced
// (CONVD_WINOGRAD=f6) it still runs
// only after none, ReLU or LeakyReLU (cd_wino_tile_offered).
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

// Creates the conv for output tile m (2, 4 or 6) on isa (SCALAR: the plain
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

// The hook of dnnl-conv.c: when d qualifies and mode allows (the CPU
// backend's switch, CONVD_WINOGRAD: 0 auto, 1 off, 2 on, 3 F2 only, 4 F4
// only, 5 F6 only, 6 oneDNN's Winograd only), times the candidates, our F2
// and F4 (F6 only when forced) and oneDNN's own Winograd (cd_dnnl_conv_create_wino, where this
// CPU has it), against op (oneDNN's direct conv of d, built for batch 1) at
// batch 1 on random input, interleaved, and keeps the fastest: ours in *out,
// oneDNN's Winograd (an op for max_batch, to run instead of op) in *alt,
// both NULL when oneDNN's direct conv is fastest. "on" keeps the fastest
// Winograd; a forced tile is built without timing (oneDNN's direct conv
// when this CPU cannot run it). The times are cached on disk
// (winograd-cache.c). 0 or CD_ENOMEM.
int cd_wino_offer(cd_dnnl_op *op, const cd_conv_desc *d, cd_layout src, cd_layout dst, int max_batch, const float *w,
                  const float *bias, int mode, cd_wino **out, cd_dnnl_op **alt);

// 1 when tile m's relative L2 error is within the bound after d's
// activation: F2 and F4 always, F6 only after none, ReLU or LeakyReLU (see
// the error above); cd_wino_offer builds no tile without it.
int cd_wino_tile_offered(int m, const cd_conv_desc *d);

// ---- the transforms, for the ISA bodies and the tests ----------------------

// The tiles built: F(2x2,3x3), F(4x4,3x3) and F(6x6,3x3) (t = 8).
#define CD_WINO_MAX_T 8
// Input tile t = m + 2. Matrices row-major: BT t x t, G t x 3 (in double:
// the weights are transformed at create), AT m x t.
typedef struct {
    int m, t;
    const float *bt;
    const double *g;
    const float *at;
} cd_wino_mats;
// The matrices of tile m (2, 4 or 6), or NULL.
const cd_wino_mats *cd_wino_mats_for(int m);

#endif // CD_BACKENDS_CPU_WINOGRAD_H
