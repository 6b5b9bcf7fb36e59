// Lowering of ConvTranspose (opset 11+; 2-D, NCHW): constant weights
// [C, K/group, kh, kw] and bias, groups, strides, dilations, pads,
// output_padding, output_shape and auto_pad, into a CONVT op (a following
// activation fuses into it like into a conv, runtime/lower.c).
//
// The padding follows onnxruntime (checked against it): with output_shape
// the total padding is what the full output has beyond it, its odd element
// at the head, except for SAME_UPPER (at the tail); with SAME_* and no
// output_shape the output is input * stride, split the same way; VALID is
// no padding.

#include "runtime/lower-internal.h"

// Per spatial dim: input size, kernel, stride, dilation, output_padding,
// the padding mode and the output size wanted (-1: none); the pads and the
// output size out.
static int transpose_dim(lctx *c, const char *ap, int64_t in, int64_t k, int64_t st, int64_t dil, int64_t adj,
                         int64_t *head, int64_t *tail, int64_t *out) {
    const int64_t full = (in - 1) * st + adj + (k - 1) * dil + 1;
    const int upper = strcmp(ap, "SAME_UPPER") == 0, same = upper || strcmp(ap, "SAME_LOWER") == 0;
    if (*out < 0 && same) *out = in * st;
    if (*out >= 0) {
        int64_t total = full - *out;
        if (total < 0) total = 0;
        *head = upper ? total / 2 : total - total / 2;
        *tail = total - *head;
    } else if (strcmp(ap, "VALID") == 0) {
        *head = *tail = 0;
    }
    *out = full - *head - *tail;
    if (*out < 1) return node_fail(c, CD_EMODEL, "output would be empty");
    if (*out > CD_MAX_ACT_ELEMS) return node_fail(c, CD_ETOO_LARGE, "output too large");
    return 0;
}

// The two values of a 2-value int attribute (dflt when absent).
static int attr_pair(lctx *c, const char *name, int64_t dflt, int64_t lo, int64_t hi, int64_t v[2]) {
    int64_t a[4];
    int n, rc = attr_ints(c, name, a, 4, &n);
    if (rc) return rc;
    if (n < 0) {
        v[0] = v[1] = dflt;
        return 0;
    }
    if (n != 2) return node_fail(c, CD_EUNSUPPORTED, "%s must have 2 values (2-D only)", name);
    for (int i = 0; i < 2; i++)
        if (a[i] < lo || a[i] > hi) return node_fail(c, CD_EMODEL, "%s out of range", name);
    v[0] = a[0];
    v[1] = a[1];
    return 0;
}

