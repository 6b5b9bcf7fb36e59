// The backend conformance table (ggml's test-backend-ops rule): every row is
// one operator case on fresh random shapes, run on every backend against the
// reference kernels (kernels/cpu/ref.h). An operator family without a row is
// unfinished (backend_ops_every_family_has_a_row).
//
// Backends: "cpu", and the HIP backend: "hip-emu" (the HIP kernels on the CPU
// emulator), or a real GPU with CD_TEST_HIP_DEVICE=hip:N (bench/gpu-check).
// A row is written in NCHW; on a backend that supports it the runner moves
// its 4-D activations to a blocked layout (NCHW16C or NCHW8C, two times in
// three), so the CPU backend's blocked kernels are checked too. A row that a
// backend must run says so (required); an optional one is skipped where
// supports_op says no (the HIP reorder kernel knows NCHW16C only).

#include "backends/devices.h"
#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "runtime/options.h"
#include "tests/unit/backend-run.h"
#include "tests/unit/check.h"
#include "tests/unit/test-kernels-util.h"

#include <stdlib.h>

// Relative L2 of got against want within tol (Winograd's bound: its
// per-element error follows the transforms, its whole-output error is ~1e-6).
static void check_rel_l2(const float *got, const float *want, size_t n, double tol, const char *kernel) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    const double e = sqrt(num / (den > 0 ? den : 1));
    if (!(e <= tol)) CD_CHECK_FAIL_("%s: relative L2 %.3g > %.3g", kernel, e, tol);
}

// ---- one case ---------------------------------------------------------------------

// What a row's generator fills: the description, the NCHW host inputs, the
// reference output, and what to check beyond the values.
typedef struct {
    cd_bop_desc d; // layouts NCHW; w/bias point at w/bias below
    int batch;
    float *srcs[64]; // NCHW host data of d.src[i] (batch items, or the constant)
    float *want;     // the reference result, NCHW, nwant floats
    size_t nwant;
    float *w, *bias;        // owned weights (may be NULL)
    float *map;             // an owned border map (cd_conv_desc.border; may be NULL)
    double tol;             // CHECK_CLOSE_F32 tolerance
    int blockable;          // the runner may pick a blocked layout
    const char *hip_kernel; // substring of the HIP backend's kernel name (NULL: any)
} op_case;

typedef void (*case_fn)(op_case *c, int variant);

static void case_init(op_case *c, cd_bop op, int batch, int nsrc) {
    memset(c, 0, sizeof *c);
    c->d.op = op;
    c->d.max_batch = batch;
    c->d.nsrc = nsrc;
    c->batch = batch;
}

static void case_free(op_case *c) {
    for (int i = 0; i < c->d.nsrc; i++) free(c->srcs[i]);
    free(c->want);
    free(c->w);
    free(c->bias);
    free(c->map);
}

// ---- the rows' generators -----------------------------------------------------------

// A conv description and its reference. The weights, bias and inputs are random.
static void conv_case(op_case *t, const cd_conv_desc *cv, int batch, const char *hip_kernel) {
    cd_conv_desc c = *cv;
    int64_t is[4] = {1, c.c, c.h, c.w}, os[4] = {1, c.k, c.oh, c.ow};
    case_init(t, CD_BOP_CONV2D, batch, c.has_residual ? 2 : 1);
    t->d.src[0] = cd_test_tdesc(4, is);
    t->d.src[1] = cd_test_tdesc(4, os);
    t->d.dst = cd_test_tdesc(4, os);
    t->d.u.conv = c;
    size_t nw = (size_t)c.k * (c.c / c.groups) * c.r * c.s;
    t->w = tk_rbuf(nw);
    t->bias = cd_test_randi(0, 3) ? tk_rbuf((size_t)c.k) : NULL;
    t->d.w = t->w;
    t->d.bias = t->bias;
    t->srcs[0] = tk_rbuf((size_t)batch * c.c * c.h * c.w);
    if (c.has_residual) t->srcs[1] = tk_rbuf((size_t)batch * c.k * c.oh * c.ow);
    t->nwant = (size_t)batch * c.k * c.oh * c.ow;
    t->want = tk_alloc(t->nwant);
    cd_conv_desc r = c;
    r.n = batch;
    cd_ref_conv2d(&r, t->srcs[0], t->w, t->bias, c.has_residual ? t->srcs[1] : NULL, t->want);
    t->tol = 1e-4;
    t->blockable = 1;
    t->hip_kernel = hip_kernel;
}

// variant: 0 dense, 1 depthwise, 2 grouped, 3 pointwise.
static void make_conv(op_case *t, int kind) {
    static const int ks[] = {1, 3, 5, 7};
    cd_conv_desc c = tk_rand_conv(kind, ks, 4);
    conv_case(t, &c, cd_test_randi(1, 3), kind == 1 ? "dwconv" : NULL);
}

// A ResNet-sized 3x3 layer: 64 -> 72 channels (not a multiple of the HIP
// SGEMM tile nor of a channel block) on 19x19.
static void make_conv_resnet(op_case *t, int variant) {
    cd_conv_desc c = cd_conv_square(64, 19, 19, 72, 3, 1, 1);
    c.act.kind = CD_ACT_RELU;
    c.has_residual = 1;
    conv_case(t, &c, 2, NULL);
}

// A conv that adds a border map (a compacted conv's, runtime/compact.c)
// before its activation, the same for every image. The reference: the
// conv without its activation, the map added, then the activation.
static void make_conv_border(op_case *t, int variant) {
    static const int ks[] = {1, 3, 5};
    cd_conv_desc c = tk_rand_conv(0, ks, 3);
    c.has_residual = 0;
    c.act = tk_act(variant ? CD_ACT_RELU : CD_ACT_CLIP);
    cd_conv_desc plain = c;
    plain.act = (cd_activation){CD_ACT_NONE, 0, 0};
    conv_case(t, &plain, cd_test_randi(1, 3), NULL);
    const size_t img = (size_t)c.k * c.oh * c.ow;
    t->map = tk_rbuf(img);
    for (size_t i = 0; i < t->nwant; i++) t->want[i] = cd_act_apply(c.act, t->want[i] + t->map[i % img]);
    c.border = t->map;
    t->d.u.conv = c;
}

