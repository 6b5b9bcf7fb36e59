// The HIP backend's memory (backends/hip/backend-hip-impl.h): accounted
// device allocations, the per-thread contexts (a non-blocking stream, the
// device workspace, pinned staging for the async copies) and the memory
// slots of the vtable.

#include "backends/hip/backend-hip-impl.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void cd_hipb_lock(cd_backend_t be) {
    hip_be *b = HB(be);
    pthread_mutex_lock(&b->lock);
    __atomic_fetch_add(&b->counters.backend_locks, 1, __ATOMIC_RELAXED);
}

void cd_hipb_unlock(cd_backend_t be) { pthread_mutex_unlock(&HB(be)->lock); }

// Adds delta (may be negative) to the accounted device bytes.
static void account(cd_backend_t be, ptrdiff_t delta) {
    cd_hipb_lock(be);
    HB(be)->bytes += (size_t)delta;
    cd_hipb_unlock(be);
}

// ---- accounted device memory ------------------------------------------------------

// Allocates size bytes of device memory (at least 1) and records it. Returns
// 0, CD_ENOMEM or CD_EDEVICE.
int cd_hipb_dev_alloc(cd_backend_t be, size_t size, void **out) {
    hip_be *b = HB(be);
    *out = NULL;
    void *p = NULL;
    CD_HIP_CHECK(hipMalloc(&p, size ? size : 1));
    cd_hipb_lock(be);
    if (b->nallocs == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        hip_alloc *na = realloc(b->allocs, cap * sizeof *na);
        if (!na) {
            cd_hipb_unlock(be);
            CD_HIP_CHECK_LOG(hipFree(p));
            return CD_ENOMEM;
        }
        b->allocs = na;
        b->cap = cap;
    }
    b->allocs[b->nallocs++] = (hip_alloc){p, size};
    b->bytes += size;
    cd_hipb_unlock(be);
    *out = p;
    return 0;
}

void cd_hipb_dev_free(cd_backend_t be, void *p) {
    if (!p) return;
    hip_be *b = HB(be);
    cd_hipb_lock(be);
    for (size_t i = b->nallocs; i-- > 0;) {
        if (b->allocs[i].p != p) continue;
        b->bytes -= b->allocs[i].size;
        b->allocs[i] = b->allocs[--b->nallocs];
        break;
    }
    cd_hipb_unlock(be);
    CD_HIP_CHECK_LOG(hipSetDevice(b->device));
    CD_HIP_CHECK_LOG(hipFree(p));
}

// Device copy of n host floats (NULL when host is NULL). Returns 0 or a code.
int cd_hipb_dev_upload(cd_backend_t be, const float *host, size_t n, float **out) {
    void *p;
    int rc = cd_hipb_dev_upload_bytes(be, host, n * sizeof(float), &p);
    *out = p;
    return rc;
}

int cd_hipb_dev_upload_bytes(cd_backend_t be, const void *host, size_t size, void **out) {
    *out = NULL;
    if (!host) return 0;
    void *p;
    int rc = cd_hipb_dev_alloc(be, size, &p);
    if (rc) return rc;
    hipError_t e = hipMemcpy(p, host, size, hipMemcpyHostToDevice);
    if (e == hipSuccess) e = hipStreamSynchronize(NULL); // see hip_upload
    if (e != hipSuccess) {
        cd_hipb_dev_free(be, p);
        return cd_hip_fail("hipMemcpy(weights)", __FILE__, __LINE__, e);
    }
    *out = p;
    return 0;
}

// ---- contexts -------------------------------------------------------------------------

void cd_hipb_ctx_free(cd_backend_t be, cd_backend_ctx *ctx) {
    if (!ctx) return;
    CD_HIP_CHECK_LOG(hipSetDevice(HB(be)->device));
    if (ctx->stream) CD_HIP_CHECK_LOG(hipStreamSynchronize(ctx->stream));
    if (ctx->sparse_ready) { // before the stream its handle was last bound to
#if CD_HIP_REAL
        cd_rocsparse_ctx_free(ctx->rs);
#endif
        account(be, -(ptrdiff_t)CD_HIP_SPARSE_HANDLE_BYTES);
    }
    if (ctx->stream) CD_HIP_CHECK_LOG(hipStreamDestroy(ctx->stream));
    cd_hipb_dev_free(be, ctx->ws);
    if (ctx->pin_in) CD_HIP_CHECK_LOG(hipHostFree(ctx->pin_in));
    if (ctx->pin_out) CD_HIP_CHECK_LOG(hipHostFree(ctx->pin_out));
    if (ctx->hx) CD_HIP_CHECK_LOG(hipHostFree(ctx->hx));
    if (ctx->hy) CD_HIP_CHECK_LOG(hipHostFree(ctx->hy));
    free(ctx->pend);
    free(ctx);
}

