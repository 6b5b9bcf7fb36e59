// Lowering of Resize (opset 11+) and Upsample (its scales-input form) into
// a RESIZE op over H and W of an NCHW activation.
//
// Resize: roi, scales and sizes are inputs (an empty name or an empty
// constant: absent; at opset 11-12 roi and scales are positional and often
// empty). scales or sizes must be constants at load; sizes computed from the
// graph's Shape ops (torchvision's F.interpolate(size=x.shape[-2:])) fold to
// constants in lower-shape.c, and their batch entry, marked as the batch
// size, means "unchanged". N and C never change. Modes nearest (every
// nearest_mode) and linear (bilinear); cubic is refused. Coordinate modes
// half_pixel, pytorch_half_pixel, align_corners, asymmetric and (opsets 11
// and 12, which alone have it) tf_half_pixel_for_nearest; tf_crop_and_resize
// and half_pixel_symmetric are refused. Opset 18's antialias must be 0, keep_aspect_ratio_policy stretch;
// its axes may name H and W (or all four dims). roi only matters for
// tf_crop_and_resize, so it is ignored.
//
// Upsample: nearest or linear with the asymmetric transform (nearest takes
// the floor: its scales are >= 1), scales as an input (opset 9) or an
// attribute (opset 7).

#include "runtime/lower-internal.h"

#include <math.h>

// Input j as a constant, or NULL when absent (no name, or no elements).
static const cd_value *opt_const(lctx *c, int j, int *rc) {
    const cd_value *v = in_val(c, j);
    *rc = 0;
    if (!v || (is_const(v) && v->numel == 0)) return NULL;
    if (!is_const(v)) {
        *rc =
            node_fail(c, CD_EUNSUPPORTED, "input %d must be a constant computable at load (it is %s)", j, kind_name(v));
        return NULL;
    }
    return v;
}

// Fills d's output size and scales from the 4 per-dim scales (N and C 1).
static int from_scales(lctx *c, const cd_value *x, const float *sc, cd_resize_desc *d) {
    if (sc[0] != 1.0f || sc[1] != 1.0f)
        return node_fail(c, CD_EUNSUPPORTED, "scales %g, %g on N and C (only H and W may be resized)", sc[0], sc[1]);
    for (int i = 2; i < 4; i++)
        if (!(sc[i] > 0.0f) || !isfinite(sc[i]) || sc[i] > 4096.0f)
            return node_fail(c, CD_EMODEL, "scale %g of dim %d out of range", sc[i], i);
    // onnxruntime: the output dim is the float product truncated.
    const float oh = sc[2] * (float)x->shape[2], ow = sc[3] * (float)x->shape[3];
    if (oh >= (float)CD_MAX_ACT_ELEMS || ow >= (float)CD_MAX_ACT_ELEMS)
        return node_fail(c, CD_ETOO_LARGE, "the output would be too large");
    d->oh = (int)oh;
    d->ow = (int)ow;
    d->scale_h = sc[2];
    d->scale_w = sc[3];
    return 0;
}

// Fills d's output size and scales from the 4 per-dim sizes.
static int from_sizes(lctx *c, const cd_value *x, const cd_value *sv, const int64_t *sz, const int *dims, int n,
                      cd_resize_desc *d) {
    int64_t s[4] = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]};
    for (int i = 0; i < n; i++) {
        int a = dims[i];
        if (a == 0 && ((sv->batch_mark && sv->batch_mark[i]) || sz[i] == 1)) continue; // the batch, unchanged
        s[a] = sz[i];
    }
    if (s[1] != x->shape[1]) return node_fail(c, CD_EUNSUPPORTED, "sizes change C (only H and W may be resized)");
    for (int i = 0; i < n; i++)
        if (dims[i] == 0 && s[0] != x->shape[0]) return node_fail(c, CD_EUNSUPPORTED, "sizes change the batch");
    for (int i = 2; i < 4; i++)
        if (s[i] < 1 || s[i] > CD_MAX_ACT_ELEMS)
            return node_fail(c, CD_EMODEL, "size %lld out of range", (long long)s[i]);
    d->oh = (int)s[2];
    d->ow = (int)s[3];
    d->scale_h = (float)d->oh / (float)x->shape[2];
    d->scale_w = (float)d->ow / (float)x->shape[3];
    return 0;
}