static void make_gemm(op_case *t, int variant) {
    int rows = cd_test_randi(1, 3), n = cd_test_randi(1, 50), k = cd_test_randi(1, 90), batch = cd_test_randi(1, 5);
    case_init(t, CD_BOP_GEMM, batch, 1);
    int64_t is[3] = {1, rows, k}, os[3] = {1, rows, n};
    t->d.src[0] = cd_test_tdesc(3, is);
    t->d.dst = cd_test_tdesc(3, os);
    t->d.u.gemm.rows = rows;
    t->d.u.gemm.n = n;
    t->d.u.gemm.k = k;
    t->d.u.gemm.act = tk_rand_act_fixed();
    t->w = tk_rbuf((size_t)n * k);
    t->bias = cd_test_randi(0, 1) ? tk_rbuf((size_t)n) : NULL;
    t->d.w = t->w;
    t->d.bias = t->bias;
    t->srcs[0] = tk_rbuf((size_t)batch * rows * k);
    t->nwant = (size_t)batch * rows * n;
    t->want = tk_alloc(t->nwant);
    cd_ref_gemm(batch * rows, n, k, t->srcs[0], t->w, t->bias, t->d.u.gemm.act, t->want);
    t->tol = 1e-4;
    t->hip_kernel = "sgemm";
}

// variant 1: a global pool (the whole plane, no padding).
static void make_pool(op_case *t, int global) {
    cd_pool_desc p = {0};
    p.kind = cd_test_randi(0, 1) ? CD_POOL_MAX : CD_POOL_AVG;
    p.n = 1;
    p.c = cd_test_randi(1, 33);
    p.kh = cd_test_randi(1, 4);
    p.kw = cd_test_randi(1, 4);
    p.h = cd_test_randi(p.kh, p.kh + 9);
    p.w = cd_test_randi(p.kw, p.kw + 9);
    p.stride_h = cd_test_randi(1, 3);
    p.stride_w = cd_test_randi(1, 3);
    p.dil_h = p.dil_w = 1;
    p.pad_t = cd_test_randi(0, p.kh - 1);
    p.pad_b = cd_test_randi(0, p.kh - 1);
    p.pad_l = cd_test_randi(0, p.kw - 1);
    p.pad_r = cd_test_randi(0, p.kw - 1);
    p.ceil_mode = cd_test_randi(0, 1);
    p.count_include_pad = cd_test_randi(0, 1);
    if (global) {
        p.kh = p.h, p.kw = p.w, p.stride_h = p.stride_w = 1;
        p.pad_t = p.pad_b = p.pad_l = p.pad_r = 0;
        p.ceil_mode = 0;
    }
    cd_pool_out_dims(&p);
    // A random window may also cover the whole unpadded plane.
    global |= p.kh == p.h && p.kw == p.w && p.oh == 1 && p.ow == 1 && !p.pad_t && !p.pad_l && !p.pad_b && !p.pad_r;
    int batch = cd_test_randi(1, 3);
    int64_t is[4] = {1, p.c, p.h, p.w}, os[4] = {1, p.c, p.oh, p.ow};
    case_init(t, CD_BOP_POOL, batch, 1);
    t->d.src[0] = cd_test_tdesc(4, is);
    t->d.dst = cd_test_tdesc(4, os);
    t->d.u.pool = p;
    t->srcs[0] = tk_rbuf((size_t)batch * p.c * p.h * p.w);
    t->nwant = (size_t)batch * p.c * p.oh * p.ow;
    t->want = tk_alloc(t->nwant);
    cd_pool_desc r = p;
    r.n = batch;
    cd_ref_pool2d(&r, t->srcs[0], t->want);
    t->tol = 1e-5;
    t->blockable = 1;
    t->hip_kernel = global ? "global-pool" : "pool2d";
}

// a (op) b with NumPy broadcasting; the broadcast operand first or second,
// constant or batched.
static void make_binary(op_case *t, int variant) {
    int rank = cd_test_randi(2, 5), batch = cd_test_randi(1, 3);
    int64_t ds[5] = {1}, bs[5] = {1};
    for (int i = 1; i < rank; i++) {
        ds[i] = cd_test_randi(1, 16);
        bs[i] = cd_test_randi(0, 1) ? ds[i] : 1;
    }
    int b_const = cd_test_randi(0, 1), swap = cd_test_randi(0, 1);
    case_init(t, CD_BOP_BINARY, batch, 2);
    t->d.src[swap] = cd_test_tdesc(rank, ds);
    t->d.src[1 - swap] = cd_test_tdesc(rank, bs);
    t->d.src[1 - swap].is_const = b_const;
    t->d.dst = cd_test_tdesc(rank, ds);
    t->d.u.binary.kind = (cd_binary_kind)cd_test_randi(0, CD_BINARY_MAX);
    t->d.u.binary.act = tk_rand_act_fixed();
    size_t na = cd_test_numel(&t->d.src[swap], batch), nb = cd_test_numel(&t->d.src[1 - swap], batch);
    float *a = tk_rbuf(na), *b = tk_rbuf(nb);
    if (t->d.u.binary.kind == CD_BINARY_DIV)
        for (size_t i = 0; i < nb; i++) b[i] = b[i] >= 0 ? b[i] + 0.5f : b[i] - 0.5f;
    t->srcs[swap] = a;
    t->srcs[1 - swap] = b;
    t->nwant = na;
    t->want = tk_alloc(na);
    int64_t sa[5], sb[5], so[5];
    memcpy(sa, ds, sizeof sa);
    memcpy(sb, bs, sizeof sb);
    memcpy(so, ds, sizeof so);
    sa[0] = so[0] = batch;
    sb[0] = b_const ? 1 : batch;
    if (swap)
        cd_ref_binary(t->d.u.binary.kind, rank, sb, b, sa, a, so, t->d.u.binary.act, t->want);
    else
        cd_ref_binary(t->d.u.binary.kind, rank, sa, a, sb, b, so, t->d.u.binary.act, t->want);
    t->tol = 1e-5;
    t->blockable = 1;
}

