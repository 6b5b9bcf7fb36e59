#ifndef CD_KERNELS_OP_DESC_H
#define CD_KERNELS_OP_DESC_H

// Plain descriptions of the operators, shared by the planner (runtime/), the
// backends (backends/), the reference kernels (kernels/cpu/) and the sparse
// kernels (sparse/). Only shapes and parameters, and the few definitions
// every kernel must agree on: what an activation computes (cd_act_apply,
// inline for host and device) and the output size of a conv (op-desc.c).

#include "core/limits.h"

#include <math.h>
#include <stdint.h>

// Activation layouts. NCHW is the interchange layout (model inputs and
// outputs, the sparse kernels). The blocked layouts are oneDNN's nChw16c and
// nChw8c: channels padded to a multiple of the block, the channels of a block
// innermost, [N][ceil(C/B)][H][W][B]. Which one a model uses is the backend's
// choice for the CPU it runs on (cd_backend_blocked_layout: 16 where oneDNN's
// fast kernels are AVX-512, 8 on AVX2); the planner keeps it across
// consecutive dense layers to avoid reorders. Never assume a block size:
// ask cd_layout_block().
// NHWC ([N][H][W][C], no padding) is the layout of 1-byte integer
// activations between oneDNN int8 layers (oneDNN 2.6's int8 jit kernels
// exist only for nhwc): the planner gives it only to a tensor stored as
// integers whose writer and readers all take it (runtime/plan-int8.c);
// no float32 op is ever planned in it.
typedef enum {
    CD_LAYOUT_NCHW = 0,
    CD_LAYOUT_NCHW16C = 1,
    CD_LAYOUT_NCHW8C = 2,
    CD_LAYOUT_NHWC = 3,
    CD_LAYOUT_COUNT
} cd_layout;

// Channels per block of layout l: 1 for NCHW and NHWC (unblocked), 16, 8;
// 0 for a bad value.
static inline int cd_layout_block(cd_layout l) {
    switch (l) {
    case CD_LAYOUT_NCHW: return 1;
    case CD_LAYOUT_NHWC: return 1;
    case CD_LAYOUT_NCHW16C: return 16;
    case CD_LAYOUT_NCHW8C: return 8;
    default: return 0;
    }
}

// "NCHW", "NCHW16C", "NCHW8C", "NHWC" ("?" for a bad value).
static inline const char *cd_layout_name(cd_layout l) {
    switch (l) {
    case CD_LAYOUT_NCHW: return "NCHW";
    case CD_LAYOUT_NCHW16C: return "NCHW16C";
    case CD_LAYOUT_NCHW8C: return "NCHW8C";
    case CD_LAYOUT_NHWC: return "NHWC";
    default: return "?";
    }
}

static inline int cd_layout_valid(int l) { return l >= CD_LAYOUT_NCHW && l < CD_LAYOUT_COUNT; }

// c rounded up to whole blocks of layout l (c itself for NCHW).
static inline int64_t cd_layout_padded_c(cd_layout l, int64_t c) {
    int b = cd_layout_block(l);
    return b > 1 ? (c + b - 1) / b * b : c;
}

