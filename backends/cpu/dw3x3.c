// Selection and packing of the depthwise 3x3 kernel (backends/cpu/dw3x3.h).

#include "backends/cpu/dw3x3.h"
#include "core/errors.h"
#include "sparse/spmm-ukernel.h"

#include <stdlib.h>
#include <string.h>

struct cd_cpu_dw3x3 {
    cd_dw3x3_shape sh; // shape and the packed arrays below
    cd_dw3x3_fn fn;    // the ISA's kernel
    const char *name;  // "dw3x3:<isa>"
    float *packed;     // weights then bias, one 64-byte aligned allocation (owned)
    size_t bytes;      // of packed
};

int cd_cpu_dw3x3_act_ok(cd_activation act) {
    switch (act.kind) {
    case CD_ACT_NONE:
    case CD_ACT_RELU:
    case CD_ACT_CLIP:
    case CD_ACT_HARDSIGMOID:
    case CD_ACT_HARDSWISH:
    case CD_ACT_LEAKYRELU: return 1;
    default: return 0;
    }
}

// Depthwise (one input and one output channel per group) 3x3, one stride of
// 1 or 2 on both axes, no dilation, leading pads 0..2 (what the checked edge
// loop assumes of a window: it starts at most 2 before the map).
static int covered(const cd_conv_desc *d) {
    if (d->groups != d->c || d->k != d->c || d->r != 3 || d->s != 3) return 0;
    if (d->stride_h != d->stride_w || (d->stride_h != 1 && d->stride_h != 2)) return 0;
    if (d->dil_h != 1 || d->dil_w != 1) return 0;
    if (d->pad_t < 0 || d->pad_t > 2 || d->pad_l < 0 || d->pad_l > 2 || d->pad_b < 0 || d->pad_r < 0) return 0;
    if (d->oh < 1 || d->ow < 1) return 0;
    return cd_cpu_dw3x3_act_ok(d->act);
}

cd_dw3x3_fn cd_cpu_dw3x3_kernel(const cd_conv_desc *d, int src_layout, int dst_layout, const char **isa_name) {
    if (!d || !covered(d) || src_layout != dst_layout || !cd_layout_valid(src_layout)) return NULL;
    const int block = cd_layout_block((cd_layout)src_layout);
    if (block == 16 && cd_sparse_isa_supported(CD_SPARSE_ISA_AVX512F)) {
        if (isa_name) *isa_name = "dw3x3:avx512f";
        return cd_cpu_dw3x3__avx512f;
    }
    // nChw8c is AVX2's vector, also on an AVX-512 machine.
    if (block == 8 && cd_sparse_isa_supported(CD_SPARSE_ISA_AVX2)) {
        if (isa_name) *isa_name = "dw3x3:avx2";
        return cd_cpu_dw3x3__avx2;
    }
    return NULL;
}

int cd_cpu_dw3x3_create(const cd_conv_desc *d, int src_layout, int dst_layout, const float *w, const float *bias,
                        cd_cpu_dw3x3 **out) {
    *out = NULL;
    const char *name = NULL;
    cd_dw3x3_fn fn = cd_cpu_dw3x3_kernel(d, src_layout, dst_layout, &name);
    if (!fn || !w) return CD_EUNSUPPORTED;
    cd_cpu_dw3x3 *k = calloc(1, sizeof *k);
    if (!k) return CD_ENOMEM;
    const int block = cd_layout_block((cd_layout)src_layout), nb = (d->c + block - 1) / block;
    // Layout of packed: [nb][9][block] taps, then [nb][block] bias; zero past c.
    const size_t floats = (size_t)nb * block * 10;
    k->bytes = (floats * sizeof(float) + 63) / 64 * 64;
    k->packed = aligned_alloc(64, k->bytes);
    if (!k->packed) {
        free(k);
        return CD_ENOMEM;
    }
    memset(k->packed, 0, k->bytes);
    float *pw = k->packed, *pb = k->packed + (size_t)nb * block * 9;
    for (int ch = 0; ch < d->c; ch++) {
        const int cb = ch / block, lane = ch % block;
        for (int t = 0; t < 9; t++) pw[((size_t)cb * 9 + t) * block + lane] = w[(size_t)ch * 9 + t];
        pb[ch] = bias ? bias[ch] : 0.0f;
    }
    k->sh = (cd_dw3x3_shape){.c = d->c,
                             .h = d->h,
                             .w = d->w,
                             .oh = d->oh,
                             .ow = d->ow,
                             .stride = d->stride_h,
                             .pad_t = d->pad_t,
                             .pad_l = d->pad_l,
                             .has_residual = d->has_residual,
                             .act = d->act,
                             .block = block,
                             .weights = pw,
                             .bias = pb};
    k->fn = fn;
    k->name = name;
    *out = k;
    return 0;
}

int cd_cpu_dw3x3_set_fq(cd_cpu_dw3x3 *k, const float fq[4]) {
    if (!k || !(fq[0] > 0.0f) || !(fq[2] <= fq[3])) return CD_EPARAMS;
    memcpy(k->sh.fq, fq, sizeof k->sh.fq);
    return 0;
}

void cd_cpu_dw3x3_run(const cd_cpu_dw3x3 *k, int batch, const float *src, const float *res, float *dst) {
    k->fn(&k->sh, batch, src, res, dst);
}

const char *cd_cpu_dw3x3_name(const cd_cpu_dw3x3 *k) { return k->name; }

size_t cd_cpu_dw3x3_bytes(const cd_cpu_dw3x3 *k) { return k->bytes; }

void cd_cpu_dw3x3_free(cd_cpu_dw3x3 *k) {
    if (!k) return;
    free(k->packed);
    free(k);
}
