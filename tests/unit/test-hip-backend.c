// What is particular to the hip-emu backend (backends/hip/backend-hip.c over
// the emulator): its sparse routes (CSR, GEBSR) against the CPU backend's
// dense kernel, its layouts, the memory slots (async staging, device-memory
// accounting), shared op states across threads, and the device names. Every
// operator family against the reference kernels, on every backend, is the
// conformance table, tests/unit/test-backend-ops.c.
//
// CD_TEST_HIP_DEVICE=hip:N runs the same tests on a real AMD GPU through the
// GPU=hip plugin (bench/gpu-check does); the default is hip-emu.

#include "backends/devices.h"
#include "backends/hip/backend-hip.h"
#include "backends/hip/check.h"
#include "backends/hip/plugin.h"
#include "core/errors.h"
#include "runtime/options.h"
#include "runtime/runtime.h"
#include "kernels/cpu/ref.h"
#include "sparse/sparse-conv.h"
#include "tests/unit/backend-run.h"
#include "tests/unit/check.h"
#include "tests/unit/test-kernels-util.h"

#include <pthread.h>
#include <stdlib.h>

// The HIP device under test: "hip-emu", or $CD_TEST_HIP_DEVICE ("hip:0").
static const char *hip_device(void) {
    const char *e = getenv("CD_TEST_HIP_DEVICE");
    return e && *e ? e : "hip-emu";
}

static int real_gpu(void) { return strcmp(hip_device(), "hip-emu") != 0; }

