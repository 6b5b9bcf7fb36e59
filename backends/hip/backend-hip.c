// The HIP backend: every slot of backends/backend.h on the kernels of
// backends/hip/. One source, two builds (backends/hip/backend-hip.h):
// "hip-emu" over the CPU emulator in the default build, "hip" over the real
// HIP runtime and rocSPARSE inside the GPU=hip plugin. Only the choice of the
// sparse route differs between them (see choose_sparse).
//
// Memory:
//   - weights are uploaded once, at op init, into device buffers the op state
//     owns (resident until the model is freed);
//   - the activation arena is planned at load by the runtime and allocated
//     with buffer_alloc, i.e. in device memory (one per cd_exec);
//   - each cd_backend_ctx (one per executing thread: one per daemon worker)
//     owns a non-blocking stream, a device workspace (im2col) grown to the
//     largest layer on first use, and pinned host staging buffers: inputs are
//     copied into pinned memory and uploaded with hipMemcpyAsync on the
//     worker's stream (upload_async); outputs come back the same way
//     (download_async) and are copied out at synchronize;
//   - every device allocation is accounted (device_bytes: weights, constants,
//     arenas of live execs, workspaces).
// What overlaps: the layers of one run are queued on the worker's stream
// without host waits (except a layer on the host SpMM route); different
// workers' uploads, kernels and downloads overlap each other (separate
// non-blocking streams, pinned staging, so the copies are truly
// asynchronous). Within one worker, the daemon submits batch i+1 on a second
// exec (cd_model_submit) before waiting for batch i (cd_model_wait), so its
// upload overlaps batch i's compute (docs/GPU.md says where that is lost).
//
// Sparse layers: the planner asks for the sparse kernels with
// cd_bop_desc.sparse = 1. This backend has them for pointwise (1x1, stride 1,
// unpadded, ungrouped) convs and Gemm, as a CSR SpMM: on the real device
// through rocSPARSE (backends/hip/sparse/rocsparse-calls.c; convs with >= 16 output
// pixels only, Gemm not: supports_op says no and the planner keeps them
// dense), under the emulator through a CPU reference loop on host copies
// (rocSPARSE cannot run without a GPU). Everything else runs on the dense
// HIP kernels. Layers the planner packs as BSR4 / BSR8 (sparse_format) take
// the general-BSR route instead (4x1 / 8x1 blocks, backends/hip/sparse/gebsr-pack.h):
// rocsparse_sgebsrmm on the real device (pointwise convs and Gemm), a CPU
// loop over the packed blocks under the emulator.
//
// Layouts: every op runs in NCHW; REORDER also converts NCHW <-> NCHW16C.

#include "backends/hip/backend-hip.h"

#include "backends/hip/bias-act.h"
#include "backends/hip/binary.h"
#include "backends/hip/check.h"
#include "backends/hip/concat.h"
#include "backends/hip/conv2d.h"
#include "backends/hip/global-pool.h"
#include "backends/hip/plugin.h"
#include "backends/hip/pool2d.h"
#include "backends/hip/reorder.h"
#include "backends/hip/sgemm.h"
#include "backends/hip/softmax.h"
#include "backends/hip/sparse/gebsr-pack.h"
#include "backends/hip/transpose.h"
#include "core/errors.h"
#include "sparse/sparse-conv.h"

#if defined(__HIP_PLATFORM_AMD__)
#define CD_HIP_REAL 1
#include "backends/hip/sparse/rocsparse-calls.h"
#else
#define CD_HIP_REAL 0
#endif

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HIP_MAX_BINARY_RANK 8

// One device allocation of the backend (for device_bytes and buffer_free).
typedef struct {
    void *p;
    size_t size;
} hip_alloc;

// The backend's private part (cd_backend.context).
typedef struct {
    int device;             // HIP ordinal every entry point selects
    pthread_mutex_t lock;   // guards allocs
    hip_alloc *allocs;      // live device allocations
    size_t nallocs, cap;
    size_t bytes;           // sum of allocs[].size
    cd_hip_counters counters; // updated with __atomic builtins
} hip_be;

typedef enum {
    K_DENSE = 0,   // the op's HIP kernel(s)
    K_GLOBAL_POOL, // pooling over the whole plane: the reduction kernel
    K_COPY,        // reorder between equal layouts: a device copy
    K_SPMM_HOST,   // CSR SpMM on the CPU over host copies (emulated builds)
    K_SPMM_ROCSPARSE, // CSR SpMM through rocSPARSE (real builds)
    K_GEBSR_HOST,  // 4x1 / 8x1 GEBSR product on the CPU over host copies (emulated builds)
    K_GEBSR_ROCSPARSE, // 4x1 / 8x1 GEBSR through rocsparse_sgebsrmm (real builds)
} kernel_kind;

struct cd_op_state {
    cd_bop op;
    kernel_kind kind;
    cd_bop_desc d;        // planning description (w/bias cleared)
    float *w, *bias;      // device: conv OIHW / gemm n x k, bias or NULL
    size_t weight_bytes;  // bytes of weights held (device, or host for K_SPMM_HOST)
    // CSR of the rows x cols weight matrix (K x C for a 1x1 conv, n x k for a
    // Gemm), host memory: K_SPMM_HOST and the source of the rocSPARSE upload.
    int rows, cols;
    int *row_ptr, *col_ind;
    float *val, *hbias;   // hbias: host bias (rows) or NULL
    // GEBSR (row_block_dim 4 or 8, col_block_dim 1) of the same matrix, host
    // memory: K_GEBSR_HOST and the source of the rocSPARSE upload.
    cd_gebsr gebsr;
#if CD_HIP_REAL
    cd_rocsparse_csr *csr; // K_SPMM_ROCSPARSE: resident CSR plan
    pthread_mutex_t csr_lock; // the plan's descriptors are rewritten per call
    int csr_lock_init;
    cd_rocsparse_gebsr *gb; // K_GEBSR_ROCSPARSE: resident GEBSR (NULL for all-zero weights)
    int gb_mb;              // its block rows (mb * rbd = padded output rows)
    pthread_mutex_t gb_lock; // the plan's handle is rebound to the caller's stream per call
    int gb_lock_init;
#endif
    char kernel[64];
};

// A download queued on the context's stream into pinned staging, copied to
// the caller's buffer at synchronize.
typedef struct {
    void *dst;
    size_t off, size;
} hip_pending;

struct cd_backend_ctx {
    hipStream_t stream;   // this thread's stream (non-blocking)
    void *ws;             // device workspace (im2col), ws_bytes
    size_t ws_bytes;
    char *pin_in;         // pinned staging for upload_async: pin_in_used of pin_in_cap
    size_t pin_in_cap, pin_in_used;
    char *pin_out;        // pinned staging for download_async
    size_t pin_out_cap, pin_out_used;
    hip_pending *pend;    // queued downloads
    int npend, pend_cap;
    float *hx, *hy;       // pinned host scratch of the host SpMM route
    size_t hx_bytes, hy_bytes;
};

