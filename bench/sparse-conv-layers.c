// Sparse conv kernels (sparse/sparse-conv.h) against oneDNN's best dense
// convolution for the same layer, in the same run, same thread count.
//
//   sparse-conv-layers [--filter SUBSTR] [--batch N] [--threads T]
//                      [--min-time SECONDS] [--layers r50|mv2|all]
//                      [--format auto|csr|bsr4|bsr8]   (default auto)
//                      [--rounds R]                    (default 3)
//                      [--levels 0.6,0.9,-0.9]  (a subset of the levels)
//                      [--cin-block N]          (force the input-channel block)
//                      [--ms]                   (cells: sparse ms, not speedups)
//
// For each ResNet-50 / MobileNetV2 layer shape, batch and thread count:
// oneDNN convolution with every tensor in the layout oneDNN prefers (format
// "any"; the reorders of weights and input are done once, outside the timing),
// then our sparse kernel on the same weights pruned at 0..95% unstructured
// and 90% in 4x1 output-channel blocks (random masks at exactly that
// fraction, NCHW in and out, packing outside the timing). Prints a Markdown
// table: dense time, then speedup = dense time / sparse time per sparsity,
// and the ideal 1/(1-s) in the header. Each cell is the fastest time over R
// rounds that interleave dense and sparse runs (the machine is shared:
// interference only ever adds time).

#include "core/stats-util.h"
#include "runtime/runtime.h"
#include "kernels/cpu/ref.h"
#include "sparse/sparse-conv.h"

#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name; // model, stage, shape
    int c, k, hw, r, stride, groups;
} layer;

static const layer k_layers[] = {
    // ResNet-50 bottlenecks (224x224 input).
    {"r50 l1 1x1 64>256 @56", 64, 256, 56, 1, 1, 1},
    {"r50 l1 1x1 256>64 @56", 256, 64, 56, 1, 1, 1},
    {"r50 l1 3x3 64 @56", 64, 64, 56, 3, 1, 1},
    {"r50 l2 1x1 128>512 @28", 128, 512, 28, 1, 1, 1},
    {"r50 l2 1x1 512>128 @28", 512, 128, 28, 1, 1, 1},
    {"r50 l2 3x3 128 @28", 128, 128, 28, 3, 1, 1},
    {"r50 l2 3x3 128 s2 @56", 128, 128, 56, 3, 2, 1},
    {"r50 l3 1x1 256>1024 @14", 256, 1024, 14, 1, 1, 1},
    {"r50 l3 1x1 1024>256 @14", 1024, 256, 14, 1, 1, 1},
    {"r50 l3 3x3 256 @14", 256, 256, 14, 3, 1, 1},
    {"r50 l3 3x3 256 s2 @28", 256, 256, 28, 3, 2, 1},
    {"r50 l4 1x1 512>2048 @7", 512, 2048, 7, 1, 1, 1},
    {"r50 l4 1x1 2048>512 @7", 2048, 512, 7, 1, 1, 1},
    {"r50 l4 3x3 512 @7", 512, 512, 7, 3, 1, 1},
    {"r50 l4 3x3 512 s2 @14", 512, 512, 14, 3, 2, 1},
    // MobileNetV2 (224x224 input): pointwise expand/project, depthwise 3x3.
    {"mv2 1x1 16>96 @112", 16, 96, 112, 1, 1, 1},
    {"mv2 1x1 24>144 @56", 24, 144, 56, 1, 1, 1},
    {"mv2 1x1 144>24 @56", 144, 24, 56, 1, 1, 1},
    {"mv2 1x1 32>192 @28", 32, 192, 28, 1, 1, 1},
    {"mv2 1x1 192>32 @28", 192, 32, 28, 1, 1, 1},
    {"mv2 1x1 64>384 @14", 64, 384, 14, 1, 1, 1},
    {"mv2 1x1 384>64 @14", 384, 64, 14, 1, 1, 1},
    {"mv2 1x1 576>96 @14", 576, 96, 14, 1, 1, 1},
    {"mv2 1x1 160>960 @7", 160, 960, 7, 1, 1, 1},
    {"mv2 1x1 960>160 @7", 960, 160, 7, 1, 1, 1},
    {"mv2 1x1 320>1280 @7", 320, 1280, 7, 1, 1, 1},
    {"mv2 3x3 3>32 s2 @224", 3, 32, 224, 3, 2, 1},
    {"mv2 3x3 dw 144 s2 @56", 144, 144, 56, 3, 2, 144},
    {"mv2 3x3 dw 384 @14", 384, 384, 14, 3, 1, 384},
};

