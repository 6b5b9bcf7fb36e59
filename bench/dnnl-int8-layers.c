// f32 vs int8 (and bf16) convolution on oneDNN, on ResNet-50's and MobileNetV2's conv
// shapes: the f32 conv in the plan's blocked layout (nChw16c/nChw8c), the int8 conv alone (u8 src with a zero point, s8 weights,
// per-channel scales, u8 dst with a zero point, layouts oneDNN's choice: nhwc),
// and the int8 conv with the boundary conversions the product's op does
// (backends/cpu/dnnl-conv-int8.c): a quantizing reorder of the f32 blocked
// input into u8 nhwc and a dequantizing one of the output back. The bf16
// conv the same way: alone (bf16 src, weights and dst in oneDNN's layouts)
// and with the conversions from and to the f32 blocked layout; where the
// CPU has no bf16 instructions oneDNN emulates it (or has no kernel: "-").
//
// Plain oneDNN C API, written to compile against oneDNN 2.x (Debian's 2.6:
// output scales and zero points fixed at creation, op descriptors) and 3.x
// (scales and zero points passed at execution as DNNL_ARG_ATTR_*, primitive
// descriptors created directly), so the same program measures both
// (bench/dnnl-int8-layers.sh, bench/results/onednn-versions.md).
//
//   dnnl-int8-layers [--batch B] [--reps R] [--min-ms M] [--model resnet50|mobilenetv2|all] [--header|--csv]
//
// Threads: oneDNN's own runtime decides (OpenMP in 2.6: OMP_NUM_THREADS;
// TBB in the PyPI 3.x: the affinity mask), so run it under `taskset -c 0`
// with OMP_NUM_THREADS=1 for one thread. Timing: every method of a layer is
// sampled once per round, R rounds interleaved; a sample runs the method k
// times (k calibrated to >= M ms); medians are printed.

#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if DNNL_VERSION_MAJOR >= 3
#define V3 1
typedef const_dnnl_memory_desc_t md_t;
#else
#define V3 0
typedef const dnnl_memory_desc_t *md_t;
#endif

