// Dense vs sparse convolution layers on a HIP device, through the backend
// vtable (backends/backend.h) exactly as the executor drives it: the dense HIP
// kernels (im2col/1x1 + tiled SGEMM + epilogue) against the CSR route
// (rocSPARSE on a GPU, the CPU reference under hip-emu) of the same layer at
// several weight densities. Prints one table row per layer and density: the
// median time of each, their ratio, and the largest difference between the
// two outputs (relative, scaled by max(1, |dense|)).
//
//   hip-layers [--device hip:0|hip-emu] [--batch B] [--reps N] [--quick] [--probe]
//
// --probe only checks the device (the probe of the GPU=hip plugin) and prints
// what it found.
// --quick divides channels by 8 and sizes by 4 (for the emulator, where the
// times mean nothing; it checks the program and the routes). Exit status 0
// when every sparse output matched its dense one within 1e-4, 1 otherwise, 2
// for usage errors, 3 when the device cannot be created.

#include "backends/devices.h"
#include "core/clock.h"
#include "core/errors.h"
#include "core/stats-util.h"
#include "runtime/options.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    int c, k, hw, r; // input/output channels, input height = width, kernel
} layer;

// ResNet-50-shaped layers: the 1x1 convolutions a sparse route exists for,
// and one 3x3 (dense only on this backend).
static const layer g_layers[] = {
    {"res2", 64, 256, 56, 1},  {"res3", 512, 128, 28, 1}, {"res4", 256, 1024, 14, 1},
    {"res5", 2048, 512, 7, 1}, {"res3", 128, 128, 28, 3},
};
static const double g_density[] = {1.0, 0.5, 0.3, 0.1, 0.05};

static uint64_t g_rng = 88172645463325252ull;
static float rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

// Runs prepared op st reps times (after one warm-up) and returns the median
// ms, or a negative value on error; the output stays in y.
static double time_op(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *x,
                      cd_btensor *y, int reps) {
    const cd_btensor *srcs[1] = {x};
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) return -1;
    for (int i = -1; i < reps; i++) {
        double t0 = cd_now_ms();
        int rc = cd_backend_op_run(be, CD_BOP_CONV2D, ctx, st, batch, srcs, y);
        if (!rc) rc = cd_backend_synchronize(be, ctx);
        if (rc) {
            fprintf(stderr, "hip-layers: run failed: %s\n", cd_strerror(rc));
            free(t);
            return -1;
        }
        if (i >= 0) t[i] = cd_now_ms() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cd_cmp_double);
    double med = t[reps / 2];
    free(t);
    return med;
}