// Sparsity levels: unstructured, then one 4x1-block level (negative = block).
static const double k_levels[] = {0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, -0.9};
#define NLEVELS (sizeof k_levels / sizeof k_levels[0])
// Levels measured (--levels: a comma list of the above, e.g. "0.6,0.9,-0.9");
// the others print "-".
static int g_level_on[NLEVELS] = {1, 1, 1, 1, 1, 1, 1, 1};
static int g_cin_block; // --cin-block: forced input-channel block (0 = auto)
static int g_ms;        // --ms: cells print the sparse time in ms, not the speedup
static int g_im2col;    // --im2col on|off: cd_sparse_conv_options.im2col (0 = auto)
// --ab-shift: every level also runs with the aligned-shift 3x3 path forced
// off (timed in the same rounds; printed as an extra "(shift off)" row) while
// the main row forces it on where the geometry allows.
static int g_ab_shift;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double g_min_time = 0.1;
static int g_rounds = 3;
static cd_sparse_format g_format = CD_SPARSE_FMT_AUTO;

// Fastest milliseconds of fn(arg) over runs lasting at least g_min_time in
// total (at least 5 runs, at most 200), after two warm-up runs. The minimum,
// not the median: the machine is shared, and interference only adds time.
static double time_ms(void (*fn)(void *), void *arg) {
    double t[200];
    fn(arg);
    fn(arg);
    int n = 0;
    const double start = now_s();
    while (n < 200 && (n < 5 || now_s() - start < g_min_time)) {
        const double t0 = now_s();
        fn(arg);
        t[n++] = (now_s() - t0) * 1e3;
    }
    qsort(t, n, sizeof t[0], cd_cmp_double);
    return t[0];
}

// The output write floor: writing the layer's NCHW output once (memset of
// the same buffer, threads splitting it). No kernel that produces the output
// in that layout can be faster; oneDNN time / floor caps the speedup.
typedef struct {
    float *y;
    size_t bytes;
} floor_arg;

static void floor_run(void *arg) {
    const floor_arg *a = arg;
    const size_t chunk = (a->bytes / (size_t)omp_get_max_threads() + 63) & ~(size_t)63;
#pragma omp parallel for schedule(static)
    for (size_t off = 0; off < a->bytes; off += chunk)
        memset((char *)a->y + off, 0, a->bytes - off < chunk ? a->bytes - off : chunk);
}