#define CHECK(call)                                                                          \
    do {                                                                                     \
        dnnl_status_t st_ = (call);                                                          \
        if (st_ != dnnl_success) {                                                           \
            fprintf(stderr, "%s failed at line %d: status %d\n", #call, __LINE__, (int)st_); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

typedef struct {
    const char *model, *name;
    int c, h, w, k, r, stride, groups;
} layer;

// The shapes of bench/conv-dense-layers.c.
static const layer k_layers[] = {
    {"resnet50", "conv1 7x7/2", 3, 224, 224, 64, 7, 2, 1},
    {"resnet50", "l1 1x1 64>64", 64, 56, 56, 64, 1, 1, 1},
    {"resnet50", "l1 3x3 64", 64, 56, 56, 64, 3, 1, 1},
    {"resnet50", "l1 1x1 64>256", 64, 56, 56, 256, 1, 1, 1},
    {"resnet50", "l1 1x1 256>64", 256, 56, 56, 64, 1, 1, 1},
    {"resnet50", "l2 3x3/2 128", 128, 56, 56, 128, 3, 2, 1},
    {"resnet50", "l2 ds 1x1/2 256>512", 256, 56, 56, 512, 1, 2, 1},
    {"resnet50", "l2 3x3 128", 128, 28, 28, 128, 3, 1, 1},
    {"resnet50", "l2 1x1 512>128", 512, 28, 28, 128, 1, 1, 1},
    {"resnet50", "l3 3x3 256", 256, 14, 14, 256, 3, 1, 1},
    {"resnet50", "l3 1x1 256>1024", 256, 14, 14, 1024, 1, 1, 1},
    {"resnet50", "l3 1x1 1024>256", 1024, 14, 14, 256, 1, 1, 1},
    {"resnet50", "l4 3x3/2 512", 512, 14, 14, 512, 3, 2, 1},
    {"resnet50", "l4 3x3 512", 512, 7, 7, 512, 3, 1, 1},
    {"resnet50", "l4 1x1 2048>512", 2048, 7, 7, 512, 1, 1, 1},
    {"mobilenetv2", "conv0 3x3/2", 3, 224, 224, 32, 3, 2, 1},
    {"mobilenetv2", "dw 3x3 32 @112", 32, 112, 112, 32, 3, 1, 32},
    {"mobilenetv2", "pw 32>16 @112", 32, 112, 112, 16, 1, 1, 1},
    {"mobilenetv2", "exp 16>96 @112", 16, 112, 112, 96, 1, 1, 1},
    {"mobilenetv2", "dw 3x3/2 96 @112", 96, 112, 112, 96, 3, 2, 96},
    {"mobilenetv2", "dw 3x3 144 @56", 144, 56, 56, 144, 3, 1, 144},
    {"mobilenetv2", "proj 144>24 @56", 144, 56, 56, 24, 1, 1, 1},
    {"mobilenetv2", "exp 32>192 @28", 32, 28, 28, 192, 1, 1, 1},
    {"mobilenetv2", "dw 3x3 192 @28", 192, 28, 28, 192, 3, 1, 192},
    {"mobilenetv2", "dw 3x3 384 @14", 384, 14, 14, 384, 3, 1, 384},
    {"mobilenetv2", "exp 96>576 @14", 96, 14, 14, 576, 1, 1, 1},
    {"mobilenetv2", "dw 3x3/2 576 @14", 576, 14, 14, 576, 3, 2, 576},
    {"mobilenetv2", "dw 3x3 960 @7", 960, 7, 7, 960, 3, 1, 960},
    {"mobilenetv2", "proj 960>320 @7", 960, 7, 7, 320, 1, 1, 1},
    {"mobilenetv2", "1x1 320>1280 @7", 320, 7, 7, 1280, 1, 1, 1},
};

static dnnl_engine_t g_eng;
static dnnl_stream_t g_stream;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- the few calls that differ between 2.x and 3.x --------------------------------

static md_t md_new(int ndims, const dnnl_dims_t dims, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
#if V3
    dnnl_memory_desc_t md;
    CHECK(dnnl_memory_desc_create_with_tag(&md, ndims, dims, dt, tag));
    return md;
#else
    dnnl_memory_desc_t *md = malloc(sizeof *md);
    CHECK(dnnl_memory_desc_init_by_tag(md, ndims, dims, dt, tag));
    return md;
#endif
}

static md_t md_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

static dnnl_memory_t mem_new(md_t md, unsigned char fill) {
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, g_eng, DNNL_MEMORY_ALLOCATE));
    void *p;
    CHECK(dnnl_memory_map_data(m, &p));
    memset(p, fill, dnnl_memory_desc_get_size(md));
    CHECK(dnnl_memory_unmap_data(m, p));
    return m;
}

#if V3
// A small constant memory (scales f32 or zero points s32), 3.x execution args.
static dnnl_memory_t mem_const(dnnl_data_type_t dt, int n, const void *vals) {
    dnnl_dims_t d = {n};
    md_t md = md_new(1, d, dt, dnnl_x);
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, g_eng, DNNL_MEMORY_ALLOCATE));
    void *p;
    CHECK(dnnl_memory_map_data(m, &p));
    memcpy(p, vals, (size_t)n * 4);
    CHECK(dnnl_memory_unmap_data(m, p));
    return m;
}
#endif

// The f32 conv runs where the plan keeps activations: oneDNN's blocked
// layout for the ISA (nChw16c on AVX-512, nChw8c below; the stem's 3-channel
// input stays nchw). The int8 conv's layouts are oneDNN's choice.
static dnnl_format_tag_t g_blocked = dnnl_nChw16c;

static dnnl_primitive_desc_t conv_pd(const layer *L, int batch, dnnl_data_type_t src_dt, dnnl_data_type_t wdt,
                                     dnnl_data_type_t dst_dt, const_dnnl_primitive_attr_t attr) {
    int oh = (L->h + 2 * (L->r / 2) - L->r) / L->stride + 1, ow = (L->w + 2 * (L->r / 2) - L->r) / L->stride + 1;
    dnnl_dims_t sd = {batch, L->c, L->h, L->w}, dd = {batch, L->k, oh, ow}, bd = {L->k};
    dnnl_dims_t wd4 = {L->k, L->c, L->r, L->r}, wd5 = {L->groups, L->k / L->groups, L->c / L->groups, L->r, L->r};
    int f32 = src_dt == dnnl_f32;
    md_t smd = md_new(4, sd, src_dt, !f32 ? dnnl_format_tag_any : L->c == 3 ? dnnl_nchw : g_blocked);
    md_t dmd = md_new(4, dd, dst_dt, f32 ? g_blocked : dnnl_format_tag_any);
    md_t wmd = L->groups > 1 ? md_new(5, wd5, wdt, dnnl_format_tag_any) : md_new(4, wd4, wdt, dnnl_format_tag_any);
    md_t bmd = md_new(1, bd, dnnl_f32, dnnl_x);
    dnnl_dims_t strides = {L->stride, L->stride}, dil = {0, 0}, pad = {L->r / 2, L->r / 2};
    dnnl_primitive_desc_t pd;
#if V3
    CHECK(dnnl_convolution_forward_primitive_desc_create(&pd, g_eng, dnnl_forward_inference, dnnl_convolution_direct,
                                                         smd, wmd, bmd, dmd, strides, dil, pad, pad, attr));
#else
    dnnl_convolution_desc_t cd;
    CHECK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, smd, wmd,
                                                     bmd, dmd, strides, dil, pad, pad));
    CHECK(dnnl_primitive_desc_create(&pd, &cd, attr, g_eng, NULL));
