// Per-image time of the sparse conv kernels at batch 1 against batch N on
// ResNet-50's layer shapes (90% unstructured, random weights), 1 thread,
// in CPU time of the calling thread, so that time slices lost to other
// processes on a shared machine do not count (cache interference still
// does). Rounds interleave the two batches; each cell is the fastest round.
//
//   sparse-batch-layers [--batch N (16)] [--rounds R (8)] [--sparsity S (0.9)]
//
// Each batch runs on inputs and outputs of its own size, as the layers of a
// model do: at batch 1 they stay in cache between runs, at batch 16 the big
// maps' (16 x 3.2 MB after a 1x1 64>256 @56) do not.

#define _POSIX_C_SOURCE 200809L
#include "sparse/sparse-conv.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    int c, k, hw, r, stride;
} layer;

static const layer k_layers[] = {
    {"1x1 64>256 @56", 64, 256, 56, 1, 1},      {"1x1 256>64 @56", 256, 64, 56, 1, 1},
    {"3x3 64 @56", 64, 64, 56, 3, 1},           {"3x3 128 s2 @56", 128, 128, 56, 3, 2},
    {"1x1 256>512 s2 @56", 256, 512, 56, 1, 2}, {"1x1 128>512 @28", 128, 512, 28, 1, 1},
    {"1x1 512>128 @28", 512, 128, 28, 1, 1},    {"3x3 128 @28", 128, 128, 28, 3, 1},
    {"1x1 256>1024 @14", 256, 1024, 14, 1, 1},  {"1x1 1024>256 @14", 1024, 256, 14, 1, 1},
    {"3x3 256 @14", 256, 256, 14, 3, 1},        {"3x3 512 s2 @14", 512, 512, 14, 3, 2},
    {"1x1 512>2048 @7", 512, 2048, 7, 1, 1},    {"1x1 2048>512 @7", 2048, 512, 7, 1, 1},
    {"3x3 512 @7", 512, 512, 7, 3, 1},
};

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static float *alloc_floats(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) exit(1);
    return p;
}

// Fastest per-image ms over `rounds` of batch 1 and batch n, interleaved.
static void measure(const layer *L, int n, int rounds, double sparsity, double out[2]) {
    cd_conv_desc d;
    memset(&d, 0, sizeof d);
    d.n = n;
    d.c = L->c, d.k = L->k, d.h = d.w = L->hw, d.r = d.s = L->r;
    d.stride_h = d.stride_w = L->stride, d.dil_h = d.dil_w = 1;
    d.pad_t = d.pad_l = d.pad_b = d.pad_r = L->r / 2;
    d.groups = 1;
    d.act.kind = CD_ACT_RELU;
    const size_t nw = (size_t)d.k * d.c * d.r * d.s;
    float *w = alloc_floats(nw);
    for (size_t i = 0; i < nw; i++) w[i] = rand() < sparsity * RAND_MAX ? 0.0f : (float)rand() / RAND_MAX - 0.5f;
    cd_sparse_conv *h;
    if (cd_sparse_conv_create(&d, w, NULL, NULL, &h)) exit(1);
    const int oh = (d.h + 2 * (d.r / 2) - d.r) / d.stride_h + 1;
    const int batch[2] = {1, n};
    float *x[2], *y[2];
    void *ws[2];
    for (int b = 0; b < 2; b++) {
        const size_t xn = (size_t)batch[b] * d.c * d.h * d.w;
        x[b] = alloc_floats(xn);
        for (size_t i = 0; i < xn; i++) x[b][i] = (float)rand() / RAND_MAX;
        y[b] = alloc_floats((size_t)batch[b] * d.k * oh * oh);
        const size_t wn = cd_sparse_conv_workspace_size(h, batch[b]);
        ws[b] = wn ? alloc_floats(wn / sizeof(float) + 1) : NULL;
        out[b] = 1e30;
    }
    for (int r = 0; r < rounds; r++)
        for (int b = 0; b < 2; b++) {
            const int reps = b == 0 ? n : 1; // the same images' worth of work
            cd_sparse_conv_run_ws(h, x[b], NULL, y[b], batch[b], ws[b]);
            const double t0 = cpu_ms();
            for (int i = 0; i < reps; i++) cd_sparse_conv_run_ws(h, x[b], NULL, y[b], batch[b], ws[b]);
            const double t = (cpu_ms() - t0) / n;
            if (t < out[b]) out[b] = t;
        }
    for (int b = 0; b < 2; b++) {
        free(x[b]);
        free(y[b]);
        free(ws[b]);
    }
    cd_sparse_conv_free(h);
    free(w);
}

int main(int argc, char **argv) {
    int n = 16, rounds = 8;
    double sparsity = 0.9;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sparsity") && i + 1 < argc)
            sparsity = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--batch N] [--rounds R] [--sparsity S]\n", argv[0]);
            return 2;
        }
    }
    if (n < 2 || rounds < 1) return 2;
    omp_set_num_threads(1);
    srand(1);
    printf("| ResNet-50 layer (%.0f%%) | batch 1 ms | batch %d ms per image | ratio |\n|---|---|---|---|\n",
           sparsity * 100, n);
    double s1 = 0, sn = 0;
    for (size_t i = 0; i < sizeof k_layers / sizeof k_layers[0]; i++) {
        double t[2];
        measure(&k_layers[i], n, rounds, sparsity, t);
        printf("| %s | %.3f | %.3f | %.2f |\n", k_layers[i].name, t[0], t[1], t[1] / t[0]);
        s1 += t[0];
        sn += t[1];
        fflush(stdout);
    }
    printf("| sum | %.3f | %.3f | %.2f |\n", s1, sn, sn / s1);
    return 0;
}
