// ONNX file -> cd_graph: reads the protobuf, validates everything that later
// stages index with (names, dims, sizes, references), converts initializers
// to owned constants and sorts the nodes topologically.

#include "runtime/graph.h"
#include "runtime/onnx-file.h"
#include "runtime/runtime.h"

#include "core/checked.h"
#include "core/errors.h"
#include "core/host.h"
#include "core/limits.h"
#include "onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *str_or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { // subnormal: normalise
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | exp << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0xff << 23 | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// Bytes per element of an ONNX data type we convert, 0 when unsupported.
static size_t onnx_itemsize(int dt) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return 1;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return 1;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
    }
    return 0;
}

static int is_float_type(int dt) {
    return dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
           dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
}

// Decodes one little-endian element of type dt at p.
static double load_elem(int dt, const uint8_t *p, int64_t *iv) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return half_to_float(h);
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: {
        memcpy(iv, p, 8);
        return 0;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: {
        uint64_t u;
        memcpy(&u, p, 8);
        *iv = (int64_t)u;
        return 0;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        *iv = x;
        return 0;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: {
        uint32_t x;
        memcpy(&x, p, 4);
        *iv = x;
        return 0;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: {
        int16_t x;
        memcpy(&x, p, 2);
        *iv = x;
        return 0;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        *iv = x;
        return 0;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: {
        *iv = (int8_t)p[0];
        return 0;
    }
    default: *iv = p[0]; return 0; // UINT8, BOOL
    }
}

// Reads the external bytes of a tensor: location must stay inside g->dir.
static int read_external(cd_graph *g, const Onnx__TensorProto *t, const char *what, size_t want, uint8_t **out,
                         char *err, size_t errlen) {
    const char *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e || !e->key) continue;
        char *end = NULL;
        if (strcmp(e->key, "location") == 0) {
            loc = e->value;
        } else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
            errno = 0;
            long long v = e->value ? strtoll(e->value, &end, 10) : -1;
            if (!e->value || errno || end == e->value || *end || v < 0)
                return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': bad external data %s '%s'", what, e->key,
                               str_or(e->value, ""));
            if (e->key[0] == 'o')
                offset = v;
            else
                length = v;
        }
    }
    if (!loc || !*loc) return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': external data without a location", what);
    if (!g->dir) return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': external data but no model folder", what);
    // No absolute paths and no '..' component: the file must sit in the model's folder.
    if (loc[0] == '/' || strstr(loc, "..") || strlen(loc) > 1024)
        return cd_errf(CD_EMODEL, err, errlen,
                       "tensor '%s': external data location '%.200s' escapes the model's folder", what, loc);
    char joined[PATH_MAX], real[PATH_MAX];
    if ((size_t)snprintf(joined, sizeof joined, "%s/%s", g->dir, loc) >= sizeof joined)
        return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': external data path too long", what);
    if (!realpath(joined, real))
        return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': external data file '%.200s': %s", what, loc,
                       strerror(errno));
    size_t dl = strlen(g->dir);
    if (strncmp(real, g->dir, dl) != 0 || real[dl] != '/')
        return cd_errf(CD_EMODEL, err, errlen,
                       "tensor '%s': external data location '%.200s' escapes the model's folder (symlink)", what, loc);
    if (length >= 0 && (uint64_t)length != want)
        return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': external length %lld, the shape needs %zu bytes", what,
                       (long long)length, want);
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': cannot open external data: %s", what, strerror(errno));
    struct stat st;
    int rc = 0;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = cd_errf(CD_EMODEL, err, errlen, "tensor '%s': external data is not a regular file", what);
    } else if (g->max_bytes && (want > g->max_bytes || g->bytes_read > g->max_bytes - want)) {
        rc = cd_errf(CD_ETOO_LARGE, err, errlen,
                     "tensor '%s': external data of %zu bytes takes the model "
                     "over the limit of %zu bytes",
                     what, want, g->max_bytes);
    } else if ((uint64_t)offset > (uint64_t)st.st_size || want > (uint64_t)st.st_size - (uint64_t)offset) {
        rc = cd_errf(CD_EMODEL, err, errlen,
                     "tensor '%s': external data [%lld, +%zu) lies past the end of the file (%lld bytes)", what,
                     (long long)offset, want, (long long)st.st_size);
    } else if (!(buf = malloc(want ? want : 1))) {
        rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    } else {
        size_t got = 0;
        while (got < want) {
            ssize_t r = pread(fd, buf + got, want - got, offset + (off_t)got);
            if (r <= 0) {
                rc = cd_errf(CD_EMODEL, err, errlen, "tensor '%s': short read of external data", what);
                break;
            }
            got += (size_t)r;
        }
        g->bytes_read += got;
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    return 0;
}

