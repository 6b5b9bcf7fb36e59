// Public wrappers of the backend vtable: optional slots are checked here so
// callers never test for NULL themselves.

#include "backends/backend.h"

#include "backends/hip/backend-hip.h"
#include "core/checked.h"
#include "core/errors.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *cd_backend_name(cd_backend_t be) { return be->iface->get_name(be); }

void cd_backend_free(cd_backend_t be) {
    if (be) be->iface->free(be);
}

int cd_backend_buffer_alloc(cd_backend_t be, size_t size, void **out) {
    return be->iface->buffer_alloc(be, size, out);
}

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

bool cd_backend_supports_op(cd_backend_t be, const cd_bop_desc *d) {
    return be->iface->supports_op(be, d);
}

static void slots(cd_backend_t be, cd_bop op, cd_op_init_fn *init, cd_op_run_fn *run) {
    const struct cd_backend_i *i = be->iface;
    switch (op) {
    case CD_BOP_CONV2D: *init = i->conv2d_init; *run = i->conv2d; return;
    case CD_BOP_GEMM: *init = i->gemm_init; *run = i->gemm; return;
    case CD_BOP_POOL: *init = i->pool_init; *run = i->pool; return;
    case CD_BOP_BINARY: *init = i->binary_init; *run = i->binary; return;
    case CD_BOP_ACTIVATION: *init = i->activation_init; *run = i->activation; return;
    case CD_BOP_SOFTMAX: *init = i->softmax_init; *run = i->softmax; return;
    case CD_BOP_CONCAT: *init = i->concat_init; *run = i->concat; return;
    case CD_BOP_TRANSPOSE: *init = i->transpose_init; *run = i->transpose; return;
    case CD_BOP_REORDER: *init = i->reorder_init; *run = i->reorder; return;
    case CD_BOP_COUNT: break;
    }
    *init = NULL;
    *run = NULL;
}

int cd_backend_op_init(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out) {
    cd_op_init_fn init;
    cd_op_run_fn run;
    slots(be, d->op, &init, &run);
    *out = NULL;
    if (!init || !run) return CD_EUNSUPPORTED;
    return init(be, d, out);
}

int cd_backend_op_run(cd_backend_t be, cd_bop op, cd_backend_ctx *ctx, cd_op_state *st, int batch,
                      const cd_btensor *const *srcs, cd_btensor *dst) {
    cd_op_init_fn init;
    cd_op_run_fn run;
    slots(be, op, &init, &run);
    if (!run) return CD_EUNSUPPORTED;
    return run(be, ctx, st, batch, srcs, dst);
}

const char *cd_backend_op_kernel(cd_backend_t be, cd_op_state *st) {
    return be->iface->op_kernel && st ? be->iface->op_kernel(be, st) : cd_backend_name(be);
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

size_t cd_backend_device_bytes(cd_backend_t be) {
    return be->iface->device_bytes ? be->iface->device_bytes(be) : 0;
}

cd_layout cd_backend_blocked_layout(cd_backend_t be) {
    return be->iface->blocked_layout ? be->iface->blocked_layout(be) : CD_LAYOUT_NCHW;
}

bool cd_backend_kernel_is_reference(const char *kernel) {
    // "ref" (our reference kernels) or "dnnl:ref:any" (oneDNN's).
    return kernel && (strcmp(kernel, "ref") == 0 || strncmp(kernel, "ref:", 4) == 0 ||
                      strstr(kernel, ":ref") != NULL);
}

size_t cd_tdesc_item_bytes(const cd_tdesc *t) {
    size_t n = 1;
    for (int i = t->is_const ? 0 : 1; i < t->rank; i++) {
        int64_t d = t->shape[i];
        if (d < 0 || d > INT64_MAX - 64) return SIZE_MAX;
        if (i == 1) d = cd_layout_padded_c(t->layout, d);
        if (cd_ck_mul_size(n, (size_t)d, &n)) return SIZE_MAX;
    }
    return cd_ck_mul_size(n, sizeof(float), &n) ? SIZE_MAX : n;
}

const char *cd_bop_name(cd_bop op) {
    static const char *names[] = {"Conv2d", "Gemm", "Pool", "Binary", "Activation",
                                  "Softmax", "Concat", "Transpose", "Reorder"};
    return op < CD_BOP_COUNT ? names[op] : "?";
}

int cd_backend_create(const char *device, cd_backend_t *out, char *err, size_t errlen) {
    *out = NULL;
    int n;
    if (!device || !*device || strcmp(device, "cpu") == 0) return cd_backend_cpu_init(out);
    if (strcmp(device, "hip-emu") == 0) return cd_backend_hip_init(0, out, err, errlen);
    if (cd_hip_device_parse(device, &n)) return cd_backend_hip_plugin_create(n, out, err, errlen);
    if (err && errlen) snprintf(err, errlen, "'%s' is not a device (cpu, hip-emu, hip, hip:N)", device);
    return CD_EUNSUPPORTED;
}

int cd_backend_probe(const char *device, char *info, size_t infolen, char *err, size_t errlen) {
    int n;
    if (info && infolen) info[0] = '\0';
    if (!device || !*device || strcmp(device, "cpu") == 0 || strcmp(device, "hip-emu") == 0) {
        cd_backend_t be;
        int rc = cd_backend_create(device, &be, err, errlen);
        if (rc) return rc;
        if (info && infolen)
            snprintf(info, infolen, "%s", strcmp(cd_backend_name(be), "cpu") == 0
                                              ? "cpu"
                                              : "hip-emu (the HIP kernels on the CPU emulator: for tests, slow)");
        cd_backend_free(be);
        return 0;
    }
    if (cd_hip_device_parse(device, &n)) return cd_backend_hip_plugin_probe(n, info, infolen, err, errlen);
    if (err && errlen) snprintf(err, errlen, "'%s' is not a device (cpu, hip-emu, hip, hip:N)", device);
    return CD_EUNSUPPORTED;
}