#endif
    return pd;
}

// The bf16 conv (all three tensors bf16, layouts oneDNN's choice), or NULL
// when this oneDNN has no implementation for it on this CPU.
static dnnl_primitive_desc_t bf16_pd(const layer *L, int batch) {
    int oh = (L->h + 2 * (L->r / 2) - L->r) / L->stride + 1, ow = (L->w + 2 * (L->r / 2) - L->r) / L->stride + 1;
    dnnl_dims_t sd = {batch, L->c, L->h, L->w}, dd = {batch, L->k, oh, ow}, bd = {L->k};
    dnnl_dims_t wd4 = {L->k, L->c, L->r, L->r}, wd5 = {L->groups, L->k / L->groups, L->c / L->groups, L->r, L->r};
    md_t smd = md_new(4, sd, dnnl_bf16, dnnl_format_tag_any), dmd = md_new(4, dd, dnnl_bf16, dnnl_format_tag_any);
    md_t wmd =
        L->groups > 1 ? md_new(5, wd5, dnnl_bf16, dnnl_format_tag_any) : md_new(4, wd4, dnnl_bf16, dnnl_format_tag_any);
    md_t bmd = md_new(1, bd, dnnl_f32, dnnl_x);
    dnnl_dims_t strides = {L->stride, L->stride}, dil = {0, 0}, pad = {L->r / 2, L->r / 2};
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st;
#if V3
    st = dnnl_convolution_forward_primitive_desc_create(&pd, g_eng, dnnl_forward_inference, dnnl_convolution_direct,
                                                        smd, wmd, bmd, dmd, strides, dil, pad, pad, NULL);
#else
    dnnl_convolution_desc_t cd;
    CHECK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, smd, wmd,
                                                     bmd, dmd, strides, dil, pad, pad));
    st = dnnl_primitive_desc_create(&pd, &cd, NULL, g_eng, NULL);
#endif
    return st == dnnl_success ? pd : NULL;
}

// The quantization parameters of the int8 path (arbitrary but realistic).
enum { ZP_IN = 128, ZP_OUT = 5 };
static const float k_in_scale = 0.02f, k_out_scale = 0.05f, k_w_scale = 0.004f;

// Attributes of the int8 conv: per-channel scales, src and dst zero points.
static dnnl_primitive_attr_t i8_attr(int k, int groups) {
    dnnl_primitive_attr_t a;
    CHECK(dnnl_primitive_attr_create(&a));
#if V3
    (void)k;
    CHECK(dnnl_primitive_attr_set_scales_mask(a, DNNL_ARG_SRC, 0));
    CHECK(dnnl_primitive_attr_set_scales_mask(a, DNNL_ARG_WEIGHTS, groups > 1 ? 3 : 1));
    CHECK(dnnl_primitive_attr_set_scales_mask(a, DNNL_ARG_DST, 0));
    CHECK(dnnl_primitive_attr_set_zero_points_mask(a, DNNL_ARG_SRC, 0));
    CHECK(dnnl_primitive_attr_set_zero_points_mask(a, DNNL_ARG_DST, 0));
#else
    (void)groups;
    float *os = malloc(sizeof(float) * k);
    for (int i = 0; i < k; i++) os[i] = k_in_scale * k_w_scale / k_out_scale;
    int32_t zi = ZP_IN, zo = ZP_OUT;
    CHECK(dnnl_primitive_attr_set_output_scales(a, k, 1 << 1, os));
    CHECK(dnnl_primitive_attr_set_zero_points(a, DNNL_ARG_SRC, 1, 0, &zi));
    CHECK(dnnl_primitive_attr_set_zero_points(a, DNNL_ARG_DST, 1, 0, &zo));
    free(os);
#endif
    return a;
}

