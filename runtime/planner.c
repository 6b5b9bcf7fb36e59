// The per-layer dense/sparse choice: calibrated cost model and load-time
// tuning with an on-disk cache (see planner.h).
//
// Cache files, in the cache folder (created when missing), one record per
// line, tab-separated, appended (a torn or foreign line is skipped):
//   calib-v7.txt  CPU<TAB>threads<TAB>16 figures (see g_cal)
// where CPU is the model name and the ISAs in force, "NAME [avx2 avx2]"
// (cd_planner_cpu_name: our kernels', oneDNN's)
//   tune-v5.txt   key<TAB>dense_ms<TAB>sparse_ms
// where key = CPU|threads|batch|op and shape|nnz|best block. The version goes
// up whenever a kernel's speed changes enough to make old records wrong (v4/v2:
// the aligned-shift path made sparse 3x3 ~1.4x faster; v5/v3: vector plane
// rows and per-thread band slots, stride-2 3x3 ~1.2x faster; v6/v4: Gemms
// timed with cold caches, dense ~3-5x slower than timed hot; tune v5 and
// int8 v3: the candidates timed in turn, not one after the other, so that a
// loaded machine's bursts no longer decide: records from a busy hour said
// 18 ms for a 1 ms int8 stem and kept ResNet-18's 2-thread plan on f32).

#include "core/clock.h"
#include "runtime/planner.h"
#include "backends/devices.h"
#include "core/host.h"
#include "runtime/options.h"

#include "core/errors.h"
#include "sparse/analysis.h"
#include "sparse/sparse-conv.h"

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// ---- shared helpers ---------------------------------------------------------------

static char g_cpu[128], g_cpu_bf16[2][160];
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void cpu_read(void) {
    if (cd_host_cpu_model(g_cpu, sizeof g_cpu) != 0) snprintf(g_cpu, sizeof g_cpu, "unknown-cpu");
    for (char *c = g_cpu; *c; c++)
        if (*c == '\t' || *c == '|') *c = ' ';
    // The instruction sets in force (CONVD_MAX_ISA, ONEDNN_MAX_CPU_ISA) are part
    // of the machine: rates measured at one do not hold at another.
    size_t n = strlen(g_cpu);
    snprintf(g_cpu + n, sizeof g_cpu - n, " [%s %s]%s", cd_sparse_isa_name(cd_sparse_isa_best()),
             cd_backends_host_caps().isa, CD_HOST_BUILD_FLAVOR);
    // So is the bf16 switch: it changes what a dense conv costs.
    snprintf(g_cpu_bf16[0], sizeof g_cpu_bf16[0], "%s bf16 auto", g_cpu);
    snprintf(g_cpu_bf16[1], sizeof g_cpu_bf16[1], "%s bf16 on", g_cpu);
}

static const char *cpu_name(void) {
    pthread_once(&g_cpu_once, cpu_read);
    const int bf16 = cd_runtime_backend_opts()->bf16;
    return bf16 == 1 ? g_cpu_bf16[0] : bf16 == 2 ? g_cpu_bf16[1] : g_cpu;
}

const char *cd_planner_cpu_name(void) { return cpu_name(); }

// The cache folder into buf (created); 0 or -1 when there is none.
static int cache_dir(const cd_planner_opts *po, char *buf, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (po && po->tune_cache && *po->tune_cache)
        snprintf(buf, n, "%s", po->tune_cache);
    else if (xdg && *xdg)
        snprintf(buf, n, "%s/convd", xdg);
    else if (home && *home)
        snprintf(buf, n, "%s/.cache/convd", home);
    else
        return -1;
    // mkdir -p of the last two components is enough for the defaults.
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", buf);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    return 0;
}

cd_plan_mode cd_planner_mode(const cd_planner_opts *po) {
    if (po && po->mode != CD_PLAN_AUTO) return po->mode;
    return (cd_plan_mode)cd_runtime_opts()->plan; // cd_runtime_options.plan
}

// Deterministic filler (xorshift) for calibration and timing buffers.
static float frand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