static cd_backend_t make(const char *name) {
    cd_backend_t be;
    char err[512] = "";
    int rc = cd_backend_create(name, cd_runtime_backend_opts(), &be, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("cd_backend_create(%s): %s: %s", name, cd_strerror(rc), err);
    if (strcmp(name, "cpu") == 0)
        CHECK_STREQ(cd_backend_name(be), "cpu");
    else
        CHECK_STREQ(cd_backend_name(be), real_gpu() ? "hip" : "hip-emu");
    return be;
}

// Runs d on hip-emu and on cpu with the same inputs and compares (relative
// error <= tol scaled by max(1, |cpu|)). cpu_d is what the CPU backend runs
// (d itself unless the caller needs a different but equivalent description).
// Returns the hip kernel name in kernel (may be NULL).
static void compare_desc(const cd_bop_desc *d, const cd_bop_desc *cpu_d, int batch, float *const *srcs, double tol,
                         char *kernel, size_t klen) {
    cd_backend_t hip = make(hip_device()), cpu = make("cpu");
    CHECK(cd_backend_supports_op(hip, d));
    size_t n = cd_test_numel(&d->dst, batch);
    float *got = calloc(n ? n : 1, 4), *want = calloc(n ? n : 1, 4);
    cd_test_backend_run(hip, d, batch, srcs, got, kernel, klen);
    cd_test_backend_run(cpu, cpu_d ? cpu_d : d, batch, srcs, want, NULL, 0);
    CHECK_CLOSE_F32(got, want, n, tol);
    free(got);
    free(want);
    cd_backend_free(hip);
    cd_backend_free(cpu);
}

// A random convolution; kind 0 dense, 1 depthwise, 2 grouped, 3 pointwise.
static cd_conv_desc rand_conv(int kind) {
    static const int ks[] = {1, 3, 5};
    return tk_rand_conv(kind, ks, 3);
}

static cd_bop_desc conv_bop(const cd_conv_desc *c, int batch, const float *w, const float *bias) {
    int64_t is[4] = {1, c->c, c->h, c->w}, os[4] = {1, c->k, c->oh, c->ow};
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_CONV2D;
    d.max_batch = batch;
    d.nsrc = c->has_residual ? 2 : 1;
    d.src[0] = cd_test_tdesc(4, is);
    d.src[1] = cd_test_tdesc(4, os);
    d.dst = cd_test_tdesc(4, os);
    d.u.conv = *c;
    d.w = w;
    d.bias = bias;
    return d;
}

// Zeroes, at each column, each aligned block of bh rows (rows x cols
// row-major; the last block may be short) with probability frac: the 4x1 /
// 8x1 output-channel block patterns BSR4/BSR8 are made for.
static void zero_row_blocks(float *w, int rows, int cols, int bh, double frac) {
    for (int r0 = 0; r0 < rows; r0 += bh)
        for (int j = 0; j < cols; j++)
            if (frac >= 1.0 || cd_test_randf(0, 1) < frac)
                for (int i = r0; i < r0 + bh && i < rows; i++) w[(size_t)i * cols + j] = 0.0f;
}

// A random conv of the kind on hip vs the CPU backend's dense kernel;
// sparse = 1 asks for the sparse route with sparse_format fmt (0: CSR; BSR4,
// BSR8: the GEBSR route), zero_frac of the weights zeroed one by one, or in
// aligned fmt-sized output-channel blocks when blocks is set.
static void check_conv_fmt(int kind, int sparse, double zero_frac, int fmt, int blocks) {
    cd_conv_desc c = rand_conv(kind);
    if (sparse && real_gpu() && c.h * c.w < 16) { // rocSPARSE route: >= 16 pixels
        c.h = c.w = cd_test_randi(4, 9);
        cd_conv_out_dims(&c);
    }
    int batch = cd_test_randi(1, 3);
    size_t nw = (size_t)c.k * (c.c / c.groups) * c.r * c.s;
    float *w = tk_rbuf(nw), *bias = cd_test_randi(0, 3) ? tk_rbuf((size_t)c.k) : NULL;
    int bh = fmt == CD_SPARSE_FMT_BSR8 ? 8 : 4;
    if (blocks)
        zero_row_blocks(w, c.k, (int)(nw / c.k), bh, zero_frac);
    else
        for (size_t i = 0; i < nw; i++)
            if (cd_test_randf(0, 1) < zero_frac) w[i] = 0.0f;
    cd_bop_desc d = conv_bop(&c, batch, w, bias), cpu_d = d;
    d.sparse = sparse;
    d.sparse_format = fmt;
    float *x = tk_rbuf((size_t)batch * c.c * c.h * c.w), *res = tk_rbuf((size_t)batch * c.k * c.oh * c.ow);
    float *srcs[2] = {x, res};
    char kernel[64] = "";
    compare_desc(&d, &cpu_d, batch, srcs, 1e-4, kernel, sizeof kernel);
    if (sparse && kind == 0)
        CHECK(strstr(kernel, (c.r == 1 && c.s == 1 && c.stride_h == 1 && c.stride_w == 1 && !c.pad_t && !c.pad_l &&
                              !c.pad_b && !c.pad_r)
                                 ? ":"
                                 : ":im2col-") != NULL);
    if (sparse && fmt)
        CHECK(strstr(kernel, fmt == CD_SPARSE_FMT_BSR8 ? "gebsr8x1" : "gebsr4x1") != NULL);
    else if (sparse)
        CHECK(strstr(kernel, "csr-spmm") != NULL);
    else if (kind == 1)
        CHECK(strstr(kernel, "dwconv") != NULL);
    free(w), free(bias), free(x), free(res);
}

static void check_conv(int kind, int sparse, double zero_frac) { check_conv_fmt(kind, sparse, zero_frac, 0, 0); }

// sparse = 1 on a pointwise conv: the CSR route (the CPU reference under
// emulation), 70% zeros, against the CPU backend's dense kernel.
CD_TEST(hip_backend_conv2d_sparse_route_pointwise_vs_cpu) {
    for (int iter = 0; iter < 4; iter++) check_conv(3, 1, 0.7);
}

CD_TEST(hip_backend_conv2d_sparse_route_all_zero_layer) { check_conv(3, 1, 1.0); }

// sparse_format BSR4 / BSR8 on a pointwise conv: the GEBSR route (4x1 / 8x1
// blocks; the CPU loop over the packed blocks under emulation), K random so
// mostly not a multiple of 4 or 8, at 0% and 90% zeros (single weights and
// aligned blocks) and all-zero, vs the CPU backend's dense kernel.
CD_TEST(hip_backend_conv2d_gebsr_route_bsr4_bsr8_vs_cpu) {
    static const double fracs[] = {0.0, 0.9, 1.0};
    for (int f = CD_SPARSE_FMT_BSR4; f <= CD_SPARSE_FMT_BSR8; f++)
        for (int i = 0; i < 3; i++) {
            check_conv_fmt(3, 1, fracs[i], f, 0);
            check_conv_fmt(3, 1, fracs[i], f, 1);
        }
}

// sparse = 1 on a k x k conv (strides, pads, dilations): im2col on the
// device, then the CSR or GEBSR SpMM over the columns, vs the CPU backend.
CD_TEST(hip_backend_conv2d_kxk_im2col_sparse_routes_vs_cpu) {
    static const int fmts[] = {0, CD_SPARSE_FMT_BSR4, CD_SPARSE_FMT_BSR8};
    for (int rep = 0; rep < 4; rep++)
        for (int f = 0; f < 3; f++) check_conv_fmt(0, 1, 0.7, fmts[f], f && rep % 2);
}

CD_TEST(hip_backend_sparse_route_only_where_it_exists) {
    cd_backend_t hip = make(hip_device());
    cd_conv_desc c = rand_conv(0);
    c.r = c.s = 3;
    c.h = c.w = 8;
    c.pad_t = c.pad_b = c.pad_l = c.pad_r = 1;
    c.stride_h = c.stride_w = 1;
    c.dil_h = c.dil_w = 1;
    cd_conv_out_dims(&c);
    cd_bop_desc d = conv_bop(&c, 1, NULL, NULL);
    CHECK(cd_backend_supports_op(hip, &d));
    d.sparse = 1; // 3x3: im2col + the SpMM
    CHECK(cd_backend_supports_op(hip, &d));
    cd_conv_desc g = rand_conv(2); // grouped: no sparse route, the planner keeps it dense
    d = conv_bop(&g, 1, NULL, NULL);
    d.sparse = 1;
    CHECK(!cd_backend_supports_op(hip, &d));
    cd_conv_desc p = rand_conv(3);
    p.h = p.w = cd_test_randi(4, 9); // enough pixels for the rocSPARSE route too
    cd_conv_out_dims(&p);
    d = conv_bop(&p, 1, NULL, NULL);
    d.sparse = 1;
    CHECK(cd_backend_supports_op(hip, &d));
    d.src[0].layout = d.dst.layout = CD_LAYOUT_NCHW16C; // sparse kernels are NCHW only
    CHECK(!cd_backend_supports_op(hip, &d));
    cd_backend_free(hip);
}

static void check_gemm_fmt(int sparse, int fmt, double zero_frac) {
    int rows = cd_test_randi(1, 3), n = cd_test_randi(1, 50), k = cd_test_randi(1, 90), batch = cd_test_randi(1, 5);
    if (sparse) rows = 1;
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_GEMM;
    d.max_batch = batch;
    d.nsrc = 1;
    int64_t is[3] = {1, rows, k}, os[3] = {1, rows, n};
    d.src[0] = cd_test_tdesc(3, is);
    d.dst = cd_test_tdesc(3, os);
    d.u.gemm.rows = rows;
    d.u.gemm.n = n;
    d.u.gemm.k = k;
    d.u.gemm.act = tk_rand_act_fixed();
    float *w = tk_rbuf((size_t)n * k), *b = (sparse || cd_test_randi(0, 1)) ? tk_rbuf((size_t)n) : NULL;
    if (sparse && fmt)
        zero_row_blocks(w, n, k, fmt == CD_SPARSE_FMT_BSR8 ? 8 : 4, zero_frac);
    else if (sparse)
        for (size_t i = 0; i < (size_t)n * k; i++)
            if (cd_test_randi(0, 3)) w[i] = 0.0f;
    d.w = w;
    d.bias = b;
    cd_bop_desc cpu_d = d;
    d.sparse = sparse;
    d.sparse_format = fmt;
    if (sparse && !fmt && real_gpu()) { // no rocSPARSE route for Gemm: the planner keeps it dense
        cd_backend_t hip = make(hip_device());
        CHECK(!cd_backend_supports_op(hip, &d));
        cd_backend_free(hip);
        free(w), free(b);
        return;
    }
    float *x = tk_rbuf((size_t)batch * rows * k);
    char kernel[64] = "";
    compare_desc(&d, &cpu_d, batch, &x, 1e-4, kernel, sizeof kernel);
    if (sparse && fmt)
        CHECK(strstr(kernel, fmt == CD_SPARSE_FMT_BSR8 ? "gebsr8x1" : "gebsr4x1") != NULL);
    else
        CHECK(strstr(kernel, sparse ? "csr-spmm" : "sgemm") != NULL);
    free(w), free(b), free(x);
}

static void check_gemm(int sparse) { check_gemm_fmt(sparse, 0, 0.0); }

CD_TEST(hip_backend_gemm_sparse_route_vs_cpu) {
    for (int iter = 0; iter < 3; iter++) check_gemm(1);
}

// Gemm (fully connected) with sparse_format BSR4 / BSR8: the GEBSR route,
// n output features random (mostly not a multiple of 4 / 8), 0% / 90% /
// 100% zeros in aligned blocks.
CD_TEST(hip_backend_gemm_gebsr_route_bsr4_bsr8_vs_cpu) {
    static const double fracs[] = {0.0, 0.9, 1.0};
    for (int f = CD_SPARSE_FMT_BSR4; f <= CD_SPARSE_FMT_BSR8; f++)
        for (int i = 0; i < 3; i++) check_gemm_fmt(1, f, fracs[i]);
}

CD_TEST(hip_backend_runs_nchw_only) {
    cd_backend_t hip = make(hip_device());
    cd_conv_desc c = rand_conv(0);
    cd_bop_desc d = conv_bop(&c, 1, NULL, NULL);
    CHECK(cd_backend_supports_op(hip, &d));
    d.dst.layout = CD_LAYOUT_NCHW16C;
    CHECK(!cd_backend_supports_op(hip, &d));
    cd_backend_free(hip);
}

// upload_async stages through pinned memory (src reusable at once, staging
// grown past its first size), download_async delivers only at synchronize,
// and device_bytes follows every allocation back to zero.
CD_TEST(hip_backend_async_staging_and_device_bytes) {
    cd_backend_t hip = make(hip_device());
    CHECK_EQ(cd_backend_device_bytes(hip), 0);
    cd_backend_ctx *ctx;
    CHECK_EQ(cd_backend_ctx_create(hip, &ctx), 0);
    enum { NB = 5 };
    void *dev[NB];
    float *host[NB], *back[NB];
    size_t sizes[NB], total = 0;
    for (int i = 0; i < NB; i++) {
        sizes[i] = (size_t)cd_test_randi(1, 5000) * (size_t)(i + 1) * 4; // grows: forces restaging
        CHECK_EQ(cd_backend_buffer_alloc(hip, sizes[i], &dev[i]), 0);
        total += sizes[i];
        CHECK_EQ(cd_backend_device_bytes(hip), total);
        host[i] = tk_rbuf(sizes[i] / 4);
        back[i] = calloc(sizes[i] / 4, 4);
    }
    for (int i = 0; i < NB; i++) {
        float *tmp = malloc(sizes[i]);
        memcpy(tmp, host[i], sizes[i]);
        CHECK_EQ(cd_backend_upload_async(hip, ctx, dev[i], tmp, sizes[i]), 0);
        memset(tmp, 0x7f, sizes[i]); // the caller's buffer is free once the call returns
        free(tmp);
    }
    for (int i = 0; i < NB; i++) CHECK_EQ(cd_backend_download_async(hip, ctx, back[i], dev[i], sizes[i]), 0);
    CHECK_EQ(cd_backend_synchronize(hip, ctx), 0);
    for (int i = 0; i < NB; i++) CHECK_CLOSE_F32(back[i], host[i], sizes[i] / 4, 0);
    for (int i = 0; i < NB; i++) {
        cd_backend_buffer_free(hip, dev[i]);
        free(host[i]);
        free(back[i]);
    }
    CHECK_EQ(cd_backend_device_bytes(hip), 0);
    // A prepared conv holds its weights (and bias) on the device.
    cd_conv_desc c = rand_conv(0);
    size_t nw = (size_t)c.k * c.c * c.r * c.s;
    float *w = tk_rbuf(nw), *b = tk_rbuf((size_t)c.k);
    cd_bop_desc d = conv_bop(&c, 1, w, b);
    cd_op_state *st;
    CHECK_EQ(cd_backend_op_init(hip, &d, &st), 0);
    CHECK_EQ(cd_backend_device_bytes(hip), (nw + (size_t)c.k) * 4);
    CHECK_EQ(cd_backend_op_weight_bytes(hip, st), (nw + (size_t)c.k) * 4);
    cd_backend_op_state_free(hip, st);
    CHECK_EQ(cd_backend_device_bytes(hip), 0);
    cd_backend_ctx_free(hip, ctx);
    free(w), free(b);
    cd_backend_free(hip);
}

// A request with two inputs and two outputs of the same size: once the
// first request has grown the pinned staging, later requests stage every
// copy without waiting for the stream (double buffering depends on it).
CD_TEST(hip_backend_staging_two_outputs_no_drain_after_warmup) {
    if (real_gpu()) CD_SKIP("reads the hip-emu backend's counters");
    cd_backend_t hip = make(hip_device());
    cd_backend_ctx *ctx;
    CHECK_EQ(cd_backend_ctx_create(hip, &ctx), 0);
    size_t size = (size_t)cd_test_randi(1, 3000) * 4;
    void *dev[2];
    float *in[2], *out[2];
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(cd_backend_buffer_alloc(hip, size, &dev[i]), 0);
        in[i] = tk_rbuf(size / 4);
        out[i] = calloc(size / 4, 4);
    }
    cd_hip_counters c0, c1;
    for (int req = 0; req < 4; req++) {
        if (req == 1) cd_backend_hip_counters(hip, &c0); // after warm-up
        for (int i = 0; i < 2; i++) CHECK_EQ(cd_backend_upload_async(hip, ctx, dev[i], in[i], size), 0);
        for (int i = 0; i < 2; i++) CHECK_EQ(cd_backend_download_async(hip, ctx, out[1 - i], dev[i], size), 0);
        CHECK_EQ(cd_backend_synchronize(hip, ctx), 0);
        for (int i = 0; i < 2; i++) CHECK_CLOSE_F32(out[1 - i], in[i], size / 4, 0);
    }
    cd_backend_hip_counters(hip, &c1);
    CHECK_EQ(c1.staging_drains - c0.staging_drains, 0);
    for (int i = 0; i < 2; i++) {
        cd_backend_buffer_free(hip, dev[i]);
        free(in[i]);
        free(out[i]);
    }
    cd_backend_ctx_free(hip, ctx);
    cd_backend_free(hip);
}