// A quantizing (f32 -> u8: x / scale + zp) or dequantizing (u8 -> f32:
// scale * (q - zp)) reorder.
static dnnl_primitive_desc_t q_reorder(md_t from, md_t to, int quantize) {
    dnnl_primitive_attr_t a;
    CHECK(dnnl_primitive_attr_create(&a));
    int arg = quantize ? DNNL_ARG_DST : DNNL_ARG_SRC;
#if V3
    CHECK(dnnl_primitive_attr_set_scales_mask(a, arg, 0));
    CHECK(dnnl_primitive_attr_set_zero_points_mask(a, arg, 0));
#else
    float s = quantize ? 1.0f / k_in_scale : k_out_scale;
    int32_t z = quantize ? ZP_IN : ZP_OUT;
    CHECK(dnnl_primitive_attr_set_output_scales(a, 1, 0, &s));
    CHECK(dnnl_primitive_attr_set_zero_points(a, arg, 1, 0, &z));
#endif
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_reorder_primitive_desc_create(&pd, from, g_eng, to, g_eng, a));
    dnnl_primitive_attr_destroy(a);
    return pd;
}

// ---- one layer ---------------------------------------------------------------------

enum { M_F32, M_I8, M_I8_BOUNDARY, M_BF16, M_BF16_BOUNDARY, M_COUNT };

typedef struct {
    dnnl_primitive_t f32, i8, qin, qout, bf, bin, bout; // bf NULL: oneDNN has no bf16 conv here
    dnnl_exec_arg_t af32[4], ai8[12], aqin[4], aqout[4], abf[4], abin[2], about[2];
    int nf32, ni8, nqin, nqout;
} bench_layer;

static void run(dnnl_primitive_t p, int n, const dnnl_exec_arg_t *a) {
    CHECK(dnnl_primitive_execute(p, g_stream, n, a));
    CHECK(dnnl_stream_wait(g_stream));
}

static void run_method(bench_layer *b, int m) {
    switch (m) {
    case M_F32: run(b->f32, b->nf32, b->af32); break;
    case M_I8: run(b->i8, b->ni8, b->ai8); break;
    case M_I8_BOUNDARY:
        run(b->qin, b->nqin, b->aqin);
        run(b->i8, b->ni8, b->ai8);
        run(b->qout, b->nqout, b->aqout);
        break;
    case M_BF16:
        if (b->bf) run(b->bf, 4, b->abf);
        break;
    case M_BF16_BOUNDARY:
        if (!b->bf) break;
        run(b->bin, 2, b->abin);
        run(b->bf, 4, b->abf);
        run(b->bout, 2, b->about);
        break;
    }
}

static double sample(bench_layer *b, int m, int *iters, double min_ms) {
    if (*iters == 0) {
        int k = 1;
        for (;;) {
            double t0 = now_ms();
            for (int i = 0; i < k; i++) run_method(b, m);
            double t = now_ms() - t0;
            if (t >= min_ms || k >= 1 << 20) break;
            k = t > 0.01 ? (int)(k * min_ms / t * 1.1) + 1 : k * 10;
        }
        *iters = k;
    }
    double t0 = now_ms();
    for (int i = 0; i < *iters; i++) run_method(b, m);
    return (now_ms() - t0) / *iters;
}

// Packs user weights (plain OIHW/GOIHW, type wdt) into the layout pd wants.
static dnnl_memory_t packed_weights(const layer *L, const_dnnl_primitive_desc_t pd, dnnl_data_type_t wdt) {
    dnnl_dims_t wd4 = {L->k, L->c, L->r, L->r}, wd5 = {L->groups, L->k / L->groups, L->c / L->groups, L->r, L->r};
    md_t umd = L->groups > 1 ? md_new(5, wd5, wdt, dnnl_goihw) : md_new(4, wd4, wdt, dnnl_oihw);
    dnnl_memory_t user = mem_new(umd, 1), packed = mem_new(md_query(pd, dnnl_query_weights_md), 0);
    dnnl_primitive_desc_t rpd;
    CHECK(dnnl_reorder_primitive_desc_create(&rpd, umd, g_eng, md_query(pd, dnnl_query_weights_md), g_eng, NULL));
    dnnl_primitive_t r;
    CHECK(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, packed}};
    run(r, 2, a);
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(user);
    return packed;
}

static const char *impl_of(const_dnnl_primitive_desc_t pd) {
    const char *s = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s;
}