#define DNNL_CHECK(x)                                                                              \
    do {                                                                                           \
        dnnl_status_t s_ = (x);                                                                    \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "oneDNN: %s failed (%d) at %s:%d\n", #x, (int)s_, __FILE__, __LINE__); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static dnnl_engine_t g_engine;
static dnnl_stream_t g_stream;

typedef struct {
    dnnl_primitive_t conv;
    dnnl_memory_t src, wei, bia, dst;
    dnnl_exec_arg_t args[4];
} dense_conv;

// Reorders user memory `from` into a new memory of layout md (done once).
static dnnl_memory_t to_layout(dnnl_memory_t from, const dnnl_memory_desc_t *md) {
    dnnl_memory_t to;
    DNNL_CHECK(dnnl_memory_create(&to, md, g_engine, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t rpd;
    const dnnl_memory_desc_t *fmd;
    DNNL_CHECK(dnnl_memory_get_memory_desc(from, &fmd));
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, fmd, g_engine, md, g_engine, NULL));
    dnnl_primitive_t r;
    DNNL_CHECK(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    DNNL_CHECK(dnnl_primitive_execute(r, g_stream, 2, a));
    DNNL_CHECK(dnnl_stream_wait(g_stream));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    return to;
}

// oneDNN's best dense conv for d (inference, bias, layouts chosen by oneDNN).
static void dense_create(const cd_conv_desc *d, const float *x, const float *w, const float *bias, dense_conv *dc) {
    const int cpg = d->c / d->groups;
    dnnl_dims_t sd = {d->n, d->c, d->h, d->w}, dd = {d->n, d->k, d->oh, d->ow};
    dnnl_dims_t bd = {d->k};
    dnnl_memory_desc_t smd, wmd, bmd, dmd, u_smd, u_wmd;
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, dnnl_format_tag_any));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, dnnl_format_tag_any));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&u_smd, 4, sd, dnnl_f32, dnnl_nchw));
    if (d->groups > 1) {
        dnnl_dims_t wd = {d->groups, d->k / d->groups, cpg, d->r, d->s};
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wmd, 5, wd, dnnl_f32, dnnl_format_tag_any));
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&u_wmd, 5, wd, dnnl_f32, dnnl_goihw));
    } else {
        dnnl_dims_t wd = {d->k, cpg, d->r, d->s};
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any));
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&u_wmd, 4, wd, dnnl_f32, dnnl_oihw));
    }
    dnnl_dims_t strides = {d->stride_h, d->stride_w}, dil = {d->dil_h - 1, d->dil_w - 1};
    dnnl_dims_t pl = {d->pad_t, d->pad_l}, pr = {d->pad_b, d->pad_r};
    dnnl_convolution_desc_t cdesc;
    DNNL_CHECK(dnnl_dilated_convolution_forward_desc_init(&cdesc, dnnl_forward_inference, dnnl_convolution_direct, &smd,
                                                          &wmd, &bmd, &dmd, strides, dil, pl, pr));
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &cdesc, NULL, g_engine, NULL));
    const dnnl_memory_desc_t *psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *pwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_t usrc, uwei;
    DNNL_CHECK(dnnl_memory_create(&usrc, &u_smd, g_engine, (void *)x));
    DNNL_CHECK(dnnl_memory_create(&uwei, &u_wmd, g_engine, (void *)w));
    dc->src = to_layout(usrc, psrc);
    dc->wei = to_layout(uwei, pwei);
    DNNL_CHECK(dnnl_memory_create(&dc->bia, &bmd, g_engine, (void *)bias));
    DNNL_CHECK(dnnl_memory_create(&dc->dst, pdst, g_engine, DNNL_MEMORY_ALLOCATE));
    dnnl_memory_destroy(usrc);
    dnnl_memory_destroy(uwei);
    DNNL_CHECK(dnnl_primitive_create(&dc->conv, pd));
    dnnl_primitive_desc_destroy(pd);
    dc->args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, dc->src};
    dc->args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, dc->wei};
    dc->args[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, dc->bia};
    dc->args[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, dc->dst};
}

static void dense_run(void *arg) {
    dense_conv *dc = arg;
    DNNL_CHECK(dnnl_primitive_execute(dc->conv, g_stream, 4, dc->args));
    DNNL_CHECK(dnnl_stream_wait(g_stream));
}

static void dense_free(dense_conv *dc) {
    dnnl_primitive_destroy(dc->conv);
    dnnl_memory_destroy(dc->src);
    dnnl_memory_destroy(dc->wei);
    dnnl_memory_destroy(dc->bia);
    dnnl_memory_destroy(dc->dst);
}

typedef struct {
    const cd_sparse_conv *h;
    const float *x;
    float *y;
    int batch;
    void *ws;
} sparse_run_arg;

static void sparse_run(void *arg) {
    sparse_run_arg *a = arg;
    if (cd_sparse_conv_run_ws(a->h, a->x, NULL, a->y, a->batch, a->ws) != 0) exit(1);
}

static unsigned long long g_rng = 0x1234567ull;
static double rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