// A Gemm reads each weight once per call, so in a model its weights come
// from memory: the other layers' weights have evicted them. Timed hot, the
// classifier of ResNet-50 (2048x1000, 8 MB) took 0.06 ms and ran 0.31 ms in
// the model, so the planner kept it dense at 90% sparsity (sparse: 0.15 ms in
// the model). Gemms are timed with the caches flushed between runs: a read
// of twice the last-level cache.
static size_t flush_bytes(void) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t n = l3 > 0 ? 2 * (size_t)l3 : (size_t)64 << 20;
    return n < ((size_t)16 << 20) ? (size_t)16 << 20 : n > ((size_t)256 << 20) ? (size_t)256 << 20 : n;
}

static void flush_caches(unsigned char *buf, size_t n) {
    volatile unsigned char sink = 0;
    unsigned char acc = 0;
    for (size_t i = 0; i < n; i += 64) acc ^= buf[i];
    sink = acc;
    (void)sink;
}

// One op prepared for timing: its state, context and buffers of random data.
typedef struct {
    cd_op_state *st;
    cd_backend_ctx *ctx;
    void *buf[CD_OP_MAX_IN + 1];
    cd_btensor bt[CD_OP_MAX_IN + 1];
    const cd_btensor *srcs[CD_OP_MAX_IN];
    unsigned char *flush; // the caches are flushed before each run of a Gemm
    size_t nflush;
} timed_op;

static void timed_free(cd_backend_t be, const cd_bop_desc *d, timed_op *t) {
    free(t->flush);
    for (int i = 0; i <= d->nsrc; i++)
        if (t->buf[i]) cd_backend_buffer_free(be, t->buf[i]);
    if (t->ctx) cd_backend_ctx_free(be, t->ctx);
    if (t->st) cd_backend_op_state_free(be, t->st);
}

static int timed_init(cd_backend_t be, const cd_bop_desc *d, int batch, timed_op *t) {
    memset(t, 0, sizeof *t);
    float *host = NULL;
    int rc = cd_backend_op_init(be, d, &t->st);
    if (!rc) rc = cd_backend_ctx_create(be, &t->ctx);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i <= d->nsrc && !rc; i++) {
        const cd_tdesc *td = i < d->nsrc ? &d->src[i] : &d->dst;
        size_t bytes = cd_tdesc_item_bytes(td) * (td->is_const ? 1 : (size_t)batch);
        rc = cd_backend_buffer_alloc(be, bytes, &t->buf[i]);
        if (rc) break;
        if (i < d->nsrc) {
            free(host);
            host = malloc(bytes + 4);
            if (!host) {
                rc = CD_ENOMEM;
                break;
            }
            for (size_t j = 0; j < bytes / 4; j++) host[j] = frand(&seed);
            rc = cd_backend_upload(be, t->buf[i], host, bytes);
        }
        cd_btensor *b = &t->bt[i];
        b->data = t->buf[i];
        b->layout = td->layout;
        b->rank = td->rank;
        memcpy(b->shape, td->shape, sizeof b->shape);
        if (!td->is_const) b->shape[0] = batch;
        if (i < d->nsrc) t->srcs[i] = b;
    }
    free(host);
    t->nflush = d->op == CD_BOP_GEMM ? flush_bytes() : 0;
    if (!rc && t->nflush && (t->flush = malloc(t->nflush))) memset(t->flush, 1, t->nflush);
    if (rc) timed_free(be, d, t);
    return rc;
}

static int timed_run(cd_backend_t be, const cd_bop_desc *d, int batch, timed_op *t, double *ms) {
    if (t->flush) flush_caches(t->flush, t->nflush);
    double t0 = cd_now_ms();
    int rc = cd_backend_op_run(be, d->op, t->ctx, t->st, batch, t->srcs, &t->bt[d->nsrc]);
    if (!rc) rc = cd_backend_synchronize(be, t->ctx);
    *ms = cd_now_ms() - t0;
    return rc;
}

int cd_planner_time_ops(cd_backend_t be, int n, const cd_bop_desc *const *d, int batch, int reps, double *ms) {
    timed_op t[4];
    if (n < 1 || n > 4) return CD_EPARAMS;
    int rc = 0, ready = 0;
    for (; ready < n && !rc; ready++) rc = timed_init(be, d[ready], batch, &t[ready]);
    if (rc) ready--; // the one that failed freed itself
    for (int i = 0; i < n; i++) ms[i] = 1e30;
    // Round-robin: a burst of load from elsewhere slows every candidate alike,
    // and the best of each is what it costs on a quiet core.
    for (int r = 0; r <= reps && !rc; r++)
        for (int i = 0; i < n && !rc; i++) {
            double m;
            rc = timed_run(be, d[i], batch, &t[i], &m);
            if (r > 0 && m < ms[i]) ms[i] = m; // round 0 is the warm-up
        }
    for (int i = 0; i < ready; i++) timed_free(be, d[i], &t[i]);
    return rc;
}