// One prepared op state run by two threads at once, each with its own
// context and buffers (the daemon's workers share a model's op states).
typedef struct {
    cd_backend_t be;
    const cd_bop_desc *d;
    cd_op_state *st;
    int batch;
    const float *x;
    float *y;
    int rc;
} thread_job;

static void *thread_run(void *arg) {
    thread_job *j = arg;
    cd_backend_ctx *ctx = NULL;
    void *xb = NULL, *yb = NULL;
    size_t xn = cd_tdesc_item_bytes(&j->d->src[0]) * (size_t)j->batch,
           yn = cd_tdesc_item_bytes(&j->d->dst) * (size_t)j->batch;
    j->rc = cd_backend_ctx_create(j->be, &ctx);
    if (!j->rc) j->rc = cd_backend_buffer_alloc(j->be, xn, &xb);
    if (!j->rc) j->rc = cd_backend_buffer_alloc(j->be, yn, &yb);
    for (int rep = 0; rep < 3 && !j->rc; rep++) {
        cd_btensor x = {xb, CD_LAYOUT_NCHW, 4, {0}}, y = {yb, CD_LAYOUT_NCHW, 4, {0}};
        memcpy(x.shape, j->d->src[0].shape, sizeof x.shape);
        memcpy(y.shape, j->d->dst.shape, sizeof y.shape);
        x.shape[0] = y.shape[0] = j->batch;
        const cd_btensor *srcs[1] = {&x};
        j->rc = cd_backend_upload_async(j->be, ctx, xb, j->x, xn);
        if (!j->rc) j->rc = cd_backend_op_run(j->be, CD_BOP_CONV2D, ctx, j->st, j->batch, srcs, &y);
        if (!j->rc) j->rc = cd_backend_download_async(j->be, ctx, j->y, yb, yn);
        if (!j->rc) j->rc = cd_backend_synchronize(j->be, ctx);
    }
    cd_backend_buffer_free(j->be, xb);
    cd_backend_buffer_free(j->be, yb);
    cd_backend_ctx_free(j->be, ctx);
    return NULL;
}