static hip_be *HB(cd_backend_t be) { return (hip_be *)be->context; }

static int use_device(cd_backend_t be) {
    CD_HIP_CHECK(hipSetDevice(HB(be)->device));
    return 0;
}

// ---- accounted device memory ------------------------------------------------------

// Allocates size bytes of device memory (at least 1) and records it. Returns
// 0, CD_ENOMEM or CD_EDEVICE.
static int dev_alloc(cd_backend_t be, size_t size, void **out) {
    hip_be *b = HB(be);
    *out = NULL;
    void *p = NULL;
    CD_HIP_CHECK(hipMalloc(&p, size ? size : 1));
    pthread_mutex_lock(&b->lock);
    if (b->nallocs == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        hip_alloc *na = realloc(b->allocs, cap * sizeof *na);
        if (!na) {
            pthread_mutex_unlock(&b->lock);
            CD_HIP_CHECK_LOG(hipFree(p));
            return CD_ENOMEM;
        }
        b->allocs = na;
        b->cap = cap;
    }
    b->allocs[b->nallocs++] = (hip_alloc){p, size};
    b->bytes += size;
    pthread_mutex_unlock(&b->lock);
    *out = p;
    return 0;
}

static void dev_free(cd_backend_t be, void *p) {
    if (!p) return;
    hip_be *b = HB(be);
    pthread_mutex_lock(&b->lock);
    for (size_t i = b->nallocs; i-- > 0;) {
        if (b->allocs[i].p != p) continue;
        b->bytes -= b->allocs[i].size;
        b->allocs[i] = b->allocs[--b->nallocs];
        break;
    }
    pthread_mutex_unlock(&b->lock);
    CD_HIP_CHECK_LOG(hipSetDevice(b->device));
    CD_HIP_CHECK_LOG(hipFree(p));
}

// Device copy of n host floats (NULL when host is NULL). Returns 0 or a code.
static int dev_upload_new(cd_backend_t be, const float *host, size_t n, float **out) {
    *out = NULL;
    if (!host) return 0;
    void *p;
    int rc = dev_alloc(be, n * sizeof(float), &p);
    if (rc) return rc;
    hipError_t e = hipMemcpy(p, host, n * sizeof(float), hipMemcpyHostToDevice);
    if (e == hipSuccess) e = hipStreamSynchronize(NULL); // see hip_upload
    if (e != hipSuccess) {
        dev_free(be, p);
        return cd_hip_fail("hipMemcpy(weights)", __FILE__, __LINE__, e);
    }
    *out = p;
    return 0;
}

// ---- descriptions -----------------------------------------------------------------

static int all_nchw(const cd_bop_desc *d) {
    for (int i = 0; i < d->nsrc; i++)
        if (d->src[i].layout != CD_LAYOUT_NCHW) return 0;
    return d->dst.layout == CD_LAYOUT_NCHW;
}

static int is_pointwise(const cd_conv_desc *c) {
    return c->groups == 1 && c->r == 1 && c->s == 1 && c->stride_h == 1 && c->stride_w == 1 &&
           c->pad_t == 0 && c->pad_l == 0 && c->pad_b == 0 && c->pad_r == 0;
}

static int is_global_pool(const cd_pool_desc *p) {
    return p->kh == p->h && p->kw == p->w && p->oh == 1 && p->ow == 1 && p->pad_t == 0 &&
           p->pad_l == 0 && p->pad_b == 0 && p->pad_r == 0 && p->dil_h == 1 && p->dil_w == 1;
}

// Bytes of one batch item of t (cd_tdesc_item_bytes, which lives in the
// runtime the plugin does not link).
static size_t item_bytes(const cd_tdesc *t) {
    size_t n = 1;
    for (int i = t->is_const ? 0 : 1; i < t->rank; i++) {
        int64_t d = t->shape[i];
        if (i == 1) d = cd_layout_padded_c(t->layout, d);
        n *= (size_t)d;
    }
    return n * sizeof(float);
}

static int binary_shapes_ok(const cd_bop_desc *d) {
    if (d->nsrc != 2 || d->dst.rank > HIP_MAX_BINARY_RANK) return 0;
    for (int i = 0; i < 2; i++) {
        const cd_tdesc *s = &d->src[i];
        if (s->rank != d->dst.rank) return 0;
        for (int k = 1; k < s->rank; k++)
            if (s->shape[k] != d->dst.shape[k] && s->shape[k] != 1) return 0;
        if (s->is_const && s->shape[0] != 1) return 0;
    }
    return 1;
}

// The GEBSR row block of a sparse_format, or 0 (CSR, AUTO: the CSR route).
static int gebsr_rows(const cd_bop_desc *d) {
    if (d->sparse_format == CD_SPARSE_FMT_BSR4) return 4;
    if (d->sparse_format == CD_SPARSE_FMT_BSR8) return 8;
    return 0;
}

// The sparse route of a sparse = 1 conv/gemm on this build, or K_DENSE when
// it has none for that geometry. BSR4/BSR8 take the GEBSR route (4x1 / 8x1
// blocks), every other format the CSR route.
static kernel_kind sparse_kind(const cd_bop_desc *d) {
    if (!all_nchw(d)) return K_DENSE;
    if (gebsr_rows(d)) {
        if (d->op == CD_BOP_CONV2D) {
            const cd_conv_desc *c = &d->u.conv;
            if (!is_pointwise(c) || (size_t)c->k * c->c > (size_t)1 << 30) return K_DENSE;
        } else if (d->op != CD_BOP_GEMM || (size_t)d->u.gemm.n * d->u.gemm.k > (size_t)1 << 30) {
            return K_DENSE;
        }
        return CD_HIP_REAL ? K_GEBSR_ROCSPARSE : K_GEBSR_HOST;
    }
    if (d->op == CD_BOP_CONV2D) {
        const cd_conv_desc *c = &d->u.conv;
        if (!is_pointwise(c) || (size_t)c->k * c->c > (size_t)1 << 30) return K_DENSE;
#if CD_HIP_REAL
        // rocSPARSE: one image's activations are the dense B (C x OH*OW,
        // row-major); narrower than CD_ROCSPARSE_MIN_COLS would need padding.
        if ((int64_t)c->oh * c->ow < CD_ROCSPARSE_MIN_COLS) return K_DENSE;
        return K_SPMM_ROCSPARSE;
#else
        return K_SPMM_HOST;
#endif
    }
    if (d->op == CD_BOP_GEMM && (size_t)d->u.gemm.n * d->u.gemm.k <= (size_t)1 << 30)
        return CD_HIP_REAL ? K_DENSE : K_SPMM_HOST; // rocSPARSE Gemm would need a transpose
    return K_DENSE;
}