// Activations fused into the producing kernel.
typedef enum {
    CD_ACT_NONE = 0,
    CD_ACT_RELU,        // max(x, 0)
    CD_ACT_CLIP,        // min(max(x, alpha), beta)   (ReLU6: alpha 0, beta 6)
    CD_ACT_SIGMOID,     // 1 / (1 + exp(-x))
    CD_ACT_HARDSIGMOID, // max(0, min(1, alpha * x + beta))
    CD_ACT_HARDSWISH,   // x * max(0, min(1, x / 6 + 1/2))
    CD_ACT_LEAKYRELU,   // x >= 0 ? x : alpha * x
    // Element-wise ops that run as a stand-alone activation (never fused
    // into a conv by the lowering):
    CD_ACT_TANH,      // tanh(x)
    CD_ACT_SOFTPLUS,  // log(1 + exp(x))
    CD_ACT_MISH,      // x * tanh(softplus(x))
    CD_ACT_NEG,       // -x
    CD_ACT_ABS,       // |x|
    CD_ACT_SQRT,      // sqrt(x)
    CD_ACT_ERF,       // erf(x)
    CD_ACT_GELU,      // x / 2 * (1 + erf(x / sqrt(2)))   (Gelu, and the Erf pattern fused)
    CD_ACT_GELU_TANH, // x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))   (Gelu approximate=tanh)
    CD_ACT_POW,       // pow(x, alpha)   (Pow with a constant scalar exponent)
    CD_ACT_SILU,      // x * sigmoid(x)   (the Sigmoid + Mul pattern fused: EfficientNet's SiLU)
} cd_act;

typedef struct {
    cd_act kind;
    float alpha; // CLIP min, HARDSIGMOID alpha, LEAKYRELU slope
    float beta;  // CLIP max, HARDSIGMOID beta
} cd_activation;

// Applies act to x: the one definition of the formulas, for the reference
// kernels, the sparse kernels and the HIP kernels (cd_hip_act), host and device.
#if defined(__HIPCC__) || defined(__HIP__)
#define CD_ACT_APPLY_QUALIFIERS static __host__ __device__ __forceinline__
#else
#define CD_ACT_APPLY_QUALIFIERS static inline
#endif
CD_ACT_APPLY_QUALIFIERS float cd_act_apply(cd_activation act, float x) {
    switch (act.kind) {
    case CD_ACT_NONE: return x;
    case CD_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case CD_ACT_CLIP: return fminf(fmaxf(x, act.alpha), act.beta);
    case CD_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case CD_ACT_HARDSIGMOID: return fmaxf(0.0f, fminf(1.0f, act.alpha * x + act.beta));
    case CD_ACT_HARDSWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case CD_ACT_LEAKYRELU: return x >= 0.0f ? x : act.alpha * x;
    case CD_ACT_TANH: return tanhf(x);
    // log1p(exp(x)) overflows to inf past ~88 where the answer is x itself.
    case CD_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
    case CD_ACT_MISH: return x * tanhf(x > 20.0f ? x : log1pf(expf(x)));
    case CD_ACT_NEG: return -x;
    case CD_ACT_ABS: return fabsf(x);
    case CD_ACT_SQRT: return sqrtf(x);
    case CD_ACT_ERF: return erff(x);
    case CD_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case CD_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case CD_ACT_POW: return act.alpha == 2.0f ? x * x : powf(x, act.alpha);
    case CD_ACT_SILU: return x / (1.0f + expf(-x));
    }
    return x;
}

// Fake quantization (a QuantizeLinear -> DequantizeLinear pair on float
// activations): y = (clamp(round_half_even(x / scale) + zero_point, qmin,
// qmax) - zero_point) * scale, with one scale and zero point for the tensor
// (channels 1) or one per index of dim axis. The range is the quantized
// type's (u8: 0..255, s8: -128..127). zero_point is an integer in
// [qmin, qmax], so a padding channel's 0 stays 0.
// dynamic 1 (DynamicQuantizeLinear, onnxruntime's quantize_dynamic): per
// tensor, the scale and zero point computed from each batch item's own
// values (cd_dynquant_params), not given.
typedef struct {
    int channels; // 1: per tensor; else the size of dim axis
    int axis;     // per channel: the dim (of the per-item NCHW shape, dim 0 the batch)
    float qmin, qmax;
    int dynamic;
} cd_fakequant_desc;