int cd_planner_time_op(cd_backend_t be, const cd_bop_desc *d, int batch, int reps, double *ms) {
    return cd_planner_time_ops(be, 1, &d, batch, reps, ms);
}

// ---- calibration --------------------------------------------------------------------

enum {
    R_D1 = 0,
    R_DK,
    R_DFC,
    R_C1,
    R_CK,
    R_CFC,
    R_B1,
    R_BK,
    R_BFC,
    R_E1,
    R_EK,
    R_EFC,
    R_REORD,
    O_DENSE,
    O_SPARSE,
    O_REORD,
    R_N
};

// Rates (per kind: 1x1, kxk, FC): flops per ms (dense), nonzero-flops per ms
// (CSR), stored-weight flops per ms (BSR4 "B", BSR8 "E"); bytes per ms
// for the reorder; then the fixed cost of one call (ms) of a dense conv, a
// sparse conv and a reorder, measured on tiny shapes (they dominate small
// layers: 2-7 us per call here, as much as a whole late MobileNetV2 layer).
static double g_cal[R_N];
static int g_cal_ok;
static pthread_mutex_t g_cal_lock = PTHREAD_MUTEX_INITIALIZER;

static void conv_bop(cd_bop_desc *d, int c, int hw, int k, int rsz, cd_layout lay, int sparse, int fmt) {
    memset(d, 0, sizeof *d);
    d->op = CD_BOP_CONV2D;
    d->max_batch = 1;
    d->nsrc = 1;
    cd_conv_desc *cv = &d->u.conv;
    *cv = cd_conv_square(c, hw, hw, k, rsz, 1, rsz / 2);
    d->src[0] = (cd_tdesc){4, {1, c, hw, hw}, lay, 0};
    d->dst = (cd_tdesc){4, {1, k, hw, hw}, lay, 0};
    d->sparse = sparse;
    d->sparse_format = fmt;
}

static void gemm_bop(cd_bop_desc *d, int k, int n, int sparse, int fmt) {
    memset(d, 0, sizeof *d);
    d->op = CD_BOP_GEMM;
    d->max_batch = 1;
    d->nsrc = 1;
    d->u.gemm.rows = 1;
    d->u.gemm.n = n;
    d->u.gemm.k = k;
    d->src[0] = (cd_tdesc){2, {1, k}, CD_LAYOUT_NCHW, 0};
    d->dst = (cd_tdesc){2, {1, n}, CD_LAYOUT_NCHW, 0};
    d->sparse = sparse;
    d->sparse_format = fmt;
}

// Weights at 90% sparsity: random positions (bh = 1), or bh x 1 output-channel blocks.
static float *calib_weights(size_t k, size_t cols, int bh, uint64_t *seed) {
    float *w = malloc(sizeof(float) * k * cols);
    if (!w) return NULL;
    if (bh < 1) bh = 1;
    for (size_t o = 0; o < k; o += (size_t)bh)
        for (size_t j = 0; j < cols; j++) {
            int keep = (frand(seed) + 1.0f) * 0.5f < 0.1f;
            for (size_t r = o; r < o + (size_t)bh && r < k; r++) w[r * cols + j] = keep ? frand(seed) : 0.0f;
        }
    return w;
}