static bool hip_supports_op(cd_backend_t be, const cd_bop_desc *d) {
    if (d->sparse) {
        if (d->op == CD_BOP_CONV2D && d->u.conv.has_residual != (d->nsrc == 2)) return false;
        return sparse_kind(d) != K_DENSE;
    }
    switch (d->op) {
    case CD_BOP_REORDER:
        if (d->nsrc != 1) return false;
        if (d->src[0].layout == d->dst.layout) return true;
        // The reorder kernel (reorder.hip) knows NCHW and NCHW16C.
        for (int i = 0; i < 2; i++) {
            cd_layout l = i ? d->dst.layout : d->src[0].layout;
            if (l != CD_LAYOUT_NCHW && l != CD_LAYOUT_NCHW16C) return false;
        }
        return d->src[0].rank == 4;
    case CD_BOP_CONV2D: {
        const cd_conv_desc *c = &d->u.conv;
        if (!all_nchw(d) || d->src[0].rank != 4) return false;
        if (c->has_residual != (d->nsrc == 2)) return false;
        return c->groups >= 1 && c->c % c->groups == 0 && c->k % c->groups == 0 && c->r >= 1 && c->s >= 1;
    }
    case CD_BOP_GEMM: return all_nchw(d) && d->u.gemm.n >= 1 && d->u.gemm.k >= 1 && d->u.gemm.rows >= 1;
    case CD_BOP_POOL: return all_nchw(d) && d->src[0].rank == 4;
    case CD_BOP_BINARY: return all_nchw(d) && d->u.binary.kind <= CD_BINARY_DIV && binary_shapes_ok(d);
    case CD_BOP_ACTIVATION: return all_nchw(d);
    case CD_BOP_SOFTMAX: return all_nchw(d) && d->u.softmax.len >= 1 && d->u.softmax.inner >= 1;
    case CD_BOP_CONCAT:
        return all_nchw(d) && d->nsrc >= 1 && d->nsrc <= 64 && d->u.axis >= 1 && d->u.axis < d->dst.rank;
    case CD_BOP_TRANSPOSE: return all_nchw(d) && d->src[0].rank >= 1 && d->src[0].rank <= 8;
    case CD_BOP_COUNT: break;
    }
    return false;
}

// ---- the sparse route ---------------------------------------------------------------

// Builds the host CSR of the rows x cols matrix w (row-major). Returns 0 or
// CD_ENOMEM; sets st->rows/cols and the arrays.
static int csr_build(cd_op_state *st, const float *w, int rows, int cols, size_t nnz) {
    st->rows = rows;
    st->cols = cols;
    st->row_ptr = malloc(((size_t)rows + 1) * sizeof(int));
    st->col_ind = malloc((nnz ? nnz : 1) * sizeof(int));
    st->val = malloc((nnz ? nnz : 1) * sizeof(float));
    if (!st->row_ptr || !st->col_ind || !st->val) return CD_ENOMEM;
    size_t j = 0;
    for (int r = 0; r < rows; r++) {
        st->row_ptr[r] = (int)j;
        for (int c = 0; c < cols; c++) {
            float v = w[(size_t)r * cols + c];
            if (v == 0.0f) continue;
            st->col_ind[j] = c;
            st->val[j] = v;
            j++;
        }
    }
    st->row_ptr[rows] = (int)j;
    return 0;
}

#if CD_HIP_REAL
// Creates the resident rocSPARSE plan of a pointwise conv (C = W x X per
// image, X: C x OH*OW). Sample operands are allocated for the preprocess
// stage and freed. Returns 0 or a code.
static int csr_plan_create(cd_backend_t be, cd_op_state *st) {
    const cd_conv_desc *c = &st->d.u.conv;
    int hw = c->oh * c->ow;
    if (st->row_ptr[st->rows] == 0) return 0; // all-zero weights: no plan, the run writes zeros
    void *b = NULL, *o = NULL;
    int rc = dev_alloc(be, (size_t)c->c * hw * sizeof(float), &b);
    if (!rc) rc = dev_alloc(be, (size_t)c->k * hw * sizeof(float), &o);
    if (!rc)
        rc = cd_rocsparse_csr_init(&st->csr, NULL, st->rows, st->cols, st->row_ptr[st->rows], st->row_ptr,
                                   st->col_ind, st->val, hw, b, o);
    dev_free(be, b);
    dev_free(be, o);
    if (!rc) {
        pthread_mutex_init(&st->csr_lock, NULL);
        st->csr_lock_init = 1;
    }
    return rc;
}

// Uploads the host GEBSR as the op's resident rocSPARSE plan (none for
// all-zero weights: the run writes zeros). Returns 0 or a code.
static int gebsr_plan_create(cd_op_state *st) {
    const cd_gebsr *g = &st->gebsr;
    st->gb_mb = g->mb;
    if (g->nnzb == 0) return 0;
    int rc = cd_rocsparse_gebsr_init(&st->gb, g->mb, g->kb, g->nnzb, g->row_block_dim, g->col_block_dim,
                                     g->row_ptr, g->col_ind, g->val);
    if (!rc) {
        pthread_mutex_init(&st->gb_lock, NULL);
        st->gb_lock_init = 1;
    }
    return rc;
}
#endif

// ---- op init ------------------------------------------------------------------------

static void hip_op_state_free(cd_backend_t be, cd_op_state *st) {
    if (!st) return;
    dev_free(be, st->w);
    dev_free(be, st->bias);
#if CD_HIP_REAL
    cd_rocsparse_csr_free(st->csr);
    if (st->csr_lock_init) pthread_mutex_destroy(&st->csr_lock);
    cd_rocsparse_gebsr_free(st->gb);
    if (st->gb_lock_init) pthread_mutex_destroy(&st->gb_lock);
#endif
    cd_gebsr_free(&st->gebsr);
    free(st->row_ptr);
    free(st->col_ind);
    free(st->val);
    free(st->hbias);
    free(st);
}

static const char *kind_name(const cd_op_state *st) {
    switch (st->kind) {
    case K_GLOBAL_POOL: return "global-pool";
    case K_COPY: return "copy";
    case K_SPMM_HOST: return "csr-spmm-cpu-ref";
    case K_SPMM_ROCSPARSE: return "rocsparse-csr-spmm";
    case K_GEBSR_HOST: return st->d.sparse_format == CD_SPARSE_FMT_BSR8 ? "gebsr8x1-cpu-ref" : "gebsr4x1-cpu-ref";
    case K_GEBSR_ROCSPARSE:
        return st->d.sparse_format == CD_SPARSE_FMT_BSR8 ? "rocsparse-gebsr8x1-mm" : "rocsparse-gebsr4x1-mm";
    case K_DENSE: break;
    }
    switch (st->op) {
    case CD_BOP_CONV2D: {
        const cd_conv_desc *c = &st->d.u.conv;
        if (c->groups > 1 && c->groups == c->c && c->k % c->c == 0) return "dwconv";
        if (c->r == 1 && c->s == 1 && c->stride_h == 1 && c->stride_w == 1 && !c->pad_t && !c->pad_l &&
            !c->pad_b && !c->pad_r)
            return "conv1x1-sgemm";
        return "im2col-sgemm";
    }
    case CD_BOP_GEMM: return "sgemm";
    case CD_BOP_POOL: return "pool2d";
    case CD_BOP_BINARY: return "binary";
    case CD_BOP_ACTIVATION: return "bias-act";
    case CD_BOP_SOFTMAX: return "softmax";
    case CD_BOP_CONCAT: return "concat";
    case CD_BOP_TRANSPOSE: return "transpose";
    case CD_BOP_REORDER: return "reorder";
    case CD_BOP_COUNT: break;
    }
    return "?";
}