// Values stored in the typed field that holds dt's elements.
static size_t typed_count(const Onnx__TensorProto *t, int dt) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return t->n_float_data;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return t->n_double_data;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return t->n_int64_data;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return t->n_uint64_data;
    default: return t->n_int32_data; // int32/16/8, uint16/8, bool, float16
    }
}

// Every check runs before anything is allocated: the declared dims (each, and
// their product, overflow-checked and capped), then the stored data's length
// against them. Only then are the (external) bytes read and the values made.
int cd_onnx_tensor_value(cd_graph *g, const void *tensor, const char *what, cd_value *v, char *err, size_t errlen) {
    const Onnx__TensorProto *t = tensor;
    int dt = t->has_data_type ? t->data_type : 0;
    size_t isz = onnx_itemsize(dt);
    if (!isz)
        return cd_errf(CD_EUNSUPPORTED, err, errlen,
                       "tensor '%s': data type %d not supported (float, double, float16, integer types)", what, dt);
    if (t->n_dims > CD_MAX_RANK)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "tensor '%s': rank %zu above %d", what, t->n_dims, CD_MAX_RANK);
    int64_t shape[CD_MAX_RANK];
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': negative dimension %lld", what, (long long)t->dims[i]);
        if (t->dims[i] > CD_MAX_CONST_DIM)
            return cd_errf(CD_ETOO_LARGE, err, errlen, "tensor '%s': dimension %zu is %lld (at most %d)", what, i,
                           (long long)t->dims[i], CD_MAX_CONST_DIM);
        shape[i] = t->dims[i];
    }
    int64_t n;
    size_t want;
    if (cd_ck_shape_numel((int)t->n_dims, shape, &n) || n > CD_MAX_CONST_ELEMS || cd_ck_bytes(n, isz, &want))
        return cd_errf(CD_ETOO_LARGE, err, errlen, "tensor '%s': its dims declare more than %lld elements", what,
                       (long long)CD_MAX_CONST_ELEMS);
    const int fl = is_float_type(dt);
    const int external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (!external && t->has_raw_data) {
        if (t->raw_data.len != want)
            return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': raw_data has %zu bytes, the shape needs %zu", what,
                           t->raw_data.len, want);
    } else if (!external && n > 0 && typed_count(t, dt) != (size_t)n) {
        return cd_errf(CD_EMODEL, err, errlen, "tensor '%s': %zu values stored, the shape needs %lld", what,
                       typed_count(t, dt), (long long)n);
    }
    uint8_t *ext = NULL;
    const uint8_t *bytes = NULL;
    if (external) {
        int rc = read_external(g, t, what, want, &ext, err, errlen); // checks the file's size first
        if (rc) return rc;
        bytes = ext;
    } else if (t->has_raw_data) {
        bytes = t->raw_data.data;
    }
    size_t vbytes;
    if (cd_ck_bytes(n ? n : 1, fl ? sizeof(float) : sizeof(int64_t), &vbytes)) { // cannot fail after the cap
        free(ext);
        return cd_errf(CD_ETOO_LARGE, err, errlen, "tensor '%s': too large", what);
    }
    void *data = malloc(vbytes);
    if (!data) {
        free(ext);
        return cd_errf(CD_ENOMEM, err, errlen, "tensor '%s': out of memory for %zu bytes", what, vbytes);
    }
    v->rank = (int)t->n_dims;
    memcpy(v->shape, shape, sizeof(int64_t) * t->n_dims);
    v->numel = n;
    v->kind = fl ? CD_VAL_CONST_F32 : CD_VAL_CONST_I64;
    v->dtype = dt;
    if (fl)
        v->f = data;
    else
        v->i = data;
    if (bytes || n == 0) {
        for (int64_t e = 0; e < n; e++) {
            int64_t iv = 0;
            double d = load_elem(dt, bytes + (size_t)e * isz, &iv);
            if (fl)
                v->f[e] = (float)d;
            else
                v->i[e] = iv;
        }
        free(ext);
        return 0;
    }
    // Typed fields (their count was checked above).
    for (int64_t e = 0; e < n; e++) {
        switch (dt) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: v->f[e] = t->float_data[e]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: v->f[e] = (float)t->double_data[e]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: v->f[e] = half_to_float((uint16_t)t->int32_data[e]); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: v->i[e] = t->int64_data[e]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: v->i[e] = (int64_t)t->uint64_data[e]; break;
        default: v->i[e] = t->int32_data[e]; break;
        }
    }
    return 0;
}

