#ifndef CD_BACKENDS_HIP_BACKEND_HIP_IMPL_H
#define CD_BACKENDS_HIP_BACKEND_HIP_IMPL_H

// The HIP backend's private parts, shared by its files:
//   backend-hip.c         supports_op, op init, the dense runs, the vtable;
//   backend-hip-mem.c     accounted device memory, contexts (streams,
//                         workspace, pinned staging), the memory slots;
//   backend-hip-sparse.c  the sparse routes (CSR, GEBSR; rocSPARSE or the
//                         CPU reference under the emulator).
// Nothing outside backends/hip/backend-hip*.c includes it.

#include "backends/hip/backend-hip.h"
#include "backends/hip/check.h"
#include "backends/hip/sparse/gebsr-pack.h"
#include "core/errors.h"

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
    int device;           // HIP ordinal every entry point selects
    pthread_mutex_t lock; // guards allocs (take it with hipb_lock: counted)
    hip_alloc *allocs;    // live device allocations
    size_t nallocs, cap;
    size_t bytes;             // sum of allocs[].size
    cd_hip_counters counters; // updated with __atomic builtins
#if CD_HIP_REAL
    cd_rocsparse_ctx *load_rs; // the handle CSR plans are set up with at load (guarded by lock)
#endif
} hip_be;

typedef enum {
    K_DENSE = 0,   // the op's HIP kernel(s)
    K_GLOBAL_POOL, // pooling over the whole plane: the reduction kernel
    K_COPY,        // reorder between equal layouts: a device copy
    // Every kind from here on is a sparse route (backend-hip-sparse.c).
    K_SPMM_HOST,       // CSR SpMM on the CPU over host copies (emulated builds)
    K_SPMM_ROCSPARSE,  // CSR SpMM through rocSPARSE (real builds)
    K_GEBSR_HOST,      // 4x1 / 8x1 GEBSR product on the CPU over host copies (emulated builds)
    K_GEBSR_ROCSPARSE, // 4x1 / 8x1 GEBSR through rocsparse_sgebsrmm (real builds)
} kernel_kind;

struct cd_op_state {
    cd_bop op;
    kernel_kind kind;
    cd_bop_desc d;       // planning description (w/bias cleared)
    float *w, *bias;     // device: conv OIHW / gemm n x k, bias or NULL; FAKEQUANT: scales, zero points
    int64_t *gidx;       // device: GATHER's indices
    size_t weight_bytes; // bytes of weights held (device, or host for K_SPMM_HOST)
    // CSR of the rows x cols weight matrix (K x C for a 1x1 conv, n x k for a
    // Gemm), host memory: K_SPMM_HOST and the source of the rocSPARSE upload.
    int rows, cols;
    int *row_ptr, *col_ind;
    float *val, *hbias; // hbias: host bias (rows) or NULL
    // GEBSR (row_block_dim 4 or 8, col_block_dim 1) of the same matrix, host
    // memory: K_GEBSR_HOST and the source of the rocSPARSE upload.
    cd_gebsr gebsr;
#if CD_HIP_REAL
    // Resident plans, read-only once made: any number of contexts run them
    // at once, each with its own handle and stream (no lock).
    cd_rocsparse_csr *csr;  // K_SPMM_ROCSPARSE: resident CSR plan (NULL for all-zero weights)
    cd_rocsparse_gebsr *gb; // K_GEBSR_ROCSPARSE: resident GEBSR (NULL for all-zero weights)
    int gb_mb;              // its block rows (mb * rbd = padded output rows)
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
    hipStream_t stream; // this thread's stream (non-blocking)
    void *ws;           // device workspace (im2col), ws_bytes
    size_t ws_bytes;
    char *pin_in; // pinned staging for upload_async: pin_in_used of pin_in_cap
    size_t pin_in_cap, pin_in_used;
    char *pin_out; // pinned staging for download_async
    size_t pin_out_cap, pin_out_used;
    int sparse_ready; // the context's sparse handle exists (cd_hipb_ctx_sparse)
#if CD_HIP_REAL
    cd_rocsparse_ctx *rs; // its rocSPARSE handle, bound to stream per call
#endif
    hip_pending *pend; // queued downloads
    int npend, pend_cap;
    float *hx, *hy; // pinned host scratch of the host SpMM route
    size_t hx_bytes, hy_bytes;
};

static inline hip_be *HB(cd_backend_t be) { return (hip_be *)be->context; }

static inline int use_device(cd_backend_t be) {
    CD_HIP_CHECK(hipSetDevice(HB(be)->device));
    return 0;
}