CD_TEST(hip_backend_shared_op_state_two_threads) {
    cd_backend_t hip = make(hip_device());
    cd_conv_desc c = rand_conv(0);
    c.has_residual = 0;
    int batch = 2;
    size_t nw = (size_t)c.k * c.c * c.r * c.s, no = (size_t)batch * c.k * c.oh * c.ow;
    float *w = tk_rbuf(nw), *b = tk_rbuf((size_t)c.k);
    cd_bop_desc d = conv_bop(&c, batch, w, b);
    cd_op_state *st;
    CHECK_EQ(cd_backend_op_init(hip, &d, &st), 0);
    float *x[2] = {tk_rbuf((size_t)batch * c.c * c.h * c.w), tk_rbuf((size_t)batch * c.c * c.h * c.w)};
    thread_job jobs[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        jobs[i] = (thread_job){hip, &d, st, batch, x[i], calloc(no, 4), 0};
        CHECK_EQ(pthread_create(&th[i], NULL, thread_run, &jobs[i]), 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    cd_conv_desc r = c;
    r.n = batch;
    float *want = calloc(no, 4);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(jobs[i].rc, 0);
        cd_ref_conv2d(&r, x[i], w, b, NULL, want);
        CHECK_CLOSE_F32(jobs[i].y, want, no, 1e-4);
        free(jobs[i].y);
        free(x[i]);
    }
    free(want), free(w), free(b);
    cd_backend_op_state_free(hip, st);
    cd_backend_free(hip);
}

// Three sparse pointwise layers (a chain, c -> c channels) run by two
// threads at once, each with its own context.
enum { CHAIN = 3 };
typedef struct {
    cd_backend_t be;
    const cd_bop_desc *d;
    cd_op_state **st;
    pthread_barrier_t *bar; // after warm-up; after the counted runs
    const float *x;
    float *y;
    int rc;
} chain_job;

static int chain_run(chain_job *j, cd_backend_ctx *ctx, void *xb, void *yb, size_t bytes) {
    cd_btensor a = {xb, CD_LAYOUT_NCHW, 4, {0}}, b = {yb, CD_LAYOUT_NCHW, 4, {0}};
    memcpy(a.shape, j->d->src[0].shape, sizeof a.shape);
    memcpy(b.shape, j->d->dst.shape, sizeof b.shape);
    a.shape[0] = b.shape[0] = j->d->max_batch;
    int rc = cd_backend_upload_async(j->be, ctx, xb, j->x, bytes);
    for (int l = 0; l < CHAIN && !rc; l++) { // x -> y -> x -> y
        cd_btensor *in = l % 2 ? &b : &a, *out = l % 2 ? &a : &b;
        const cd_btensor *srcs[1] = {in};
        rc = cd_backend_op_run(j->be, CD_BOP_CONV2D, ctx, j->st[l], j->d->max_batch, srcs, out);
    }
    if (!rc) rc = cd_backend_download_async(j->be, ctx, j->y, CHAIN % 2 ? yb : xb, bytes);
    if (!rc) rc = cd_backend_synchronize(j->be, ctx);
    return rc;
}

static void *chain_thread(void *arg) {
    chain_job *j = arg;
    cd_backend_ctx *ctx = NULL;
    void *xb = NULL, *yb = NULL;
    size_t bytes = cd_tdesc_item_bytes(&j->d->src[0]) * (size_t)j->d->max_batch;
    j->rc = cd_backend_ctx_create(j->be, &ctx);
    if (!j->rc) j->rc = cd_backend_buffer_alloc(j->be, bytes, &xb);
    if (!j->rc) j->rc = cd_backend_buffer_alloc(j->be, bytes, &yb);
    if (!j->rc) j->rc = chain_run(j, ctx, xb, yb, bytes); // warm-up: handle, scratch, staging
    pthread_barrier_wait(j->bar);
    pthread_barrier_wait(j->bar); // the main thread has read the counters
    for (int rep = 0; rep < 3 && !j->rc; rep++) j->rc = chain_run(j, ctx, xb, yb, bytes);
    pthread_barrier_wait(j->bar);
    pthread_barrier_wait(j->bar);
    cd_backend_buffer_free(j->be, xb);
    cd_backend_buffer_free(j->be, yb);
    cd_backend_ctx_free(j->be, ctx);
    return NULL;
}

// The sparse route keeps one handle per context, not per layer, counted in
// device_bytes; two threads run it at once without the backend's lock once
// warm, and get the CPU reference's results.
CD_TEST(hip_backend_sparse_handle_per_context_two_threads_no_lock) {
    if (real_gpu()) CD_SKIP("reads the hip-emu backend's counters");
    cd_backend_t hip = make(hip_device());
    cd_conv_desc c = rand_conv(3);
    c.k = c.c;
    c.has_residual = 0;
    int batch = cd_test_randi(1, 3);
    size_t nw = (size_t)c.k * c.c, no = (size_t)batch * c.k * c.oh * c.ow;
    float *w[CHAIN], *bias[CHAIN];
    cd_op_state *st[CHAIN];
    cd_bop_desc d;
    for (int l = 0; l < CHAIN; l++) {
        w[l] = tk_rbuf(nw), bias[l] = tk_rbuf((size_t)c.k);
        for (size_t i = 0; i < nw; i++)
            if (cd_test_randf(0, 1) < 0.7) w[l][i] = 0.0f;
        d = conv_bop(&c, batch, w[l], bias[l]);
        d.sparse = 1;
        CHECK_EQ(cd_backend_op_init(hip, &d, &st[l]), 0);
        CHECK(strstr(cd_backend_op_kernel(hip, st[l]), "csr-spmm") != NULL);
    }
    size_t weights = cd_backend_device_bytes(hip);
    cd_hip_counters c0, c1, c2;
    cd_backend_hip_counters(hip, &c0);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 3);
    float *x[2] = {tk_rbuf(no), tk_rbuf(no)};
    chain_job jobs[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        jobs[i] = (chain_job){hip, &d, st, &bar, x[i], calloc(no, 4), 0};
        CHECK_EQ(pthread_create(&th[i], NULL, chain_thread, &jobs[i]), 0);
    }
    pthread_barrier_wait(&bar);                       // both warm
    size_t warm_bytes = cd_backend_device_bytes(hip); // takes the lock: before c1
    cd_backend_hip_counters(hip, &c1);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar); // both ran 3 more times
    cd_backend_hip_counters(hip, &c2);
    pthread_barrier_wait(&bar);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    CHECK_EQ(c1.sparse_handles - c0.sparse_handles, 2); // contexts, not 2 x CHAIN layers
    CHECK_EQ(c2.sparse_handles, c1.sparse_handles);
    CHECK_EQ(c2.backend_locks - c1.backend_locks, 0); // no global lock on a warm run
    // Each context: two activation buffers and its handle.
    CHECK_EQ(warm_bytes - weights, 2 * (2 * no * 4 + CD_HIP_SPARSE_HANDLE_BYTES));
    CHECK_EQ(cd_backend_device_bytes(hip), weights);
    cd_conv_desc r = c;
    r.n = batch;
    float *want = calloc(no, 4), *tmp = calloc(no, 4);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(jobs[i].rc, 0);
        memcpy(want, x[i], no * 4);
        for (int l = 0; l < CHAIN; l++) {
            cd_ref_conv2d(&r, want, w[l], bias[l], NULL, tmp);
            memcpy(want, tmp, no * 4);
        }
        CHECK_CLOSE_F32(jobs[i].y, want, no, 1e-4);
        free(jobs[i].y);
        free(x[i]);
    }
    for (int l = 0; l < CHAIN; l++) {
        cd_backend_op_state_free(hip, st[l]);
        free(w[l]), free(bias[l]);
    }
    free(want), free(tmp);
    cd_backend_free(hip);
}