static void hip_get_caps(cd_backend_t be, cd_backend_caps *out) {
    *out = (cd_backend_caps){
        .name = CD_HIP_REAL ? "hip" : "hip-emu",
        .description = CD_HIP_REAL ? "hip (the HIP backend of the GPU=hip plugin)"
                                   : "hip-emu (the HIP kernels on the CPU emulator: for tests, slow)",
        // On a GPU, ops and copies only queue on the context's stream. The
        // emulator runs each launch to completion before it returns.
        .async = CD_HIP_REAL,
        .device_memory = true,
        .blocked_layout = CD_LAYOUT_NCHW, // our HIP kernels are NCHW
        .native_layout = CD_LAYOUT_NCHW,
        .isa = NULL,
    };
}

// Prepares d: uploads conv/gemm weights and bias (dense), or builds the CSR
// (sparse = 1: host copy for the CPU reference route, a resident rocSPARSE
// plan on the device), and picks the kernel. Returns 0, CD_EUNSUPPORTED (not
// supports_op), CD_EPARAMS (conv/gemm without weights), CD_ENOMEM or the
// HIP/rocSPARSE error.
static int hip_op_init(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out) {
    *out = NULL;
    if (!hip_supports_op(be, d)) return CD_EUNSUPPORTED;
    int rc = use_device(be);
    if (rc) return rc;
    cd_op_state *st = calloc(1, sizeof *st);
    if (!st) return CD_ENOMEM;
    st->op = d->op;
    st->d = *d;
    st->d.w = st->d.bias = NULL;
    st->kind = K_DENSE;
    if (d->op == CD_BOP_CONV2D || d->op == CD_BOP_GEMM) {
        int rows, cols;
        size_t nw, nnz = 0;
        if (d->op == CD_BOP_CONV2D) {
            const cd_conv_desc *c = &d->u.conv;
            rows = c->k;
            cols = (c->c / c->groups) * c->r * c->s;
        } else {
            rows = d->u.gemm.n;
            cols = d->u.gemm.k;
        }
        nw = (size_t)rows * cols;
        if (!d->w) rc = CD_EPARAMS;
        if (!rc && d->sparse) {
            st->kind = sparse_kind(d);
            for (size_t i = 0; i < nw; i++) nnz += d->w[i] != 0.0f;
        }
        int gebsr = st->kind == K_GEBSR_HOST || st->kind == K_GEBSR_ROCSPARSE;
        int host = st->kind == K_SPMM_HOST || st->kind == K_GEBSR_HOST;
        if (!rc && gebsr) {
            st->rows = rows;
            st->cols = cols;
            rc = cd_gebsr_pack(d->w, rows, cols, gebsr_rows(d), 1, &st->gebsr);
            if (!rc && d->bias && host) {
                st->hbias = malloc((size_t)rows * sizeof(float));
                if (!st->hbias) rc = CD_ENOMEM;
                else memcpy(st->hbias, d->bias, (size_t)rows * sizeof(float));
            }
            const cd_gebsr *g = &st->gebsr;
            st->weight_bytes = ((size_t)g->mb + 1 + (size_t)g->nnzb) * sizeof(int) +
                               (size_t)g->nnzb * g->row_block_dim * g->col_block_dim * sizeof(float) +
                               (d->bias ? (size_t)rows * sizeof(float) : 0);
        } else if (!rc && st->kind != K_DENSE) {
            rc = csr_build(st, d->w, rows, cols, nnz);
            if (!rc && d->bias && st->kind == K_SPMM_HOST) {
                st->hbias = malloc((size_t)rows * sizeof(float));
                if (!st->hbias) rc = CD_ENOMEM;
                else memcpy(st->hbias, d->bias, (size_t)rows * sizeof(float));
            }
            st->weight_bytes = ((size_t)rows + 1) * sizeof(int) + nnz * (sizeof(int) + sizeof(float)) +
                               (d->bias ? (size_t)rows * sizeof(float) : 0);
        }
        // The dense and rocSPARSE routes keep the bias on the device (their
        // epilogue runs there), the host route on the host (hbias).
        if (!rc && !host) rc = dev_upload_new(be, d->bias, (size_t)rows, &st->bias);
        if (!rc && st->kind == K_DENSE) {
            rc = dev_upload_new(be, d->w, nw, &st->w);
            st->weight_bytes = (nw + (d->bias ? (size_t)rows : 0)) * sizeof(float);
        }
#if CD_HIP_REAL
        if (!rc && st->kind == K_SPMM_ROCSPARSE) {
            // The plan holds its own device copy: the host CSR is not needed after.
            rc = csr_plan_create(be, st);
            free(st->row_ptr);
            free(st->col_ind);
            free(st->val);
            st->row_ptr = st->col_ind = NULL;
            st->val = NULL;
        }
        if (!rc && st->kind == K_GEBSR_ROCSPARSE) {
            rc = gebsr_plan_create(st); // the plan holds its own device copy
            cd_gebsr_free(&st->gebsr);
        }
#endif
    } else if (d->op == CD_BOP_POOL && is_global_pool(&d->u.pool)) {
        st->kind = K_GLOBAL_POOL;
    } else if (d->op == CD_BOP_REORDER && d->src[0].layout == d->dst.layout) {
        st->kind = K_COPY;
    }
    if (rc) {
        hip_op_state_free(be, st);
        return rc;
    }
    snprintf(st->kernel, sizeof st->kernel, "%s:%s", CD_HIP_REAL ? "hip" : "hip-emu", kind_name(st));
    *out = st;
    return 0;
}

// ---- contexts -------------------------------------------------------------------------

static void hip_ctx_free(cd_backend_t be, cd_backend_ctx *ctx) {
    if (!ctx) return;
    CD_HIP_CHECK_LOG(hipSetDevice(HB(be)->device));
    if (ctx->stream) {
        CD_HIP_CHECK_LOG(hipStreamSynchronize(ctx->stream));
        CD_HIP_CHECK_LOG(hipStreamDestroy(ctx->stream));
    }
    dev_free(be, ctx->ws);
    if (ctx->pin_in) CD_HIP_CHECK_LOG(hipHostFree(ctx->pin_in));
    if (ctx->pin_out) CD_HIP_CHECK_LOG(hipHostFree(ctx->pin_out));
    if (ctx->hx) CD_HIP_CHECK_LOG(hipHostFree(ctx->hx));
    if (ctx->hy) CD_HIP_CHECK_LOG(hipHostFree(ctx->hy));
    free(ctx->pend);
    free(ctx);
}

