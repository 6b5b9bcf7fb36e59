// The CPU backend's choice of kernel for an op description (shared by
// supports_op and init, backend-cpu.c).

#include "backends/cpu/backend-cpu-choose.h"
#include "backends/cpu/bop-layouts.h"

#include "kernels/cpu/ref.h"
#include "sparse/sparse-conv.h"

// An int8 conv (d->quant): the sparse int8 kernels when the planner chose
// sparse (NCHW, the residual float or integer); oneDNN's int8 conv for dense
// (backends/cpu/dnnl.h, where it has a jit kernel); else the reference, in NCHW,
// only where asked for (CONVD_INT8=on, or the reference kernels everywhere):
// the planner's auto mode takes int8 only where a fast kernel exists.
static kernel_kind choose_int8(const cd_backend_opts *sw, const cd_bop_desc *d) {
    const cd_conv_quant *q = d->quant;
    if (d->u.conv.has_residual && d->nsrc != 2) return K_NONE;
    if (q->dst_int && !(q->out_scale > 0.0f)) return K_NONE;
    if (!sw->kernels_ref && d->sparse && cd_cpu_all_nchw(d)) return K_I8SP;
    if (!sw->kernels_ref && !d->sparse &&
        cd_dnnl_conv_i8_supports_res(&d->u.conv, q, d->src[0].layout, d->dst.layout, cd_cpu_res_layout(d)))
        return K_DNNL;
    if (cd_cpu_all_nchw(d) && (sw->kernels_ref || sw->int8_ref)) return K_I8REF;
    return K_NONE;
}

// A max pool on the integers of a quantized activation (plan-int8-storage.c):
// oneDNN's jit int8 pooling only, src and dst alike.
static kernel_kind choose_pool_int8(const cd_backend_opts *sw, const cd_bop_desc *d) {
    const cd_tdesc *s = &d->src[0], *o = &d->dst;
    const int ok = !sw->kernels_ref && s->int8 == o->int8 && s->int8_signed == o->int8_signed && s->layout == o->layout;
    return ok && cd_dnnl_pool_supports(&d->u.pool, o->layout, cd_dnnl_elem_of(1, o->int8_signed)) ? K_DNNL : K_NONE;
}

// The kernel of a quantized conv or pool, or of a conv with a border map
// (only the int8 convs, sparse and oneDNN's, and the references add one); -1
// for other ops.
static int choose_special(const cd_backend_opts *sw, const cd_bop_desc *d) {
    if (d->op == CD_BOP_CONV2D && d->quant) return choose_int8(sw, d);
    if (d->op == CD_BOP_POOL && (d->src[0].int8 || d->dst.int8)) return choose_pool_int8(sw, d);
    if (d->op == CD_BOP_CONV2D && d->u.conv.border)
        return cd_cpu_all_nchw(d) && !d->sparse && !(d->fq_scale > 0.0f) ? K_REF : K_NONE;
    return -1;
}