// 1 when every operand of d is NCHW.
static inline int all_nchw(const cd_bop_desc *d) {
    for (int i = 0; i < d->nsrc; i++)
        if (d->src[i].layout != CD_LAYOUT_NCHW) return 0;
    return d->dst.layout == CD_LAYOUT_NCHW;
}

static inline int is_pointwise(const cd_conv_desc *c) {
    return c->groups == 1 && c->r == 1 && c->s == 1 && c->stride_h == 1 && c->stride_w == 1 && c->pad_t == 0 &&
           c->pad_l == 0 && c->pad_b == 0 && c->pad_r == 0;
}

static inline size_t numel(const cd_btensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->shape[i];
    return n;
}

// ---- backend-hip-mem.c

// Takes / releases the backend's lock, counting each take
// (cd_hip_counters.backend_locks): the run path of a warm context takes none.
void cd_hipb_lock(cd_backend_t be);
void cd_hipb_unlock(cd_backend_t be);
// Makes the context's sparse-library handle on its first sparse layer (once
// per context, like the workspace's first growth): a rocSPARSE handle on the
// real device; under the emulator, which runs the sparse routes on the CPU,
// nothing is created but the handle is counted and accounted the same way,
// so tests see the real build's bookkeeping. 0 or a code.
int cd_hipb_ctx_sparse(cd_backend_t be, cd_backend_ctx *ctx);

// Allocates size bytes of device memory (at least 1) and records it. Returns
// 0, CD_ENOMEM or CD_EDEVICE.
int cd_hipb_dev_alloc(cd_backend_t be, size_t size, void **out);
// Frees and forgets a cd_hipb_dev_alloc buffer (NULL is fine).
void cd_hipb_dev_free(cd_backend_t be, void *p);
// Device copy of n host floats (NULL when host is NULL). Returns 0 or a code.
int cd_hipb_dev_upload(cd_backend_t be, const float *host, size_t n, float **out);
// Device copy of size host bytes (NULL when host is NULL). Returns 0 or a code.
int cd_hipb_dev_upload_bytes(cd_backend_t be, const void *host, size_t size, void **out);
// Makes the context's device workspace hold at least bytes. 0 or a code.
int cd_hipb_ctx_workspace(cd_backend_t be, cd_backend_ctx *ctx, size_t bytes);
// Makes the pinned host buffer *buf (capacity *cap) hold at least bytes. 0 or a code.
int cd_hipb_pinned_reserve(char **buf, size_t *cap, size_t bytes);
int cd_hipb_ctx_create(cd_backend_t be, cd_backend_ctx **out);
void cd_hipb_ctx_free(cd_backend_t be, cd_backend_ctx *ctx);
int cd_hipb_synchronize(cd_backend_t be, cd_backend_ctx *ctx);
int cd_hipb_buffer_alloc(cd_backend_t be, size_t size, void **out);
void cd_hipb_buffer_free(cd_backend_t be, void *buf);
int cd_hipb_upload(cd_backend_t be, void *dst, const void *src, size_t size);
int cd_hipb_download(cd_backend_t be, void *dst, const void *src, size_t size);
int cd_hipb_upload_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size);
int cd_hipb_stage_inputs(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, const size_t *size,
                         void **host);
int cd_hipb_upload_staged(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, void *const *host,
                          const size_t *size);
int cd_hipb_download_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size);
size_t cd_hipb_device_bytes(cd_backend_t be);

// ---- backend-hip-sparse.c

// The sparse route of a sparse = 1 conv/gemm on this build, or K_DENSE when
// it has none for that geometry.
kernel_kind cd_hipb_sparse_kind(const cd_bop_desc *d);
// The GEBSR row block of a sparse_format, or 0 (CSR, AUTO: the CSR route).
int cd_hipb_gebsr_rows(const cd_bop_desc *d);
// Prepares the weights of a conv/gemm on st->kind's sparse route (rows x
// cols matrix w, bias or NULL): host CSR / GEBSR and, on the real device,
// the resident rocSPARSE plan; sets st->weight_bytes. 0 or a code.
int cd_hipb_sparse_init(cd_backend_t be, cd_op_state *st, const float *w, const float *bias, int rows, int cols);
// Frees what cd_hipb_sparse_init made.
void cd_hipb_sparse_free(cd_op_state *st);
// Runs a prepared op on its sparse route. 0 or a code.
int cd_hipb_sparse_run(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                       cd_btensor *dst);

#endif // CD_BACKENDS_HIP_BACKEND_HIP_IMPL_H
