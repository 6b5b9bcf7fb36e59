// MobileNetV2's depthwise 3x3 layers and its classifier at their floors, in
// one run: oneDNN's depthwise primitive alone and with its ReLU6 post-op,
// our kernel (backends/cpu/dw3x3.h) with ReLU6, and a streaming copy that
// moves the layer's bytes (in + out) through the same cache level, which
// gives the bandwidth floor; the FMA floor is the layer's multiply-adds at
// the --peak rate (bench/fma-peak). Then the 1280 -> 1000 FC at batch 1 from
// cold weights (a 64 MB write evicts them before each run) against a
// streaming read of 5 MB equally cold.
//
//   dw-layers [--threads N] [--rounds R] [--reps K] [--peak GFLOPS] [--layer NAME] [--no-fc]
//
// Every method of a layer is sampled once per round (interleaved); a sample
// is the mean of K back-to-back runs; the best of R samples is printed for
// the layers (on a shared machine load only ever adds time), the median of R
// cold runs for the FC.

#include "backends/cpu/dnnl.h"
#include "backends/cpu/dw3x3-choose.h"
#include "core/clock.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int c, hw, stride, count; // count: layers of this shape in the model
} dw_layer;

static const dw_layer k_dw[] = {
    {"features.1", 32, 112, 1, 1},    {"features.2", 96, 112, 2, 1},     {"features.3", 144, 56, 1, 1},
    {"features.4", 144, 56, 2, 1},    {"features.5-6", 192, 28, 1, 2},   {"features.7", 192, 28, 2, 1},
    {"features.8-11", 384, 14, 1, 4}, {"features.12-13", 576, 14, 1, 2}, {"features.14", 576, 14, 2, 1},
    {"features.15-17", 960, 7, 1, 3},
};

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static float *fbuf(size_t n, float v) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) abort();
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}

static cd_dnnl_op *dw_op(const cd_conv_desc *d, cd_layout l, const float *w, cd_dw3x3_mode mode) {
    cd_dnnl_op *op = NULL;
    if (cd_dnnl_conv_create_sw(d, l, l, 1, w, w, &(cd_backend_opts){.dw3x3 = (int)mode}, &op)) {
        fprintf(stderr, "conv create failed\n");
        exit(1);
    }
    return op;
}

static void dw_row(const dw_layer *L, cd_layout l, int rounds, int reps, double peak, double *tot) {
    cd_conv_desc d = cd_conv_square(L->c, L->hw, L->hw, L->c, 3, L->stride, 1);
    d.groups = L->c;
    cd_conv_out_dims(&d);
    const size_t sn = cd_dnnl_tensor_floats(l, 1, d.c, d.h, d.w), dn = cd_dnnl_tensor_floats(l, 1, d.k, d.oh, d.ow);
    float *w = fbuf((size_t)d.c * 9, 0.01f), *in = fbuf(sn, 0.5f), *out = fbuf(dn, 0.0f), *copy = fbuf(sn, 0.0f);
    cd_dnnl_op *plain = dw_op(&d, l, w, CD_DW3X3_OFF);
    d.act = (cd_activation){CD_ACT_CLIP, 0.0f, 6.0f};
    cd_dnnl_op *post = dw_op(&d, l, w, CD_DW3X3_OFF), *ours = dw_op(&d, l, w, CD_DW3X3_ON);
    cd_dnnl_ctx *ctx;
    if (cd_dnnl_ctx_create(&ctx)) exit(1);
    double s[4][64];
    const float *srcs[1] = {in};
    for (int r = 0; r < rounds; r++) {
        cd_dnnl_op *ops[3] = {plain, post, ours};
        for (int m = 0; m < 4; m++) {
            uint64_t t0 = cd_now_ns();
            for (int k = 0; k < reps; k++)
                if (m < 3)
                    cd_dnnl_op_run(ops[m], ctx, 1, 1, srcs, out);
                else
                    memcpy(copy, in, sn * sizeof(float));
            s[m][r] = (double)(cd_now_ns() - t0) / reps / 1e6;
        }
    }
    double t[4];
    for (int m = 0; m < 4; m++) t[m] = (median(s[m], rounds), s[m][0]); // sorted: [0] is the best
    const double bytes = (double)(sn + dn) * sizeof(float), bw = 2.0 * sn * sizeof(float) / (t[3] * 1e6); // GB/s
    const double mem_ms = bytes / (bw * 1e6), fma_ms = 2.0 * 9 * d.c * d.oh * d.ow / (peak * 1e6);
    printf("| %s | %d @%d s%d | %.3f | %.3f | %.3f (%.2fx) | %.1f | %.3f | %.3f | %s | %s |\n", L->name, L->c, L->hw,
           L->stride, t[0], t[1], t[2], t[1] / t[2], bw, mem_ms, fma_ms, cd_dnnl_op_impl(post, 1),
           cd_dnnl_op_impl(ours, 1));
    tot[0] += L->count * t[1], tot[1] += L->count * t[2], tot[2] += L->count * (mem_ms > fma_ms ? mem_ms : fma_ms);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(plain), cd_dnnl_op_free(post), cd_dnnl_op_free(ours);
    free(w), free(in), free(out), free(copy);
}