// The scale and zero point DynamicQuantizeLinear takes for values in
// [mn, mx]: the range widened to hold 0, scale (mx - mn) / (qmax - qmin)
// (1 for an all-zero range, as onnxruntime), zero point qmin - mn / scale
// clamped and rounded half to even.
CD_ACT_APPLY_QUALIFIERS void cd_dynquant_params(float mn, float mx, float qmin, float qmax, float *scale, float *zp) {
    mn = fminf(mn, 0.0f);
    mx = fmaxf(mx, 0.0f);
    const float s = mx == mn ? 1.0f : (mx - mn) / (qmax - qmin);
    *scale = s;
    *zp = rintf(fminf(fmaxf(qmin - mn / s, qmin), qmax));
}

// The element operation of the fake quantization: the one definition for
// the reference kernel and the HIP kernel (host and device).
CD_ACT_APPLY_QUALIFIERS float cd_fakequant_apply(float x, float scale, float zero_point, float qmin, float qmax) {
    float q = rintf(x / scale) + zero_point; // rintf: round half to even in the default rounding mode
    q = fminf(fmaxf(q, qmin), qmax);
    return (q - zero_point) * scale;
}

// An int8 convolution (quantized models): u8 or s8 activations times s8
// symmetric weights (zero point 0, one scale per output channel), s32
// accumulation, then the epilogue below, the one definition every int8
// kernel (reference, sparse, oneDNN wrapper, HIP) computes:
//   acc = sum over the taps of (x_q - in_zp) * w_q   (padding is x_q = in_zp: 0.0)
//   y0  = fmaf(acc, in_scale * w_scale[k], bias[k])  (+ the conv's border map at [k, pixel], if any)
//   mid_scale > 0: y0 = its grid value (clamp(rintf(y0 / mid_scale) + mid_zp) - mid_zp) * mid_scale
//   y   = act(y0 (+ residual))        residual: float, or (r - res_zp) * res_scale when res_int
//   out_scale > 0: q = clamp(rintf(y / out_scale) + out_zp, qmin, qmax) of the output's type
// (mid_scale: a QDQ residual block, conv -> QuantizeLinear -> DequantizeLinear
// -> Add -> Relu -> QuantizeLinear, done in one layer.) A kernel that does
// not implement mid_scale or res_int declines a conv that has them.
// Storage of the activations: src_int/dst_int 0 = float32 holding grid
// values (x = (x_q - zp) * scale exactly, what a FakeQuant writes; an int8
// kernel quantizes them back exactly), 1 = the integers themselves (u8, or
// s8 when *_signed). dst_int needs out_scale > 0.
typedef struct {
    float in_scale;
    int in_zp, in_signed, src_int;
    const float *w_scale; // K values (host memory; during init only where a desc holds it)
    float out_scale;      // 0: the output is y in float32, not quantized
    int out_zp, out_signed, dst_int;
    float mid_scale; // 0: none; else the grid y0 is rounded to before the residual
    int mid_zp, mid_signed;
    float res_scale; // res_int: the residual's integers' scale and zero point
    int res_zp, res_signed, res_int;
} cd_conv_quant;

// The range of a quantized type: u8 0..255, s8 -128..127.
CD_ACT_APPLY_QUALIFIERS float cd_quant_qmin(int is_signed) { return is_signed ? -128.0f : 0.0f; }
CD_ACT_APPLY_QUALIFIERS float cd_quant_qmax(int is_signed) { return is_signed ? 127.0f : 255.0f; }

// y of the epilogue for one accumulator: mult = in_scale * w_scale[k]
// (computed once per channel, in float, by every kernel the same way).
CD_ACT_APPLY_QUALIFIERS float cd_conv_quant_y(int32_t acc, float mult, float bias, float residual, int has_residual,
                                              cd_activation act) {
    float y = fmaf((float)acc, mult, bias);
    if (has_residual) y += residual;
    return cd_act_apply(act, y);
}

// y0 rounded to the mid grid (mid_scale > 0), else y0.
CD_ACT_APPLY_QUALIFIERS float cd_conv_quant_mid(const cd_conv_quant *q, float y0) {
    if (!(q->mid_scale > 0.0f)) return y0;
    float v = rintf(y0 / q->mid_scale) + (float)q->mid_zp;
    v = fminf(fmaxf(v, cd_quant_qmin(q->mid_signed)), cd_quant_qmax(q->mid_signed));
    return (v - (float)q->mid_zp) * q->mid_scale;
}