// rocSPARSE 5.3 does not check its launches: CD_ROCSPARSE_CHECK takes the
// thread's last HIP error after each call (cd_hip_check_launch). Injected
// here by a failing HIP call; reported once, as CD_EDEVICE, then cleared.
CD_TEST(hip_backend_launch_check_reports_a_pending_error_once) {
    if (real_gpu()) CD_SKIP("the emulator's HIP API is called directly");
    CHECK_EQ(cd_hip_check_launch("rocsparse_call()", __FILE__, __LINE__), 0);
    CHECK(hipSetDevice(99) != hipSuccess); // leaves hipErrorInvalidDevice pending
    CHECK_EQ(cd_hip_check_launch("rocsparse_call()", __FILE__, __LINE__), CD_EDEVICE);
    CHECK_EQ(cd_hip_check_launch("rocsparse_call()", __FILE__, __LINE__), 0);
}

// The plugin probe makes one rocSPARSE call; a rocSPARSE that cannot run on
// the device fails the probe with a message naming rocSPARSE and the arch
// (injected under the emulator, which has no rocSPARSE).
CD_TEST(hip_backend_probe_rocsparse_failure_names_library_and_arch) {
    if (real_gpu()) CD_SKIP("the failure is injected into the emulated probe");
    cd_hip_device_info info;
    char err[512] = "";
    CHECK_EQ(cd_hip_plugin_probe(0, &info, err, sizeof err), 0);
    setenv("CD_HIP_EMU_ROCSPARSE_PROBE", "fail", 1);
    CHECK_EQ(cd_hip_plugin_probe(0, &info, err, sizeof err), CD_EDEVICE);
    unsetenv("CD_HIP_EMU_ROCSPARSE_PROBE");
    CHECK(strstr(err, "rocSPARSE") != NULL);
    CHECK(strstr(err, "(convd HIP emulator (CPU), emu)") != NULL);
    CHECK(strstr(err, "rocsparse_saxpyi") != NULL);
}