// A context: its non-blocking stream now; workspace and staging on first use.
// Returns 0, CD_ENOMEM or the HIP error.
int cd_hipb_ctx_create(cd_backend_t be, cd_backend_ctx **out) {
    *out = NULL;
    int rc = use_device(be);
    if (rc) return rc;
    cd_backend_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return CD_ENOMEM;
    hipError_t e = hipStreamCreateWithFlags(&ctx->stream, hipStreamNonBlocking);
    if (e != hipSuccess) {
        ctx->stream = NULL;
        cd_hipb_ctx_free(be, ctx);
        return cd_hip_fail("hipStreamCreateWithFlags", __FILE__, __LINE__, e);
    }
    *out = ctx;
    return 0;
}

// Makes the context's device workspace hold at least bytes. Growing waits
// for the stream (queued kernels may still read the old one). 0 or a code.
int cd_hipb_ctx_workspace(cd_backend_t be, cd_backend_ctx *ctx, size_t bytes) {
    if (bytes <= ctx->ws_bytes) return 0;
    CD_HIP_CHECK(hipStreamSynchronize(ctx->stream));
    cd_hipb_dev_free(be, ctx->ws);
    ctx->ws = NULL;
    ctx->ws_bytes = 0;
    int rc = cd_hipb_dev_alloc(be, bytes, &ctx->ws);
    if (!rc) ctx->ws_bytes = bytes;
    return rc;
}

// Makes the pinned host buffer *buf (capacity *cap) hold at least bytes,
// dropping its contents. The caller has synchronised the stream. 0 or a code.
int cd_hipb_pinned_reserve(char **buf, size_t *cap, size_t bytes) {
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
int cd_hipb_synchronize(cd_backend_t be, cd_backend_ctx *ctx) {
    int rc = use_device(be);
    if (rc) return rc;
    if (ctx) return ctx_drain(ctx);
    CD_HIP_CHECK(hipDeviceSynchronize());
    return 0;
}

// ---- memory slots ---------------------------------------------------------------------

// Zeroed, accounted device memory. Returns 0, CD_ENOMEM or CD_EDEVICE.
int cd_hipb_buffer_alloc(cd_backend_t be, size_t size, void **out) {
    int rc = use_device(be);
    if (rc) return rc;
    rc = cd_hipb_dev_alloc(be, size, out);
    if (rc) return rc;
    // NCHW16C padding starts out zero. The null stream is waited for: the
    // workers' non-blocking streams do not order after it.
    hipError_t e = hipMemset(*out, 0, size ? size : 1);
    if (e == hipSuccess) e = hipStreamSynchronize(NULL);
    if (e != hipSuccess) {
        cd_hipb_dev_free(be, *out);
        *out = NULL;
        return cd_hip_fail("hipMemset", __FILE__, __LINE__, e);
    }
    return 0;
}

void cd_hipb_buffer_free(cd_backend_t be, void *buf) { cd_hipb_dev_free(be, buf); }

// A synchronous copy on the null stream. A pageable host->device hipMemcpy
// may return before the DMA lands, and the workers' non-blocking streams do
// not order after the null stream: wait for it, so the data is in place for
// any stream once this returns.
int cd_hipb_upload(cd_backend_t be, void *dst, const void *src, size_t size) {
    int rc = use_device(be);
    if (rc) return rc;
    CD_HIP_CHECK(hipMemcpy(dst, src, size, hipMemcpyHostToDevice));
    CD_HIP_CHECK(hipStreamSynchronize(NULL));
    return 0;
}

// Synchronous, on the null stream: the caller has synchronised the context
// whose stream wrote src (the wrapper's fallback and the executor do).
int cd_hipb_download(cd_backend_t be, void *dst, const void *src, size_t size) {
    int rc = use_device(be);
    if (rc) return rc;
    CD_HIP_CHECK(hipMemcpy(dst, src, size, hipMemcpyDeviceToHost));
    return 0;
}

// Stages src in pinned memory and queues its upload on the context's stream.
int cd_hipb_upload_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size) {
    int rc = use_device(be);
    if (rc) return rc;
    if (ctx->pin_in_used + size > ctx->pin_in_cap) {
        // Earlier staged uploads may still be reading the buffer. Grow to
        // hold them and this one, so the next request of the same shape
        // (several inputs) stages without waiting.
        size_t need = ctx->pin_in_used + size;
        if ((rc = ctx_drain_full(be, ctx))) return rc;
        if ((rc = cd_hipb_pinned_reserve(&ctx->pin_in, &ctx->pin_in_cap, need))) return rc;
    }
    char *stage = ctx->pin_in + ctx->pin_in_used;
    memcpy(stage, src, size);
    ctx->pin_in_used += (size + 63) & ~(size_t)63;
    CD_HIP_CHECK(hipMemcpyAsync(dst, stage, size, hipMemcpyHostToDevice, ctx->stream));
    return 0;
}