void cd_onnx_release(cd_graph *g) {
    if (g->model_proto) onnx__model_proto__free_unpacked(g->model_proto, NULL);
    g->model_proto = NULL;
    for (int i = 0; i < g->nnodes; i++) g->nodes[i].proto = NULL;
}

// The first node of gp that reads the value name ("" when none).
static const char *first_reader(const Onnx__GraphProto *gp, const char *name) {
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t j = 0; np && j < np->n_input; j++)
            if (np->input[j] && strcmp(np->input[j], name) == 0)
                return str_or(np->name, str_or(np->n_output ? np->output[0] : NULL, str_or(np->op_type, "")));
    }
    return "";
}

// Declares a graph input from its ValueInfo: float32, known dims except the
// batch (dim 0, any value or symbolic).
static int add_input(cd_graph *g, const Onnx__GraphProto *gp, const Onnx__ValueInfoProto *vi, char *err,
                     size_t errlen) {
    const char *name = vi->name;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "graph input '%s': only tensor inputs are supported", name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type &&
        (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 || tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT8))
        return cd_errf(CD_EUNSUPPORTED, err, errlen,
                       "graph input '%s' is %s, read by node '%s': a quantized graph input is not supported "
                       "(convd takes float32 inputs; quantize inside the model with QuantizeLinear)",
                       name, tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 ? "uint8" : "int8",
                       first_reader(gp, name));
    if (!tt->has_elem_type || tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "graph input '%s': element type %d not supported (float32 only)",
                       name, tt->has_elem_type ? tt->elem_type : 0);
    if (!tt->shape || tt->shape->n_dim == 0)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "graph input '%s': shape unknown or scalar (need [batch, ...])",
                       name);
    if (tt->shape->n_dim > CD_MAX_RANK)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "graph input '%s': rank %zu above %d", name, tt->shape->n_dim,
                       CD_MAX_RANK);
    int id = cd_graph_add_value(g, name);
    if (id == CD_EMODEL) return cd_errf(CD_EMODEL, err, errlen, "graph input '%s' declared twice", name);
    if (id < 0) return cd_errf(id, err, errlen, "out of memory");
    cd_value *v = &g->values[id];
    v->kind = CD_VAL_ACT;
    v->rank = (int)tt->shape->n_dim;
    v->shape[0] = 1;
    uint32_t dyn = 0;
    const cd_input_shape *spec = cd_input_shape_find(g->shape_spec, g->n_shape_spec, name, v->rank);
    for (int i = 1; i < v->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        int fixed = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (fixed && (d->dim_value < 1 || d->dim_value > (1 << 24)))
            return cd_errf(CD_EUNSUPPORTED, err, errlen, "graph input '%s': dim %d must be a positive size, got %lld",
                           name, i, (long long)d->dim_value);
        if (fixed) { // a size given for it changes nothing (cd_model_variant_get checks requests)
            v->shape[i] = d->dim_value;
            continue;
        }
        // Symbolic (dim_param) or unknown: planned at the size the caller
        // gives (runtime/variants.c), one plan per size.
        if (!spec)
            return cd_errf(CD_EUNSUPPORTED, err, errlen,
                           "graph input '%s': dim %d is symbolic ('%s'): give the size to plan it at "
                           "(convd-run --input-shape %s=1x..., convd --input-shape)",
                           name, i,
                           d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param
                               ? d->dim_param
                               : "?",
                           name);
        if (spec->shape[i] < 1 || spec->shape[i] > (1 << 24))
            return cd_errf(CD_ESHAPE, err, errlen, "graph input '%s': dim %d of %lld out of range (1..%d)", name, i,
                           (long long)spec->shape[i], 1 << 24);
        v->shape[i] = spec->shape[i];
        dyn |= 1u << i;
    }
    v->numel = cd_shape_numel(v->rank, v->shape);
    if (v->numel <= 0 || v->numel > ((int64_t)1 << 30))
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "graph input '%s': too large", name);
    int *in = realloc(g->inputs, (size_t)(g->ninputs + 1) * sizeof *in);
    if (!in) return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    g->inputs = in;
    uint32_t *dy = realloc(g->input_dyn, (size_t)(g->ninputs + 1) * sizeof *dy);
    if (!dy) return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    g->input_dyn = dy;
    g->input_dyn[g->ninputs] = dyn;
    g->inputs[g->ninputs++] = id;
    return 0;
}