static int calibrate(cd_backend_t be) {
    uint64_t seed = 12345;
    const cd_layout blk = cd_backend_blocked_layout(be);
    // ResNet-50's middle shapes: 1x1 256->256 @14, 3x3 128->128 @14, FC
    // 1024->1024 (the sparse kernels' efficiency depends on the shape: a
    // small-channel calibration layer predicted them 1.5x too fast).
    struct {
        int kind; // 0 1x1, 1 kxk, 2 fc
        int c, hw, k, rs;
    } shp[3] = {{0, 256, 14, 256, 1}, {1, 128, 14, 128, 3}, {2, 1024, 1, 1024, 1}};
    for (int i = 0; i < 3; i++) {
        size_t cols = (size_t)shp[i].c * shp[i].rs * shp[i].rs, k = (size_t)shp[i].k;
        double pix = (double)shp[i].hw * shp[i].hw;
        for (int v = 0; v < 4; v++) { // dense, csr, bsr4, bsr8
            cd_bop_desc d;
            float *w = calib_weights(k, cols, v == 2 ? 4 : v == 3 ? 8 : 1, &seed);
            if (!w) return CD_ENOMEM;
            size_t nnz = 0;
            if (v == 0)
                for (size_t j = 0; j < k * cols; j++) w[j] = frand(&seed);
            for (size_t j = 0; j < k * cols; j++) nnz += w[j] != 0.0f;
            int fmt = v == 1 ? CD_SPARSE_FMT_CSR : v == 2 ? CD_SPARSE_FMT_BSR4 : CD_SPARSE_FMT_BSR8;
            if (shp[i].kind == 2)
                gemm_bop(&d, shp[i].c, shp[i].k, v > 0, v ? fmt : 0);
            else
                conv_bop(&d, shp[i].c, shp[i].hw, shp[i].k, shp[i].rs, v ? CD_LAYOUT_NCHW : blk, v > 0, v ? fmt : 0);
            if (v == 0 && !cd_backend_supports_op(be, &d)) {
                d.src[0].layout = d.dst.layout = CD_LAYOUT_NCHW;
            }
            d.w = w;
            double ms = 0;
            int rc = cd_planner_time_op(be, &d, 1, 5, &ms);
            free(w);
            if (rc) return rc;
            if (ms < 1e-4) ms = 1e-4;
            double work = 2.0 * (v == 0 ? (double)(k * cols) : (double)nnz) * pix;
            g_cal[v * 3 + shp[i].kind] = work / ms;
        }
    }
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_REORDER;
    d.max_batch = 1;
    d.nsrc = 1;
    d.src[0] = (cd_tdesc){4, {1, 128, 28, 28}, blk, 0};
    d.dst = d.src[0];
    d.dst.layout = CD_LAYOUT_NCHW;
    double ms = 0;
    int rc = cd_planner_time_op(be, &d, 1, 5, &ms);
    if (rc) return rc;
    g_cal[R_REORD] = 128.0 * 28 * 28 * 4 / (ms > 1e-4 ? ms : 1e-4);
    // Fixed costs: a 16-channel 2x2 reorder, dense and sparse 1x1 convs on it.
    d.src[0] = (cd_tdesc){4, {1, 16, 2, 2}, blk, 0};
    d.dst = d.src[0];
    d.dst.layout = CD_LAYOUT_NCHW;
    if ((rc = cd_planner_time_op(be, &d, 1, 9, &ms))) return rc;
    g_cal[O_REORD] = ms;
    for (int v = 0; v < 2; v++) {
        cd_bop_desc c;
        float *w = calib_weights(16, 16, 0, &seed);
        if (!w) return CD_ENOMEM;
        conv_bop(&c, 16, 2, 16, 1, v ? CD_LAYOUT_NCHW : blk, v, v ? CD_SPARSE_FMT_CSR : 0);
        if (v == 0 && !cd_backend_supports_op(be, &c)) c.src[0].layout = c.dst.layout = CD_LAYOUT_NCHW;
        c.w = w;
        rc = cd_planner_time_op(be, &c, 1, 9, &ms);
        free(w);
        if (rc) return rc;
        g_cal[v ? O_SPARSE : O_DENSE] = ms;
    }
    return 0;
}

// Calibrates once per process. On a shared machine one calibration can be
// disturbed (a neighbour's burst makes a rate 10-100x low), so the disk cache
// keeps every calibration of this CPU and thread count: the first
// CD_CALIB_SAMPLES processes each measure and append theirs, later ones
// measure nothing; every process uses the least disturbed entry: the
// highest dense x sparse rate over the dense x sparse fixed cost. The fixed
// costs tell a disturbed team best: with a core taken by other work, a
// 2-thread call waits for its second thread (a sparse call's 0.9 us became
// 40 us, and its rate fell by half, on an AMD Zen 5 running the test suite).
// 0 or a negative code.
#define CD_CALIB_SAMPLES 3