// variant: the cd_act.
static void make_activation(op_case *t, int kind) {
    int batch = cd_test_randi(1, 3);
    int64_t s[4] = {1, cd_test_randi(1, 40), cd_test_randi(1, 9), cd_test_randi(1, 9)};
    case_init(t, CD_BOP_ACTIVATION, batch, 1);
    t->d.src[0] = t->d.dst = cd_test_tdesc(4, s);
    t->d.u.act = tk_rand_act_fixed();
    t->d.u.act.kind = (cd_act)kind;
    if (kind == CD_ACT_CLIP) t->d.u.act.alpha = 0, t->d.u.act.beta = 6;
    if (kind == CD_ACT_HARDSIGMOID) t->d.u.act.alpha = 0.2f, t->d.u.act.beta = 0.5f;
    if (kind == CD_ACT_LEAKYRELU) t->d.u.act.alpha = 0.1f;
    if (kind == CD_ACT_POW) t->d.u.act.alpha = (float)cd_test_randi(2, 3);
    size_t n = cd_test_numel(&t->d.dst, batch);
    t->srcs[0] = tk_rbuf(n);
    for (size_t i = 0; i < n; i++) t->srcs[0][i] *= 8.0f;
    if (kind == CD_ACT_SQRT) // (a NaN never compares equal)
        for (size_t i = 0; i < n; i++) t->srcs[0][i] = fabsf(t->srcs[0][i]);
    t->nwant = n;
    t->want = tk_alloc(n);
    cd_ref_activation(t->d.u.act, n, t->srcs[0], t->want);
    t->tol = 1e-5;
    t->blockable = 1;
}

// variant 0: per tensor, u8; 1: per tensor, s8; 2: per channel (axis 1), s8;
// 3: per channel along the last axis (axis 3), u8. Inputs reach past the
// range on both sides (saturation) and land on halves (round half to even).
static void make_fakequant(op_case *t, int variant) {
    int batch = cd_test_randi(1, 3);
    int64_t s[4] = {1, cd_test_randi(1, 40), cd_test_randi(1, 9), cd_test_randi(1, 9)};
    int u8 = variant == 0 || variant == 3, axis = variant == 3 ? 3 : 1;
    case_init(t, CD_BOP_FAKEQUANT, batch, 1);
    t->d.src[0] = t->d.dst = cd_test_tdesc(4, s);
    t->d.u.fq.channels = variant >= 2 ? (int)s[axis] : 1;
    t->d.u.fq.axis = axis;
    t->d.u.fq.qmin = u8 ? 0.0f : -128.0f;
    t->d.u.fq.qmax = u8 ? 255.0f : 127.0f;
    int ch = t->d.u.fq.channels;
    t->w = tk_alloc((size_t)ch);
    t->bias = tk_alloc((size_t)ch);
    for (int c = 0; c < ch; c++) {
        t->w[c] = cd_test_randf(0.002f, 0.05f);
        t->bias[c] = (float)(u8 ? cd_test_randi(0, 255) : cd_test_randi(-20, 20));
    }
    t->d.scale = t->w;
    t->d.zero_point = t->bias;
    size_t n = cd_test_numel(&t->d.dst, batch), inner = 1;
    for (int i = axis + 1; i < 4; i++) inner *= (size_t)s[i];
    t->srcs[0] = tk_rbuf(n);
    for (size_t i = 0; i < n; i++) {
        size_t c = ch > 1 ? i / inner % (size_t)ch : 0;
        t->srcs[0][i] *= 8.0f;
        if (i % 5 == 0) t->srcs[0][i] = ((float)cd_test_randi(-300, 300) + 0.5f) * t->w[c]; // a tie
    }
    t->nwant = n;
    t->want = tk_alloc(n);
    cd_ref_fakequant(&t->d.u.fq, n, inner, t->w, t->bias, t->srcs[0], t->want);
    t->tol = 1e-6;
    t->blockable = ch == 1;
}

// variant 1: outer == 1 (the softmax over one axis oneDNN takes).
static void make_softmax(op_case *t, int outer_one) {
    int batch = cd_test_randi(1, 4);
    int64_t outer = outer_one ? 1 : cd_test_randi(1, 4), len = cd_test_randi(1, 300), inner = cd_test_randi(1, 5);
    int64_t s[4] = {1, outer, len, inner};
    case_init(t, CD_BOP_SOFTMAX, batch, 1);
    t->d.src[0] = t->d.dst = cd_test_tdesc(4, s);
    t->d.u.softmax.outer = outer;
    t->d.u.softmax.len = len;
    t->d.u.softmax.inner = inner;
    size_t n = (size_t)batch * outer * len * inner;
    t->srcs[0] = tk_rbuf(n);
    t->nwant = n;
    t->want = tk_alloc(n);
    cd_ref_softmax((size_t)(batch * outer), (size_t)len, (size_t)inner, t->srcs[0], t->want);
    t->tol = 1e-5;
}

// variant: the axis (1..3); 4: axis 1 with whole blocks of 16 channels per
// input (the CPU's blocked memcpy concat, DenseNet's).
static void make_concat(op_case *t, int variant) {
    const int axis = variant == 4 ? 1 : variant;
    int n = cd_test_randi(1, 4), batch = cd_test_randi(1, 3);
    int64_t base[4] = {1, cd_test_randi(1, 20), cd_test_randi(1, 7), cd_test_randi(1, 7)}, ds[4];
    memcpy(ds, base, sizeof ds);
    ds[axis] = 0;
    case_init(t, CD_BOP_CONCAT, batch, n);
    t->d.u.axis = axis;
    int64_t shp[4][4];
    for (int j = 0; j < n; j++) {
        memcpy(shp[j], base, sizeof base);
        shp[j][axis] = variant == 4 ? 16 * cd_test_randi(1, 3) : cd_test_randi(1, 17);
        ds[axis] += shp[j][axis];
        t->d.src[j] = cd_test_tdesc(4, shp[j]);
        t->srcs[j] = tk_rbuf(cd_test_numel(&t->d.src[j], batch));
    }
    t->d.dst = cd_test_tdesc(4, ds);
    t->nwant = cd_test_numel(&t->d.dst, batch);
    t->want = tk_alloc(t->nwant);
    const int64_t *sp[4];
    const float *cp[4];
    for (int j = 0; j < n; j++) {
        shp[j][0] = batch;
        sp[j] = shp[j];
        cp[j] = t->srcs[j];
    }
    cd_ref_concat(4, axis, n, sp, cp, t->want);
    t->tol = 0;
    t->blockable = 1;
}