// Pinned staging for a run's n inputs, handed to the caller to fill: the
// daemon joins its requests straight into it, and upload_staged queues the
// DMA from there (no copy of ours in between).
int cd_hipb_stage_inputs(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, const size_t *size,
                         void **host) {
    (void)dst;
    int rc = use_device(be);
    if (rc) return rc;
    size_t need = ctx->pin_in_used;
    for (int i = 0; i < n; i++) need += (size[i] + 63) & ~(size_t)63;
    if (need > ctx->pin_in_cap) { // all n at once: growing moves the buffer
        need -= ctx->pin_in_used;
        if ((rc = ctx_drain_full(be, ctx))) return rc;
        if ((rc = cd_hipb_pinned_reserve(&ctx->pin_in, &ctx->pin_in_cap, need))) return rc;
    }
    for (int i = 0; i < n; i++) {
        host[i] = ctx->pin_in + ctx->pin_in_used;
        ctx->pin_in_used += (size[i] + 63) & ~(size_t)63;
    }
    return 0;
}

int cd_hipb_upload_staged(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, void *const *host,
                          const size_t *size) {
    int rc = use_device(be);
    if (rc) return rc;
    for (int i = 0; i < n; i++)
        if (size[i]) CD_HIP_CHECK(hipMemcpyAsync(dst[i], host[i], size[i], hipMemcpyHostToDevice, ctx->stream));
    return 0;
}

// Queues the download of src into pinned staging; dst is written at synchronize.
int cd_hipb_download_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size) {
    int rc = use_device(be);
    if (rc) return rc;
    if (ctx->pin_out_used + size > ctx->pin_out_cap) {
        // Room for the downloads queued so far and this one (several
        // outputs): after warm-up a request never waits here.
        size_t need = ctx->pin_out_used + size;
        if ((rc = ctx_drain_full(be, ctx))) return rc; // delivers the downloads queued so far
        if ((rc = cd_hipb_pinned_reserve(&ctx->pin_out, &ctx->pin_out_cap, need))) return rc;
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

size_t cd_hipb_device_bytes(cd_backend_t be) {
    hip_be *b = HB(be);
    cd_hipb_lock(be);
    size_t n = b->bytes;
    cd_hipb_unlock(be);
    return n;
}

void cd_backend_hip_counters(cd_backend_t be, cd_hip_counters *out) {
    hip_be *b = HB(be);
    out->staging_drains = __atomic_load_n(&b->counters.staging_drains, __ATOMIC_RELAXED);
    out->sparse_handles = __atomic_load_n(&b->counters.sparse_handles, __ATOMIC_RELAXED);
    out->backend_locks = __atomic_load_n(&b->counters.backend_locks, __ATOMIC_RELAXED);
}

int cd_hipb_ctx_sparse(cd_backend_t be, cd_backend_ctx *ctx) {
    if (ctx->sparse_ready) return 0;
#if CD_HIP_REAL
    int rc = cd_rocsparse_ctx_create(&ctx->rs);
    if (rc) return rc;
#endif
    ctx->sparse_ready = 1;
    __atomic_fetch_add(&HB(be)->counters.sparse_handles, 1, __ATOMIC_RELAXED);
    account(be, (ptrdiff_t)CD_HIP_SPARSE_HANDLE_BYTES);
    return 0;
}
