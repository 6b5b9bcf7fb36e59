// Offline ONNX editing for convctl: load, find/decode/replace constant
// tensors, save (onnx-rewrite.h). Decoding reuses the runtime's
// cd_onnx_tensor_value, so convctl reads tensors exactly as the daemon does.

#include "tools/convctl/onnx-rewrite.h"

#include "core/errors.h"
#include "core/host.h"
#include "runtime/graph.h"
#include "runtime/onnx-file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_const(const void *a, const void *b) {
    return strcmp(((const struct ctl_onnx_const *)a)->name, ((const struct ctl_onnx_const *)b)->name);
}

// The tensor of a Constant node's `value` attribute, or NULL.
static Onnx__TensorProto *constant_value(const Onnx__NodeProto *n) {
    if (!n->op_type || strcmp(n->op_type, "Constant") != 0 ||
        (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0))
        return NULL;
    if (n->n_output < 1 || !n->output[0] || !*n->output[0]) return NULL;
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (a && a->name && strcmp(a->name, "value") == 0) return a->t;
    }
    return NULL;
}

int ctl_onnx_load(const char *path, ctl_onnx_model *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = cd_onnx_read_file(path, 0, &buf, &len, err, errlen);
    if (rc) return rc;
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, buf);
    free(buf);
    if (!mp) return cd_errf(CD_EMODEL, err, errlen, "%s: not a valid ONNX protobuf (corrupt or truncated file)", path);
    if (!mp->graph) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return cd_errf(CD_EMODEL, err, errlen, "%s: not an ONNX model (no graph)", path);
    }
    m->proto = mp;

    char real[PATH_MAX];
    if (cd_host_real_dir(path, real) && !(m->dir = strdup(real))) {
        ctl_onnx_free(m);
        return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    }

    const Onnx__GraphProto *g = mp->graph;
    m->consts = malloc((g->n_initializer + g->n_node + 1) * sizeof *m->consts);
    if (!m->consts) {
        ctl_onnx_free(m);
        return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        if (!t || !t->name || !*t->name) {
            ctl_onnx_free(m);
            return cd_errf(CD_EMODEL, err, errlen, "%s: initializer #%zu has no name", path, i);
        }
        m->consts[m->nconst++] = (struct ctl_onnx_const){t->name, t};
    }
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__TensorProto *t = g->node[i] ? constant_value(g->node[i]) : NULL;
        if (t) m->consts[m->nconst++] = (struct ctl_onnx_const){g->node[i]->output[0], t};
    }
    qsort(m->consts, m->nconst, sizeof *m->consts, cmp_const);
    for (size_t i = 1; i < m->nconst; i++)
        if (strcmp(m->consts[i - 1].name, m->consts[i].name) == 0) {
            int r = cd_errf(CD_EMODEL, err, errlen, "%s: constant '%.200s' is defined twice", path, m->consts[i].name);
            ctl_onnx_free(m);
            return r;
        }
    return 0;
}

void ctl_onnx_free(ctl_onnx_model *m) {
    if (m->proto) onnx__model_proto__free_unpacked(m->proto, NULL);
    free(m->dir);
    free(m->consts);
    memset(m, 0, sizeof *m);
}

Onnx__TensorProto *ctl_onnx_find_const(const ctl_onnx_model *m, const char *name) {
    if (!name || !m->nconst) return NULL;
    struct ctl_onnx_const key = {name, NULL};
    const struct ctl_onnx_const *c = bsearch(&key, m->consts, m->nconst, sizeof *m->consts, cmp_const);
    return c ? c->t : NULL;
}

int ctl_onnx_read_f32(const ctl_onnx_model *m, const Onnx__TensorProto *t, float **out, size_t *n, char *err,
                      size_t errlen) {
    const char *what = t->name && *t->name ? t->name : "(constant)";
    if (!t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return cd_errf(CD_EUNSUPPORTED, err, errlen, "tensor '%s': data type %d, only float32 (1) is pruned", what,
                       t->has_data_type ? t->data_type : 0);
    cd_graph g = {0};
    g.dir = m->dir;
    cd_value v = {0};
    int rc = cd_onnx_tensor_value(&g, t, what, &v, err, errlen);
    if (rc) {
        free(v.f);
        free(v.i);
        return rc;
    }
    *out = v.f;
    *n = (size_t)v.numel;
    return 0;
}

int ctl_onnx_write_f32(Onnx__TensorProto *t, const float *v, size_t n) {
    uint8_t *raw = malloc(n ? n * 4 : 1);
    if (!raw) return CD_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        raw[4 * i] = (uint8_t)u;
        raw[4 * i + 1] = (uint8_t)(u >> 8);
        raw[4 * i + 2] = (uint8_t)(u >> 16);
        raw[4 * i + 3] = (uint8_t)(u >> 24);
    }
    // The message was unpacked with the default allocator (malloc/free).
    if (t->has_raw_data) free(t->raw_data.data);
    t->has_raw_data = 1;
    t->raw_data.data = raw;
    t->raw_data.len = n * 4;
    free(t->float_data);
    t->float_data = NULL;
    t->n_float_data = 0;
    for (size_t i = 0; i < t->n_external_data; i++)
        onnx__string_string_entry_proto__free_unpacked(t->external_data[i], NULL);
    free(t->external_data);
    t->external_data = NULL;
    t->n_external_data = 0;
    t->has_data_location = 0;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    return 0;
}