// variant 0: a random permutation of dims 1..rank-1, rank 2..6; 1: a
// rotation of dims 1..keep-1, the rest in place (NCHW <-> NHWC, the channel
// shuffle: the CPU's tiled kernel), rank 3..6, dims up to 40 at rank 3 and
// 4 (several tiles).
static void make_transpose(op_case *t, int variant) {
    int rank = cd_test_randi(variant ? 3 : 2, 6), batch = cd_test_randi(1, 3);
    int64_t s[6] = {1}, o[6];
    int perm[6] = {0};
    for (int i = 1; i < rank; i++) s[i] = cd_test_randi(1, variant && rank <= 4 ? 40 : 6), perm[i] = i;
    if (variant) {
        int keep = cd_test_randi(3, rank), first = cd_test_randi(2, keep - 1);
        for (int i = 1; i < keep; i++) perm[i] = first + i - 1 < keep ? first + i - 1 : first + i - keep;
    }
    for (int i = rank - 1; i > 1 && !variant; i--) { // Fisher-Yates over dims 1..rank-1
        int j = cd_test_randi(1, i), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int i = 0; i < rank; i++) o[i] = s[perm[i]];
    case_init(t, CD_BOP_TRANSPOSE, batch, 1);
    t->d.src[0] = cd_test_tdesc(rank, s);
    t->d.dst = cd_test_tdesc(rank, o);
    memcpy(t->d.u.perm, perm, sizeof perm);
    size_t n = cd_test_numel(&t->d.src[0], batch);
    t->srcs[0] = tk_rbuf(n);
    t->nwant = n;
    t->want = tk_alloc(n);
    s[0] = batch;
    cd_ref_transpose(rank, s, perm, t->srcs[0], t->want);
    t->tol = 0;
}

// variant: 0 NCHW -> NCHW16C, 1 NCHW16C -> NCHW, 2 NCHW -> NCHW8C, 3 NCHW8C ->
// NCHW, 4 the plain copy, 5 NCHW -> NHWC, 6 NHWC -> NCHW16C (NHWC: the
// int8 storage layout); c not a multiple of the block. The runner hands the
// backend the input in the source layout and reads the output back from the
// destination layout, so the result is the input again.
static void make_reorder(op_case *t, int dir) {
    static const cd_layout from[] = {CD_LAYOUT_NCHW, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW8C,
                                     CD_LAYOUT_NCHW, CD_LAYOUT_NCHW,    CD_LAYOUT_NHWC};
    static const cd_layout to[] = {CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW8C, CD_LAYOUT_NCHW,
                                   CD_LAYOUT_NCHW,    CD_LAYOUT_NHWC, CD_LAYOUT_NCHW16C};
    int batch = cd_test_randi(1, 3);
    int64_t s[4] = {1, cd_test_randi(1, 50), cd_test_randi(1, 7), cd_test_randi(1, 7)};
    if (s[1] % 8 == 0) s[1]++;
    case_init(t, CD_BOP_REORDER, batch, 1);
    t->d.src[0] = t->d.dst = cd_test_tdesc(4, s);
    t->d.src[0].layout = from[dir];
    t->d.dst.layout = to[dir];
    size_t n = cd_test_numel(&t->d.src[0], batch);
    t->srcs[0] = tk_rbuf(n);
    t->nwant = n;
    t->want = tk_alloc(n);
    memcpy(t->want, t->srcs[0], n * sizeof(float));
    t->tol = 0;
    t->hip_kernel = dir == 4 ? "copy" : "reorder";
}

// A random tensor shape of rank 2..5 (dim 0 the batch item), dims 1..hi.
static int rand_shape(int64_t *s, int hi) {
    int rank = cd_test_randi(2, 5);
    s[0] = 1;
    for (int i = 1; i < rank; i++) s[i] = cd_test_randi(1, hi);
    return rank;
}

// variant: the cd_pad_mode. Pads of -1..3 on random dims but the batch
// (crops too); reflect keeps its pads below the dim.
static void make_pad(op_case *t, int mode) {
    int64_t s[5], o[5];
    int rank = rand_shape(s, 7), batch = cd_test_randi(1, 3);
    case_init(t, CD_BOP_PAD, batch, 1);
    t->d.u.pad.mode = (cd_pad_mode)mode;
    t->d.u.pad.value = cd_test_randf(-2.0f, 2.0f);
    o[0] = 1;
    for (int i = 1; i < rank; i++) {
        int lim = mode == CD_PAD_REFLECT ? (int)s[i] - 1 : 3;
        int64_t b = cd_test_randi(s[i] > 1 ? -1 : 0, lim), e = cd_test_randi(s[i] + b > 1 ? -1 : 0, lim);
        if (mode == CD_PAD_REFLECT && b < 0) b = 0;
        t->d.u.pad.begin[i] = b;
        o[i] = s[i] + b + e;
    }
    t->d.src[0] = cd_test_tdesc(rank, s);
    t->d.dst = cd_test_tdesc(rank, o);
    size_t n = cd_test_numel(&t->d.src[0], batch);
    t->srcs[0] = tk_rbuf(n);
    t->nwant = cd_test_numel(&t->d.dst, batch);
    t->want = tk_alloc(t->nwant);
    s[0] = o[0] = batch;
    cd_ref_pad(&t->d.u.pad, rank, s, t->srcs[0], o, t->want);
    t->tol = 0;
    t->hip_kernel = "pad";
}

// Random start, step (-3..3, not 0) and count along every dim but the batch.
static void make_slice(op_case *t, int variant) {
    int64_t s[5], o[5];
    int rank = rand_shape(s, 9), batch = cd_test_randi(1, 3);
    case_init(t, CD_BOP_SLICE, batch, 1);
    o[0] = 1;
    t->d.u.slice.step[0] = 1;
    for (int i = 1; i < rank; i++) {
        int64_t step = cd_test_randi(1, 3) * (cd_test_randi(0, 2) ? 1 : -1), start = cd_test_randi(0, (int)s[i] - 1);
        int64_t room = step > 0 ? (s[i] - start + step - 1) / step : start / -step + 1;
        t->d.u.slice.start[i] = start;
        t->d.u.slice.step[i] = step;
        o[i] = cd_test_randi(1, (int)room);
    }
    t->d.src[0] = cd_test_tdesc(rank, s);
    t->d.dst = cd_test_tdesc(rank, o);
    t->srcs[0] = tk_rbuf(cd_test_numel(&t->d.src[0], batch));
    t->nwant = cd_test_numel(&t->d.dst, batch);
    t->want = tk_alloc(t->nwant);
    s[0] = o[0] = batch;
    cd_ref_slice(&t->d.u.slice, rank, s, t->srcs[0], o, t->want, sizeof(float));
    t->tol = 0;
    t->hip_kernel = "slice";
}