static int g_csv; // one CSV line per layer instead of a markdown row

static void bench_one(const layer *L, int batch, int reps, double min_ms) {
    bench_layer b = {0};
    dnnl_primitive_desc_t pf = conv_pd(L, batch, dnnl_f32, dnnl_f32, dnnl_f32, NULL);
    dnnl_primitive_attr_t ia = i8_attr(L->k, L->groups);
    dnnl_primitive_desc_t pi = conv_pd(L, batch, dnnl_u8, dnnl_s8, dnnl_u8, ia);
    dnnl_primitive_attr_destroy(ia);
    md_t fsrc = md_query(pf, dnnl_query_src_md), fdst = md_query(pf, dnnl_query_dst_md);
    md_t isrc = md_query(pi, dnnl_query_src_md), idst = md_query(pi, dnnl_query_dst_md);
    dnnl_dims_t bd = {L->k};
    dnnl_memory_t bias = mem_new(md_new(1, bd, dnnl_f32, dnnl_x), 0);
    dnnl_memory_t xf = mem_new(fsrc, 0), yf = mem_new(fdst, 0), xi = mem_new(isrc, 100), yi = mem_new(idst, 0);
    dnnl_memory_t wf = packed_weights(L, pf, dnnl_f32), wi = packed_weights(L, pi, dnnl_s8);
    CHECK(dnnl_primitive_create(&b.f32, pf));
    CHECK(dnnl_primitive_create(&b.i8, pi));
    b.af32[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, xf};
    b.af32[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, wf};
    b.af32[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias};
    b.af32[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, yf};
    b.nf32 = 4;
    b.ai8[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, xi};
    b.ai8[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, wi};
    b.ai8[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias};
    b.ai8[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, yi};
    b.ni8 = 4;
    dnnl_primitive_desc_t pqin = q_reorder(fsrc, isrc, 1), pqout = q_reorder(idst, fdst, 0);
    CHECK(dnnl_primitive_create(&b.qin, pqin));
    CHECK(dnnl_primitive_create(&b.qout, pqout));
    b.aqin[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, xf};
    b.aqin[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, xi};
    b.nqin = 2;
    b.aqout[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, yi};
    b.aqout[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, yf};
    b.nqout = 2;
    // bf16: src, weights and dst bf16 in oneDNN's layouts; plain reorders at the boundary.
    dnnl_primitive_desc_t pb = NULL;
    pb = bf16_pd(L, batch);
    if (pb) {
        md_t bsrc = md_query(pb, dnnl_query_src_md), bdst = md_query(pb, dnnl_query_dst_md);
        dnnl_memory_t xb = mem_new(bsrc, 0), yb = mem_new(bdst, 0), wb = packed_weights(L, pb, dnnl_bf16);
        CHECK(dnnl_primitive_create(&b.bf, pb));
        b.abf[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, xb};
        b.abf[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, wb};
        b.abf[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias};
        b.abf[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, yb};
        dnnl_primitive_desc_t rin, rout;
        CHECK(dnnl_reorder_primitive_desc_create(&rin, fsrc, g_eng, bsrc, g_eng, NULL));
        CHECK(dnnl_reorder_primitive_desc_create(&rout, bdst, g_eng, fdst, g_eng, NULL));
        CHECK(dnnl_primitive_create(&b.bin, rin));
        CHECK(dnnl_primitive_create(&b.bout, rout));
        b.abin[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, xf};
        b.abin[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, xb};
        b.about[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, yb};
        b.about[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, yf};
    }
#if V3
    // 3.x: dst = (s_src * s_wei[k] * acc + bias) / s_dst + zp_dst, bias unscaled.
    float *ws = malloc(sizeof(float) * L->k);
    for (int i = 0; i < L->k; i++) ws[i] = k_w_scale;
    int32_t zi = ZP_IN, zo = ZP_OUT;
    b.ai8[b.ni8++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, mem_const(dnnl_f32, 1, &k_in_scale)};
    b.ai8[b.ni8++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, mem_const(dnnl_f32, L->k, ws)};
    b.ai8[b.ni8++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, mem_const(dnnl_f32, 1, &k_out_scale)};
    b.ai8[b.ni8++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, mem_const(dnnl_s32, 1, &zi)};
    b.ai8[b.ni8++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, mem_const(dnnl_s32, 1, &zo)};
    b.aqin[b.nqin++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, mem_const(dnnl_f32, 1, &k_in_scale)};
    b.aqin[b.nqin++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, mem_const(dnnl_s32, 1, &zi)};
    b.aqout[b.nqout++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, mem_const(dnnl_f32, 1, &k_out_scale)};
    b.aqout[b.nqout++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, mem_const(dnnl_s32, 1, &zo)};
    free(ws);
#endif
    double samples[M_COUNT][64];
    int iters[M_COUNT] = {0};
    if (reps > 64) reps = 64;
    for (int m = 0; m < M_COUNT; m++) run_method(&b, m); // warm up
    for (int rep = 0; rep < reps; rep++)
        for (int m = 0; m < M_COUNT; m++) samples[m][rep] = sample(&b, m, &iters[m], min_ms);
    double med[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) med[m] = median(samples[m], reps);
    int oh = (L->h + 2 * (L->r / 2) - L->r) / L->stride + 1;
    double gop = 2.0 * batch * L->k * oh * oh * (L->c / L->groups) * L->r * L->r * 1e-9;
    // (bf16 columns last, so readers of the older columns are unaffected; -1 / "-": no bf16 conv.)
    double bf = b.bf ? med[M_BF16] : -1, bfb = b.bf ? med[M_BF16_BOUNDARY] : -1;
    if (g_csv)
        printf("%s,%s,%d,%.3f,%.5f,%.5f,%.5f,%s,%s,%s,%.5f,%.5f,%s\n", L->model, L->name, batch, gop, med[M_F32],
               med[M_I8], med[M_I8_BOUNDARY], impl_of(pf), impl_of(pi), impl_of(pqin), bf, bfb, pb ? impl_of(pb) : "-");
    else
        printf("| %s | %s | %d | %.3f | %.3f | %.3f (%.2fx) | %.3f (%.2fx) | %.0f%% | %s | %s | %s | %.3f (%.2fx) | "
               "%.3f (%.2fx) | %s |\n",
               L->model, L->name, batch, gop, med[M_F32], med[M_I8], med[M_F32] / med[M_I8], med[M_I8_BOUNDARY],
               med[M_F32] / med[M_I8_BOUNDARY], 100.0 * (med[M_I8_BOUNDARY] - med[M_I8]) / med[M_I8], impl_of(pf),
               impl_of(pi), impl_of(pqin), bf, b.bf ? med[M_F32] / bf : 0, bfb, b.bf ? med[M_F32] / bfb : 0,
               pb ? impl_of(pb) : "-");
    fflush(stdout);
    // Process exit frees the rest; the bench runs each layer once.
    dnnl_primitive_destroy(b.f32);
    dnnl_primitive_destroy(b.i8);
    dnnl_primitive_destroy(b.qin);
    dnnl_primitive_destroy(b.qout);
}