static double calib_quality(const double *r) { return r[R_D1] * r[R_C1] / (r[O_DENSE] * r[O_SPARSE]); }

static int ensure_calibrated(cd_backend_t be, const cd_planner_opts *po) {
    pthread_mutex_lock(&g_cal_lock);
    int rc = 0, entries = 0;
    double best[R_N];
    if (g_cal_ok) goto out;
    char dir[1024], path[1100];
    int threads = omp_get_max_threads(), have_dir = cache_dir(po, dir, sizeof dir) == 0;
    if (have_dir) {
        snprintf(path, sizeof path, "%s/calib-v7.txt", dir);
        FILE *f = fopen(path, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            char *tab = strchr(line, '\t');
            if (!tab) continue;
            *tab = '\0';
            if (strcmp(line, cpu_name()) != 0) continue;
            double r[R_N];
            char *p = tab + 1, *end;
            int th = (int)strtol(p, &end, 10), got = 0;
            for (p = end; got < R_N; got++, p = end) {
                r[got] = strtod(p, &end);
                if (end == p) break;
            }
            if (got != R_N || th != threads) continue;
            int ok = 1;
            for (int i = 0; i < R_N; i++) ok &= r[i] > 0;
            if (!ok) continue;
            if (!entries++ || calib_quality(r) > calib_quality(best)) memcpy(best, r, sizeof best);
        }
        if (f) fclose(f);
    }
    if (!have_dir || entries < CD_CALIB_SAMPLES) {
        rc = calibrate(be);
        if (rc) goto out;
        if (have_dir) {
            FILE *f = fopen(path, "a");
            if (f) {
                fprintf(f, "%s\t%d", cpu_name(), threads);
                for (int i = 0; i < R_N; i++) fprintf(f, " %.6g", g_cal[i]);
                fprintf(f, "\n");
                fclose(f);
            }
        }
        if (entries && calib_quality(best) > calib_quality(g_cal)) memcpy(g_cal, best, sizeof g_cal);
    } else {
        memcpy(g_cal, best, sizeof g_cal);
    }
    g_cal_ok = 1;
out:
    pthread_mutex_unlock(&g_cal_lock);
    return rc;
}

double cd_planner_reorder_ms(double bytes) {
    return g_cal_ok && g_cal[R_REORD] > 0 ? g_cal[O_REORD] + bytes / g_cal[R_REORD] : 0.0;
}

// ---- prediction ---------------------------------------------------------------------

static int layer_kind(const cd_bop_desc *d) {
    if (d->op == CD_BOP_GEMM) return 2;
    const cd_conv_desc *c = &d->u.conv;
    if (c->r == 1 && c->s == 1) return c->h == 1 && c->w == 1 ? 2 : 0;
    return 1;
}

static double pixels(const cd_bop_desc *d) {
    if (d->op == CD_BOP_GEMM) return d->u.gemm.rows;
    return (double)d->u.conv.oh * d->u.conv.ow;
}

int cd_planner_dense_off_jit(const cd_conv_desc *c, int blk) {
    if (c->groups < 2 || c->groups == c->c || blk < 2) return 0;
    return (c->c / c->groups) % blk != 0 || (c->k / c->groups) % blk != 0;
}

int cd_planner_sparse_candidate(const cd_bop_desc *d, size_t nnz, size_t total, int blk) {
    if (d->op == CD_BOP_CONV2D && cd_planner_dense_off_jit(&d->u.conv, blk)) return 1;
    if (!total || (double)nnz > CD_PLANNER_MAX_DENSITY * (double)total) return 0;
    if (d->op == CD_BOP_GEMM) return 1; // any rows: the sparse FC kernel folds them 16 at a time
    const cd_conv_desc *c = &d->u.conv;
    return !(c->groups > 1 && c->groups == c->c); // depthwise: 9 weights per channel, nothing to gain
}

// Depthwise 3x3 flops per ms, measured once per process on MobileNetV2's 144
// channels at 56x56 (not in the calibration file: it only sets the predicted
// time, since a depthwise layer is never a sparse candidate). Nine
// multiply-adds per output are bound by loads, stores and the call, not by
// the FMA rate of dense convs: with that rate (R_DK) every depthwise layer
// was predicted 2.5-3.5x too fast. 0 when it cannot be measured.
static double g_dw_rate = -1;

