// Public wrappers of the backend vtable (optional slots are checked here so
// callers never test for NULL themselves). The devices are backends/devices.c.

#include "backends/backend.h"

#include "core/checked.h"
#include "core/errors.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

cd_backend_caps cd_backend_get_caps(cd_backend_t be) {
    cd_backend_caps c;
    memset(&c, 0, sizeof c);
    be->iface->get_caps(be, &c);
    return c;
}

const char *cd_backend_name(cd_backend_t be) { return cd_backend_get_caps(be).name; }

void cd_backend_free(cd_backend_t be) {
    if (be) be->iface->free(be);
}

int cd_backend_buffer_alloc(cd_backend_t be, size_t size, void **out) { return be->iface->buffer_alloc(be, size, out); }

void cd_backend_buffer_free(cd_backend_t be, void *buf) {
    if (buf) be->iface->buffer_free(be, buf);
}

int cd_backend_upload(cd_backend_t be, void *dst, const void *src, size_t size) {
    return size ? be->iface->upload(be, dst, src, size) : 0;
}

int cd_backend_download(cd_backend_t be, void *dst, const void *src, size_t size) {
    return size ? be->iface->download(be, dst, src, size) : 0;
}

int cd_backend_ctx_create(cd_backend_t be, cd_backend_ctx **out) {
    *out = NULL;
    return be->iface->ctx_create ? be->iface->ctx_create(be, out) : 0;
}

void cd_backend_ctx_free(cd_backend_t be, cd_backend_ctx *ctx) {
    if (ctx && be->iface->ctx_free) be->iface->ctx_free(be, ctx);
}

bool cd_backend_supports_op(cd_backend_t be, const cd_bop_desc *d) { return be->iface->supports_op(be, d); }

int cd_backend_op_init(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out) {
    *out = NULL;
    if ((unsigned)d->op >= CD_BOP_COUNT) return CD_EUNSUPPORTED;
    return be->iface->op_init(be, d, out);
}

int cd_backend_op_run(cd_backend_t be, cd_bop op, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                      const cd_btensor *const *srcs, cd_btensor *dst) {
    if ((unsigned)op >= CD_BOP_COUNT) return CD_EUNSUPPORTED;
    return be->iface->op_run(be, ctx, st, batch, srcs, dst);
}

const char *cd_backend_op_kernel(cd_backend_t be, cd_op_state *st) {
    return be->iface->op_kernel && st ? be->iface->op_kernel(be, st) : cd_backend_name(be);
}

const char *cd_backend_op_compute_dtype(cd_backend_t be, cd_op_state *st) {
    return be->iface->op_compute_dtype && st ? be->iface->op_compute_dtype(be, st) : NULL;
}

size_t cd_backend_op_weight_bytes(cd_backend_t be, cd_op_state *st) {
    return be->iface->op_weight_bytes && st ? be->iface->op_weight_bytes(be, st) : 0;
}

void cd_backend_op_state_free(cd_backend_t be, cd_op_state *st) {
    if (st) be->iface->op_state_free(be, st);
}

int cd_backend_synchronize(cd_backend_t be, cd_backend_ctx *ctx) {
    return be->iface->synchronize ? be->iface->synchronize(be, ctx) : 0;
}

int cd_backend_upload_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size) {
    if (!size) return 0;
    if (ctx && be->iface->upload_async) return be->iface->upload_async(be, ctx, dst, src, size);
    return be->iface->upload(be, dst, src, size);
}

int cd_backend_download_async(cd_backend_t be, cd_backend_ctx *ctx, void *dst, const void *src, size_t size) {
    if (!size) return 0;
    if (ctx && be->iface->download_async) return be->iface->download_async(be, ctx, dst, src, size);
    int rc = cd_backend_synchronize(be, ctx);
    return rc ? rc : be->iface->download(be, dst, src, size);
}

int cd_backend_stage_inputs(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, const size_t *size,
                            void **host) {
    if (be->iface->stage_inputs) return be->iface->stage_inputs(be, ctx, n, dst, size, host);
    if (cd_backend_get_caps(be).device_memory) return CD_EUNSUPPORTED;
    for (int i = 0; i < n; i++) host[i] = dst[i];
    return 0;
}

int cd_backend_upload_staged(cd_backend_t be, cd_backend_ctx *ctx, int n, void *const *dst, void *const *host,
                             const size_t *size) {
    if (be->iface->upload_staged) return be->iface->upload_staged(be, ctx, n, dst, host, size);
    for (int i = 0; i < n; i++)
        if (host[i] != dst[i]) return CD_EPARAMS; // not what stage_inputs handed out
    return 0;
}

size_t cd_backend_device_bytes(cd_backend_t be) { return be->iface->device_bytes ? be->iface->device_bytes(be) : 0; }

cd_layout cd_backend_blocked_layout(cd_backend_t be) { return cd_backend_get_caps(be).blocked_layout; }

bool cd_backend_kernel_is_reference(const char *kernel) {
    // "ref" (our reference kernels) or "dnnl:ref:any" (oneDNN's).
    return kernel && (strcmp(kernel, "ref") == 0 || strncmp(kernel, "ref:", 4) == 0 || strstr(kernel, ":ref") != NULL);
}

size_t cd_tdesc_item_bytes(const cd_tdesc *t) {
    size_t n = 1;
    for (int i = t->is_const ? 0 : 1; i < t->rank; i++) {
        int64_t d = t->shape[i];
        if (d < 0 || d > INT64_MAX - 64) return SIZE_MAX;
        if (i == 1) d = cd_layout_padded_c(t->layout, d);
        if (cd_ck_mul_size(n, (size_t)d, &n)) return SIZE_MAX;
    }
    return cd_ck_mul_size(n, t->int8 ? 1 : sizeof(float), &n) ? SIZE_MAX : n;
}

const char *cd_bop_name(cd_bop op) {
    static const char *names[] = {"Conv2d", "Gemm",      "Pool",    "Binary",    "Activation", "Softmax",
                                  "Concat", "Transpose", "Reorder", "FakeQuant", "Pad",        "Slice",
                                  "Reduce", "LayerNorm", "Resize",  "Deconv",    "Gather",     "Tile"};
    _Static_assert(sizeof names / sizeof names[0] == CD_BOP_COUNT, "a name for every cd_bop");
    return op < CD_BOP_COUNT ? names[op] : "?";
}
