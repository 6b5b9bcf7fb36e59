#ifndef CD_BACKENDS_CPU_BACKEND_CPU_CHOOSE_H
#define CD_BACKENDS_CPU_BACKEND_CPU_CHOOSE_H

// Which kernel of the CPU backend runs an op (backend-cpu-choose.c), shared
// by its supports_op and init, and the tensor helpers both use.

#include "backends/backend-opts.h"
#include "backends/backend.h"
#include "backends/cpu/dnnl.h"

#include <string.h>

typedef enum {
    K_REF = 0,
    K_DNNL,
    K_COPY,
    K_SPARSE, // sparse/sparse-conv.h (CONV2D, GEMM), NCHW
    K_I8REF,  // an int8 conv on the reference (kernels/cpu/ref-conv-i8.c), NCHW
    K_I8SP,   // an int8 conv on the sparse int8 kernels (sparse/sparse-conv-i8.h), NCHW
    K_NONE,   // this backend cannot run the op as described
} kernel_kind;

// The kernel for d (K_NONE: this backend cannot run it as described); *swap:
// a binary op's operands swapped for oneDNN (the full-shaped one first).
kernel_kind cd_cpu_choose(const cd_backend_opts *sw, const cd_bop_desc *d, int *swap);

// Maps a tensor of rank <= 4 onto oneDNN's per-item c, h, w (missing trailing
// dims are 1). Returns 0 when the rank does not fit.
static inline int cd_cpu_to_dnnl(const cd_tdesc *t, int batch_bcast, cd_dnnl_tdesc *o) {
    if (t->rank < 1 || t->rank > 4) return 0;
    int64_t d[3] = {1, 1, 1};
    for (int i = 1; i < t->rank; i++) d[i - 1] = t->shape[i];
    if (t->layout != CD_LAYOUT_NCHW && t->rank != 4) return 0;
    if (t->is_const && t->shape[0] != 1) return 0;
    for (int i = 0; i < 3; i++)
        if (d[i] > (1 << 30)) return 0;
    *o = (cd_dnnl_tdesc){(int)d[0], (int)d[1], (int)d[2], t->layout, batch_bcast};
    return 1;
}

static inline int cd_cpu_all_nchw(const cd_bop_desc *d) {
    for (int i = 0; i < d->nsrc; i++)
        if (d->src[i].layout != CD_LAYOUT_NCHW) return 0;
    return d->dst.layout == CD_LAYOUT_NCHW;
}

static inline int cd_cpu_same_shape(const cd_tdesc *a, const cd_tdesc *b) {
    return a->rank == b->rank && memcmp(a->shape + 1, b->shape + 1, sizeof(int64_t) * (size_t)(a->rank - 1)) == 0;
}

static inline cd_dnnl_binary_kind cd_cpu_dnnl_bin(cd_binary_kind k) {
    return k == CD_BINARY_ADD   ? CD_DNNL_ADD
           : k == CD_BINARY_MUL ? CD_DNNL_MUL
           : k == CD_BINARY_MIN ? CD_DNNL_MIN
                                : CD_DNNL_MAX;
}

#endif // CD_BACKENDS_CPU_BACKEND_CPU_CHOOSE_H