// Zeroes exactly round(s*n) of the n items chosen by a random permutation.
static void random_mask(unsigned char *keep, size_t n, double s) {
    size_t *idx = malloc(n * sizeof *idx);
    for (size_t i = 0; i < n; i++) idx[i] = i, keep[i] = 1;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rnd() * i);
        size_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
    const size_t z = (size_t)llround(s * (double)n);
    for (size_t i = 0; i < z && i < n; i++) keep[idx[i]] = 0;
    free(idx);
}

// w pruned at level s (negative: 4x1 output-channel blocks at |s|).
static void prune(const float *dense, float *w, const cd_conv_desc *d, double s) {
    const size_t cols = (size_t)(d->c / d->groups) * d->r * d->s;
    const size_t n = (size_t)d->k * cols;
    memcpy(w, dense, n * sizeof *w);
    if (s == 0.0) return;
    if (s > 0) {
        unsigned char *keep = malloc(n);
        random_mask(keep, n, s);
        for (size_t i = 0; i < n; i++)
            if (!keep[i]) w[i] = 0.0f;
        free(keep);
        return;
    }
    const size_t kb = (size_t)(d->k + 3) / 4, nb = kb * cols;
    unsigned char *keep = malloc(nb);
    random_mask(keep, nb, -s);
    for (size_t b = 0; b < kb; b++)
        for (size_t j = 0; j < cols; j++)
            if (!keep[b * cols + j])
                for (size_t i = 0; i < 4 && b * 4 + i < (size_t)d->k; i++) w[(b * 4 + i) * cols + j] = 0.0f;
    free(keep);
}

// Results kept for the summary: layer kind (0: 1x1, 1: 3x3 dense-channel,
// 2: depthwise), batch and thread index, speedups per level, break-even.
typedef struct {
    int kind, bi, ti;
    int stem; // 3 input channels: a network's first conv, which the pruned
              // models keep dense (`convctl prune --skip first`)
    double sp[NLEVELS];
    double be;  // break-even sparsity, 1.0 when none up to 95%
    double cap; // oneDNN time / output write floor
} result;
static result g_results[512];
static int g_nresults;