// A ConvTranspose of stride 1 is the convolution with the kernel flipped,
// the in/out channels of each group swapped and the padding d * (k - 1) -
// pad: lowered as that CONV, it takes the conv kernels, layouts and fusions
// (oneDNN's deconvolution ran ~10x slower than the equal conv). 0 when
// emitted (output set), 1 when the padding does not allow it (pads beyond
// the kernel span), or a negative code.
static int as_conv(lctx *c, const cd_deconv_desc *t, const float *w, const float *bias) {
    const int span_h = t->dil_h * (t->r - 1), span_w = t->dil_w * (t->s - 1);
    cd_conv_desc d = {.n = 1,
                      .c = t->c,
                      .h = t->h,
                      .w = t->w,
                      .k = t->k,
                      .r = t->r,
                      .s = t->s,
                      .stride_h = 1,
                      .stride_w = 1,
                      .pad_t = span_h - t->pad_t,
                      .pad_l = span_w - t->pad_l,
                      .dil_h = t->dil_h,
                      .dil_w = t->dil_w,
                      .groups = t->groups};
    d.pad_b = t->oh - t->h - d.pad_t + span_h;
    d.pad_r = t->ow - t->w - d.pad_l + span_w;
    if (d.pad_t < 0 || d.pad_l < 0 || d.pad_b < 0 || d.pad_r < 0 || d.pad_t > 4096 || d.pad_l > 4096 ||
        d.pad_b > 4096 || d.pad_r > 4096)
        return 1;
    cd_conv_out_dims(&d);
    if (d.oh != t->oh || d.ow != t->ow) return node_fail(c, CD_EINTERNAL, "stride-1 ConvTranspose as a conv: size");
    int op = new_op(c, CD_OP_CONV, "ConvTranspose(as Conv)");
    if (op < 0) return op;
    cd_op *o = &c->g->ops[op];
    o->nin = 1;
    o->in[0] = in_id(c, 0);
    o->u.conv.d = d;
    const int cpg = t->c / t->groups, kpg = t->k / t->groups, rs = t->r * t->s;
    const size_t nw = (size_t)t->k * cpg * rs;
    o->u.conv.w = malloc(nw * sizeof(float));
    o->u.conv.bias = calloc((size_t)t->k, sizeof(float));
    if (!o->u.conv.w || !o->u.conv.bias) return OOM(c);
    for (int k = 0; k < t->k; k++) {
        const int g = k / kpg, ko = k % kpg;
        for (int cl = 0; cl < cpg; cl++) {
            const float *src = w + ((size_t)(g * cpg + cl) * kpg + ko) * rs;
            float *dst = o->u.conv.w + ((size_t)k * cpg + cl) * rs;
            for (int i = 0; i < rs; i++) dst[i] = src[rs - 1 - i]; // flipped in both dims
        }
    }
    count_weights(c->g, w, (int64_t)nw);
    if (bias) {
        memcpy(o->u.conv.bias, bias, (size_t)t->k * sizeof(float));
        count_weights(c->g, bias, t->k);
    }
    int64_t shape[4] = {1, t->k, t->oh, t->ow};
    return set_act_out(c, op, 4, shape);
}

