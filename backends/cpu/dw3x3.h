// Our own depthwise 3x3 f32 convolution (stride 1 or 2, one channel per
// group) in the blocked layouts nChw16c / nChw8c, with bias, residual,
// activation and a QDQ model's FakeQuant fused. oneDNN 2.6's depthwise
// kernel runs MobileNetV2's layers at 1.5-2.5x the core's FMA floor; this
// one keeps a tile of a row's outputs and the nine taps in registers and
// reads each input vector once per kernel row: 1.3x oneDNN's speed at
// AVX-512, parity at AVX2 (bench/results/depthwise.md).
// backends/cpu/dnnl-conv.c offers it per op next to oneDNN's primitive and
// keeps the faster one (dw3x3-choose.c).
#ifndef CD_BACKENDS_CPU_DW3X3_H
#define CD_BACKENDS_CPU_DW3X3_H

#include "kernels/op-desc.h"

#include <stddef.h>

// What one kernel call needs; the packed arrays are 64-byte aligned.
typedef struct {
    int c, h, w, oh, ow;  // channels (unpadded), input and output map
    int stride;           // 1 or 2, both axes
    int pad_t, pad_l;     // leading pads (0..2); trailing ones follow from oh, ow
    int has_residual;     // 1: dst = act(conv + bias + residual), residual in dst's layout
    cd_activation act;    // one of cd_cpu_dw3x3_act_ok's kinds
    int block;            // channels per block of the layout: the kernel's vector width
    const float *weights; // [ceil(c / block)][9][block], tap r*3+s, zero past c
    const float *bias;    // [ceil(c / block)][block], zero past c (and without a bias)
    float fq[4];          // the output's FakeQuant after act (scale, zero point, qmin, qmax), computed
                          // as the FakeQuant pass does; fq[0] 0: none
} cd_dw3x3_shape;

// One ISA's kernel: dst = act(dw3x3(src) + bias (+ res)) for `batch` images
// in the layout of sh->block, padded channels of dst written as zero. res may
// equal dst. Runs on the calling OpenMP team; never fails.
typedef void (*cd_dw3x3_fn)(const cd_dw3x3_shape *sh, int batch, const float *src, const float *res, float *dst);
void cd_cpu_dw3x3__avx512f(const cd_dw3x3_shape *sh, int batch, const float *src, const float *res, float *dst);
void cd_cpu_dw3x3__avx2(const cd_dw3x3_shape *sh, int batch, const float *src, const float *res, float *dst);

// 1 when the SIMD epilogue computes act (the others stay with oneDNN).
int cd_cpu_dw3x3_act_ok(cd_activation act);

// A packed depthwise op (dw3x3.c).
typedef struct cd_cpu_dw3x3 cd_cpu_dw3x3;

// The kernel for conv d between layouts src and dst (a block layout equal on
// both sides) at the best ISA under the cap whose vector is that block, or
// NULL when d is not a depthwise 3x3 this kernel covers.
cd_dw3x3_fn cd_cpu_dw3x3_kernel(const cd_conv_desc *d, int src_layout, int dst_layout, const char **isa_name);

// Packs OIHW depthwise weights w (c x 1 x 3 x 3) and bias (c floats or NULL)
// for conv d in layouts src/dst. 0, CD_EUNSUPPORTED when cd_cpu_dw3x3_kernel
// has none, or CD_ENOMEM.
int cd_cpu_dw3x3_create(const cd_conv_desc *d, int src_layout, int dst_layout, const float *w, const float *bias,
                        cd_cpu_dw3x3 **out);
// The output's FakeQuant (scale, zero point, qmin, qmax) in the epilogue,
// after the activation: the bytes of cd_cpu_fakequant over the output (the
// same division, rounding half to even, clamp and multiply), so a QDQ
// model's QuantizeLinear + DequantizeLinear after the conv needs no pass of
// its own. 0, or CD_EPARAMS for a scale not > 0 or qmin > qmax.
int cd_cpu_dw3x3_set_fq(cd_cpu_dw3x3 *k, const float fq[4]);
// Runs it on batch images (res: the residual when d has one, may be dst).
void cd_cpu_dw3x3_run(const cd_cpu_dw3x3 *k, int batch, const float *src, const float *res, float *dst);
// "dw3x3:avx512f" or "dw3x3:avx2".
const char *cd_cpu_dw3x3_name(const cd_cpu_dw3x3 *k);
// Bytes of packed weights and bias.
size_t cd_cpu_dw3x3_bytes(const cd_cpu_dw3x3 *k);
void cd_cpu_dw3x3_free(cd_cpu_dw3x3 *k);

#endif // CD_BACKENDS_CPU_DW3X3_H
