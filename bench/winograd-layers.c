// Our Winograd 3x3 conv (F2, F4, F6) and oneDNN's own Winograd against
// oneDNN's direct conv on ResNet's stride-1 3x3 layers (64@56, 128@28,
// 256@14, 512@7): ResNet-18's (ReLU and the residual of a basic block's
// second conv) and ResNet-50's (the bottleneck's 3x3: ReLU, no residual),
// each through cd_dnnl_conv_create_sw as the product creates it:
// CONVD_WINOGRAD off (oneDNN direct), onednn, f2, f4 and f6 forced. Prints
// the load average and the ISAs, then one markdown row per layer; oneDNN's
// Winograd reads "-" where oneDNN declines it (below AVX-512).
//
//   winograd-layers [--threads N] [--batch B] [--rounds R] [--min-ms M]
//
// Timing: the methods of a layer are sampled once per round, R rounds
// interleaved (a busy neighbour hurts all alike); a sample repeats the call
// until M ms have passed and keeps the mean; the median sample is reported.

#include "backends/cpu/dnnl.h"
#include "core/clock.h"
#include "core/stats-util.h"
#include "kernels/cpu/ref.h"
#include "runtime/runtime.h"
#include "sparse/spmm-ukernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { M_DNNL, M_ONEDNN_WINO, M_F2, M_F4, M_F6, M_COUNT };
static const int k_mode_opt[M_COUNT] = {1, 6, 3, 4, 5}; // the CPU backend's winograd switch (backend-opts.h)

static cd_dnnl_op *create(const cd_conv_desc *d, cd_layout l, int batch, int mode, const float *w, const float *b) {
    cd_dnnl_op *op = NULL;
    if (cd_dnnl_conv_create_sw(d, l, l, batch, w, b, &(cd_backend_opts){.winograd = k_mode_opt[mode]}, &op))
        return NULL;
    return op;
}

// Mean ms of op over at least min_ms.
static double sample(cd_dnnl_op *op, cd_dnnl_ctx *ctx, int batch, const float *const *in, float *dst, double min_ms) {
    int n = 0;
    const uint64_t t0 = cd_now_ns();
    uint64_t t;
    do {
        cd_dnnl_op_run(op, ctx, batch, in[1] ? 2 : 1, in, dst);
        n++;
        t = cd_now_ns();
    } while ((double)(t - t0) / 1e6 < min_ms);
    return (double)(t - t0) / 1e6 / n;
}

// The speed-up cell of method m: "ms (x)", or "-" when it did not build.
static void cell(char *buf, size_t n, const double *med, int m, int built) {
    if (built)
        snprintf(buf, n, "%.3f (%.2fx)", med[m], med[M_DNNL] / med[m]);
    else
        snprintf(buf, n, "-");
}