// variant 0: a 1-D list of indices (repeats allowed), 1: one scalar index
// (the dim goes), 2: a 2 x 3 table of indices (the dim becomes two); a
// random axis but the batch.
static void make_gather(op_case *t, int variant) {
    static int64_t idx[6]; // the description points here while the case runs
    int64_t s[5], o[6];
    int rank = rand_shape(s, 9), batch = cd_test_randi(1, 3), axis = cd_test_randi(1, rank - 1);
    int64_t nidx = variant == 0 ? cd_test_randi(1, 6) : variant == 1 ? 1 : 6;
    case_init(t, CD_BOP_GATHER, batch, 1);
    for (int64_t j = 0; j < nidx; j++) idx[j] = cd_test_randi(0, (int)s[axis] - 1);
    t->d.u.gather = (cd_gather_desc){.axis = axis, .nidx = nidx, .idx = idx};
    int orank = 0;
    for (int i = 0; i < rank; i++) {
        if (i != axis) {
            o[orank++] = s[i];
        } else if (variant == 0) {
            o[orank++] = nidx;
        } else if (variant == 2) {
            o[orank++] = 2;
            o[orank++] = 3;
        }
    }
    t->d.src[0] = cd_test_tdesc(rank, s);
    t->d.dst = cd_test_tdesc(orank, o);
    t->srcs[0] = tk_rbuf(cd_test_numel(&t->d.src[0], batch));
    t->nwant = cd_test_numel(&t->d.dst, batch);
    t->want = tk_alloc(t->nwant);
    s[0] = batch;
    cd_ref_gather(&t->d.u.gather, rank, s, t->srcs[0], t->want);
    t->tol = 0;
    t->hip_kernel = "gather";
}

// variant 0: Expand (random dims of 1 broadcast), 1: Tile (random repeats
// of 1..3 on every dim but the batch).
static void make_tile(op_case *t, int variant) {
    int64_t s[5], o[5];
    int rank = rand_shape(s, 6), batch = cd_test_randi(1, 3);
    case_init(t, CD_BOP_TILE, batch, 1);
    o[0] = 1;
    for (int i = 1; i < rank; i++) {
        if (variant == 0) {
            o[i] = s[i];
            if (cd_test_randi(0, 1)) s[i] = 1;
        } else {
            o[i] = s[i] * cd_test_randi(1, 3);
        }
    }
    t->d.src[0] = cd_test_tdesc(rank, s);
    t->d.dst = cd_test_tdesc(rank, o);
    t->srcs[0] = tk_rbuf(cd_test_numel(&t->d.src[0], batch));
    t->nwant = cd_test_numel(&t->d.dst, batch);
    t->want = tk_alloc(t->nwant);
    s[0] = o[0] = batch;
    cd_ref_tile(rank, s, t->srcs[0], o, t->want);
    t->tol = 0;
    t->hip_kernel = "tile";
}

// variant: the cd_reduce_kind; a random non-empty set of dims but the batch.
static void make_reduce(op_case *t, int kind) {
    int64_t s[5], o[5];
    int rank = rand_shape(s, 9), batch = cd_test_randi(1, 3), orank = 0;
    unsigned mask = 0;
    while (!mask) mask = (unsigned)cd_test_randi(0, (1 << rank) - 1) & ~1u;
    int keep = cd_test_randi(0, 1);
    for (int i = 0; i < rank; i++)
        if (!((mask >> i) & 1u) || keep) o[orank++] = (mask >> i) & 1u ? 1 : s[i];
    case_init(t, CD_BOP_REDUCE, batch, 1);
    t->d.u.reduce = (cd_reduce_desc){(cd_reduce_kind)kind, mask};
    t->d.src[0] = cd_test_tdesc(rank, s);
    t->d.dst = cd_test_tdesc(orank, o);
    t->srcs[0] = tk_rbuf(cd_test_numel(&t->d.src[0], batch));
    t->nwant = cd_test_numel(&t->d.dst, batch);
    t->want = tk_alloc(t->nwant);
    s[0] = batch;
    cd_ref_reduce(&t->d.u.reduce, rank, s, t->srcs[0], t->want);
    t->tol = 1e-5;
    t->hip_kernel = "reduce";
}

// Rows of len (the trailing dims), with or without beta.
static void make_layernorm(op_case *t, int variant) {
    int64_t s[5];
    int rank = rand_shape(s, 12), batch = cd_test_randi(1, 3), axis = cd_test_randi(1, rank - 1);
    case_init(t, CD_BOP_LAYERNORM, batch, 1);
    cd_layernorm_desc d = {1, 1, cd_test_randf(1e-6f, 1e-3f)};
    for (int i = 1; i < rank; i++) *(i < axis ? &d.outer : &d.len) *= s[i];
    t->d.u.ln = d;
    t->d.src[0] = t->d.dst = cd_test_tdesc(rank, s);
    t->w = tk_rbuf((size_t)d.len);
    t->bias = cd_test_randi(0, 1) ? tk_rbuf((size_t)d.len) : NULL;
    t->d.w = t->w;
    t->d.bias = t->bias;
    size_t n = cd_test_numel(&t->d.src[0], batch);
    t->srcs[0] = tk_rbuf(n);
    for (size_t i = 0; i < n; i++) t->srcs[0][i] = 3.0f * t->srcs[0][i] + 1.0f; // a mean away from 0
    t->nwant = n;
    t->want = tk_alloc(n);
    cd_ref_layernorm(&d, batch * d.outer, t->srcs[0], t->w, t->bias, t->want);
    t->tol = 1e-4;
    t->hip_kernel = "layernorm";
}
// DynamicQuantizeLinear: per batch item, the parameters from its own range
// (u8). Items all zero (scale 1), all positive, all negative, or mixed.
static void make_fakequant_dynamic(op_case *t, int variant) {
    int batch = cd_test_randi(1, 4);
    int64_t s[4] = {1, cd_test_randi(1, 40), cd_test_randi(1, 9), cd_test_randi(1, 9)};
    case_init(t, CD_BOP_FAKEQUANT, batch, 1);
    t->d.src[0] = t->d.dst = cd_test_tdesc(4, s);
    t->d.u.fq = (cd_fakequant_desc){1, 1, 0.0f, 255.0f, 1};
    size_t n = cd_test_numel(&t->d.dst, batch), per = n / (size_t)batch;
    t->srcs[0] = tk_rbuf(n);
    for (int b = 0; b < batch; b++) {
        int kind = cd_test_randi(0, 3);
        float amp = cd_test_randf(0.01f, 20.0f);
        for (size_t i = 0; i < per; i++) {
            float *x = &t->srcs[0][(size_t)b * per + i];
            *x = kind == 0 ? 0.0f : kind == 1 ? fabsf(*x) * amp : kind == 2 ? -fabsf(*x) * amp : *x * amp;
        }
    }
    t->nwant = n;
    t->want = tk_alloc(n);
    cd_ref_fakequant_dynamic(&t->d.u.fq, (size_t)batch, per, t->srcs[0], t->want);
    t->tol = 1e-6;
    t->blockable = 1; // a blocked layout's padding is 0, inside the range anyway
}