static int emit_resize(lctx *c, const cd_resize_desc *d, const char *label) {
    const cd_value *x = in_val(c, 0);
    int64_t shape[4] = {x->shape[0], x->shape[1], d->oh, d->ow};
    if (d->oh < 1 || d->ow < 1) return node_fail(c, CD_EMODEL, "the output would be empty (%dx%d)", d->oh, d->ow);
    int id = new_op(c, CD_OP_RESIZE, label);
    if (id < 0) return id;
    c->g->ops[id].nin = 1;
    c->g->ops[id].in[0] = in_id(c, 0);
    c->g->ops[id].u.resize = *d;
    return set_act_out(c, id, 4, shape);
}

// The input activation checks both ops share; d gets its c, h, w.
static int resize_input(lctx *c, cd_resize_desc *d) {
    int rc = need_act(c, 0);
    if (rc || (rc = only_first_output(c))) return rc;
    const cd_value *x = in_val(c, 0);
    if (x->rank != 4) return node_fail(c, CD_EUNSUPPORTED, "input of rank %d (4-D NCHW only)", x->rank);
    memset(d, 0, sizeof *d);
    d->c = (int)x->shape[1];
    d->h = (int)x->shape[2];
    d->w = (int)x->shape[3];
    return 0;
}

static int read_mode(lctx *c, const char *dflt, cd_resize_desc *d) {
    char mode[32];
    int rc = attr_str(c, "mode", dflt, mode, sizeof mode);
    if (rc) return rc;
    if (strcmp(mode, "nearest") == 0)
        d->mode = CD_RESIZE_NEAREST;
    else if (strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0)
        d->mode = CD_RESIZE_LINEAR;
    else
        return node_fail(c, CD_EUNSUPPORTED, "mode '%s' is not supported (nearest, linear)", mode);
    return 0;
}

// The opset-18 attributes: antialias 0, keep_aspect_ratio_policy stretch,
// axes naming H and W (or all dims); *dims gets the dims the scales/sizes
// values stand for, *n their count.
static int read_v18(lctx *c, int rank, int *dims, int *n) {
    int64_t v;
    int rc;
    char pol[32];
    if ((rc = attr_int(c, "antialias", 0, &v))) return rc;
    if (v) return node_fail(c, CD_EUNSUPPORTED, "antialias=%lld is not supported (0 only)", (long long)v);
    if ((rc = attr_str(c, "keep_aspect_ratio_policy", "stretch", pol, sizeof pol))) return rc;
    if (strcmp(pol, "stretch") != 0)
        return node_fail(c, CD_EUNSUPPORTED, "keep_aspect_ratio_policy '%s' is not supported (stretch only)", pol);
    int64_t axes[CD_MAX_RANK];
    int na;
    if ((rc = attr_ints(c, "axes", axes, CD_MAX_RANK, &na))) return rc;
    if (na >= 0 && c->g->opset < 18)
        return node_fail(c, CD_EMODEL, "attribute 'axes' is not in opset %d (from opset 18)", c->g->opset);
    if (na < 0) {
        for (int i = 0; i < rank; i++) dims[i] = i;
        *n = rank;
        return 0;
    }
    unsigned seen = 0;
    for (int i = 0; i < na; i++) {
        int64_t a = norm_axis(axes[i], rank);
        if (a < 0 || a >= rank || (seen & (1u << a))) return node_fail(c, CD_EMODEL, "axes out of range or repeated");
        seen |= 1u << a;
        dims[i] = (int)a;
    }
    *n = na;
    return 0;
}