// long: one switch over every op family, the backend's whole kernel table in one place.
kernel_kind cd_cpu_choose(const cd_backend_opts *sw, const cd_bop_desc *d, int *swap) {
    cd_dnnl_tdesc a, b;
    *swap = 0;
    const int special = choose_special(sw, d);
    if (special >= 0) return (kernel_kind)special;
    const int fq = d->op == CD_BOP_CONV2D && d->fq_scale > 0.0f; // only oneDNN's conv quantizes its output
    if (fq && (sw->kernels_ref || d->sparse)) return K_NONE;
    if (cd_cpu_any_nhwc(d) && d->op != CD_BOP_REORDER) return K_NONE;
    if (d->sparse) {
        if (d->op != CD_BOP_CONV2D && d->op != CD_BOP_GEMM) return K_NONE;
        if (d->op == CD_BOP_CONV2D && d->u.conv.has_residual && d->nsrc != 2) return K_NONE;
        if (!cd_cpu_all_nchw(d) || !cd_sparse_conv_available((cd_sparse_format)d->sparse_format, CD_SPARSE_ISA_AUTO))
            return K_NONE;
        return K_SPARSE;
    }
    if (sw->kernels_ref) {
        if (d->op == CD_BOP_REORDER && d->src[0].layout == d->dst.layout) return K_COPY;
        if (d->op == CD_BOP_CONV2D && d->u.conv.has_residual && d->nsrc != 2) return K_NONE;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    }
    switch (d->op) {
    case CD_BOP_CONV2D: {
        const cd_conv_desc *c = &d->u.conv;
        cd_layout s = d->src[0].layout, o = d->dst.layout;
        if (c->has_residual && (d->nsrc != 2 || d->src[1].layout != o)) return K_NONE;
        if (cd_dnnl_conv_supports(c, s, o)) return K_DNNL;
        return cd_cpu_all_nchw(d) && !fq ? K_REF : K_NONE;
    }
    case CD_BOP_GEMM: {
        cd_dnnl_tdesc t = {d->u.gemm.k, 1, 1, CD_LAYOUT_NCHW, 0};
        if (cd_cpu_all_nchw(d) && cd_dnnl_ip_supports(t, d->u.gemm.n)) return K_DNNL;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    }
    case CD_BOP_POOL:
        if (d->src[0].layout == d->dst.layout && cd_dnnl_pool_supports(&d->u.pool, d->dst.layout, CD_DNNL_F32))
            return K_DNNL;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    case CD_BOP_BINARY: {
        const cd_tdesc *x = &d->src[0], *y = &d->src[1];
        int k = d->u.binary.kind;
        if (k == CD_BINARY_ADD || k == CD_BINARY_MUL || k == CD_BINARY_MIN || k == CD_BINARY_MAX) {
            // oneDNN wants the full-shaped operand first.
            if (!x->is_const && cd_cpu_same_shape(x, &d->dst) && x->layout == d->dst.layout) {
                *swap = 0;
            } else if (!y->is_const && cd_cpu_same_shape(y, &d->dst) && y->layout == d->dst.layout) {
                *swap = 1;
                const cd_tdesc *t = x;
                x = y;
                y = t;
            } else {
                goto ref_binary;
            }
            if (cd_cpu_to_dnnl(x, 0, &a) && cd_cpu_to_dnnl(y, y->is_const, &b) &&
                cd_dnnl_binary_supports(cd_cpu_dnnl_bin(d->u.binary.kind), a, b, d->u.binary.act))
                return K_DNNL;
        }
    ref_binary:
        *swap = 0;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    }
    case CD_BOP_ACTIVATION:
        if (d->src[0].layout == d->dst.layout && cd_cpu_to_dnnl(&d->src[0], 0, &a) &&
            cd_dnnl_eltwise_supports(a, d->u.act))
            return K_DNNL;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    case CD_BOP_SOFTMAX:
        if (cd_cpu_all_nchw(d) && d->u.softmax.outer == 1 && d->u.softmax.len <= (1 << 30) &&
            d->u.softmax.inner <= (1 << 30)) {
            cd_dnnl_tdesc t = {(int)d->u.softmax.len, (int)d->u.softmax.inner, 1, CD_LAYOUT_NCHW, 0};
            if (cd_dnnl_softmax_supports(t, 1)) return K_DNNL;
        }
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    case CD_BOP_CONCAT: {
        // In NCHW a concat is memcpy runs (cd_ref_concat), faster than oneDNN's
        // simple:any; so is a channel concat in one blocked layout of inputs
        // with whole blocks (DenseNet's): each input is one run per item.
        if (cd_cpu_all_nchw(d) || cd_cpu_blocked_channel_concat(d)) return K_COPY;
        int ok = d->u.axis >= 1 && d->u.axis <= 3 && d->nsrc <= CD_OP_MAX_IN;
        cd_dnnl_tdesc t[CD_OP_MAX_IN];
        for (int i = 0; ok && i < d->nsrc; i++) ok = cd_cpu_to_dnnl(&d->src[i], 0, &t[i]);
        if (ok && cd_dnnl_concat_supports(d->nsrc, t, d->u.axis, d->dst.layout)) return K_DNNL;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    }
    case CD_BOP_TRANSPOSE: { // a rotation of dims is a tiled 2-D transpose (kernels/cpu/transpose-2d.c)
        int split, keep;
        if (cd_cpu_all_nchw(d) && cd_cpu_transpose_rotation(d->src[0].rank, d->u.perm, &split, &keep)) return K_COPY;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    }
    case CD_BOP_FAKEQUANT:
        // Per tensor it is element-wise in any layout (a padding channel's 0
        // stays 0); per channel the reference kernel indexes NCHW.
        if (d->u.fq.channels == 1 && d->src[0].layout == d->dst.layout) return K_REF;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    case CD_BOP_REORDER: {
        const cd_tdesc *s = &d->src[0];
        if (s->layout == d->dst.layout) return K_COPY;
        if (s->rank == 4 &&
            cd_dnnl_reorder_supports(s->layout, d->dst.layout, (int)s->shape[1], (int)s->shape[2], (int)s->shape[3]))
            return K_DNNL;
        return s->rank == 4 ? K_REF : K_NONE;
    }
    case CD_BOP_LAYERNORM:
        if (cd_cpu_all_nchw(d) && cd_dnnl_layernorm_supports(d->u.ln.outer, d->u.ln.len, d->bias != NULL))
            return K_DNNL;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    case CD_BOP_SLICE: return cd_cpu_all_nchw(d) ? K_COPY : K_NONE; // memcpy runs (kernels/cpu/slice-runs.c)
    case CD_BOP_GATHER:
        // memcpy runs (kernels/cpu/ref-gather-tile.c)
        return cd_cpu_all_nchw(d) && d->u.gather.axis >= 1 && d->u.gather.axis < d->src[0].rank && d->u.gather.nidx >= 1
                   ? K_COPY
                   : K_NONE;
    case CD_BOP_TILE: return cd_cpu_all_nchw(d) ? K_REF : K_NONE; // a broadcast copy (cd_ref_tile)
    case CD_BOP_PAD:
    case CD_BOP_REDUCE: return cd_cpu_all_nchw(d) ? K_REF : K_NONE; // kernels/cpu/ref-pad-slice.c, ref-reduce.c
    case CD_BOP_RESIZE: return cd_cpu_all_nchw(d) ? K_REF : K_NONE; // tables (resize-tables.h), or the reference
    case CD_BOP_DECONV:
        if (cd_cpu_all_nchw(d) && !sw->kernels_ref && cd_dnnl_deconv_supports(&d->u.deconv)) return K_DNNL;
        return cd_cpu_all_nchw(d) ? K_REF : K_NONE;
    case CD_BOP_COUNT: break;
    }
    return K_NONE;
}