int main(int argc, char **argv) {
    int batch = 1, reps = 7, header = 0;
    double min_ms = 10;
    const char *model = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-ms") && i + 1 < argc)
            min_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--header"))
            header = 1;
        else if (!strcmp(argv[i], "--csv"))
            g_csv = 1;
        else {
            fprintf(stderr, "usage: %s [--batch B] [--reps R] [--min-ms M] [--model NAME] [--header | --csv]\n",
                    argv[0]);
            return 2;
        }
    }
    if (batch < 1 || reps < 1) return 2;
    CHECK(dnnl_engine_create(&g_eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&g_stream, g_eng, dnnl_stream_default_flags));
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    g_blocked = (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? dnnl_nChw16c : dnnl_nChw8c;
    const dnnl_version_t *v = dnnl_version();
    printf("# oneDNN %d.%d.%d (%s), cpu runtime %u, effective ISA 0x%x\n", v->major, v->minor, v->patch, v->hash,
           v->cpu_runtime, (unsigned)dnnl_get_effective_cpu_isa());
    if (header) {
        printf("| model | layer | batch | GOP | f32 ms | int8 ms (f32/int8) | int8 + boundary ms (f32/that) | "
               "boundary %% of int8 | f32 impl | int8 impl | quantize reorder | bf16 ms (f32/bf16) | "
               "bf16 + boundary ms (f32/that) | bf16 impl |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    }
    for (size_t i = 0; i < sizeof k_layers / sizeof *k_layers; i++)
        if (!strcmp(model, "all") || !strcmp(model, k_layers[i].model)) bench_one(&k_layers[i], batch, reps, min_ms);
    dnnl_stream_destroy(g_stream);
    dnnl_engine_destroy(g_eng);
    return 0;
}