// The output quantization of y: the integer q (dst_int) or its grid value
// (q - out_zp) * out_scale; y itself when out_scale is 0.
CD_ACT_APPLY_QUALIFIERS float cd_conv_quant_out(const cd_conv_quant *q, float y) {
    if (!(q->out_scale > 0.0f)) return y;
    float v = rintf(y / q->out_scale) + (float)q->out_zp;
    v = fminf(fmaxf(v, cd_quant_qmin(q->out_signed)), cd_quant_qmax(q->out_signed));
    return q->dst_int ? v : (v - (float)q->out_zp) * q->out_scale;
}

// The integer of a grid value x of the input (src_int 0): exact for values
// a FakeQuant with the same scale and zero point wrote.
CD_ACT_APPLY_QUALIFIERS int32_t cd_conv_quant_in(const cd_conv_quant *q, float x) {
    float v = rintf(x / q->in_scale) + (float)q->in_zp;
    v = fminf(fmaxf(v, cd_quant_qmin(q->in_signed)), cd_quant_qmax(q->in_signed));
    return (int32_t)v;
}

// Element-wise binary operators (NumPy broadcasting).
typedef enum {
    CD_BINARY_ADD = 0,
    CD_BINARY_MUL,
    CD_BINARY_SUB,
    CD_BINARY_DIV,
    CD_BINARY_MIN, // Min, variadic in ONNX: a chain of these
    CD_BINARY_MAX,
} cd_binary_kind;

// An element-wise binary op and the activation fused after it.
typedef struct {
    cd_binary_kind kind;
    cd_activation act;
} cd_binary_desc;

// A softmax, per batch item: outer blocks of len x inner elements, softmax
// over len.
typedef struct {
    int64_t outer, len, inner;
} cd_softmax_desc;

// A fully connected layer: per batch item, rows x k inputs times the n x k
// weights, then the fused activation.
typedef struct {
    int rows, n, k; // rows per batch item; weights n x k
    cd_activation act;
} cd_gemm_desc;

// A 2-D convolution, weights OIHW (O = K, I = C / groups).
typedef struct {
    int n, c, h, w; // input: batch, channels, height, width
    int k, r, s;    // output channels, kernel height, kernel width
    int stride_h, stride_w;
    int pad_t, pad_l, pad_b, pad_r;
    int dil_h, dil_w;
    int groups;
    int oh, ow;        // output height/width (derived, filled by the planner)
    cd_activation act; // applied after bias (and after the residual add)
    int has_residual;  // 1: dst = act(conv + bias + residual)
    // NULL, or K x OH x OW floats (NCHW, one image; host memory, read during
    // init only: a kernel keeps its own copy) added to every image after
    // the bias, before the residual and the activation: a compacted conv's
    // border map (runtime/compact.c). A kernel that does not add it declines.
    const float *border;
} cd_conv_desc;

// Output size of a convolution along one axis (floor division, ONNX rule).
int cd_conv_out_dim(int in, int kernel, int stride, int pad_begin, int pad_end, int dilation);
// Fills d->oh and d->ow from the other fields.
void cd_conv_out_dims(cd_conv_desc *d);
// The common conv: batch 1, c x h x w in, k out, an r x r kernel with one
// stride and the same padding on every side, no dilation, one group, no
// activation; output size filled. Callers change any other field after it.
cd_conv_desc cd_conv_square(int c, int h, int w, int k, int r, int stride, int pad);

typedef enum {
    CD_POOL_MAX = 0,
    CD_POOL_AVG = 1, // count_include_pad decides the divisor
} cd_pool_kind;

