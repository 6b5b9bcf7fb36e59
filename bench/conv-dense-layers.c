// Dense conv kernels on the real ResNet-50 and MobileNetV2 layer shapes:
// oneDNN in NCHW and in the CPU's blocked layout, nChw16c or nChw8c (through backends/cpu/dnnl.h, i.e. exactly the
// product path), im2col + OpenBLAS sgemm on NCHW, and the NCHW<->blocked
// reorder costs. Prints one markdown table row per layer.
//
//   conv-dense-layers [--threads N] [--batch B] [--reps R] [--min-ms M]
//                     [--model resnet50|mobilenetv2|all] [--overhead]
//
// Timing: every method of a layer is sampled once per round, R rounds
// (interleaved, so a busy neighbour core hurts all methods alike); a sample
// runs the kernel k times (k calibrated to last >= M ms) and the median
// sample is reported. Ratios are against oneDNN blocked of the same round set.

#include "backends/cpu/dnnl.h"
#include "core/clock.h"
#include "core/stats-util.h"
#include "runtime/runtime.h"
#include "kernels/cpu/ref.h"

#include <cblas.h>
#include <math.h>
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *model, *name;
    int c, h, w, k, r, stride, groups;
} layer;

// ResNet-50 (torchvision v1.5: stride in the 3x3) and MobileNetV2 at 224x224:
// every distinct conv shape class, each listed once.
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

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cd_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void *xalloc(size_t floats) {
    float *p = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < floats; i++) p[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return p;
}

// ---- methods -------------------------------------------------------------------

// The blocked layout oneDNN runs fast on this CPU (nChw16c on AVX-512, nChw8c
// on AVX2): the "blocked" column and the reorders use it.
static cd_layout g_blk = CD_LAYOUT_NCHW16C;

enum { M_DNNL16C, M_DNNLNCHW, M_BLAS, M_REORDER_IN, M_REORDER_OUT, M_COUNT };

typedef struct {
    cd_conv_desc d;
    int batch;
    cd_dnnl_ctx *ctx;
    cd_dnnl_op *conv16, *convn, *rin, *rout;
    float *w, *bias, *src, *src16, *dst, *dst16, *col;
} bench_layer;

static void run_blas(bench_layer *b) {
    const cd_conv_desc *d = &b->d;
    int g = d->groups, cpg = d->c / g, kpg = d->k / g, ohw = d->oh * d->ow;
    int kk = cpg * d->r * d->s;
    int direct = d->r == 1 && d->s == 1 && d->stride_h == 1 && d->stride_w == 1;
    for (int n = 0; n < b->batch; n++) {
        const float *x = b->src + (size_t)n * d->c * d->h * d->w;
        float *y = b->dst + (size_t)n * d->k * ohw;
        for (int gi = 0; gi < g; gi++) {
            const float *col = x + (size_t)gi * cpg * d->h * d->w;
            if (!direct) {
                // im2col: rows (c, r, s), columns output pixels.
                for (int c = 0; c < cpg; c++)
                    for (int r = 0; r < d->r; r++)
                        for (int s = 0; s < d->s; s++) {
                            float *row = b->col + ((size_t)(c * d->r + r) * d->s + s) * ohw;
                            const float *plane = col + (size_t)c * d->h * d->w;
                            for (int oy = 0; oy < d->oh; oy++) {
                                int iy = oy * d->stride_h - d->pad_t + r;
                                for (int ox = 0; ox < d->ow; ox++) {
                                    int ix = ox * d->stride_w - d->pad_l + s;
                                    row[oy * d->ow + ox] =
                                        (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) ? 0.0f : plane[iy * d->w + ix];
                                }
                            }
                        }
                col = b->col;
            }
            float *yg = y + (size_t)gi * kpg * ohw;
            for (int k = 0; k < kpg; k++) {
                float bv = b->bias[gi * kpg + k];
                for (int p = 0; p < ohw; p++) yg[(size_t)k * ohw + p] = bv;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kpg, ohw, kk, 1.0f, b->w + (size_t)gi * kpg * kk, kk,
                        col, ohw, 1.0f, yg, ohw);
        }
    }
}

static int run_method(bench_layer *b, int m) {
    const float *s[1];
    switch (m) {
    case M_DNNL16C: s[0] = b->src16; return cd_dnnl_op_run(b->conv16, b->ctx, b->batch, 1, s, b->dst16);
    case M_DNNLNCHW: s[0] = b->src; return cd_dnnl_op_run(b->convn, b->ctx, b->batch, 1, s, b->dst);
    case M_BLAS: run_blas(b); return 0;
    case M_REORDER_IN: s[0] = b->src; return cd_dnnl_op_run(b->rin, b->ctx, b->batch, 1, s, b->src16);
    case M_REORDER_OUT: s[0] = b->dst16; return cd_dnnl_op_run(b->rout, b->ctx, b->batch, 1, s, b->dst);
    }
    return -1;
}