int main(int argc, char **argv) {
    cd_runtime_options ropts; // CONVD_* (runtime/runtime.h)
    cd_runtime_options_from_env(&ropts);
    cd_runtime_configure(&ropts);
    const char *device = "hip:0";
    int batch = 8, reps = 20, quick = 0, probe = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--probe") == 0)
            probe = 1;
        else {
            fprintf(stderr, "usage: hip-layers [--device hip:0|hip-emu] [--batch B] [--reps N] [--quick] [--probe]\n");
            return 2;
        }
    }
    if (batch < 1 || batch > 256 || reps < 1 || reps > 10000) {
        fprintf(stderr, "hip-layers: --batch 1..256, --reps 1..10000\n");
        return 2;
    }
    char err[768] = "", info[512] = "";
    if (cd_backend_probe(device, cd_runtime_backend_opts(), info, sizeof info, err, sizeof err) != 0) {
        fprintf(stderr, "hip-layers: --device %s: %s\n", device, err);
        return 3;
    }
    if (probe) {
        printf("%s\n", info);
        return 0;
    }
    cd_backend_t be;
    int rc = cd_backend_create(device, cd_runtime_backend_opts(), &be, err, sizeof err);
    if (rc) {
        fprintf(stderr, "hip-layers: --device %s: %s\n", device, err);
        return 3;
    }
    cd_backend_ctx *ctx = NULL;
    if ((rc = cd_backend_ctx_create(be, &ctx))) {
        fprintf(stderr, "hip-layers: context: %s\n", cd_strerror(rc));
        cd_backend_free(be);
        return 3;
    }
    printf("device %s: %s; batch %d, median of %d runs%s\n", device, info, batch, reps,
           quick ? " (--quick: shrunk layers)" : "");
    printf("%-28s %7s %10s %10s %8s %12s  %s\n", "layer", "density", "dense ms", "sparse ms", "speedup", "max rel err",
           "sparse kernel");
    int bad = 0;
    for (size_t li = 0; li < sizeof g_layers / sizeof g_layers[0]; li++) {
        layer L = g_layers[li];
        if (quick) L.c = L.c / 8 + 1, L.k = L.k / 8 + 3, L.hw = L.hw / 4 + 1;
        cd_conv_desc c = cd_conv_square(L.c, L.hw, L.hw, L.k, L.r, 1, L.r / 2);
        c.act = (cd_activation){CD_ACT_RELU, 0, 0};
        char name[64];
        snprintf(name, sizeof name, "%s %dx%d %d->%d %dx%d", L.name, L.r, L.r, L.c, L.k, L.hw, L.hw);
        size_t nw = (size_t)c.k * c.c * c.r * c.s, nx = (size_t)batch * c.c * c.h * c.w,
               ny = (size_t)batch * c.k * c.oh * c.ow;
        float *w = malloc(nw * sizeof(float)), *bias = malloc((size_t)c.k * sizeof(float));
        float *hx = malloc(nx * sizeof(float)), *hd = malloc(ny * sizeof(float)), *hs = malloc(ny * sizeof(float));
        void *dx = NULL, *dd = NULL, *ds = NULL;
        if (!w || !bias || !hx || !hd || !hs || cd_backend_buffer_alloc(be, nx * 4, &dx) ||
            cd_backend_buffer_alloc(be, ny * 4, &dd) || cd_backend_buffer_alloc(be, ny * 4, &ds)) {
            fprintf(stderr, "hip-layers: out of memory\n");
            return 3;
        }
        for (size_t i = 0; i < nx; i++) hx[i] = rnd();
        for (int i = 0; i < c.k; i++) bias[i] = rnd() * 0.1f;
        cd_backend_upload(be, dx, hx, nx * 4);
        for (size_t di = 0; di < sizeof g_density / sizeof g_density[0]; di++) {
            double dens = g_density[di];
            for (size_t i = 0; i < nw; i++) {
                float v = rnd();
                w[i] = (rnd() * 0.5f + 0.5f) < dens ? v : 0.0f;
            }
            cd_bop_desc d;
            memset(&d, 0, sizeof d);
            d.op = CD_BOP_CONV2D;
            d.max_batch = batch;
            d.nsrc = 1;
            d.src[0] = (cd_tdesc){4, {1, c.c, c.h, c.w}, CD_LAYOUT_NCHW, 0};
            d.dst = (cd_tdesc){4, {1, c.k, c.oh, c.ow}, CD_LAYOUT_NCHW, 0};
            d.u.conv = c;
            d.w = w;
            d.bias = bias;
            cd_btensor x = {dx, CD_LAYOUT_NCHW, 4, {batch, c.c, c.h, c.w}};
            cd_btensor yd = {dd, CD_LAYOUT_NCHW, 4, {batch, c.k, c.oh, c.ow}}, ys = yd;
            ys.data = ds;
            cd_op_state *st = NULL;
            double t_dense = -1, t_sparse = -1, err_max = -1;
            if ((rc = cd_backend_op_init(be, &d, &st)) == 0) {
                t_dense = time_op(be, ctx, st, batch, &x, &yd, reps);
                cd_backend_op_state_free(be, st);
            }
            char kernel[64] = "-";
            d.sparse = 1;
            if (dens < 1.0 && cd_backend_supports_op(be, &d) && cd_backend_op_init(be, &d, &st) == 0) {
                snprintf(kernel, sizeof kernel, "%s", cd_backend_op_kernel(be, st));
                t_sparse = time_op(be, ctx, st, batch, &x, &ys, reps);
                cd_backend_op_state_free(be, st);
                if (t_dense >= 0 && t_sparse >= 0 && !cd_backend_download(be, hd, dd, ny * 4) &&
                    !cd_backend_download(be, hs, ds, ny * 4)) {
                    err_max = 0;
                    for (size_t i = 0; i < ny; i++) {
                        double e = fabs((double)hs[i] - hd[i]) / fmax(1.0, fabs((double)hd[i]));
                        if (!(e <= err_max)) err_max = e; // NaN counts as the worst
                    }
                }
            }
            if (t_dense < 0 || (t_sparse < 0 && strcmp(kernel, "-") != 0) || err_max > 1e-4 || isnan(err_max)) bad = 1;
            char ts[32] = "-", sp[32] = "-", es[32] = "-";
            if (t_sparse >= 0) snprintf(ts, sizeof ts, "%.3f", t_sparse);
            if (t_sparse > 0 && t_dense > 0) snprintf(sp, sizeof sp, "%.2fx", t_dense / t_sparse);
            if (err_max >= 0 || isnan(err_max)) snprintf(es, sizeof es, "%.2e", err_max);
            printf("%-28s %7.2f %10.3f %10s %8s %12s  %s\n", name, dens, t_dense, ts, sp, es, kernel);
            fflush(stdout);
        }
        cd_backend_buffer_free(be, dx);
        cd_backend_buffer_free(be, dd);
        cd_backend_buffer_free(be, ds);
        free(w), free(bias), free(hx), free(hd), free(hs);
    }
    cd_backend_ctx_free(be, ctx);
    cd_backend_free(be);
    if (bad) fprintf(stderr, "hip-layers: a run failed or a sparse output differs from the dense one by > 1e-4\n");
    return bad;
}