typedef struct {
    cd_pool_kind kind;
    int n, c, h, w;
    int kh, kw;
    int stride_h, stride_w;
    int pad_t, pad_l, pad_b, pad_r;
    int dil_h, dil_w;
    int ceil_mode;
    int count_include_pad;
    int oh, ow;
} cd_pool_desc;

// Pad (ONNX Pad) of a tensor of any rank: dst dim i has begin[i] more
// elements in front than src (negative: cropped) and as many more at the end
// as the shapes say. Elements outside src are value (CONSTANT), the nearest
// edge element (EDGE) or its mirror image without the edge (REFLECT).
typedef enum { CD_PAD_CONSTANT = 0, CD_PAD_REFLECT, CD_PAD_EDGE } cd_pad_mode;

typedef struct {
    cd_pad_mode mode;
    float value;
    int64_t begin[CD_MAX_RANK]; // per dim of the tensor (dim 0, the batch, is 0)
} cd_pad_desc;

// Slice (ONNX Slice, one output of Split): dst[i...] = src[start[d] + i_d *
// step[d] ...] for the dst shape; start is already clamped and step != 0.
typedef struct {
    int64_t start[CD_MAX_RANK];
    int64_t step[CD_MAX_RANK];
} cd_slice_desc;

// A reduction (ReduceSum, ReduceMean, ReduceMax) over the dims set in mask
// (bit i: dim i of src). dst holds the kept dims in order (keepdims only
// changes the shape, not the data).
typedef enum { CD_REDUCE_SUM = 0, CD_REDUCE_MEAN, CD_REDUCE_MAX } cd_reduce_kind;

typedef struct {
    cd_reduce_kind kind;
    unsigned mask;
} cd_reduce_desc;

// Layer normalization (LayerNormalization, and the ReduceMean/Sub/Pow/Sqrt/Div
// pattern of older exports) over the last len elements of each of outer rows
// per batch item: y = (x - mean) / sqrt(var + eps) * gamma + beta, var the
// biased variance; gamma and beta len values (the op's w and bias).
typedef struct {
    int64_t outer, len;
    float eps;
} cd_layernorm_desc;

// Resize (ONNX Resize, Upsample) of H and W of an NCHW tensor (N and C
// unchanged). For each output coordinate x the source coordinate is the
// ONNX formula of coord with scale (the scale given, or out/in when sizes
// were given), computed in float as onnxruntime does; nearest rounds it by
// nearest and clamps to the input, linear clamps it to [0, in - 1] and mixes
// the two neighbours (bilinear over H and W).
typedef enum { CD_RESIZE_NEAREST = 0, CD_RESIZE_LINEAR } cd_resize_mode;
typedef enum {
    CD_COORD_HALF_PIXEL = 0,            // (x + 0.5) / scale - 0.5
    CD_COORD_PYTORCH_HALF_PIXEL,        // out > 1 ? (x + 0.5) / scale - 0.5 : 0
    CD_COORD_ALIGN_CORNERS,             // out > 1 ? x * (in - 1) / (out - 1) : 0
    CD_COORD_ASYMMETRIC,                // x / scale
    CD_COORD_TF_HALF_PIXEL_FOR_NEAREST, // (x + 0.5) / scale
} cd_resize_coord;
typedef enum {
    CD_NEAREST_ROUND_PREFER_FLOOR = 0, // round, halves down
    CD_NEAREST_ROUND_PREFER_CEIL,      // round, halves up
    CD_NEAREST_FLOOR,
    CD_NEAREST_CEIL,
} cd_nearest_mode;

typedef struct {
    cd_resize_mode mode;
    cd_resize_coord coord;
    cd_nearest_mode nearest;
    int c, h, w;            // input per item
    int oh, ow;             // output
    float scale_h, scale_w; // the scales of the formula
} cd_resize_desc;