// One sample of method m: ms per call over >= min_ms of calls.
static double sample(bench_layer *b, int m, int *iters, double min_ms) {
    if (*iters == 0) { // calibrate
        int k = 1;
        for (;;) {
            double t0 = cd_now_ms();
            for (int i = 0; i < k; i++) run_method(b, m);
            double t = cd_now_ms() - t0;
            if (t >= min_ms || k >= 1 << 20) break;
            k = t > 0.01 ? (int)(k * min_ms / t * 1.1) + 1 : k * 10;
        }
        *iters = k;
    }
    double t0 = cd_now_ms();
    for (int i = 0; i < *iters; i++) run_method(b, m);
    return (cd_now_ms() - t0) / *iters;
}

static int bench_one(const layer *L, int batch, int threads, int reps, double min_ms) {
    bench_layer b = {0};
    cd_conv_desc *d = &b.d;
    d->c = L->c;
    d->h = L->h;
    d->w = L->w;
    d->k = L->k;
    d->r = d->s = L->r;
    d->stride_h = d->stride_w = L->stride;
    d->dil_h = d->dil_w = 1;
    d->groups = L->groups;
    d->pad_t = d->pad_l = d->pad_b = d->pad_r = L->r / 2;
    d->act = (cd_activation){CD_ACT_NONE, 0, 0};
    cd_conv_out_dims(d);
    b.batch = batch;
    int cpg = d->c / d->groups;
    size_t wn = (size_t)d->k * cpg * d->r * d->s;
    b.w = xalloc(wn);
    b.bias = xalloc(d->k);
    b.src = xalloc(cd_dnnl_tensor_floats(CD_LAYOUT_NCHW, batch, d->c, d->h, d->w));
    b.src16 = xalloc(cd_dnnl_tensor_floats(g_blk, batch, d->c, d->h, d->w));
    b.dst = xalloc(cd_dnnl_tensor_floats(CD_LAYOUT_NCHW, batch, d->k, d->oh, d->ow));
    b.dst16 = xalloc(cd_dnnl_tensor_floats(g_blk, batch, d->k, d->oh, d->ow));
    b.col = xalloc((size_t)cpg * d->r * d->s * d->oh * d->ow);
    int rc = cd_dnnl_ctx_create(&b.ctx);
    // Layer 0 of each net has 3 input channels: its natural input is NCHW.
    cd_layout in16 = L->c == 3 ? CD_LAYOUT_NCHW : g_blk;
    if (!rc) rc = cd_dnnl_conv_create(d, in16, g_blk, batch, b.w, b.bias, &b.conv16);
    if (!rc) rc = cd_dnnl_conv_create(d, CD_LAYOUT_NCHW, CD_LAYOUT_NCHW, batch, b.w, b.bias, &b.convn);
    if (!rc) rc = cd_dnnl_reorder_create(CD_LAYOUT_NCHW, g_blk, d->c, d->h, d->w, batch, &b.rin);
    if (!rc) rc = cd_dnnl_reorder_create(g_blk, CD_LAYOUT_NCHW, d->k, d->oh, d->ow, batch, &b.rout);
    if (rc) {
        fprintf(stderr, "%s %s: setup failed: %d\n", L->model, L->name, rc);
        return rc;
    }
    if (in16 == CD_LAYOUT_NCHW)
        memcpy(b.src16, b.src, cd_dnnl_tensor_floats(CD_LAYOUT_NCHW, batch, d->c, d->h, d->w) * 4);
    size_t need = 0, s;
    cd_dnnl_op_prepare(b.conv16, batch, &s);
    need = s > need ? s : need;
    cd_dnnl_op_prepare(b.convn, batch, &s);
    need = s > need ? s : need;
    cd_dnnl_ctx_reserve(b.ctx, need);

    double samples[M_COUNT][64];
    int iters[M_COUNT] = {0};
    if (reps > 64) reps = 64;
    for (int m = 0; m < M_COUNT; m++) run_method(&b, m); // warm up
    for (int rep = 0; rep < reps; rep++)
        for (int m = 0; m < M_COUNT; m++) {
            if (m == M_REORDER_IN && in16 == CD_LAYOUT_NCHW) {
                samples[m][rep] = 0;
                continue;
            }
            samples[m][rep] = sample(&b, m, &iters[m], min_ms);
        }
    double med[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) med[m] = median(samples[m], reps);
    double gflop = 2.0 * batch * d->k * d->oh * d->ow * cpg * d->r * d->s * 1e-9;
    double base = med[M_DNNL16C];
    printf("| %s | %s | %d | %d | %.3f | %.3f | %.0f | %.3f (%.2fx) | %.3f (%.2fx) | %.3f + %.3f (%.0f%%) | %s |\n",
           L->model, L->name, batch, threads, gflop, base, gflop / base * 1e3, med[M_DNNLNCHW], med[M_DNNLNCHW] / base,
           med[M_BLAS], med[M_BLAS] / base, med[M_REORDER_IN], med[M_REORDER_OUT],
           100.0 * (med[M_REORDER_IN] + med[M_REORDER_OUT]) / base, cd_dnnl_op_impl(b.conv16, batch));
    fflush(stdout);
    cd_dnnl_op_free(b.conv16);
    cd_dnnl_op_free(b.convn);
    cd_dnnl_op_free(b.rin);
    cd_dnnl_op_free(b.rout);
    cd_dnnl_ctx_free(b.ctx);
    free(b.w);
    free(b.bias);
    free(b.src);
    free(b.src16);
    free(b.dst);
    free(b.dst16);
    free(b.col);
    return 0;
}