static double dw_rate(cd_backend_t be) {
    pthread_mutex_lock(&g_cal_lock);
    if (g_dw_rate < 0) {
        g_dw_rate = 0;
        cd_bop_desc d;
        conv_bop(&d, 144, 56, 144, 3, cd_backend_blocked_layout(be), 0, 0);
        d.u.conv.groups = 144;
        if (!cd_backend_supports_op(be, &d)) d.src[0].layout = d.dst.layout = CD_LAYOUT_NCHW;
        float *w = malloc(sizeof(float) * 144 * 9);
        uint64_t seed = 777;
        double ms = 0;
        for (int j = 0; w && j < 144 * 9; j++) w[j] = frand(&seed);
        d.w = w;
        if (w && cd_planner_time_op(be, &d, 1, 5, &ms) == 0)
            g_dw_rate = 2.0 * 144 * 9 * 56 * 56 / (ms > 1e-4 ? ms : 1e-4);
        free(w);
    }
    double r = g_dw_rate;
    pthread_mutex_unlock(&g_cal_lock);
    return r;
}

int cd_planner_predict(cd_backend_t be, const cd_planner_opts *po, const cd_bop_desc *d, size_t nnz, size_t total,
                       double fill4, double fill8, cd_plan_choice *c) {
    memset(c, 0, sizeof *c);
    c->pred_dense_ms = c->pred_sparse_ms = c->tuned_dense_ms = c->tuned_sparse_ms = -1;
    int rc = ensure_calibrated(be, po);
    if (rc) return rc;
    int kind = layer_kind(d);
    double pix = pixels(d);
    c->pred_dense_ms = g_cal[O_DENSE] + 2.0 * (double)total * pix / g_cal[R_D1 + kind];
    const cd_conv_desc *cv = &d->u.conv;
    if (d->op == CD_BOP_CONV2D && cv->groups > 1 && cv->groups == cv->c && dw_rate(be) > 0)
        c->pred_dense_ms = g_cal[O_DENSE] + 2.0 * (double)total * pix / dw_rate(be);
    // The cheapest format: CSR stores the nonzeros; BSR stores whole blocks.
    double t = 2.0 * (double)nnz * pix / g_cal[R_C1 + kind];
    c->format = CD_SPARSE_FMT_CSR;
    if (fill4 > 0 && nnz) {
        double t4 = 2.0 * (double)nnz / fill4 * pix / g_cal[R_B1 + kind];
        if (t4 < t) t = t4, c->format = CD_SPARSE_FMT_BSR4;
    }
    if (fill8 > 0 && nnz) {
        double t8 = 2.0 * (double)nnz / fill8 * pix / g_cal[R_E1 + kind];
        if (t8 < t) t = t8, c->format = CD_SPARSE_FMT_BSR8;
    }
    c->pred_sparse_ms = g_cal[O_SPARSE] + t;
    const int blk = cd_layout_block(cd_backend_blocked_layout(be));
    c->sparse =
        cd_planner_sparse_candidate(d, nnz, total, blk) && c->pred_sparse_ms * CD_PLANNER_MARGIN < c->pred_dense_ms;
    return 0;
}

// ---- tuning -------------------------------------------------------------------------

static pthread_mutex_t g_tune_lock = PTHREAD_MUTEX_INITIALIZER;

static void tune_key(const cd_bop_desc *d, size_t nnz, int best_block, int batch, char *key, size_t n) {
    int threads = omp_get_max_threads();
    if (d->op == CD_BOP_GEMM) {
        snprintf(key, n, "%s|%d|%d|fc %d>%d r%d act%d|%zu|%d", cpu_name(), threads, batch, d->u.gemm.k, d->u.gemm.n,
                 d->u.gemm.rows, d->u.gemm.act.kind, nnz, best_block);
        return;
    }
    const cd_conv_desc *c = &d->u.conv;
    snprintf(key, n, "%s|%d|%d|conv c%d h%d w%d k%d %dx%d s%d,%d p%d,%d,%d,%d d%d,%d g%d res%d act%d|%zu|%d",
             cpu_name(), threads, batch, c->c, c->h, c->w, c->k, c->r, c->s, c->stride_h, c->stride_w, c->pad_t,
             c->pad_l, c->pad_b, c->pad_r, c->dil_h, c->dil_w, c->groups, c->has_residual, c->act.kind, nnz,
             best_block);
}