// variant: the cd_resize_mode. Random coordinate and nearest modes, scales
// up and down (integer and not), or sizes (scale out / in).
static void make_resize(op_case *t, int mode) {
    static const float scales[] = {2.0f, 3.0f, 0.5f, 1.5f, 1.7f, 0.6f, 2.5f, 1.0f, 0.75f, 0.3f};
    cd_resize_desc d = {(cd_resize_mode)mode, (cd_resize_coord)cd_test_randi(0, CD_COORD_TF_HALF_PIXEL_FOR_NEAREST),
                        (cd_nearest_mode)cd_test_randi(0, CD_NEAREST_CEIL)};
    int batch = cd_test_randi(1, 3);
    d.c = cd_test_randi(1, 20);
    d.h = cd_test_randi(1, 13);
    d.w = cd_test_randi(1, 13);
    do {
        if (cd_test_randi(0, 1)) { // scales
            d.scale_h = scales[cd_test_randi(0, 9)];
            d.scale_w = scales[cd_test_randi(0, 9)];
            d.oh = (int)(d.scale_h * (float)d.h);
            d.ow = (int)(d.scale_w * (float)d.w);
        } else { // sizes
            d.oh = cd_test_randi(1, 30);
            d.ow = cd_test_randi(1, 30);
            d.scale_h = (float)d.oh / (float)d.h;
            d.scale_w = (float)d.ow / (float)d.w;
        }
    } while (d.oh < 1 || d.ow < 1);
    int64_t is[4] = {1, d.c, d.h, d.w}, os[4] = {1, d.c, d.oh, d.ow};
    case_init(t, CD_BOP_RESIZE, batch, 1);
    t->d.src[0] = cd_test_tdesc(4, is);
    t->d.dst = cd_test_tdesc(4, os);
    t->d.u.resize = d;
    t->srcs[0] = tk_rbuf(cd_test_numel(&t->d.src[0], batch));
    t->nwant = cd_test_numel(&t->d.dst, batch);
    t->want = tk_alloc(t->nwant);
    cd_ref_resize(&d, batch, t->srcs[0], t->want);
    t->tol = mode == CD_RESIZE_NEAREST ? 0 : 1e-5;
    t->hip_kernel = "resize";
}

// variant 0: random strides, pads, dilations, output size (output_padding
// or a crop), bias and activation; 1: groups; 2: the U-Net upsampler (2x2
// stride 2) on 16..40 channels.
static void make_deconv(op_case *t, int variant) {
    cd_deconv_desc d;
    memset(&d, 0, sizeof d);
    d.groups = variant == 1 ? cd_test_randi(2, 4) : 1;
    d.c = d.groups * cd_test_randi(1, variant == 2 ? 1 : 6) * (variant == 2 ? cd_test_randi(16, 40) : 1);
    d.k = d.groups * cd_test_randi(1, variant == 2 ? 24 : 6);
    d.h = cd_test_randi(1, 9);
    d.w = cd_test_randi(1, 9);
    d.r = variant == 2 ? 2 : cd_test_randi(1, 4);
    d.s = variant == 2 ? 2 : cd_test_randi(1, 4);
    d.stride_h = variant == 2 ? 2 : cd_test_randi(1, 3);
    d.stride_w = variant == 2 ? 2 : cd_test_randi(1, 3);
    d.dil_h = variant ? 1 : cd_test_randi(1, 2);
    d.dil_w = variant ? 1 : cd_test_randi(1, 2);
    const int full_h = (d.h - 1) * d.stride_h + (d.r - 1) * d.dil_h + 1;
    const int full_w = (d.w - 1) * d.stride_w + (d.s - 1) * d.dil_w + 1;
    d.pad_t = variant == 2 ? 0 : cd_test_randi(0, d.r - 1);
    d.pad_l = variant == 2 ? 0 : cd_test_randi(0, d.s - 1);
    // The tail: a crop up to the kernel, or output_padding below the stride.
    d.oh = full_h - d.pad_t + (variant == 2 ? 0 : cd_test_randi(-(d.r - 1), d.stride_h - 1));
    d.ow = full_w - d.pad_l + (variant == 2 ? 0 : cd_test_randi(-(d.s - 1), d.stride_w - 1));
    if (d.oh < 1) d.oh = 1;
    if (d.ow < 1) d.ow = 1;
    d.act = tk_rand_act_fixed();
    int batch = cd_test_randi(1, 3);
    int64_t is[4] = {1, d.c, d.h, d.w}, os[4] = {1, d.k, d.oh, d.ow};
    case_init(t, CD_BOP_DECONV, batch, 1);
    t->d.src[0] = cd_test_tdesc(4, is);
    t->d.dst = cd_test_tdesc(4, os);
    t->d.u.deconv = d;
    t->w = tk_rbuf((size_t)d.c * (d.k / d.groups) * d.r * d.s);
    t->bias = cd_test_randi(0, 2) ? tk_rbuf((size_t)d.k) : NULL;
    t->d.w = t->w;
    t->d.bias = t->bias;
    t->srcs[0] = tk_rbuf(cd_test_numel(&t->d.src[0], batch));
    t->nwant = cd_test_numel(&t->d.dst, batch);
    t->want = tk_alloc(t->nwant);
    cd_ref_deconv(&d, batch, t->srcs[0], t->w, t->bias, t->want);
    t->tol = 1e-4;
    t->hip_kernel = "deconv";
}

// ---- the table ------------------------------------------------------------------------

typedef struct {
    const char *name;
    cd_bop op;
    case_fn make;
    int variant;
    int iters;    // fresh random cases per backend
    int required; // every backend must support it (else skipped where unsupported)
} op_row;