// Per-call cost of the wrapper (memory objects per call, scratchpad check,
// stream wait) against a raw oneDNN execute on pre-built memory objects, on a
// tiny reorder where the overhead dominates.
static void bench_overhead(int reps) {
    int c = 16, h = 7, w = 7;
    float *src = xalloc(c * h * w), *dst = xalloc(c * h * w);
    cd_dnnl_ctx *ctx;
    cd_dnnl_op *op;
    if (cd_dnnl_ctx_create(&ctx) || cd_dnnl_reorder_create(CD_LAYOUT_NCHW, g_blk, c, h, w, 1, &op)) return;
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_memory_desc_t smd, dmd;
    dnnl_dims_t dims = {1, c, h, w};
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t sm, dm;
    dnnl_engine_create(&eng, dnnl_cpu, 0);
    dnnl_stream_create(&st, eng, dnnl_stream_default_flags);
    dnnl_memory_desc_init_by_tag(&smd, 4, dims, dnnl_f32, dnnl_nchw);
    dnnl_memory_desc_init_by_tag(&dmd, 4, dims, dnnl_f32, g_blk == CD_LAYOUT_NCHW8C ? dnnl_nChw8c : dnnl_nChw16c);
    dnnl_reorder_primitive_desc_create(&pd, &smd, eng, &dmd, eng, NULL);
    dnnl_primitive_create(&prim, pd);
    dnnl_memory_create(&sm, &smd, eng, src);
    dnnl_memory_create(&dm, &dmd, eng, dst);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, sm}, {DNNL_ARG_TO, dm}};
    double a[64], r[64];
    const int n = 20000;
    if (reps > 64) reps = 64;
    for (int rep = 0; rep < reps; rep++) {
        const float *s[1] = {src};
        double t0 = cd_now_ms();
        for (int i = 0; i < n; i++) cd_dnnl_op_run(op, ctx, 1, 1, s, dst);
        a[rep] = (cd_now_ms() - t0) / n * 1e3;
        t0 = cd_now_ms();
        for (int i = 0; i < n; i++) {
            dnnl_primitive_execute(prim, st, 2, args);
            dnnl_stream_wait(st);
        }
        r[rep] = (cd_now_ms() - t0) / n * 1e3;
    }
    double ma = median(a, reps), mr = median(r, reps);
    printf("per-call overhead (reorder 16x7x7, threads %d): cd_dnnl_op_run %.2f us, raw dnnl execute %.2f us, wrapper "
           "adds %.2f us\n",
           cd_dnnl_get_threads(), ma, mr, ma - mr);
    dnnl_memory_destroy(sm);
    dnnl_memory_destroy(dm);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
    cd_dnnl_op_free(op);
    cd_dnnl_ctx_free(ctx);
    free(src);
    free(dst);
}

int main(int argc, char **argv) {
    cd_runtime_options ropts; // CONVD_* (runtime/runtime.h)
    cd_runtime_options_from_env(&ropts);
    cd_runtime_configure(&ropts);
    int threads = 1, batch = 1, reps = 7, overhead = 0;
    double min_ms = 10;
    const char *model = "all";
    g_blk = cd_dnnl_blocked_layout();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-ms") && i + 1 < argc)
            min_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--overhead"))
            overhead = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--threads N] [--batch B] [--reps R] [--min-ms M] "
                    "[--model resnet50|mobilenetv2|all] [--overhead]\n",
                    argv[0]);
            return 2;
        }
    }
    if (threads < 1 || batch < 1 || reps < 1) return 2;
    if (cd_dnnl_set_threads(threads)) return 1;
    openblas_set_num_threads(threads);
    if (overhead) {
        bench_overhead(reps);
        return 0;
    }
    for (size_t i = 0; i < sizeof k_layers / sizeof *k_layers; i++) {
        if (strcmp(model, "all") && strcmp(model, k_layers[i].model)) continue;
        if (bench_one(&k_layers[i], batch, threads, reps, min_ms)) return 1;
    }
    return 0;
}