int cd_lower_convtranspose(lctx *c) {
    int rc;
    if ((rc = need_inputs(c, 2, 3)) || (rc = need_act(c, 0)) || (rc = only_first_output(c))) return rc;
    cd_value *x = in_val(c, 0), *w = in_val(c, 1), *b = in_val(c, 2);
    if (x->rank != 4) return node_fail(c, CD_EUNSUPPORTED, "input rank %d: only 2-D (NCHW) is supported", x->rank);
    if (!w || w->kind != CD_VAL_CONST_F32 || w->rank != 4)
        return node_fail(c, CD_EUNSUPPORTED, "weights must be a float initializer of rank 4 (they are %s)",
                         kind_name(w));
    int64_t group;
    if ((rc = attr_int(c, "group", 1, &group))) return rc;
    const int64_t C = x->shape[1], K = w->shape[1] * group;
    if (group < 1 || group > C || C % group || w->shape[0] != C || K < 1)
        return node_fail(c, CD_EMODEL, "weights [%lld,%lld,...] do not fit %lld input channels in %lld groups",
                         (long long)w->shape[0], (long long)w->shape[1], (long long)C, (long long)group);
    if (K > (1 << 30)) return node_fail(c, CD_ETOO_LARGE, "%lld output channels", (long long)K);
    if (b && (b->kind != CD_VAL_CONST_F32 || b->rank != 1 || b->shape[0] != K))
        return node_fail(c, CD_EUNSUPPORTED, "bias must be a float initializer of shape [%lld]", (long long)K);
    int64_t ks[2] = {w->shape[2], w->shape[3]}, kattr[2], st[2], dil[2], adj[2];
    if ((rc = attr_pair(c, "kernel_shape", 0, 1, 1024, kattr)) || (rc = attr_pair(c, "strides", 1, 1, 1024, st)) ||
        (rc = attr_pair(c, "dilations", 1, 1, 1024, dil)) || (rc = attr_pair(c, "output_padding", 0, 0, 1024, adj)))
        return rc;
    if (attr_find(c, "kernel_shape") && (kattr[0] != ks[0] || kattr[1] != ks[1]))
        return node_fail(c, CD_EMODEL, "kernel_shape disagrees with the weights");
    if (ks[0] < 1 || ks[1] < 1 || ks[0] > 1024 || ks[1] > 1024) return node_fail(c, CD_EMODEL, "bad kernel size");
    for (int i = 0; i < 2; i++)
        if (adj[i] >= st[i] && adj[i] >= dil[i])
            return node_fail(c, CD_EMODEL, "output_padding %lld must be below the stride or the dilation",
                             (long long)adj[i]);
    char ap[32];
    if ((rc = attr_str(c, "auto_pad", "NOTSET", ap, sizeof ap))) return rc;
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID") && strcmp(ap, "SAME_UPPER") && strcmp(ap, "SAME_LOWER"))
        return node_fail(c, CD_EUNSUPPORTED, "auto_pad '%s' not supported (NOTSET, SAME_UPPER, SAME_LOWER, VALID)", ap);
    int64_t pads[4] = {0, 0, 0, 0}, outs[4];
    int np, no;
    if ((rc = attr_ints(c, "pads", pads, 4, &np)) || (rc = attr_ints(c, "output_shape", outs, 4, &no))) return rc;
    if (np >= 0 && np != 4) return node_fail(c, CD_EUNSUPPORTED, "pads must have 4 values");
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0 || pads[i] > 4096) return node_fail(c, CD_EMODEL, "pads out of range");
    if (no >= 0 && no != 2 && no != 4) return node_fail(c, CD_EUNSUPPORTED, "output_shape must have 2 or 4 values");
    for (int i = 0; i < no; i++)
        if (outs[i] < 1 || outs[i] > CD_MAX_ACT_ELEMS) return node_fail(c, CD_EMODEL, "output_shape out of range");
    int64_t head[2] = {pads[0], pads[1]}, tail[2] = {pads[2], pads[3]}, out[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        if (no >= 0) out[i] = outs[no - 2 + i];
        if ((rc = transpose_dim(c, ap, x->shape[2 + i], ks[i], st[i], dil[i], adj[i], &head[i], &tail[i], &out[i])))
            return rc;
    }
    cd_deconv_desc d = {.c = (int)C,
                        .h = (int)x->shape[2],
                        .w = (int)x->shape[3],
                        .k = (int)K,
                        .r = (int)ks[0],
                        .s = (int)ks[1],
                        .groups = (int)group,
                        .stride_h = (int)st[0],
                        .stride_w = (int)st[1],
                        .dil_h = (int)dil[0],
                        .dil_w = (int)dil[1],
                        .pad_t = (int)head[0],
                        .pad_l = (int)head[1],
                        .oh = (int)out[0],
                        .ow = (int)out[1]};
    if (d.stride_h == 1 && d.stride_w == 1) {
        int rc2 = as_conv(c, &d, w->f, b ? b->f : NULL);
        if (rc2 <= 0) return rc2;
    }
    int op = new_op(c, CD_OP_CONVT, "ConvTranspose");
    if (op < 0) return op;
    cd_op *o = &c->g->ops[op];
    o->nin = 1;
    o->in[0] = in_id(c, 0);
    o->u.convt.d = d;
    o->u.convt.w = malloc((size_t)w->numel * sizeof(float));
    if (!o->u.convt.w) return OOM(c);
    memcpy(o->u.convt.w, w->f, (size_t)w->numel * sizeof(float));
    count_weights(c->g, w->f, w->numel);
    if (b) {
        if (!(o->u.convt.bias = malloc((size_t)K * sizeof(float)))) return OOM(c);
        memcpy(o->u.convt.bias, b->f, (size_t)K * sizeof(float));
        count_weights(c->g, b->f, K);
    }
    int64_t shape[4] = {1, K, d.oh, d.ow};
    return set_act_out(c, op, 4, shape);
}