static const op_row g_rows[] = {
    {"conv2d dense", CD_BOP_CONV2D, make_conv, 0, 6, 1},
    {"conv2d depthwise", CD_BOP_CONV2D, make_conv, 1, 3, 1},
    {"conv2d grouped", CD_BOP_CONV2D, make_conv, 2, 3, 1},
    {"conv2d pointwise", CD_BOP_CONV2D, make_conv, 3, 3, 1},
    {"conv2d resnet-sized, k not a multiple of the tile", CD_BOP_CONV2D, make_conv_resnet, 0, 1, 1},
    {"conv2d with a border map, clip", CD_BOP_CONV2D, make_conv_border, 0, 2, 0},
    {"conv2d with a border map, relu", CD_BOP_CONV2D, make_conv_border, 1, 2, 0},
    {"gemm", CD_BOP_GEMM, make_gemm, 0, 4, 1},
    {"pool windowed", CD_BOP_POOL, make_pool, 0, 7, 1},
    {"pool global", CD_BOP_POOL, make_pool, 1, 3, 1},
    {"binary broadcast and const", CD_BOP_BINARY, make_binary, 0, 12, 1},
    {"activation none", CD_BOP_ACTIVATION, make_activation, CD_ACT_NONE, 1, 1},
    {"activation relu", CD_BOP_ACTIVATION, make_activation, CD_ACT_RELU, 1, 1},
    {"activation clip", CD_BOP_ACTIVATION, make_activation, CD_ACT_CLIP, 1, 1},
    {"activation sigmoid", CD_BOP_ACTIVATION, make_activation, CD_ACT_SIGMOID, 1, 1},
    {"activation hardsigmoid", CD_BOP_ACTIVATION, make_activation, CD_ACT_HARDSIGMOID, 1, 1},
    {"activation hardswish", CD_BOP_ACTIVATION, make_activation, CD_ACT_HARDSWISH, 1, 1},
    {"activation leakyrelu", CD_BOP_ACTIVATION, make_activation, CD_ACT_LEAKYRELU, 1, 1},
    {"softmax outer > 1", CD_BOP_SOFTMAX, make_softmax, 0, 2, 1},
    {"softmax outer == 1", CD_BOP_SOFTMAX, make_softmax, 1, 2, 1},
    {"concat axis 1", CD_BOP_CONCAT, make_concat, 1, 1, 1},
    {"concat axis 2", CD_BOP_CONCAT, make_concat, 2, 1, 1},
    {"concat axis 3", CD_BOP_CONCAT, make_concat, 3, 1, 1},
    {"concat axis 1, whole blocks", CD_BOP_CONCAT, make_concat, 4, 3, 1},
    {"transpose random perm", CD_BOP_TRANSPOSE, make_transpose, 0, 4, 1},
    {"transpose rotation (NCHW <-> NHWC)", CD_BOP_TRANSPOSE, make_transpose, 1, 4, 1},
    {"reorder NCHW -> NCHW16C", CD_BOP_REORDER, make_reorder, 0, 1, 1},
    {"reorder NCHW16C -> NCHW", CD_BOP_REORDER, make_reorder, 1, 1, 1},
    {"reorder NCHW -> NCHW8C", CD_BOP_REORDER, make_reorder, 2, 1, 0},
    {"reorder NCHW8C -> NCHW", CD_BOP_REORDER, make_reorder, 3, 1, 0},
    {"reorder copy", CD_BOP_REORDER, make_reorder, 4, 1, 1},
    {"reorder NCHW -> NHWC", CD_BOP_REORDER, make_reorder, 5, 1, 0},
    {"reorder NHWC -> NCHW16C", CD_BOP_REORDER, make_reorder, 6, 1, 0},
    {"fakequant per tensor u8", CD_BOP_FAKEQUANT, make_fakequant, 0, 3, 1},
    {"fakequant per tensor s8", CD_BOP_FAKEQUANT, make_fakequant, 1, 3, 1},
    {"fakequant per channel axis 1 s8", CD_BOP_FAKEQUANT, make_fakequant, 2, 3, 1},
    {"fakequant per channel last axis u8", CD_BOP_FAKEQUANT, make_fakequant, 3, 2, 1},
    {"fakequant dynamic per item u8", CD_BOP_FAKEQUANT, make_fakequant_dynamic, 0, 4, 1},
    // issue 22
    {"activation tanh", CD_BOP_ACTIVATION, make_activation, CD_ACT_TANH, 1, 1},
    {"activation softplus", CD_BOP_ACTIVATION, make_activation, CD_ACT_SOFTPLUS, 1, 1},
    {"activation mish", CD_BOP_ACTIVATION, make_activation, CD_ACT_MISH, 1, 1},
    {"activation neg", CD_BOP_ACTIVATION, make_activation, CD_ACT_NEG, 1, 1},
    {"activation abs", CD_BOP_ACTIVATION, make_activation, CD_ACT_ABS, 1, 1},
    {"activation sqrt", CD_BOP_ACTIVATION, make_activation, CD_ACT_SQRT, 1, 1},
    {"activation erf", CD_BOP_ACTIVATION, make_activation, CD_ACT_ERF, 1, 1},
    {"activation gelu", CD_BOP_ACTIVATION, make_activation, CD_ACT_GELU, 1, 1},
    {"activation gelu tanh", CD_BOP_ACTIVATION, make_activation, CD_ACT_GELU_TANH, 1, 1},
    {"activation pow", CD_BOP_ACTIVATION, make_activation, CD_ACT_POW, 1, 1},
    {"activation silu", CD_BOP_ACTIVATION, make_activation, CD_ACT_SILU, 1, 1},
    {"pad constant", CD_BOP_PAD, make_pad, CD_PAD_CONSTANT, 4, 1},
    {"pad reflect", CD_BOP_PAD, make_pad, CD_PAD_REFLECT, 4, 1},
    {"pad edge", CD_BOP_PAD, make_pad, CD_PAD_EDGE, 4, 1},
    {"slice random start step count", CD_BOP_SLICE, make_slice, 0, 6, 1},
    {"reduce sum", CD_BOP_REDUCE, make_reduce, CD_REDUCE_SUM, 3, 1},
    {"reduce mean", CD_BOP_REDUCE, make_reduce, CD_REDUCE_MEAN, 3, 1},
    {"reduce max", CD_BOP_REDUCE, make_reduce, CD_REDUCE_MAX, 3, 1},
    {"layernorm trailing dims", CD_BOP_LAYERNORM, make_layernorm, 0, 4, 1},
    // issue 22, segmentation
    {"resize nearest, every coordinate and rounding mode", CD_BOP_RESIZE, make_resize, CD_RESIZE_NEAREST, 8, 1},
    {"resize linear, every coordinate mode", CD_BOP_RESIZE, make_resize, CD_RESIZE_LINEAR, 8, 1},
    {"deconv strides pads dilations output size", CD_BOP_DECONV, make_deconv, 0, 6, 1},
    {"deconv groups", CD_BOP_DECONV, make_deconv, 1, 3, 1},
    {"deconv 2x2 stride 2 (U-Net)", CD_BOP_DECONV, make_deconv, 2, 2, 1},
    {"gather 1-D indices, any axis", CD_BOP_GATHER, make_gather, 0, 4, 1},
    {"gather scalar index", CD_BOP_GATHER, make_gather, 1, 2, 1},
    {"gather 2-D indices", CD_BOP_GATHER, make_gather, 2, 2, 1},
    {"tile as Expand (dims of 1)", CD_BOP_TILE, make_tile, 0, 3, 1},
    {"tile repeats", CD_BOP_TILE, make_tile, 1, 3, 1},
};