// ConvTranspose (2-D, NCHW): src c x h x w, weights [c][k / groups][r][s]
// (ONNX's layout), dst k x oh x ow. Input pixel (i, j) adds w * x into output
// (i * stride_h + kr * dil_h - pad_t, j * stride_w + ks * dil_w - pad_l);
// positions outside [0, oh) x [0, ow) are dropped (pads at the end and
// output_padding only set oh and ow). Then bias and act.
typedef struct {
    int c, h, w;
    int k, r, s;
    int groups;
    int stride_h, stride_w, dil_h, dil_w;
    int pad_t, pad_l;
    int oh, ow;
    cd_activation act;
} cd_deconv_desc;

// The source coordinate of output coordinate x along a dim of in -> out
// (cd_resize_desc), in float as onnxruntime computes it (a scale of exactly
// 1 maps x to itself, as there; tf_half_pixel_for_nearest, which onnxruntime
// no longer has, keeps the ONNX formula's x + 0.5).
CD_ACT_APPLY_QUALIFIERS float cd_resize_src_coord(int coord, int x, float scale, int out, int in) {
    const float xf = (float)x;
    if (scale == 1.0f && coord != CD_COORD_TF_HALF_PIXEL_FOR_NEAREST) return xf;
    switch (coord) {
    case CD_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? (xf + 0.5f) / scale - 0.5f : 0.0f;
    case CD_COORD_ALIGN_CORNERS: return out == 1 ? 0.0f : xf * (float)(in - 1) / (float)(out - 1);
    case CD_COORD_ASYMMETRIC: return xf / scale;
    case CD_COORD_TF_HALF_PIXEL_FOR_NEAREST: return (xf + 0.5f) / scale;
    default: return (xf + 0.5f) / scale - 0.5f; // HALF_PIXEL
    }
}

// The input index nearest mode picks for source coordinate xo, clamped to [0, in).
CD_ACT_APPLY_QUALIFIERS int cd_resize_nearest_index(int nearest, float xo, int in) {
    float r;
    switch (nearest) {
    case CD_NEAREST_ROUND_PREFER_CEIL: r = roundf(xo); break;
    case CD_NEAREST_FLOOR: r = floorf(xo); break;
    case CD_NEAREST_CEIL: r = ceilf(xo); break;
    default: r = xo == (float)(int64_t)xo + 0.5f ? floorf(xo) : roundf(xo); break; // ROUND_PREFER_FLOOR
    }
    if (!(r > 0.0f)) return 0; // (NaN too)
    return r >= (float)(in - 1) ? in - 1 : (int)r;
}

// The two input indices and the weight of the second for linear
// interpolation at source coordinate xo (clamped to [0, in - 1] first):
// value = (1 - *l) * x[*i0] + *l * x[*i1].
CD_ACT_APPLY_QUALIFIERS void cd_resize_linear_index(float xo, int in, int *i0, int *i1, float *l) {
    const float hi = (float)(in - 1);
    xo = xo > hi ? hi : xo;
    xo = xo > 0.0f ? xo : 0.0f;
    int a = (int)xo;
    a = a > in - 1 ? in - 1 : a;
    int b = a + 1 > in - 1 ? in - 1 : a + 1;
    *i0 = a;
    *i1 = b;
    *l = a == b ? 0.5f : xo - (float)a; // onnxruntime's halves where both are the edge
}
// Gather (ONNX Gather on an activation) along dim axis of src: src seen as
// [outer][len][inner] (len = src dim axis), dst as [outer][nidx][inner] with
// dst[o][j][i] = src[o][idx[j]][i]. Every idx is in [0, len) (the lowering
// turns negative indices around). idx is host memory, read only while a
// backend prepares the op (the backend keeps its own copy).
typedef struct {
    int axis;
    int64_t nidx;
    const int64_t *idx;
} cd_gather_desc;

// Tile (ONNX Tile, and Expand of an activation) has no parameters beyond its
// shapes: dst[i...] = src[i_d mod src_shape[d] ...], each dst dim a multiple
// of the src dim (Expand: a dim of 1 repeated).

#endif // CD_KERNELS_OP_DESC_H