// A context: its non-blocking stream now; workspace and staging on first use.
// Returns 0, CD_ENOMEM or the HIP error.
static int hip_ctx_create(cd_backend_t be, cd_backend_ctx **out) {
    *out = NULL;
    int rc = use_device(be);
    if (rc) return rc;
    cd_backend_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return CD_ENOMEM;
    hipError_t e = hipStreamCreateWithFlags(&ctx->stream, hipStreamNonBlocking);
    if (e != hipSuccess) {
        ctx->stream = NULL;
        hip_ctx_free(be, ctx);
        return cd_hip_fail("hipStreamCreateWithFlags", __FILE__, __LINE__, e);
    }
    *out = ctx;
    return 0;
}

// Makes the context's device workspace hold at least bytes. Growing waits
// for the stream (queued kernels may still read the old one). 0 or a code.
static int ctx_workspace(cd_backend_t be, cd_backend_ctx *ctx, size_t bytes) {
    if (bytes <= ctx->ws_bytes) return 0;
    CD_HIP_CHECK(hipStreamSynchronize(ctx->stream));
    dev_free(be, ctx->ws);
    ctx->ws = NULL;
    ctx->ws_bytes = 0;
    int rc = dev_alloc(be, bytes, &ctx->ws);
    if (!rc) ctx->ws_bytes = bytes;
    return rc;
}

// Makes the pinned host buffer *buf (capacity *cap) hold at least bytes,
// dropping its contents. The caller has synchronised the stream. 0 or a code.
static int pinned_reserve(char **buf, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return 0;
    size_t n = *cap * 2 > bytes ? *cap * 2 : bytes;
    if (*buf) CD_HIP_CHECK(hipHostFree(*buf));
    *buf = NULL;
    *cap = 0;
    void *p = NULL;
    CD_HIP_CHECK(hipHostMalloc(&p, n, hipHostMallocDefault));
    *buf = p;
    *cap = n;
    return 0;
}

// Waits for the stream, then copies the finished downloads to their callers.
static int ctx_drain(cd_backend_ctx *ctx) {
    hipError_t e = hipStreamSynchronize(ctx->stream);
    if (e == hipSuccess)
        for (int i = 0; i < ctx->npend; i++)
            memcpy(ctx->pend[i].dst, ctx->pin_out + ctx->pend[i].off, ctx->pend[i].size);
    ctx->npend = 0;
    ctx->pin_in_used = ctx->pin_out_used = 0;
    return e == hipSuccess ? 0 : cd_hip_fail("hipStreamSynchronize", __FILE__, __LINE__, e);
}

// ctx_drain when staging is full: counted, since it makes the caller wait
// for everything queued on the stream (the overlap of that request is lost).
static int ctx_drain_full(cd_backend_t be, cd_backend_ctx *ctx) {
    __atomic_fetch_add(&HB(be)->counters.staging_drains, 1, __ATOMIC_RELAXED);
    return ctx_drain(ctx);
}

// Waits for ctx's stream and delivers its queued downloads (the whole device
// when ctx is NULL). Returns 0 or the HIP error.
static int hip_synchronize(cd_backend_t be, cd_backend_ctx *ctx) {
    int rc = use_device(be);
    if (rc) return rc;
    if (ctx) return ctx_drain(ctx);
    CD_HIP_CHECK(hipDeviceSynchronize());
    return 0;
}

// ---- memory slots ---------------------------------------------------------------------

// Zeroed, accounted device memory. Returns 0, CD_ENOMEM or CD_EDEVICE.
static int hip_buffer_alloc(cd_backend_t be, size_t size, void **out) {
    int rc = use_device(be);
    if (rc) return rc;
    rc = dev_alloc(be, size, out);
    if (rc) return rc;
    // NCHW16C padding starts out zero. The null stream is waited for: the
    // workers' non-blocking streams do not order after it.
    hipError_t e = hipMemset(*out, 0, size ? size : 1);
    if (e == hipSuccess) e = hipStreamSynchronize(NULL);
    if (e != hipSuccess) {
        dev_free(be, *out);
        *out = NULL;
        return cd_hip_fail("hipMemset", __FILE__, __LINE__, e);
    }
    return 0;
}

static void hip_buffer_free(cd_backend_t be, void *buf) { dev_free(be, buf); }

// A synchronous copy on the null stream. A pageable host->device hipMemcpy
// may return before the DMA lands, and the workers' non-blocking streams do
// not order after the null stream: wait for it, so the data is in place for
// any stream once this returns.
static int hip_upload(cd_backend_t be, void *dst, const void *src, size_t size) {
    int rc = use_device(be);
    if (rc) return rc;
    CD_HIP_CHECK(hipMemcpy(dst, src, size, hipMemcpyHostToDevice));
    CD_HIP_CHECK(hipStreamSynchronize(NULL));
    return 0;
}

// Synchronous, on the null stream: the caller has synchronised the context
// whose stream wrote src (the wrapper's fallback and the executor do).
static int hip_download(cd_backend_t be, void *dst, const void *src, size_t size) {
    int rc = use_device(be);
    if (rc) return rc;
    CD_HIP_CHECK(hipMemcpy(dst, src, size, hipMemcpyDeviceToHost));
    return 0;
}

// Stages src in pinned memory and queues its upload on the context's stream.
static int hip_upload_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size) {
    int rc = use_device(be);
    if (rc) return rc;
    if (ctx->pin_in_used + size > ctx->pin_in_cap) {
        // Earlier staged uploads may still be reading the buffer. Grow to
        // hold them and this one, so the next request of the same shape
        // (several inputs) stages without waiting.
        size_t need = ctx->pin_in_used + size;
        if ((rc = ctx_drain_full(be, ctx))) return rc;
        if ((rc = pinned_reserve(&ctx->pin_in, &ctx->pin_in_cap, need))) return rc;
    }
    char *stage = ctx->pin_in + ctx->pin_in_used;
    memcpy(stage, src, size);
    ctx->pin_in_used += (size + 63) & ~(size_t)63;
    CD_HIP_CHECK(hipMemcpyAsync(dst, stage, size, hipMemcpyHostToDevice, ctx->stream));
    return 0;
}

// Queues the download of src into pinned staging; dst is written at synchronize.
static int hip_download_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size) {
    int rc = use_device(be);
    if (rc) return rc;
    if (ctx->pin_out_used + size > ctx->pin_out_cap) {
        // Room for the downloads queued so far and this one (several
        // outputs): after warm-up a request never waits here.
        size_t need = ctx->pin_out_used + size;
        if ((rc = ctx_drain_full(be, ctx))) return rc; // delivers the downloads queued so far
        if ((rc = pinned_reserve(&ctx->pin_out, &ctx->pin_out_cap, need))) return rc;
    }
    if (ctx->npend == ctx->pend_cap) {
        int cap = ctx->pend_cap ? ctx->pend_cap * 2 : 8;
        hip_pending *np = realloc(ctx->pend, (size_t)cap * sizeof *np);
        if (!np) return CD_ENOMEM;
        ctx->pend = np;
        ctx->pend_cap = cap;
    }
    size_t off = ctx->pin_out_used;
    CD_HIP_CHECK(hipMemcpyAsync(ctx->pin_out + off, src, size, hipMemcpyDeviceToHost, ctx->stream));
    ctx->pend[ctx->npend++] = (hip_pending){dst, off, size};
    ctx->pin_out_used += (size + 63) & ~(size_t)63;
    return 0;
}