#define NROWS (sizeof g_rows / sizeof g_rows[0])

// The backends under test. is_hip: the row's hip_kernel is checked there.
typedef struct {
    const char *device;
    int is_hip;
} test_backend;

static int backends(test_backend *out) {
    const char *e = getenv("CD_TEST_HIP_DEVICE");
    out[0] = (test_backend){"cpu", 0};
    out[1] = (test_backend){e && *e ? e : "hip-emu", 1};
    return 2;
}

// ---- the runner -----------------------------------------------------------------------

// Moves c's 4-D activations to a blocked layout (NCHW16C or NCHW8C) when
// the backend supports that (two times in three). Reorder rows keep theirs.
static void pick_layout(cd_backend_t be, op_case *c) {
    const cd_layout l = (cd_layout)cd_test_randi(0, CD_LAYOUT_COUNT - 1);
    if (!c->blockable || l == CD_LAYOUT_NCHW || c->d.dst.rank != 4) return;
    cd_bop_desc t = c->d;
    t.dst.layout = l;
    for (int i = 0; i < t.nsrc; i++)
        if (!t.src[i].is_const && t.src[i].rank == 4) t.src[i].layout = l;
    if (cd_backend_supports_op(be, &t)) c->d = t;
}

// Runs every row of family op on every backend against the reference.
static void run_family(cd_bop op) {
    test_backend tb[4];
    int nb = backends(tb);
    for (int b = 0; b < nb; b++) {
        cd_backend_t be;
        char err[512] = "";
        int rc = cd_backend_create(tb[b].device, cd_runtime_backend_opts(), &be, err, sizeof err);
        if (rc) CD_CHECK_FAIL_("cd_backend_create(%s): %s: %s", tb[b].device, cd_strerror(rc), err);
        for (size_t r = 0; r < NROWS; r++) {
            const op_row *row = &g_rows[r];
            if (row->op != op) continue;
            for (int it = 0; it < row->iters; it++) {
                op_case c;
                row->make(&c, row->variant);
                if (!cd_backend_supports_op(be, &c.d)) {
                    if (row->required) CD_CHECK_FAIL_("%s: %s: supports_op says no", cd_backend_name(be), row->name);
                    case_free(&c);
                    continue;
                }
                pick_layout(be, &c);
                float *got = tk_alloc(c.nwant);
                char kernel[64] = "";
                cd_test_backend_run(be, &c.d, c.batch, c.srcs, got, kernel, sizeof kernel);
                if (strstr(kernel, "wino")) // ours or oneDNN's Winograd: bound on the whole output, relative L2
                    check_rel_l2(got, c.want, c.nwant, c.tol, kernel);
                else
                    CHECK_CLOSE_F32(got, c.want, c.nwant, c.tol);
                if (tb[b].is_hip && c.hip_kernel && !strstr(kernel, c.hip_kernel))
                    CD_CHECK_FAIL_("%s: %s: kernel %s, expected %s", cd_backend_name(be), row->name, kernel,
                                   c.hip_kernel);
                free(got);
                case_free(&c);
            }
        }
        cd_backend_free(be);
    }
}

CD_TEST(backend_ops_every_family_has_a_row) {
    for (int op = 0; op < CD_BOP_COUNT; op++) {
        int n = 0;
        for (size_t r = 0; r < NROWS; r++) n += g_rows[r].op == (cd_bop)op;
        if (!n) CD_CHECK_FAIL_("no conformance row for %s", cd_bop_name((cd_bop)op));
    }
}

CD_TEST(backend_ops_conv2d_vs_ref) { run_family(CD_BOP_CONV2D); }
CD_TEST(backend_ops_gemm_vs_ref) { run_family(CD_BOP_GEMM); }
CD_TEST(backend_ops_pool_windowed_and_global_vs_ref) { run_family(CD_BOP_POOL); }
CD_TEST(backend_ops_binary_broadcast_and_const_vs_ref) { run_family(CD_BOP_BINARY); }
CD_TEST(backend_ops_activation_every_kind_vs_ref) { run_family(CD_BOP_ACTIVATION); }
CD_TEST(backend_ops_softmax_outer_len_inner_vs_ref) { run_family(CD_BOP_SOFTMAX); }
CD_TEST(backend_ops_concat_every_axis_vs_ref) { run_family(CD_BOP_CONCAT); }
CD_TEST(backend_ops_transpose_random_perm_vs_ref) { run_family(CD_BOP_TRANSPOSE); }
CD_TEST(backend_ops_reorder_both_directions_c_not_multiple_of_block) { run_family(CD_BOP_REORDER); }
CD_TEST(backend_ops_fakequant_per_tensor_and_per_channel_vs_ref) { run_family(CD_BOP_FAKEQUANT); }
CD_TEST(backend_ops_pad_constant_reflect_edge_vs_ref) { run_family(CD_BOP_PAD); }
CD_TEST(backend_ops_slice_negative_steps_vs_ref) { run_family(CD_BOP_SLICE); }
CD_TEST(backend_ops_reduce_sum_mean_max_vs_ref) { run_family(CD_BOP_REDUCE); }
CD_TEST(backend_ops_layernorm_vs_ref) { run_family(CD_BOP_LAYERNORM); }
CD_TEST(backend_ops_resize_nearest_linear_up_and_down_vs_ref) { run_family(CD_BOP_RESIZE); }
CD_TEST(backend_ops_deconv_vs_ref) { run_family(CD_BOP_DECONV); }
CD_TEST(backend_ops_gather_any_axis_scalar_and_2d_indices_vs_ref) { run_family(CD_BOP_GATHER); }
CD_TEST(backend_ops_tile_and_expand_vs_ref) { run_family(CD_BOP_TILE); }