static void run_layer(const layer *L, int batch, int threads, int bi, int ti) {
    omp_set_num_threads(threads);
    cd_conv_desc d = cd_conv_square(L->c, L->hw, L->hw, L->k, L->r, L->stride, L->r / 2);
    d.n = batch;
    d.groups = L->groups;
    const size_t wn = (size_t)d.k * (d.c / d.groups) * d.r * d.s;
    const size_t xn = (size_t)batch * d.c * d.h * d.w, yn = (size_t)batch * d.k * d.oh * d.ow;
    float *dense = malloc(wn * sizeof *dense), *w = malloc(wn * sizeof *w);
    // The input 64-byte aligned, as the runtime's tensors are: 1x1 layers
    // run on its planes, and malloc's 16-byte alignment made the same layer
    // 1.3x slower or not depending on the heap's history.
    float *bias = malloc(d.k * sizeof *bias), *x = aligned_alloc(64, (xn * sizeof *x + 63) & ~(size_t)63);
    float *y = aligned_alloc(64, (yn * sizeof *y + 63) & ~(size_t)63);
    for (size_t i = 0; i < wn; i++) dense[i] = (float)(rnd() - 0.5);
    for (int i = 0; i < d.k; i++) bias[i] = (float)(rnd() - 0.5);
    for (size_t i = 0; i < xn; i++) x[i] = (float)rnd();

    dense_conv dc;
    dense_create(&d, x, dense, bias, &dc);
    cd_sparse_conv *h[NLEVELS] = {0}, *hb[NLEVELS] = {0};
    void *ws[NLEVELS] = {0}, *wsb[NLEVELS] = {0};
    char fmt_note[16] = "";
    for (size_t l = 0; l < NLEVELS; l++) {
        if (!g_level_on[l]) continue;
        prune(dense, w, &d, k_levels[l]);
        cd_sparse_conv_options opt = {
            .format = g_format, .cin_block = g_cin_block, .shift = g_ab_shift ? 1 : 0, .im2col = g_im2col};
        if (cd_sparse_conv_create(&d, w, bias, &opt, &h[l]) != 0) {
            h[l] = NULL;
            continue;
        }
        opt.shift = -1;
        if (g_ab_shift && cd_sparse_conv_create(&d, w, bias, &opt, &hb[l]) == 0) {
            const size_t n = cd_sparse_conv_workspace_size(hb[l], batch);
            wsb[l] = n ? aligned_alloc(64, (n + 63) & ~(size_t)63) : NULL;
        }
        const size_t wsn = cd_sparse_conv_workspace_size(h[l], batch);
        ws[l] = wsn ? aligned_alloc(64, (wsn + 63) & ~(size_t)63) : NULL;
        if (k_levels[l] < 0) {
            cd_sparse_conv_info info;
            cd_sparse_conv_get_info(h[l], &info);
            snprintf(fmt_note, sizeof fmt_note, "%s", cd_sparse_format_name(info.format));
        }
    }
    // Rounds interleave dense and sparse; every cell keeps its fastest time.
    double t_dense = INFINITY, t_floor = INFINITY, t_sparse[NLEVELS], t_off[NLEVELS];
    floor_arg fa = {y, yn * sizeof *y};
    for (size_t l = 0; l < NLEVELS; l++) t_sparse[l] = h[l] ? INFINITY : -1.0;
    for (size_t l = 0; l < NLEVELS; l++) t_off[l] = hb[l] ? INFINITY : -1.0;
    for (int round = 0; round < g_rounds; round++) {
        const double td = time_ms(dense_run, &dc);
        t_dense = td < t_dense ? td : t_dense;
        const double tf = time_ms(floor_run, &fa);
        t_floor = tf < t_floor ? tf : t_floor;
        for (size_t l = 0; l < NLEVELS; l++) {
            if (!h[l]) continue;
            sparse_run_arg a = {h[l], x, y, batch, ws[l]};
            const double t = time_ms(sparse_run, &a);
            t_sparse[l] = t < t_sparse[l] ? t : t_sparse[l];
            if (!hb[l]) continue;
            sparse_run_arg b = {hb[l], x, y, batch, wsb[l]};
            const double tb = time_ms(sparse_run, &b);
            t_off[l] = tb < t_off[l] ? tb : t_off[l];
        }
    }
    const double td = time_ms(dense_run, &dc);
    t_dense = td < t_dense ? td : t_dense;
    dense_free(&dc);
    int shifted = 0;
    for (size_t l = 0; l < NLEVELS; l++) {
        if (h[l]) {
            cd_sparse_conv_info info;
            cd_sparse_conv_get_info(h[l], &info);
            shifted |= info.shift > 0;
        }
        free(ws[l]);
        cd_sparse_conv_free(h[l]);
        free(wsb[l]);
        cd_sparse_conv_free(hb[l]);
    }

    printf("| %s | %d | %d | %.3f |", L->name, batch, threads, t_dense);
    double best_be = -1.0; // lowest unstructured level from which sparse >= dense
    int broke = 0;
    result *res = g_nresults < 512 ? &g_results[g_nresults++] : NULL;
    if (res) {
        res->kind = L->groups > 1 ? 2 : L->r == 1 ? 0 : 1;
        res->stem = L->c <= 3;
        res->bi = bi;
        res->ti = ti;
        res->cap = t_dense / t_floor;
    }
    for (size_t l = 0; l < NLEVELS; l++) {
        if (!g_level_on[l]) {
            if (res) res->sp[l] = 0;
            printf(" - |");
            continue;
        }
        if (t_sparse[l] < 0) {
            printf(" err |");
            continue;
        }
        const double sp = t_dense / t_sparse[l];
        if (res) res->sp[l] = sp;
        if (k_levels[l] >= 0) {
            if (sp >= 1.0) {
                if (best_be < 0 || broke) best_be = k_levels[l];
                broke = 0;
            } else {
                broke = 1;
            }
        }
        if (g_ms)
            printf(" %.3f |", t_sparse[l]);
        else
            printf(" %.2f |", sp);
    }
    if (res) res->be = best_be >= 0 && !broke ? best_be : 1.0;
    if (best_be >= 0 && !broke)
        printf(" %.0f%% | %s |", best_be * 100, fmt_note);
    else
        printf(" >95%% | %s |", fmt_note);
    printf(" %.3f | %.1fx |\n", t_floor, t_dense / t_floor);
    if (g_ab_shift) {
        printf("| %s (shift off%s) | %d | %d | %.3f |", L->name, shifted ? "" : "; on not eligible", batch, threads,
               t_dense);
        for (size_t l = 0; l < NLEVELS; l++) {
            if (!g_level_on[l] || t_off[l] < 0)
                printf(" - |");
            else if (g_ms)
                printf(" %.3f |", t_off[l]);
            else
                printf(" %.2f |", t_dense / t_off[l]);
        }
        printf(" | | | |\n");
    }
    fflush(stdout);
    free(dense);
    free(w);
    free(bias);
    free(x);
    free(y);
}