static int cache_lookup(const char *path, const char *key, double *dense, double *sparse) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int found = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) != 0 || line[kl] != '\t') continue;
        if (sscanf(line + kl + 1, "%lf %lf", dense, sparse) == 2 && *dense > 0 && *sparse > 0) found = 1;
    }
    fclose(f);
    return found;
}

void cd_planner_op_key(const cd_bop_desc *d, size_t nnz, int batch, char *key, size_t n) {
    tune_key(d, nnz, 0, batch, key, n);
}

int cd_planner_cache_get(const cd_planner_opts *po, const char *name, const char *key, double *a, double *b) {
    char dir[1024], path[1100];
    if (cache_dir(po, dir, sizeof dir)) return 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pthread_mutex_lock(&g_tune_lock);
    int found = cache_lookup(path, key, a, b);
    pthread_mutex_unlock(&g_tune_lock);
    return found;
}

void cd_planner_cache_put(const cd_planner_opts *po, const char *name, const char *key, double a, double b) {
    char dir[1024], path[1100];
    if (cache_dir(po, dir, sizeof dir)) return;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pthread_mutex_lock(&g_tune_lock);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%s\t%.6g %.6g\n", key, a, b);
        fclose(f);
    }
    pthread_mutex_unlock(&g_tune_lock);
}

int cd_planner_tune(cd_backend_t be, const cd_planner_opts *po, const cd_bop_desc *d, size_t nnz, int best_block,
                    cd_plan_choice *c) {
    int batch = po && po->max_batch > 0 ? (po->max_batch < 8 ? po->max_batch : 8) : 1;
    char key[512], dir[1024], path[1100];
    tune_key(d, nnz, best_block, batch, key, sizeof key);
    int have_dir = cache_dir(po, dir, sizeof dir) == 0;
    if (have_dir) snprintf(path, sizeof path, "%s/tune-v5.txt", dir);
    double dense = 0, sparse = 0;
    pthread_mutex_lock(&g_tune_lock);
    if (have_dir && cache_lookup(path, key, &dense, &sparse)) {
        c->tuned_dense_ms = dense;
        c->tuned_sparse_ms = sparse;
        c->tune_batch = batch;
        c->from_cache = 1;
        pthread_mutex_unlock(&g_tune_lock);
        return 0;
    }
    cd_bop_desc dd = *d, ds = *d;
    dd.sparse = 0;
    dd.max_batch = ds.max_batch = batch;
    if (dd.op == CD_BOP_CONV2D) {
        const cd_layout blk = cd_backend_blocked_layout(be);
        for (int i = 0; i < dd.nsrc; i++) dd.src[i].layout = blk;
        dd.dst.layout = blk;
        if (dd.u.conv.c < cd_layout_block(blk)) dd.src[0].layout = CD_LAYOUT_NCHW;
        // Off oneDNN's blocked jit kernels the plan runs it in NCHW (its gemm
        // path); blocked, it would time oneDNN's reference loop (100x slower).
        if (!cd_backend_supports_op(be, &dd) || cd_planner_dense_off_jit(&dd.u.conv, cd_layout_block(blk))) {
            for (int i = 0; i < dd.nsrc; i++) dd.src[i].layout = CD_LAYOUT_NCHW;
            dd.dst.layout = CD_LAYOUT_NCHW;
        }
    }
    ds.sparse = 1;
    ds.sparse_format = c->format;
    for (int i = 0; i < ds.nsrc; i++) ds.src[i].layout = CD_LAYOUT_NCHW;
    ds.dst.layout = CD_LAYOUT_NCHW;
    const cd_bop_desc *both[2] = {&dd, &ds};
    double ms[2];
    int rc = cd_planner_time_ops(be, 2, both, batch, 5, ms);
    dense = ms[0], sparse = ms[1];
    if (!rc) {
        c->tuned_dense_ms = dense;
        c->tuned_sparse_ms = sparse;
        c->tune_batch = batch;
        if (have_dir) {
            FILE *f = fopen(path, "a");
            if (f) {
                fprintf(f, "%s\t%.6g %.6g\n", key, dense, sparse);
                fclose(f);
            }
        }
    }
    pthread_mutex_unlock(&g_tune_lock);
    return rc;
}