static size_t hip_device_bytes(cd_backend_t be) {
    hip_be *b = HB(be);
    pthread_mutex_lock(&b->lock);
    size_t n = b->bytes;
    pthread_mutex_unlock(&b->lock);
    return n;
}

// ---- runs -------------------------------------------------------------------------------

static size_t numel(const cd_btensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->shape[i];
    return n;
}

// The activations of kernels/op-desc.h on the host (the formulas of cd_act_apply).
static float host_act(cd_activation a, float x) {
    switch (a.kind) {
    case CD_ACT_NONE: return x;
    case CD_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case CD_ACT_CLIP: return fminf(fmaxf(x, a.alpha), a.beta);
    case CD_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case CD_ACT_HARDSIGMOID: return fmaxf(0.0f, fminf(1.0f, a.alpha * x + a.beta));
    case CD_ACT_HARDSWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case CD_ACT_LEAKYRELU: return x >= 0.0f ? x : a.alpha * x;
    }
    return x;
}

// Makes the pinned scratch *p hold bytes (contents dropped). 0 or a code.
static int host_scratch(float **p, size_t *have, size_t bytes) {
    char *b = (char *)*p;
    int rc = pinned_reserve(&b, have, bytes);
    *p = (float *)b;
    return rc;
}

// The GEBSR part of the host route (K_GEBSR_HOST): y = act(A x + bias
// [+ residual]) from the packed blocks, y already holding the residual when
// the conv has one. Padding rows of the last block row are never written.
static void gebsr_host(const cd_op_state *st, int batch, const float *x, float *y) {
    const cd_bop_desc *d = &st->d;
    if (d->op == CD_BOP_CONV2D) {
        const cd_conv_desc *c = &d->u.conv;
        size_t hw = (size_t)c->oh * c->ow;
        for (int n = 0; n < batch; n++) {
            float *yn = y + (size_t)n * st->rows * hw;
            for (int k = 0; k < st->rows; k++) {
                float b0 = st->hbias ? st->hbias[k] : 0.0f;
                float *yr = yn + (size_t)k * hw;
                for (size_t p = 0; p < hw; p++) yr[p] = c->has_residual ? yr[p] + b0 : b0;
            }
            // X: C x hw row-major, Y: K x hw row-major (one NCHW image each).
            cd_gebsr_mm_host(&st->gebsr, hw, x + (size_t)n * st->cols * hw, hw, 1, yn, hw, 1);
            for (size_t i = 0; i < (size_t)st->rows * hw; i++) yn[i] = host_act(c->act, yn[i]);
        }
    } else { // GEMM: X(col, i) = x[i*cols + col], Y(r, i) = y[i*rows + r]
        size_t m = (size_t)batch * d->u.gemm.rows;
        for (size_t i = 0; i < m; i++)
            for (int r = 0; r < st->rows; r++) y[i * st->rows + r] = st->hbias ? st->hbias[r] : 0.0f;
        cd_gebsr_mm_host(&st->gebsr, m, x, 1, (size_t)st->cols, y, 1, (size_t)st->rows);
        for (size_t i = 0; i < m * st->rows; i++) y[i] = host_act(d->u.gemm.act, y[i]);
    }
}

// The host SpMM route: waits for the stream, copies the input (and the
// residual) to pinned host memory, multiplies by the CSR (or GEBSR) weights
// with the bias, residual and activation applied, and uploads the result.
static int run_spmm_host(cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                         cd_btensor *dst) {
    const cd_bop_desc *d = &st->d;
    size_t nx = numel(srcs[0]), ny = numel(dst);
    // The input is ready, and the previous host layer's upload out of hy is done.
    CD_HIP_CHECK(hipStreamSynchronize(ctx->stream));
    int rc = host_scratch(&ctx->hx, &ctx->hx_bytes, nx * sizeof(float));
    if (!rc) rc = host_scratch(&ctx->hy, &ctx->hy_bytes, ny * sizeof(float));
    if (rc) return rc;
    CD_HIP_CHECK(hipMemcpy(ctx->hx, srcs[0]->data, nx * sizeof(float), hipMemcpyDeviceToHost));
    float *x = ctx->hx, *y = ctx->hy;
    const int *rp = st->row_ptr, *ci = st->col_ind;
    const float *v = st->val;
    if (d->op == CD_BOP_CONV2D && d->u.conv.has_residual)
        CD_HIP_CHECK(hipMemcpy(y, srcs[1]->data, ny * sizeof(float), hipMemcpyDeviceToHost));
    if (st->kind == K_GEBSR_HOST) {
        gebsr_host(st, batch, x, y);
    } else if (d->op == CD_BOP_CONV2D) {
        const cd_conv_desc *c = &d->u.conv;
        size_t hw = (size_t)c->oh * c->ow;
        for (int n = 0; n < batch; n++)
            for (int k = 0; k < st->rows; k++) {
                float *yr = y + ((size_t)n * st->rows + k) * hw;
                float b0 = st->hbias ? st->hbias[k] : 0.0f;
                for (size_t p = 0; p < hw; p++) yr[p] = c->has_residual ? yr[p] + b0 : b0;
                for (size_t p = 0; p < hw; p++) {
                    float s = 0.0f;
                    for (int j = rp[k]; j < rp[k + 1]; j++) s += v[j] * x[((size_t)n * st->cols + ci[j]) * hw + p];
                    yr[p] = host_act(c->act, s + yr[p]);
                }
            }
    } else { // GEMM: y[m, r] = act(sum_j val * x[m, col] + bias[r])
        size_t m = (size_t)batch * d->u.gemm.rows;
        for (size_t i = 0; i < m; i++)
            for (int r = 0; r < st->rows; r++) {
                float s = 0.0f;
                for (int j = rp[r]; j < rp[r + 1]; j++) s += v[j] * x[i * st->cols + ci[j]];
                y[i * st->rows + r] = host_act(d->u.gemm.act, s + (st->hbias ? st->hbias[r] : 0.0f));
            }
    }
    CD_HIP_CHECK(hipMemcpyAsync(dst->data, y, ny * sizeof(float), hipMemcpyHostToDevice, ctx->stream));
    return 0;
}

#if CD_HIP_REAL
static int run_csr_locked(cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                          cd_btensor *dst);

// The rocSPARSE route of a pointwise conv: one compute stage per image on
// the plan's stream (under the op's lock: the plan's dense descriptors are
// rebound per call), then the bias/residual/activation epilogue on ours.
static int run_spmm_rocsparse(cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                              cd_btensor *dst) {
    const cd_conv_desc *c = &st->d.u.conv;
    size_t hw = (size_t)c->oh * c->ow;
    if (!st->csr) { // all-zero weights
        CD_HIP_CHECK(hipMemsetAsync(dst->data, 0, (size_t)batch * c->k * hw * sizeof(float), ctx->stream));
    } else {
        int rc = run_csr_locked(ctx, st, batch, srcs, dst);
        if (rc) return rc;
    }
    const float *res = c->has_residual ? srcs[1]->data : NULL;
    if (!st->bias && !res && c->act.kind == CD_ACT_NONE) return 0;
    return cd_hip_bias_act(batch, c->k, (int64_t)hw, dst->data, st->bias, res, c->act, dst->data, ctx->stream);
}