static int cmp_be(const void *a, const void *b) { return cd_cmp_double(a, b); }

// Summary row k: the three kinds, then (3) the 3x3 layers without the
// 3-channel stem, i.e. those the pruned models prune.
static int summary_kind(const result *r, int k) { return k == 3 ? r->kind == 1 && !r->stem : r->kind == k; }

// Geometric means of the speedups per layer kind, batch and threads, and the
// median break-even sparsity, against the sparse kernels' speed targets.
static void print_summary(const int batches[2], const int threads[2]) {
    static const char *const kinds[] = {"1x1", "3x3 (not depthwise)", "3x3 depthwise", "3x3 without the stem"};
    printf("\nSummary: geometric mean of the speedups over the layers of a kind; BE = median "
           "break-even (targets: 1x1 >= 4x and 3x3 >= 3x at 90%%, break-even <= 60%%); "
           "reachable = the geometric mean if every layer reached the target or, below it, "
           "its write cap (oneDNN time / time to write the output once).\n\n");
    printf("| kind | N | T | layers | 50%% | 70%% | 80%% | 90%% | 95%% | b90 | median BE | reachable |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < 4; k++)
        for (int bi = 0; bi < 2; bi++)
            for (int ti = 0; ti < 2; ti++) {
                double lg[NLEVELS] = {0}, be[512];
                int n = 0;
                for (int i = 0; i < g_nresults; i++) {
                    const result *r = &g_results[i];
                    if (!summary_kind(r, k) || r->bi != bi || r->ti != ti) continue;
                    for (size_t l = 0; l < NLEVELS; l++) lg[l] += log(r->sp[l] > 0 ? r->sp[l] : 1e-9);
                    be[n++] = r->be;
                }
                if (!n) continue;
                qsort(be, n, sizeof be[0], cmp_be);
                printf("| %s | %d | %d | %d |", kinds[k], batches[bi], threads[ti], n);
                for (size_t l = 0; l < NLEVELS; l++) {
                    if (k_levels[l] == 0.0 || k_levels[l] == 0.6) continue;
                    printf(" %.2f |", exp(lg[l] / n));
                }
                const double m = be[n / 2];
                if (m >= 1.0)
                    printf(" >95%% |");
                else
                    printf(" %.0f%% |", m * 100);
                // The best geometric mean at the target if every layer
                // reached min(target, its write cap).
                const double target = k == 0 ? 4.0 : 3.0;
                double lc = 0;
                for (int i = 0; i < g_nresults; i++) {
                    const result *r = &g_results[i];
                    if (summary_kind(r, k) && r->bi == bi && r->ti == ti) lc += log(r->cap < target ? r->cap : target);
                }
                printf(" %.2f |\n", exp(lc / n));
            }
}

int main(int argc, char **argv) {
    cd_runtime_options ropts; // CONVD_* (runtime/runtime.h)
    cd_runtime_options_from_env(&ropts);
    cd_runtime_configure(&ropts);
    const char *filter = NULL, *set = "all";
    int batch_only = 0, threads_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch_only = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads_only = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc)
            g_min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            set = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            g_rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cin-block") && i + 1 < argc)
            g_cin_block = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--im2col") && i + 1 < argc)
            g_im2col = !strcmp(argv[++i], "off") ? -1 : 1;
        else if (!strcmp(argv[i], "--ab-shift"))
            g_ab_shift = 1;
        else if (!strcmp(argv[i], "--ms"))
            g_ms = 1;
        else if (!strcmp(argv[i], "--levels") && i + 1 < argc) {
            char *list = argv[++i];
            for (size_t l = 0; l < NLEVELS; l++) g_level_on[l] = 0;
            for (char *t = strtok(list, ","); t; t = strtok(NULL, ","))
                for (size_t l = 0; l < NLEVELS; l++)
                    if (fabs(atof(t) - k_levels[l]) < 1e-9) g_level_on[l] = 1;
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            const char *f = argv[++i];
            for (int k = CD_SPARSE_FMT_AUTO; k <= CD_SPARSE_FMT_BSR8; k++)
                if (!strcmp(f, cd_sparse_format_name((cd_sparse_format)k))) g_format = (cd_sparse_format)k;
        } else {
            fprintf(stderr,
                    "usage: %s [--filter S] [--batch N] [--threads T] [--min-time S] "
                    "[--layers r50|mv2|all] [--format auto|csr|bsr4|bsr8] [--rounds R] "
                    "[--levels 0.6,0.9,-0.9] [--cin-block N] [--ab-shift] [--im2col on|off] [--ms]\n",
                    argv[0]);
            return 2;
        }
    }
    DNNL_CHECK(dnnl_engine_create(&g_engine, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&g_stream, g_engine, dnnl_stream_default_flags));
    const cd_sparse_isa isa = cd_sparse_isa_best();
    printf("Sparse kernels: %s%s. Dense: oneDNN %d.%d (layouts of its choice, reorders excluded). "
           "%s"
           "`b90` = 90%% in 4x1 output-channel blocks (format in the last column); "
           "`BE` = lowest measured sparsity from which sparse is at least as fast.\n\n",
           cd_sparse_isa_name(isa), cd_sparse_isa_capped() ? " (capped by CONVD_MAX_ISA)" : "", DNNL_VERSION_MAJOR,
           DNNL_VERSION_MINOR,
           g_ms ? "Cells: sparse ms (fastest round); "
                : "Cells: speedup = oneDNN time / sparse time (ideal in the header); ");
    printf("| layer | N | T | oneDNN ms |");
    for (size_t l = 0; l < NLEVELS; l++) {
        if (k_levels[l] < 0)
            printf(" b%.0f (%.0fx) |", -k_levels[l] * 100, 1.0 / (1.0 + k_levels[l]));
        else
            printf(" %.0f%% (%.1fx) |", k_levels[l] * 100, 1.0 / (1.0 - k_levels[l]));
    }
    printf(" BE | b90 fmt | write floor ms | cap |\n|---|---|---|---|");
    for (size_t l = 0; l < NLEVELS; l++) printf("---|");
    printf("---|---|---|---|\n");
    // --batch N other than 1 measures N in the second column (default 8).
    const int batches[] = {1, batch_only > 1 ? batch_only : 8}, threads[] = {1, 2};
    for (size_t i = 0; i < sizeof k_layers / sizeof k_layers[0]; i++) {
        const layer *L = &k_layers[i];
        if (filter && !strstr(L->name, filter)) continue;
        if (strcmp(set, "all") && strncmp(L->name, set, strlen(set))) continue;
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < 2; t++) {
                if (batch_only && batches[b] != batch_only) continue;
                if (threads_only && threads[t] != threads_only) continue;
                run_layer(L, batches[b], threads[t], b, t);
            }
    }
    print_summary(batches, threads);
    dnnl_stream_destroy(g_stream);
    dnnl_engine_destroy(g_engine);
    return 0;
}