int cd_lower_resize(lctx *c) {
    int rc;
    cd_resize_desc d;
    if ((rc = need_inputs(c, 1, 4)) || (rc = resize_input(c, &d)) || (rc = read_mode(c, "nearest", &d))) return rc;
    const cd_value *x = in_val(c, 0);
    char coord[40], nearest[40];
    int64_t excl;
    if ((rc = attr_str(c, "coordinate_transformation_mode", "half_pixel", coord, sizeof coord)) ||
        (rc = attr_str(c, "nearest_mode", "round_prefer_floor", nearest, sizeof nearest)) ||
        (rc = attr_int(c, "exclude_outside", 0, &excl)))
        return rc;
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                         "tf_half_pixel_for_nearest"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    int ci = -1, ni = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(coord, coords[i]) == 0) ci = i;
    for (int i = 0; i < 4; i++)
        if (strcmp(nearest, nearests[i]) == 0) ni = i;
    if (ci < 0)
        return node_fail(c, CD_EUNSUPPORTED,
                         "coordinate_transformation_mode '%s' is not supported (half_pixel, pytorch_half_pixel, "
                         "align_corners, asymmetric, tf_half_pixel_for_nearest)",
                         coord);
    if (ci == CD_COORD_TF_HALF_PIXEL_FOR_NEAREST && c->g->opset >= 13)
        return node_fail(c, CD_EUNSUPPORTED,
                         "coordinate_transformation_mode '%s' is not in opset %d (opsets 11 and 12 only)", coord,
                         c->g->opset);
    if (ni < 0) return node_fail(c, CD_EMODEL, "nearest_mode '%s' is not an ONNX mode", nearest);
    if (excl) return node_fail(c, CD_EUNSUPPORTED, "exclude_outside=%lld is not supported (0 only)", (long long)excl);
    d.coord = (cd_resize_coord)ci;
    d.nearest = (cd_nearest_mode)ni;
    int dims[CD_MAX_RANK], n;
    if ((rc = read_v18(c, 4, dims, &n))) return rc;
    const cd_value *scales = opt_const(c, 2, &rc);
    if (rc) return rc;
    const cd_value *sizes = opt_const(c, 3, &rc);
    if (rc) return rc;
    if (!scales == !sizes) return node_fail(c, CD_EMODEL, "exactly one of scales and sizes must be given");
    if (scales) {
        if (scales->kind != CD_VAL_CONST_F32 || scales->numel != n)
            return node_fail(c, CD_EMODEL, "scales must be %d floats", n);
        float sc[4] = {1.0f, 1.0f, 1.0f, 1.0f};
        for (int i = 0; i < n; i++) sc[dims[i]] = scales->f[i];
        if ((rc = from_scales(c, x, sc, &d))) return rc;
    } else {
        if (sizes->kind != CD_VAL_CONST_I64 || sizes->numel != n)
            return node_fail(c, CD_EMODEL, "sizes must be %d integers", n);
        if ((rc = from_sizes(c, x, sizes, sizes->i, dims, n, &d))) return rc;
    }
    return emit_resize(c, &d, d.mode == CD_RESIZE_LINEAR ? "Resize(linear)" : "Resize(nearest)");
}

int cd_lower_upsample(lctx *c) {
    int rc;
    cd_resize_desc d;
    if ((rc = need_inputs(c, 1, 2)) || (rc = resize_input(c, &d)) || (rc = read_mode(c, "nearest", &d))) return rc;
    const cd_value *x = in_val(c, 0);
    float sc[4];
    const cd_value *scales = opt_const(c, 1, &rc);
    if (rc) return rc;
    const Onnx__AttributeProto *a = attr_find(c, "scales");
    if (scales) {
        if (a) return node_fail(c, CD_EMODEL, "scales given as both an input and an attribute");
        if (scales->kind != CD_VAL_CONST_F32 || scales->numel != 4)
            return node_fail(c, CD_EMODEL, "scales must be 4 floats");
        memcpy(sc, scales->f, sizeof sc);
    } else {
        if (!a || a->n_floats != 4) return node_fail(c, CD_EMODEL, "scales must be 4 floats");
        for (int i = 0; i < 4; i++) sc[i] = a->floats[i];
    }
    for (int i = 2; i < 4; i++)
        if (sc[i] < 1.0f) return node_fail(c, CD_EMODEL, "scale %g below 1 (Upsample only enlarges)", sc[i]);
    d.coord = CD_COORD_ASYMMETRIC;
    d.nearest = CD_NEAREST_FLOOR;
    if ((rc = from_scales(c, x, sc, &d))) return rc;
    return emit_resize(c, &d, d.mode == CD_RESIZE_LINEAR ? "Upsample(linear)" : "Upsample(nearest)");
}