// The classifier from cold weights against a cold 5 MB streaming read.
static void fc_rows(int rounds) {
    const int n = 1000, k = 1280;
    float *w = fbuf((size_t)n * k, 0.001f), *x = fbuf(k, 1.0f), *y = fbuf(n, 0.0f);
    float *evict = fbuf(16u << 20, 1.0f), *stream = fbuf((size_t)n * k, 1.0f);
    cd_dnnl_tdesc src = {.c = k, .h = 1, .w = 1, .layout = CD_LAYOUT_NCHW};
    cd_dnnl_op *op;
    if (cd_dnnl_ip_create(src, n, w, NULL, (cd_activation){CD_ACT_NONE, 0, 0}, 1, &op)) exit(1);
    cd_dnnl_ctx *ctx;
    if (cd_dnnl_ctx_create(&ctx)) exit(1);
    double s[3][64];
    volatile float sink = 0;
    const float *srcs[1] = {x};
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < 3; m++) {
            for (size_t i = 0; i < (16u << 20); i += 16) evict[i] += 1.0f; // 64 MB: past the L3
            uint64_t t0 = cd_now_ns();
            if (m == 0 || m == 2) {
                if (m == 2) cd_dnnl_op_run(op, ctx, 1, 1, srcs, y), t0 = cd_now_ns(); // m 2: warm
                cd_dnnl_op_run(op, ctx, 1, 1, srcs, y);
            } else {
                float acc[16] = {0};
#pragma omp parallel for reduction(+ : acc[:16])
                for (size_t i = 0; i < (size_t)n * k; i += 16)
                    for (int j = 0; j < 16; j++) acc[j] += stream[i + j];
                sink += acc[0];
            }
            s[m][r] = (double)(cd_now_ns() - t0) / 1e6;
        }
    }
    double t[3];
    for (int m = 0; m < 3; m++) t[m] = median(s[m], rounds);
    const double mb = (double)n * k * 4 / 1e6;
    printf("| FC 1280>1000 (%.1f MB) | %s | cold %.3f ms (%.1f GB/s) | warm %.3f ms | cold read floor %.3f ms (%.1f "
           "GB/s) | %.2fx the floor |\n",
           mb, cd_dnnl_op_impl(op, 1), t[0], mb / t[0], t[2], t[1], mb / t[1], t[0] / t[1]);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(w), free(x), free(y), free(evict), free(stream);
}

int main(int argc, char **argv) {
    int threads = 1, rounds = 7, reps = 20;
    double peak = 117.0;
    const char *only = NULL;
    int fc = 1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 == argc && strcmp(argv[i], "--no-fc")) return 2;
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--peak")) peak = atof(argv[i + 1]);
        if (!strcmp(argv[i], "--layer")) only = argv[i + 1];
        if (!strcmp(argv[i], "--no-fc")) fc = 0, i--;
    }
    if (rounds < 1 || rounds > 64 || reps < 1) return 2;
    if (cd_dnnl_init()) return 1;
    cd_dnnl_set_threads(threads);
    omp_set_num_threads(threads);
    const cd_layout l = cd_dnnl_blocked_layout();
    printf("# layout %s, oneDNN isa %s, %d thread(s), layers: best of %d rounds of %d runs, FMA peak %.0f GFLOP/s\n\n",
           cd_layout_name(l), cd_dnnl_isa(), threads, rounds, reps, peak);
    printf("| layer | c @hw stride | oneDNN ms | oneDNN+ReLU6 ms | ours+ReLU6 ms (gain) | copy GB/s | memory floor ms "
           "| FMA floor ms | oneDNN impl | ours |\n|---|---|---|---|---|---|---|---|---|---|\n");
    double tot[3] = {0, 0, 0};
    for (size_t i = 0; i < sizeof k_dw / sizeof k_dw[0]; i++)
        if (!only || !strcmp(only, k_dw[i].name)) dw_row(&k_dw[i], l, rounds, reps, peak, tot);
    printf("\nAll 17 depthwise layers: oneDNN+ReLU6 %.3f ms, ours %.3f ms (%.2fx), floor (max of memory, FMA) "
           "%.3f ms\n\n",
           tot[0], tot[1], tot[0] / tot[1], tot[2]);
    if (fc) fc_rows(rounds);
    return 0;
}