CD_TEST(hip_backend_no_device_fails_cleanly) {
    if (real_gpu()) CD_SKIP("emulator only (CD_HIP_EMU_DEVICES)");
    setenv("CD_HIP_EMU_DEVICES", "0", 1);
    cd_backend_t be = NULL;
    char err[256] = "";
    CHECK_EQ(cd_backend_create("hip-emu", NULL, &be, err, sizeof err), CD_EDEVICE);
    CHECK(be == NULL);
    CHECK(strstr(err, "no HIP device 0") != NULL);
}

// "hip" needs the plugin: a missing one is CD_EDEVICE naming the path; the
// real plugin on a machine without a GPU is CD_EDEVICE saying so.
CD_TEST(hip_backend_device_names) {
    cd_backend_t be = NULL;
    char err[512] = "", info[256] = "";
    CHECK_EQ(cd_backend_create("tpu", NULL, &be, err, sizeof err), CD_EUNSUPPORTED);
    CHECK(strstr(err, "not a device") != NULL);
    CHECK_EQ(cd_backend_create("hip:x", NULL, &be, err, sizeof err), CD_EUNSUPPORTED);
    CHECK_EQ(cd_backend_probe("hip-emu", NULL, info, sizeof info, err, sizeof err), 0);
    CHECK(strstr(info, "hip-emu") != NULL);
    cd_backend_opts o = {.hip_plugin = "/nonexistent/libconvd-hip.so"}; // the switch travels with the create
    CHECK_EQ(cd_backend_create("hip:1", &o, &be, err, sizeof err), CD_EDEVICE);
    CHECK(be == NULL);
    CHECK(strstr(err, "cannot load /nonexistent/libconvd-hip.so") != NULL);
    CHECK(strstr(err, "make GPU=hip") != NULL);
}
