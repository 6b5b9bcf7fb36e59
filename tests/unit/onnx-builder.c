// The protobuf-c model builder of the runtime's C tests (onnx-builder.h).

#include "tests/unit/onnx-builder.h"

#include "tests/unit/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *mb_alloc(mb *b, size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p || b->n == 4096) abort();
    b->ptrs[b->n++] = p;
    return p;
}

char *mb_str(mb *b, const char *s) {
    char *p = mb_alloc(b, strlen(s) + 1);
    strcpy(p, s);
    return p;
}

void mb_free(mb *b) {
    for (int i = 0; i < b->n; i++) free(b->ptrs[i]);
    b->n = 0;
}

Onnx__NodeProto *mb_node(mb *b, const char *op, const char *in0, const char *in1, const char *in2, const char *out) {
    Onnx__NodeProto *n = mb_alloc(b, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = mb_str(b, op);
    n->name = mb_str(b, out);
    const char *ins[3] = {in0, in1, in2};
    n->input = mb_alloc(b, 8 * sizeof(char *));
    for (int i = 0; i < 3 && ins[i]; i++) n->input[n->n_input++] = mb_str(b, ins[i]);
    n->output = mb_alloc(b, sizeof(char *));
    n->output[0] = mb_str(b, out);
    n->n_output = 1;
    n->attribute = mb_alloc(b, 16 * sizeof(void *));
    b->nodes[b->nnodes++] = n;
    return n;
}

Onnx__AttributeProto *mb_attr(mb *b, Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType t) {
    Onnx__AttributeProto *a = mb_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = mb_str(b, name);
    a->has_type = 1;
    a->type = t;
    n->attribute[n->n_attribute++] = a;
    return a;
}

void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = mb_alloc(b, (size_t)cnt * sizeof(int64_t));
    memcpy(a->ints, v, (size_t)cnt * sizeof(int64_t));
    a->n_ints = (size_t)cnt;
}

void mb_attr_int(mb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void mb_attr_str(mb *b, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)mb_str(b, v);
    a->s.len = strlen(v);
}

// Float initializer with random values (typed float_data field).
void mb_init_f(mb *b, const char *name, int rank, const int64_t *dims) {
    Onnx__TensorProto *t = mb_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(b, name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->dims = mb_alloc(b, (size_t)rank * sizeof(int64_t));
    memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    t->n_dims = (size_t)rank;
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    t->float_data = mb_alloc(b, n * sizeof(float));
    for (size_t i = 0; i < n; i++) t->float_data[i] = cd_test_randf(0.5f, 1.5f) * (i % 2 ? 1 : -1) * 0.3f;
    t->n_float_data = n;
    b->inits[b->ninits++] = t;
}

// int64 initializer in raw_data (little-endian bytes).
void mb_init_i(mb *b, const char *name, int n, const int64_t *v, int scalar) {
    Onnx__TensorProto *t = mb_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(b, name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    if (!scalar) {
        t->dims = mb_alloc(b, sizeof(int64_t));
        t->dims[0] = n;
        t->n_dims = 1;
    }
    t->has_raw_data = 1;
    t->raw_data.data = mb_alloc(b, (size_t)n * 8);
    memcpy(t->raw_data.data, v, (size_t)n * 8);
    t->raw_data.len = (size_t)n * 8;
    b->inits[b->ninits++] = t;
}

Onnx__ValueInfoProto *mb_vinfo(mb *b, const char *name, int rank, const int64_t *dims) {
    Onnx__ValueInfoProto *v = mb_alloc(b, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = mb_str(b, name);
    Onnx__TypeProto *tp = mb_alloc(b, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = mb_alloc(b, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    if (rank > 0) {
        Onnx__TensorShapeProto *sp = mb_alloc(b, sizeof *sp);
        onnx__tensor_shape_proto__init(sp);
        sp->dim = mb_alloc(b, (size_t)rank * sizeof(void *));
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = mb_alloc(b, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (i == 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = mb_str(b, "N");
            } else {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            }
            sp->dim[i] = d;
        }
        sp->n_dim = (size_t)rank;
        tt->shape = sp;
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->type = tp;
    return v;
}

void mb_input(mb *b, const char *name, int rank, const int64_t *dims) {
    b->ins[b->nins++] = mb_vinfo(b, name, rank, dims);
}
void mb_output(mb *b, const char *name) { b->outs[b->nouts++] = mb_vinfo(b, name, 0, NULL); }

// Serialises the model to a temporary file; returns its path (buffer).
const char *mb_write(mb *b, int opset) {
    Onnx__OperatorSetIdProto os;
    onnx__operator_set_id_proto__init(&os);
    os.domain = (char *)"";
    os.has_version = 1;
    os.version = opset;
    Onnx__OperatorSetIdProto *osp = &os;
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = (char *)"t";
    g.node = b->nodes;
    g.n_node = (size_t)b->nnodes;
    g.initializer = b->inits;
    g.n_initializer = (size_t)b->ninits;
    g.input = b->ins;
    g.n_input = (size_t)b->nins;
    g.output = b->outs;
    g.n_output = (size_t)b->nouts;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.opset_import = &osp;
    m.n_opset_import = 1;
    m.graph = &g;
    size_t len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(len);
    onnx__model_proto__pack(&m, buf);
    static char path[64]; // one model at a time per test process
    snprintf(path, sizeof path, "/tmp/cd-test-model-%d.onnx", (int)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
    return path;
}

const char *mb_write_small_cnn(char *path, size_t len, int max_groups, int *c_out, int *h_out) {
    mb b = {0};
    int g = max_groups > 1 ? cd_test_randi(1, max_groups) : 1;
    int c = g * cd_test_randi(1, 8), k1 = g * cd_test_randi(1, 24), k2 = cd_test_randi(1, 12);
    int h = cd_test_randi(3, 29), r = cd_test_randi(0, 1) ? 3 : 1;
    int64_t xs[4] = {1, c, h, h}, w1[4] = {k1, c / g, r, r}, b1[1] = {k1}, w2[4] = {k2, k1, 1, 1};
    int64_t pads[4] = {r / 2, r / 2, r / 2, r / 2};
    Onnx__NodeProto *conv = mb_node(&b, "Conv", "x", "w1", "b1", "c1");
    mb_attr_ints(&b, conv, "pads", 4, pads);
    if (g > 1) mb_attr_int(&b, conv, "group", g);
    mb_node(&b, "Relu", "c1", NULL, NULL, "r1");
    mb_node(&b, "Conv", "r1", "w2", NULL, "y");
    mb_init_f(&b, "w1", 4, w1);
    mb_init_f(&b, "b1", 1, b1);
    mb_init_f(&b, "w2", 4, w2);
    mb_input(&b, "x", 4, xs);
    mb_output(&b, "y");
    snprintf(path, len, "%s", mb_write(&b, 13));
    mb_free(&b);
    if (c_out) *c_out = c;
    if (h_out) *h_out = h;
    return path;
}
