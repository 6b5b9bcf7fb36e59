#ifndef CD_BACKENDS_CPU_BOP_LAYOUTS_H
#define CD_BACKENDS_CPU_BOP_LAYOUTS_H

// Layout questions the CPU backend asks of an op description.

#include "backends/backend.h"

// The layout of a conv's residual (src 1), dst's when it has none.
static inline cd_layout cd_cpu_res_layout(const cd_bop_desc *d) {
    return d->u.conv.has_residual && d->nsrc > 1 ? d->src[1].layout : d->dst.layout;
}

// 1 when a tensor of d is in NHWC: the int8 conv's integer storage
// (kernels/op-desc.h), which no other op of the CPU backend takes but a
// reorder.
static inline int cd_cpu_any_nhwc(const cd_bop_desc *d) {
    for (int i = 0; i < d->nsrc; i++)
        if (d->src[i].layout == CD_LAYOUT_NHWC) return 1;
    return d->dst.layout == CD_LAYOUT_NHWC;
}

// A channel concat whose inputs and output share one blocked layout and
// whose inputs have whole blocks of channels.
static inline int cd_cpu_blocked_channel_concat(const cd_bop_desc *d) {
    const cd_layout l = d->dst.layout;
    if (d->u.axis != 1 || l == CD_LAYOUT_NCHW || d->dst.rank != 4) return 0;
    for (int i = 0; i < d->nsrc; i++)
        if (d->src[i].layout != l || d->src[i].rank != 4 || d->src[i].shape[1] % cd_layout_block(l)) return 0;
    return 1;
}

#endif // CD_BACKENDS_CPU_BOP_LAYOUTS_H