int ctl_onnx_save(const ctl_onnx_model *m, const char *path, char *err, size_t errlen) {
    const size_t len = onnx__model_proto__get_packed_size(m->proto);
    if (len > CD_ONNX_MAX_BYTES)
        return cd_errf(CD_EMODEL, err, errlen, "the pruned model needs %zu bytes, above protobuf's 2 GiB limit", len);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return cd_errf(CD_ENOMEM, err, errlen, "out of memory for %zu bytes", len);
    if (onnx__model_proto__pack(m->proto, buf) != len) {
        free(buf);
        return cd_errf(CD_EMODEL, err, errlen, "packing the model failed");
    }
    const size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        free(buf);
        return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    }
    snprintf(tmp, plen + 16, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int r = cd_errf(CD_EIO, err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        free(buf);
        return r;
    }
    // mkstemp creates 0600; give the file the usual mode under the umask.
    mode_t um = umask(0);
    umask(um);
    int rc = 0;
    if (fchmod(fd, 0666 & ~um) != 0) rc = cd_errf(CD_EIO, err, errlen, "chmod %s: %s", tmp, strerror(errno));
    for (size_t off = 0; !rc && off < len;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            rc = cd_errf(CD_EIO, err, errlen, "cannot write %s: %s", tmp, w ? strerror(errno) : "short write");
        else
            off += (size_t)w;
    }
    if (close(fd) != 0 && !rc) rc = cd_errf(CD_EIO, err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0) rc = cd_errf(CD_EIO, err, errlen, "cannot write %s: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    free(tmp);
    free(buf);
    return rc;
}

// ---- building -----------------------------------------------------------------

Onnx__TensorProto *ctl_onnx_tensor_new(const char *name, int32_t dtype, int rank, const int64_t *dims, const void *raw,
                                       size_t nbytes) {
    Onnx__TensorProto *t = malloc(sizeof *t);
    if (!t) return NULL;
    onnx__tensor_proto__init(t);
    t->name = strdup(name);
    t->dims = malloc(sizeof(int64_t) * (size_t)(rank > 0 ? rank : 1));
    t->raw_data.data = malloc(nbytes ? nbytes : 1);
    if (!t->name || !t->dims || !t->raw_data.data) {
        onnx__tensor_proto__free_unpacked(t, NULL);
        return NULL;
    }
    t->n_dims = (size_t)rank;
    if (rank > 0) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    if (nbytes) memcpy(t->raw_data.data, raw, nbytes);
    t->raw_data.len = nbytes;
    t->has_raw_data = 1;
    t->has_data_type = 1;
    t->data_type = dtype;
    return t;
}

Onnx__NodeProto *ctl_onnx_node_new(const char *op, const char *name, int nin, const char *const *in, const char *out,
                                   const char *attr, int64_t value) {
    Onnx__NodeProto *n = malloc(sizeof *n);
    if (!n) return NULL;
    onnx__node_proto__init(n);
    int ok = (n->op_type = strdup(op)) && (n->name = strdup(name)) &&
             (n->input = calloc((size_t)nin + 1, sizeof *n->input)) && (n->output = calloc(1, sizeof *n->output));
    for (int i = 0; ok && i < nin; i++, n->n_input++) ok = (n->input[i] = strdup(in[i])) != NULL;
    if (ok) ok = (n->output[0] = strdup(out)) != NULL;
    if (ok) n->n_output = 1;
    if (ok && attr) {
        Onnx__AttributeProto *a = malloc(sizeof *a);
        ok = a && (n->attribute = calloc(1, sizeof *n->attribute));
        if (a) {
            onnx__attribute_proto__init(a);
            if (ok)
                n->attribute[n->n_attribute++] = a;
            else
                free(a);
        }
        if (ok && (a->name = strdup(attr))) {
            a->has_type = 1;
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
            a->has_i = 1;
            a->i = value;
        } else {
            ok = 0;
        }
    }
    if (!ok) {
        onnx__node_proto__free_unpacked(n, NULL);
        return NULL;
    }
    return n;
}

int ctl_onnx_set_input(Onnx__NodeProto *n, size_t i, const char *name) {
    char *s = strdup(name);
    if (!s) return CD_ENOMEM;
    free(n->input[i]);
    n->input[i] = s;
    return 0;
}

int ctl_onnx_add_initializer(ctl_onnx_model *m, Onnx__TensorProto *t) {
    Onnx__GraphProto *g = m->proto->graph;
    Onnx__TensorProto **v = realloc(g->initializer, (g->n_initializer + 1) * sizeof *v);
    if (!v) return CD_ENOMEM;
    g->initializer = v;
    g->initializer[g->n_initializer++] = t;
    return 0;
}

int64_t ctl_onnx_opset(const ctl_onnx_model *m) {
    for (size_t i = 0; i < m->proto->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->proto->opset_import[i];
        if (o && (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0)) return o->version;
    }
    return 0;
}

void ctl_onnx_set_opset(ctl_onnx_model *m, int64_t version) {
    for (size_t i = 0; i < m->proto->n_opset_import; i++) {
        Onnx__OperatorSetIdProto *o = m->proto->opset_import[i];
        if (o && (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0)) {
            o->has_version = 1;
            o->version = version;
        }
    }
}