// The compute stages of one run, under the op's lock; returns once they are done.
static int run_csr_locked(cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                          cd_btensor *dst) {
    const cd_conv_desc *c = &st->d.u.conv;
    size_t hw = (size_t)c->oh * c->ow;
    CD_HIP_CHECK(hipStreamSynchronize(ctx->stream)); // the input is ready
    int rc = 0;
    pthread_mutex_lock(&st->csr_lock);
    for (int n = 0; n < batch && !rc; n++)
        rc = cd_rocsparse_csr_spmm(st->csr, (const float *)srcs[0]->data + (size_t)n * c->c * hw,
                                   (float *)dst->data + (size_t)n * c->k * hw);
    if (!rc) {
        hipError_t e = hipStreamSynchronize(NULL);
        if (e != hipSuccess) rc = cd_hip_fail("hipStreamSynchronize(plan)", __FILE__, __LINE__, e);
    }
    pthread_mutex_unlock(&st->csr_lock);
    return rc;
}

// The rocsparse_sgebsrmm calls of one run, queued on the worker's stream
// under the op's lock (the handle is rebound to that stream per call). C is
// column-major with mb*rbd (>= rows) rows, ldc = mb*rbd: a padded output
// (padding rows land in the workspace, never in dst).
static int gebsr_mm_locked(cd_backend_ctx *ctx, cd_op_state *st, int nmm, int b_trans, int n, const float *b,
                           size_t b_step, int ldb, float *c, size_t c_step, int ldc) {
    int rc = 0;
    pthread_mutex_lock(&st->gb_lock);
    for (int i = 0; i < nmm && !rc; i++)
        rc = cd_rocsparse_gebsr_mm(st->gb, ctx->stream, b_trans, n, b + i * b_step, ldb, c + i * c_step, ldc);
    pthread_mutex_unlock(&st->gb_lock);
    return rc;
}

// The rocSPARSE GEBSR route, everything on the worker's stream:
//  - pointwise conv, per image: C (Kp x HW, column-major = HW x Kp
//    row-major) = A x X with X the image (C x HW row-major = B^T), into the
//    workspace; one transpose to Kp x HW per image; rows K..Kp-1 trimmed by a
//    2D copy to dst (the transpose writes dst directly when Kp = K);
//  - Gemm: the activations [M, k] row-major are column-major B (k x M), so
//    C (Kp x M column-major = M x Kp row-major) is dst itself when Kp = n,
//    else the workspace, trimmed by a 2D copy;
// then the bias/residual/activation epilogue. Kp = mb * rbd.
static int run_gebsr_rocsparse(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                               const cd_btensor *const *srcs, cd_btensor *dst) {
    const cd_bop_desc *d = &st->d;
    int kp = st->gb_mb * gebsr_rows(d);
    int rc;
    const float *x = srcs[0]->data;
    float *y = dst->data;
    if (d->op == CD_BOP_CONV2D) {
        const cd_conv_desc *c = &d->u.conv;
        size_t hw = (size_t)c->oh * c->ow, img = (size_t)kp * hw;
        if (!st->gb) {
            CD_HIP_CHECK(hipMemsetAsync(y, 0, (size_t)batch * c->k * hw * sizeof(float), ctx->stream));
        } else {
            int trim = kp != c->k;
            if ((rc = ctx_workspace(be, ctx, (trim ? 2 : 1) * (size_t)batch * img * sizeof(float)))) return rc;
            float *t = ctx->ws, *u = trim ? t + (size_t)batch * img : y;
            rc = gebsr_mm_locked(ctx, st, batch, 1, (int)hw, x, (size_t)c->c * hw, (int)hw, t, img, kp);
            if (rc) return rc;
            const int64_t shape[3] = {batch, (int64_t)hw, kp};
            const int perm[3] = {0, 2, 1};
            if ((rc = cd_hip_transpose(3, shape, perm, t, u, ctx->stream))) return rc;
            if (trim)
                CD_HIP_CHECK(hipMemcpy2DAsync(y, (size_t)c->k * hw * sizeof(float), u, img * sizeof(float),
                                              (size_t)c->k * hw * sizeof(float), (size_t)batch,
                                              hipMemcpyDeviceToDevice, ctx->stream));
        }
        const float *res = c->has_residual ? srcs[1]->data : NULL;
        if (!st->bias && !res && c->act.kind == CD_ACT_NONE) return 0;
        return cd_hip_bias_act(batch, c->k, (int64_t)hw, y, st->bias, res, c->act, y, ctx->stream);
    }
    size_t m = (size_t)batch * d->u.gemm.rows;
    int n = d->u.gemm.n, k = d->u.gemm.k;
    if (!st->gb) {
        CD_HIP_CHECK(hipMemsetAsync(y, 0, m * n * sizeof(float), ctx->stream));
    } else {
        int trim = kp != n;
        float *t = y;
        if (trim) {
            if ((rc = ctx_workspace(be, ctx, m * kp * sizeof(float)))) return rc;
            t = ctx->ws;
        }
        if ((rc = gebsr_mm_locked(ctx, st, 1, 0, (int)m, x, 0, k, t, 0, kp))) return rc;
        if (trim)
            CD_HIP_CHECK(hipMemcpy2DAsync(y, (size_t)n * sizeof(float), t, (size_t)kp * sizeof(float),
                                          (size_t)n * sizeof(float), m, hipMemcpyDeviceToDevice, ctx->stream));
    }
    if (!st->bias && d->u.gemm.act.kind == CD_ACT_NONE) return 0;
    return cd_hip_bias_act((int64_t)m, n, 1, y, st->bias, NULL, d->u.gemm.act, y, ctx->stream);
}
#endif