static int bench_one(int c, int hw, int residual, int batch, int threads, int rounds, double min_ms) {
    const cd_layout l = cd_dnnl_blocked_layout();
    cd_conv_desc d = cd_conv_square(c, hw, hw, c, 3, 1, 1);
    d.act.kind = CD_ACT_RELU;
    d.has_residual = residual;
    const size_t wn = (size_t)c * c * 9, sn = cd_layout_numel(l, batch, c, hw, hw);
    float *w = malloc(wn * sizeof(float)), *bias = malloc((size_t)c * sizeof(float));
    float *src = malloc(sn * sizeof(float)), *res = malloc(sn * sizeof(float)), *dst = malloc(sn * sizeof(float));
    if (!w || !bias || !src || !res || !dst) return 1;
    for (size_t i = 0; i < wn; i++) w[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    for (int i = 0; i < c; i++) bias[i] = 0.01f * (float)(i % 7);
    for (size_t i = 0; i < sn; i++) src[i] = res[i] = (float)((i * 104729) % 2001) / 1000.0f - 1.0f;
    cd_dnnl_op *op[M_COUNT];
    for (int m = 0; m < M_COUNT; m++)
        if (!(op[m] = create(&d, l, batch, m, w, bias))) return 1;
    cd_dnnl_ctx *ctx = NULL;
    if (cd_dnnl_ctx_create(&ctx)) return 1;
    const float *in[2] = {src, residual ? res : NULL};
    const int dnnl_wino = strstr(cd_dnnl_op_impl(op[M_ONEDNN_WINO], 1), "wino") != NULL;
    double *ms = calloc((size_t)rounds * M_COUNT, sizeof(double));
    for (int m = 0; m < M_COUNT; m++) sample(op[m], ctx, batch, in, dst, min_ms); // warm-up
    for (int r = 0; r < rounds; r++)
        for (int m = 0; m < M_COUNT; m++) ms[m * rounds + r] = sample(op[m], ctx, batch, in, dst, min_ms);
    double med[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) {
        qsort(ms + m * rounds, (size_t)rounds, sizeof(double), cd_cmp_double);
        med[m] = ms[m * rounds + rounds / 2];
    }
    const double gflop = 2.0 * batch * c * c * 9 * hw * hw / 1e9;
    char cells[M_COUNT][48];
    for (int m = M_ONEDNN_WINO; m < M_COUNT; m++)
        cell(cells[m], sizeof cells[m], med, m, m != M_ONEDNN_WINO || dnnl_wino);
    printf("| %s %d@%dx%d | %d | %d | %.3f | %.3f (%.0f) | %s | %s | %s | %s | %s / %s |\n", residual ? "r18" : "r50",
           c, hw, hw, batch, threads, gflop, med[M_DNNL], gflop / med[M_DNNL] * 1e3, cells[M_ONEDNN_WINO], cells[M_F2],
           cells[M_F4], cells[M_F6], cd_dnnl_op_impl(op[M_DNNL], 1),
           dnnl_wino ? cd_dnnl_op_impl(op[M_ONEDNN_WINO], 1) : "-");
    fflush(stdout);
    for (int m = 0; m < M_COUNT; m++) cd_dnnl_op_free(op[m]);
    cd_dnnl_ctx_free(ctx);
    free(ms), free(w), free(bias), free(src), free(res), free(dst);
    return 0;
}

int main(int argc, char **argv) {
    int threads = 1, batch = 1, rounds = 7;
    double min_ms = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-ms") && i + 1 < argc)
            min_ms = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--batch B] [--rounds R] [--min-ms M]\n", argv[0]);
            return 2;
        }
    }
    cd_runtime_options ropts; // CONVD_MAX_ISA caps our bodies as in the product
    cd_runtime_options_from_env(&ropts);
    cd_runtime_configure(&ropts);
    if (threads < 1 || batch < 1 || rounds < 1 || cd_dnnl_init() || cd_dnnl_set_threads(threads)) return 2;
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    printf("load average %.2f %.2f %.2f; our ISA %s; oneDNN ISA %s; %d rounds of >= %.0f ms\n\n", load[0], load[1],
           load[2], cd_sparse_isa_name(cd_sparse_isa_f32(cd_sparse_isa_best())), cd_dnnl_isa(), rounds, min_ms);
    printf("| layer | batch | threads | GFLOP | oneDNN direct ms (GFLOP/s) | oneDNN Winograd ms (speed-up) | F2x2 ms "
           "(speed-up) | F4x4 ms (speed-up) | F6x6 ms (speed-up) | oneDNN impls (direct / Winograd) "
           "|\n|---|---|---|---|---|---|---|---|---|---|\n");
    static const int shapes[][2] = {{64, 56}, {128, 28}, {256, 14}, {512, 7}};
    for (int residual = 1; residual >= 0; residual--)
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
            if (bench_one(shapes[i][0], shapes[i][1], residual, batch, threads, rounds, min_ms)) return 1;
    getloadavg(load, 3);
    printf("\nload average at the end %.2f %.2f %.2f\n", load[0], load[1], load[2]);
    return 0;
}