// Sorts the nodes topologically (Kahn), resolving every input name through the
// graph's name table. Linear in nodes plus edges: each value's readers are
// listed once (CSR: first_reader[value] .. first_reader[value + 1] in readers).
// Fills the nodes' op, name and outputs (adding the output values to g),
// leaving the inputs for later. Returns 0 or a negative code.
static int add_node_outputs(cd_graph *g, const Onnx__GraphProto *gp, cd_node *tmp, char *err, size_t errlen) {
    const size_t nn = gp->n_node;
    for (size_t k = 0; k < nn; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        cd_node *n = &tmp[k];
        n->proto = np;
        n->op = str_or(np->op_type, "");
        n->name = np->name && *np->name ? np->name : NULL;
        if (!*n->op) {
            return cd_errf(CD_EMODEL, err, errlen, "node #%zu has no op_type", k);
        }
        if (np->n_input > CD_OP_MAX_IN || np->n_output > 16) {
            return cd_errf(CD_EUNSUPPORTED, err, errlen,
                           "node '%s' (%s): %zu inputs / %zu outputs is more than supported (%d / 16)",
                           str_or(np->name, n->op), n->op, np->n_input, np->n_output, CD_OP_MAX_IN);
        }
        n->ninputs = (int)np->n_input;
        n->noutputs = (int)np->n_output;
        n->inputs = malloc((np->n_input ? np->n_input : 1) * sizeof(int));
        n->outputs = malloc((np->n_output ? np->n_output : 1) * sizeof(int));
        if (!n->inputs || !n->outputs) {
            return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        }
        for (size_t j = 0; j < np->n_output; j++) {
            const char *on = np->output[j];
            if (!on || !*on) {
                n->outputs[j] = -1;
                continue;
            }
            int id = cd_graph_add_value(g, on);
            if (id == CD_EMODEL) {
                return cd_errf(CD_EMODEL, err, errlen, "node '%s' (%s): output '%s' is already produced elsewhere",
                               str_or(np->name, n->op), n->op, on);
            }
            if (id < 0) {
                return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
            }
            n->outputs[j] = id;
        }
        if (!n->name) n->name = np->n_output && np->output[0] && *np->output[0] ? np->output[0] : n->op;
    }
    return 0;
}