// Queues a prepared op on the context's stream (the host SpMM route runs on
// the host and returns with its upload queued). Returns 0, CD_EPARAMS without
// a context, or the kernel's / HIP's error.
static int hip_op_run(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                      const cd_btensor *const *srcs, cd_btensor *dst) {
    if (!ctx) return CD_EPARAMS; // the executor always has one (ctx_create is set)
    int rc = use_device(be);
    if (rc) return rc;
    const cd_bop_desc *d = &st->d;
    hipStream_t s = ctx->stream;
    if (st->kind == K_SPMM_HOST || st->kind == K_GEBSR_HOST) return run_spmm_host(ctx, st, batch, srcs, dst);
#if CD_HIP_REAL
    if (st->kind == K_SPMM_ROCSPARSE) return run_spmm_rocsparse(ctx, st, batch, srcs, dst);
    if (st->kind == K_GEBSR_ROCSPARSE) return run_gebsr_rocsparse(be, ctx, st, batch, srcs, dst);
#endif
    switch (st->op) {
    case CD_BOP_CONV2D: {
        cd_conv_desc c = d->u.conv;
        c.n = batch;
        size_t ws = cd_hip_conv2d_workspace(&c);
        if ((rc = ctx_workspace(be, ctx, ws))) return rc;
        return cd_hip_conv2d(&c, srcs[0]->data, st->w, st->bias, c.has_residual ? srcs[1]->data : NULL, dst->data,
                             ctx->ws, ctx->ws_bytes, s);
    }
    case CD_BOP_GEMM: {
        cd_hip_gemm_desc g;
        memset(&g, 0, sizeof g);
        g.m = batch * d->u.gemm.rows;
        g.n = d->u.gemm.n;
        g.k = d->u.gemm.k;
        g.batch = 1;
        g.a_rs = g.k; // A = src, m x k row-major
        g.a_cs = 1;
        g.b_rs = 1;   // B(p, j) = w[j, p]: the n x k weights transposed
        g.b_cs = g.k;
        g.ldc = g.n;
        g.alpha = 1.0f;
        g.beta = 0.0f;
        if ((rc = cd_hip_sgemm(&g, srcs[0]->data, st->w, dst->data, s))) return rc;
        if (!st->bias && d->u.gemm.act.kind == CD_ACT_NONE) return 0;
        return cd_hip_bias_act(g.m, g.n, 1, dst->data, st->bias, NULL, d->u.gemm.act, dst->data, s);
    }
    case CD_BOP_POOL: {
        cd_pool_desc p = d->u.pool;
        p.n = batch;
        if (st->kind == K_GLOBAL_POOL)
            return cd_hip_global_pool(p.kind, (int64_t)batch * p.c, (int64_t)p.h * p.w, srcs[0]->data, dst->data, s);
        return cd_hip_pool2d(&p, srcs[0]->data, dst->data, s);
    }
    case CD_BOP_BINARY:
        return cd_hip_binary((cd_hip_binary_op)d->u.binary.kind, srcs[0]->rank, srcs[0]->shape, srcs[1]->rank,
                             srcs[1]->shape, srcs[0]->data, srcs[1]->data, d->u.binary.act, dst->data, s);
    case CD_BOP_ACTIVATION:
        return cd_hip_bias_act(1, 1, (int64_t)numel(dst), srcs[0]->data, NULL, NULL, d->u.act, dst->data, s);
    case CD_BOP_SOFTMAX:
        return cd_hip_softmax(batch * d->u.softmax.outer, d->u.softmax.len, d->u.softmax.inner, srcs[0]->data,
                              dst->data, s);
    case CD_BOP_CONCAT: {
        int64_t outer = 1, cols[64];
        const float *ptrs[64];
        for (int i = 0; i < d->u.axis; i++) outer *= dst->shape[i];
        for (int j = 0; j < d->nsrc; j++) {
            cols[j] = 1;
            for (int i = d->u.axis; i < srcs[j]->rank; i++) cols[j] *= srcs[j]->shape[i];
            ptrs[j] = srcs[j]->data;
        }
        return cd_hip_concat(d->nsrc, outer, cols, ptrs, dst->data, s);
    }
    case CD_BOP_TRANSPOSE:
        return cd_hip_transpose(srcs[0]->rank, srcs[0]->shape, d->u.perm, srcs[0]->data, dst->data, s);
    case CD_BOP_REORDER: {
        const cd_btensor *x = srcs[0];
        if (st->kind == K_COPY) {
            size_t bytes = item_bytes(&d->src[0]) * (size_t)batch;
            if (bytes && x->data != dst->data)
                CD_HIP_CHECK(hipMemcpyAsync(dst->data, x->data, bytes, hipMemcpyDeviceToDevice, s));
            return 0;
        }
        return cd_hip_reorder(x->layout, dst->layout, batch, (int)x->shape[1], (int)x->shape[2], (int)x->shape[3],
                              x->data, dst->data, s);
    }
    case CD_BOP_COUNT: break;
    }
    return CD_EINTERNAL;
}

// ---- the rest of the vtable -------------------------------------------------------------

static void hip_free(cd_backend_t be) {
    hip_be *b = HB(be);
    if (b) {
        // Everything the runtime made is freed by now; anything left is a leak
        // of ours, released here rather than kept on the device.
        for (size_t i = 0; i < b->nallocs; i++) CD_HIP_CHECK_LOG(hipFree(b->allocs[i].p));
        free(b->allocs);
        pthread_mutex_destroy(&b->lock);
        free(b);
    }
    free(be);
}

static const char *hip_op_kernel(cd_backend_t be, cd_op_state *st) { return st->kernel; }

static size_t hip_op_weight_bytes(cd_backend_t be, cd_op_state *st) { return st->weight_bytes; }

static const struct cd_backend_i g_hip_iface = {
    .get_caps = hip_get_caps,
    .free = hip_free,
    .buffer_alloc = hip_buffer_alloc,
    .buffer_free = hip_buffer_free,
    .upload = hip_upload,
    .download = hip_download,
    .ctx_create = hip_ctx_create,
    .ctx_free = hip_ctx_free,
    .supports_op = hip_supports_op,
    .op_init = hip_op_init,
    .op_run = hip_op_run,
    .op_kernel = hip_op_kernel,
    .op_weight_bytes = hip_op_weight_bytes,
    .op_state_free = hip_op_state_free,
    .synchronize = hip_synchronize,
    .upload_async = hip_upload_async,
    .download_async = hip_download_async,
    .device_bytes = hip_device_bytes,
};

void cd_backend_hip_counters(cd_backend_t be, cd_hip_counters *out) {
    hip_be *b = HB(be);
    out->staging_drains = __atomic_load_n(&b->counters.staging_drains, __ATOMIC_RELAXED);
}

int cd_backend_hip_init(int device, cd_backend_t *out, char *err, size_t errlen) {
    *out = NULL;
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    if (e != hipSuccess || count < 1 || device < 0 || device >= count) {
        if (err && errlen)
            snprintf(err, errlen, "no HIP device %d (%s%s)", device,
                     e != hipSuccess ? "hipGetDeviceCount: " : "devices: ",
                     e != hipSuccess ? hipGetErrorName(e) : (count ? "fewer" : "none"));
        return CD_EDEVICE;
    }
    cd_backend_t be = calloc(1, sizeof *be);
    hip_be *b = calloc(1, sizeof *b);
    if (!be || !b) {
        free(be);
        free(b);
        return CD_ENOMEM;
    }
    b->device = device;
    pthread_mutex_init(&b->lock, NULL);
    be->iface = &g_hip_iface;
    be->context = b;
    *out = be;
    return 0;
}

// The plugin's entry point for the runtime (backends/hip/plugin.h).
__attribute__((visibility("default"))) int cd_hip_plugin_backend_create(int device, struct cd_backend **out,
                                                                        char *err, size_t errlen) {
    return cd_backend_hip_init(device, out, err, errlen);
}