static int build_nodes(cd_graph *g, const Onnx__GraphProto *gp, char *err, size_t errlen) {
    size_t nn = gp->n_node;
    if (nn > CD_MAX_MODEL_NODES)
        return cd_errf(CD_ETOO_LARGE, err, errlen, "the graph has %zu nodes (at most %d)", nn, CD_MAX_MODEL_NODES);
    cd_node *tmp = calloc(nn ? nn : 1, sizeof *tmp);
    int *producer = NULL, *indeg = calloc(nn ? nn : 1, sizeof(int)), *order = malloc((nn ? nn : 1) * sizeof(int));
    int *first_reader = NULL, *readers = NULL;
    size_t nedges = 0;
    int rc = 0;
    if (!tmp || !indeg || !order) {
        rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    // Outputs first, so inputs can refer to any node's outputs.
    if ((rc = add_node_outputs(g, gp, tmp, err, errlen))) goto done;
    producer = malloc((size_t)(g->nvalues ? g->nvalues : 1) * sizeof(int));
    if (!producer) {
        rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->nvalues; i++) producer[i] = -1;
    for (size_t k = 0; k < nn; k++)
        for (int j = 0; j < tmp[k].noutputs; j++)
            if (tmp[k].outputs[j] >= 0) producer[tmp[k].outputs[j]] = (int)k;
    for (size_t k = 0; k < nn; k++) {
        const Onnx__NodeProto *np = tmp[k].proto;
        for (size_t j = 0; j < np->n_input; j++) {
            const char *in = np->input[j];
            if (!in || !*in) {
                tmp[k].inputs[j] = -1;
                continue;
            }
            int id = cd_graph_find(g, in);
            if (id < 0) {
                rc = cd_errf(CD_EMODEL, err, errlen,
                             "node '%s' (%s): input '%s' is not produced by any node, initializer or graph input",
                             tmp[k].name, tmp[k].op, in);
                goto done;
            }
            tmp[k].inputs[j] = id;
            g->values[id].nconsumers++;
            if (producer[id] >= 0) {
                indeg[k]++;
                nedges++;
            }
        }
    }
    // Readers of each produced value, in file order (a node reading a value
    // twice is listed twice, as it counts twice in indeg).
    first_reader = calloc((size_t)g->nvalues + 1, sizeof(int));
    readers = malloc((nedges ? nedges : 1) * sizeof(int));
    if (!first_reader || !readers) {
        rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < nn; k++)
        for (int j = 0; j < tmp[k].ninputs; j++) {
            int id = tmp[k].inputs[j];
            if (id >= 0 && producer[id] >= 0) first_reader[id + 1]++;
        }
    for (int i = 0; i < g->nvalues; i++) first_reader[i + 1] += first_reader[i];
    for (size_t k = 0; k < nn; k++)
        for (int j = 0; j < tmp[k].ninputs; j++) {
            int id = tmp[k].inputs[j];
            if (id >= 0 && producer[id] >= 0) readers[first_reader[id]++] = (int)k;
        }
    // first_reader[id] now ends value id's list; shift back to starts.
    for (int i = g->nvalues; i > 0; i--) first_reader[i] = first_reader[i - 1];
    first_reader[0] = 0;
    // Kahn's algorithm, stable with respect to the file's order (the order
    // the former quadratic scan gave: readers of each output in file order).
    int head = 0, tail = 0;
    for (size_t k = 0; k < nn; k++)
        if (!indeg[k]) order[tail++] = (int)k;
    while (head < tail) {
        int k = order[head++];
        for (int j = 0; j < tmp[k].noutputs; j++) {
            int out = tmp[k].outputs[j];
            if (out < 0) continue;
            for (int r = first_reader[out]; r < first_reader[out + 1]; r++)
                if (--indeg[readers[r]] == 0) order[tail++] = readers[r];
        }
    }
    if ((size_t)tail != nn) {
        rc = cd_errf(CD_EMODEL, err, errlen, "the graph has a cycle");
        goto done;
    }
    g->nodes = malloc((nn ? nn : 1) * sizeof *g->nodes);
    if (!g->nodes) {
        rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < nn; k++) {
        g->nodes[k] = tmp[order[k]];
        tmp[order[k]].inputs = tmp[order[k]].outputs = NULL;
    }
    g->nnodes = (int)nn;
done:
    if (tmp)
        for (size_t k = 0; k < nn; k++) {
            free(tmp[k].inputs);
            free(tmp[k].outputs);
        }
    free(tmp);
    free(producer);
    free(indeg);
    free(order);
    free(first_reader);
    free(readers);
    return rc;
}

int cd_onnx_import(const char *path, cd_graph *g, char *err, size_t errlen) {
    uint8_t *buf;
    size_t len;
    int rc = cd_onnx_read_file(path, g->max_bytes, &buf, &len, err, errlen);
    if (rc) return rc;
    g->bytes_read = len; // external data adds to it (--max-model-bytes)
    char real[PATH_MAX];
    rc = cd_onnx_import_buffer(buf, len, cd_host_real_dir(path, real), g, err, errlen);
    free(buf);
    return rc;
}

// ---- before unpacking --------------------------------------------------------
// protobuf-c builds every message of the file at once, and a few bytes can
// declare a large structure (an empty NodeProto is 2 bytes and ~150 bytes
// unpacked): 20 MB of empty nodes took 1.5 GB and 5 s before the node cap
// could say no. So the node count is read off the wire first, and the unpack
// runs under a memory budget.

// Reads a varint at *p (< end); 0 or -1 when malformed.
static int wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

// Counts the occurrences of the length-delimited field `field` in the
// message [p, end), calling each on their payloads when each is not NULL
// (then counting what each returns instead). -1 when malformed (the unpacker
// will then say so).
static int64_t wire_count(const uint8_t *p, const uint8_t *end, uint32_t field,
                          int64_t (*each)(const uint8_t *, const uint8_t *)) {
    int64_t n = 0;
    while (p < end) {
        uint64_t key, v;
        if (wire_varint(&p, end, &key)) return -1;
        switch (key & 7) {
        case 0:
            if (wire_varint(&p, end, &v)) return -1;
            break;
        case 1:
            if (end - p < 8) return -1;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return -1;
            p += 4;
            break;
        case 2:
            if (wire_varint(&p, end, &v) || v > (uint64_t)(end - p)) return -1;
            if ((key >> 3) == field) {
                int64_t k = each ? each(p, p + v) : 1;
                if (k < 0) return -1;
                n += k;
            }
            p += v;
            break;
        default: return -1; // groups: not in onnx.proto
        }
    }
    return n;
}

static int64_t graph_nodes(const uint8_t *p, const uint8_t *end) {
    return wire_count(p, end, 1, NULL);
} // GraphProto.node

// Budget of one unpack: bytes allocated (plus a malloc chunk's overhead each).
typedef struct {
    size_t used, budget;
    int over;
} unpack_budget;

static void *budget_alloc(void *data, size_t size) {
    unpack_budget *b = data;
    size_t need;
    if (cd_ck_add_size(size, 16, &need) || cd_ck_add_size(b->used, need, &need) || need > b->budget) {
        b->over = 1;
        return NULL;
    }
    void *ptr = malloc(size);
    if (ptr) b->used = need;
    return ptr;
}

static void budget_free(void *data, void *ptr) { free(ptr); }

int cd_onnx_import_buffer(const uint8_t *buf, size_t len, const char *dir, cd_graph *g, char *err, size_t errlen) {
    int rc;
    if (dir && !(g->dir = strdup(dir))) return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    int64_t nodes = wire_count(buf, buf + len, 7, graph_nodes); // ModelProto.graph (repeats merge)
    if (nodes > CD_MAX_MODEL_NODES)
        return cd_errf(CD_ETOO_LARGE, err, errlen, "the graph has %lld nodes (at most %d)", (long long)nodes,
                       CD_MAX_MODEL_NODES);
    unpack_budget b = {0, 0, 0};
    if (cd_ck_mul_size(len, CD_ONNX_UNPACK_RATIO, &b.budget) ||
        cd_ck_add_size(b.budget, CD_ONNX_UNPACK_SLACK, &b.budget))
        b.budget = SIZE_MAX;
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &b};
    // Freed later with the default allocator: budget_alloc is plain malloc.
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&alloc, len, buf);
    if (!mp && b.over)
        return cd_errf(CD_ETOO_LARGE, err, errlen,
                       "the file's %zu bytes unpack to more than %zu bytes of protobuf structures", len, b.budget);
    if (!mp) return cd_errf(CD_EMODEL, err, errlen, "not a valid ONNX protobuf (corrupt or truncated file)");
    g->model_proto = mp;

    const Onnx__GraphProto *gp = mp->graph;
    if (!gp || !mp->has_ir_version)
        return cd_errf(CD_EMODEL, err, errlen, "not an ONNX model (no %s)", gp ? "ir_version" : "graph");
    g->opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o) continue;
        if (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0)
            g->opset = o->has_version ? (int)o->version : 0;
    }
    if (g->opset < 0) return cd_errf(CD_EMODEL, err, errlen, "the model imports no default-domain opset");
    if (g->opset < CD_OPSET_MIN || g->opset > CD_OPSET_MAX)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "opset %d not supported (supported: %d to %d)", g->opset,
                       CD_OPSET_MIN, CD_OPSET_MAX);

    // Initializers.
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t || !t->name || !*t->name) return cd_errf(CD_EMODEL, err, errlen, "initializer #%zu has no name", i);
        int id = cd_graph_add_value(g, t->name);
        if (id == CD_EMODEL) return cd_errf(CD_EMODEL, err, errlen, "initializer '%s' defined twice", t->name);
        if (id < 0) return cd_errf(id, err, errlen, "out of memory");
        rc = cd_onnx_tensor_value(g, t, t->name, &g->values[id], err, errlen);
        if (rc) return rc;
    }
    if (gp->n_sparse_initializer)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "sparse_initializer is not supported (store dense initializers)");
    // Inputs that are not initializers.
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi || !vi->name || !*vi->name) return cd_errf(CD_EMODEL, err, errlen, "graph input #%zu has no name", i);
        int id = cd_graph_find(g, vi->name);
        if (id >= 0 && g->values[id].kind != CD_VAL_ACT) continue; // initializer listed as input
        rc = add_input(g, gp, vi, err, errlen);
        if (rc) return rc;
    }
    if (g->ninputs == 0) return cd_errf(CD_EMODEL, err, errlen, "the graph has no inputs");
    rc = build_nodes(g, gp, err, errlen);
    if (rc) return rc;
    // Outputs.
    if (gp->n_output == 0 || gp->n_output > CD_MAX_TENSORS)
        return cd_errf(CD_EMODEL, err, errlen, "the graph has %zu outputs (1..%d supported)", gp->n_output,
                       CD_MAX_TENSORS);
    g->outputs = malloc(gp->n_output * sizeof(int));
    if (!g->outputs) return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        int id = vi && vi->name ? cd_graph_find(g, vi->name) : -1;
        if (id < 0)
            return cd_errf(CD_EMODEL, err, errlen, "graph output '%s' is not produced by any node",
                           vi && vi->name ? vi->name : "");
        for (int j = 0; j < g->noutputs; j++)
            if (g->outputs[j] == id)
                return cd_errf(CD_EUNSUPPORTED, err, errlen, "graph output '%s' listed twice", vi->name);
        g->values[id].is_output = 1;
        g->values[id].nconsumers++;
        g->outputs[g->noutputs++] = id;
    }
    if (g->ninputs > CD_MAX_TENSORS)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "more than %d graph inputs", CD_MAX_TENSORS);
    return 0;
}
