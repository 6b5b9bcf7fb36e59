// Whole-runtime tests on ONNX models built here with protobuf-c: static shape
// inference (auto_pad, strides, dilations, ceil_mode, Reshape 0/-1, folded
// Shape->Gather->Unsqueeze->Concat), batch consistency, BN folding, arena
// reuse, and load/run errors.

#include "onnx.pb-c.h"
#include "kernels/cpu/ref.h"
#include "proto/errors.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"

#include <pthread.h>
#include <unistd.h>

// ---- a tiny builder (every allocation is tracked and freed by mb_free) ----------

typedef struct {
    void *ptrs[4096];
    int n;
    Onnx__NodeProto *nodes[64];
    int nnodes;
    Onnx__TensorProto *inits[64];
    int ninits;
    Onnx__ValueInfoProto *ins[8], *outs[8];
    int nins, nouts;
} mb;

static void *mb_alloc(mb *b, size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p || b->n == 4096) abort();
    b->ptrs[b->n++] = p;
    return p;
}

static char *mb_str(mb *b, const char *s) {
    char *p = mb_alloc(b, strlen(s) + 1);
    strcpy(p, s);
    return p;
}

static void mb_free(mb *b) {
    for (int i = 0; i < b->n; i++) free(b->ptrs[i]);
    b->n = 0;
}

static Onnx__NodeProto *node(mb *b, const char *op, const char *in0, const char *in1, const char *in2, const char *out) {
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

static Onnx__AttributeProto *attr(mb *b, Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType t) {
    Onnx__AttributeProto *a = mb_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = mb_str(b, name);
    a->has_type = 1;
    a->type = t;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static void attr_ints(mb *b, Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v) {
    Onnx__AttributeProto *a = attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = mb_alloc(b, (size_t)cnt * sizeof(int64_t));
    memcpy(a->ints, v, (size_t)cnt * sizeof(int64_t));
    a->n_ints = (size_t)cnt;
}

static void attr_int(mb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void attr_str(mb *b, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)mb_str(b, v);
    a->s.len = strlen(v);
}

// Float initializer with random values (typed float_data field).
static void init_f(mb *b, const char *name, int rank, const int64_t *dims) {
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
static void init_i(mb *b, const char *name, int n, const int64_t *v, int scalar) {
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

static Onnx__ValueInfoProto *vinfo(mb *b, const char *name, int rank, const int64_t *dims) {
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

static void input(mb *b, const char *name, int rank, const int64_t *dims) { b->ins[b->nins++] = vinfo(b, name, rank, dims); }
static void output(mb *b, const char *name) { b->outs[b->nouts++] = vinfo(b, name, 0, NULL); }

// Serialises the model to a temporary file; returns its path (static buffer).
static const char *mb_write(mb *b, int opset) {
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
    static char path[64];
    snprintf(path, sizeof path, "/tmp/cd-test-model-%d.onnx", (int)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
    return path;
}

static float *rbuf(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = cd_test_randf(-1, 1);
    return p;
}

static int64_t item_numel(const cd_io_desc *d) {
    int64_t n = 1;
    for (int i = 1; i < d->rank; i++) n *= d->shape[i];
    return n;
}

// Runs batch items at once and one at a time: the results must agree (the
// arena is laid out per item and nothing leaks between items).
static void check_batch_consistency(cd_model *m, int batch) {
    const cd_io_desc *in = cd_model_input(m, 0), *out = cd_model_output(m, 0);
    int64_t ni = item_numel(in), no = item_numel(out);
    float *x = rbuf((size_t)(ni * batch)), *y = calloc((size_t)(no * batch), 4), *y1 = calloc((size_t)no, 4);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(m, &ex), 0);
    char err[256];
    const void *ins[1] = {x};
    void *outs[1] = {y};
    CHECK_EQ(cd_model_run(ex, batch, ins, outs, err, sizeof err), 0);
    for (int b = 0; b < batch; b++) {
        const void *i1[1] = {x + b * ni};
        void *o1[1] = {y1};
        CHECK_EQ(cd_model_run(ex, 1, i1, o1, err, sizeof err), 0);
        CHECK_CLOSE_F32(y1, y + b * no, (size_t)no, 1e-5);
    }
    cd_exec_free(ex);
    free(x), free(y), free(y1);
}

static int same_up(int in, int s) { return (in + s - 1) / s; }

CD_TEST(model_shape_inference_auto_pad_dilation_ceil) {
    mb b = {0};
    int c = cd_test_randi(1, 12), h = cd_test_randi(9, 21), w = cd_test_randi(9, 21), k = cd_test_randi(1, 20);
    int64_t xs[4] = {1, c, h, w}, ws[4] = {k, c, 3, 3}, bs[1] = {k};
    input(&b, "x", 4, xs);
    init_f(&b, "w", 4, ws);
    init_f(&b, "b", 1, bs);
    Onnx__NodeProto *cv = node(&b, "Conv", "x", "w", "b", "c1");
    attr_str(&b, cv, "auto_pad", "SAME_UPPER");
    attr_ints(&b, cv, "strides", 2, (int64_t[]){2, 2});
    int64_t ws2[4] = {k, k, 3, 3};
    init_f(&b, "w2", 4, ws2);
    Onnx__NodeProto *cv2 = node(&b, "Conv", "c1", "w2", NULL, "c2");
    attr_ints(&b, cv2, "dilations", 2, (int64_t[]){2, 1});
    attr_ints(&b, cv2, "pads", 4, (int64_t[]){1, 0, 2, 1});
    Onnx__NodeProto *mp = node(&b, "MaxPool", "c2", NULL, NULL, "p");
    attr_ints(&b, mp, "kernel_shape", 2, (int64_t[]){2, 2});
    attr_ints(&b, mp, "strides", 2, (int64_t[]){2, 2});
    attr_int(&b, mp, "ceil_mode", 1);
    output(&b, "p");
    const char *path = mb_write(&b, 13);
    cd_model *m;
    char err[512];
    cd_model_opts opts = {.max_batch = 4};
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    int h1 = same_up(h, 2), w1 = same_up(w, 2);
    int h2 = (h1 + 1 + 2 - (2 * 2 + 1)) / 1 + 1, w2 = (w1 + 0 + 1 - 3) + 1;
    int h3 = (h2 - 2 + 1) / 2 + 1, w3 = (w2 - 2 + 1) / 2 + 1; // ceil((x - 2) / 2) + 1
    const cd_io_desc *o = cd_model_output(m, 0);
    CHECK_EQ(o->rank, 4);
    CHECK_EQ(o->shape[1], k);
    CHECK_EQ(o->shape[2], h3);
    CHECK_EQ(o->shape[3], w3);
    check_batch_consistency(m, cd_test_randi(2, 4));
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    CHECK_EQ(s.flops, 2LL * k * c * 9 * h1 * w1 + 2LL * k * k * 9 * h2 * w2);
    CHECK_EQ(s.params, (int64_t)k * c * 9 + k + (int64_t)k * k * 9);
    cd_model_free(m);
    unlink(path);
    mb_free(&b);
}

CD_TEST(model_shape_subgraph_folds_into_reshape) {
    // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): a flatten
    // written the way PyTorch exports x.view(x.size(0), -1).
    mb b = {0};
    int c = cd_test_randi(1, 6), h = cd_test_randi(1, 6), w = cd_test_randi(1, 6);
    int64_t xs[4] = {1, c, h, w};
    input(&b, "x", 4, xs);
    node(&b, "Shape", "x", NULL, NULL, "s");
    init_i(&b, "zero", 1, (int64_t[]){0}, 1);
    node(&b, "Gather", "s", "zero", NULL, "n");
    init_i(&b, "ax", 1, (int64_t[]){0}, 0);
    node(&b, "Unsqueeze", "n", "ax", NULL, "n1");
    init_i(&b, "m1", 1, (int64_t[]){-1}, 0);
    Onnx__NodeProto *cc = node(&b, "Concat", "n1", "m1", NULL, "shape");
    attr_int(&b, cc, "axis", 0);
    node(&b, "Reshape", "x", "shape", NULL, "flat");
    node(&b, "Relu", "flat", NULL, NULL, "y");
    output(&b, "y");
    const char *path = mb_write(&b, 13);
    cd_model *m;
    char err[512];
    cd_model_opts opts = {.max_batch = 3};
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    const cd_io_desc *o = cd_model_output(m, 0);
    CHECK_EQ(o->rank, 2);
    CHECK_EQ(o->shape[1], (int64_t)c * h * w);
    CHECK_EQ(cd_model_num_layers(m), 1); // only the Relu computes
    int batch = 3;
    size_t n = (size_t)batch * c * h * w;
    float *x = rbuf(n), *y = calloc(n, 4);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(m, &ex), 0);
    const void *ins[1] = {x};
    void *outs[1] = {y};
    CHECK_EQ(cd_model_run(ex, batch, ins, outs, err, sizeof err), 0);
    for (size_t i = 0; i < n; i++) CHECK(y[i] == (x[i] > 0 ? x[i] : 0));
    cd_exec_free(ex);
    cd_model_free(m);
    free(x), free(y);
    unlink(path);
    mb_free(&b);
}

CD_TEST(model_bn_folds_into_conv_and_relu_fuses) {
    mb b = {0};
    int c = cd_test_randi(1, 8), k = cd_test_randi(1, 8), h = cd_test_randi(3, 9);
    int64_t xs[4] = {1, c, h, h}, ws[4] = {k, c, 1, 1}, ks[1] = {k};
    input(&b, "x", 4, xs);
    init_f(&b, "w", 4, ws);
    node(&b, "Conv", "x", "w", NULL, "c");
    init_f(&b, "g", 1, ks);
    init_f(&b, "be", 1, ks);
    init_f(&b, "mu", 1, ks);
    init_f(&b, "var", 1, ks);
    for (int i = 0; i < b.ninits; i++)
        if (strcmp(b.inits[i]->name, "var") == 0)
            for (int j = 0; j < k; j++) b.inits[i]->float_data[j] = fabsf(b.inits[i]->float_data[j]) + 0.1f;
    Onnx__NodeProto *bn = node(&b, "BatchNormalization", "c", "g", "be", "bn");
    bn->input[3] = mb_str(&b, "mu");
    bn->input[4] = mb_str(&b, "var");
    bn->n_input = 5;
    node(&b, "Relu", "bn", NULL, NULL, "y");
    output(&b, "y");
    const char *path = mb_write(&b, 13);
    cd_model *m;
    char err[512];
    int rc = cd_model_load(path, NULL, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    CHECK_EQ(cd_model_num_layers(m), 1);
    cd_layer_info li;
    cd_model_layer(m, 0, &li);
    CHECK_STREQ(li.op, "Conv+BN+Relu");
    CHECK_EQ(li.flops, 2LL * k * c * h * h);
    // Against conv -> BN -> relu by hand.
    const float *W = NULL, *G = NULL, *Be = NULL, *Mu = NULL, *V = NULL;
    for (int i = 0; i < b.ninits; i++) {
        const char *nm = b.inits[i]->name;
        const float *d = b.inits[i]->float_data;
        if (!strcmp(nm, "w")) W = d;
        if (!strcmp(nm, "g")) G = d;
        if (!strcmp(nm, "be")) Be = d;
        if (!strcmp(nm, "mu")) Mu = d;
        if (!strcmp(nm, "var")) V = d;
    }
    size_t hw = (size_t)h * h;
    float *x = rbuf((size_t)c * hw), *y = calloc((size_t)k * hw, 4), *want = calloc((size_t)k * hw, 4);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(m, &ex), 0);
    const void *ins[1] = {x};
    void *outs[1] = {y};
    CHECK_EQ(cd_model_run(ex, 1, ins, outs, err, sizeof err), 0);
    for (int kk = 0; kk < k; kk++)
        for (size_t p = 0; p < hw; p++) {
            double acc = 0;
            for (int cc = 0; cc < c; cc++) acc += (double)W[kk * c + cc] * x[cc * hw + p];
            double v = (acc - Mu[kk]) / sqrt((double)V[kk] + 1e-5) * G[kk] + Be[kk];
            want[kk * hw + p] = v > 0 ? (float)v : 0.0f;
        }
    CHECK_CLOSE_F32(y, want, (size_t)k * hw, 1e-4);
    cd_exec_free(ex);
    cd_model_free(m);
    free(x), free(y), free(want);
    unlink(path);
    mb_free(&b);
}

CD_TEST(model_arena_reuses_chain_buffers) {
    // x -> Relu -> Sigmoid -> Relu -> Sigmoid ... (no fusion between
    // activations): only two tensors are alive at any step.
    mb b = {0};
    int c = cd_test_randi(1, 16), h = cd_test_randi(2, 16), steps = cd_test_randi(4, 10), mb_ = cd_test_randi(1, 4);
    int64_t xs[4] = {1, c, h, h};
    input(&b, "x", 4, xs);
    char prev[16] = "x", cur[16];
    for (int i = 0; i < steps; i++) {
        snprintf(cur, sizeof cur, "t%d", i);
        node(&b, i % 2 ? "Sigmoid" : "Relu", prev, NULL, NULL, cur);
        strcpy(prev, cur);
    }
    output(&b, prev);
    const char *path = mb_write(&b, 13);
    cd_model *m;
    char err[512];
    cd_model_opts opts = {.max_batch = mb_};
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    int64_t one = ((int64_t)mb_ * c * h * h * 4 + 63) / 64 * 64;
    CHECK_EQ(s.nlayers, steps);
    CHECK(s.activation_bytes <= 2 * one);
    CHECK(s.activation_bytes >= 2 * (int64_t)mb_ * c * h * h * 4);
    check_batch_consistency(m, mb_);
    cd_model_free(m);
    unlink(path);
    mb_free(&b);
}

CD_TEST(model_run_rejects_bad_batch) {
    mb b = {0};
    int64_t xs[4] = {1, 2, 3, 3};
    input(&b, "x", 4, xs);
    node(&b, "Relu", "x", NULL, NULL, "y");
    output(&b, "y");
    const char *path = mb_write(&b, 13);
    cd_model *m;
    char err[512];
    cd_model_opts opts = {.max_batch = 2};
    CHECK_EQ(cd_model_load(path, &opts, &m, err, sizeof err), 0);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(m, &ex), 0);
    float x[54] = {0}, y[54];
    const void *ins[1] = {x};
    void *outs[1] = {y};
    CHECK_EQ(cd_model_run(ex, 0, ins, outs, err, sizeof err), CD_ESHAPE);
    CHECK_EQ(cd_model_run(ex, 3, ins, outs, err, sizeof err), CD_ESHAPE);
    CHECK(strstr(err, "batch 3") != NULL);
    CHECK_EQ(cd_model_run(ex, 2, ins, outs, err, sizeof err), 0);
    CHECK_STREQ(cd_model_input(m, 0)->name, "x");
    CHECK(cd_model_input(m, 1) == NULL);
    cd_exec_free(ex);
    cd_model_free(m);
    unlink(path);
    mb_free(&b);
}

CD_TEST(model_load_errors_name_the_problem) {
    char err[512];
    cd_model *m = (cd_model *)1;
    CHECK_EQ(cd_model_load("/nonexistent/x.onnx", NULL, &m, err, sizeof err), CD_EIO);
    CHECK(m == NULL);
    mb b = {0};
    int64_t xs[4] = {1, 2, 3, 3};
    input(&b, "x", 4, xs);
    node(&b, "NonMaxSuppression", "x", NULL, NULL, "y");
    output(&b, "y");
    const char *path = mb_write(&b, 13);
    CHECK_EQ(cd_model_load(path, NULL, &m, err, sizeof err), CD_EUNSUPPORTED);
    CHECK(strstr(err, "NonMaxSuppression") && strstr(err, "'y'"));
    // The same graph at opset 10: the opset is rejected first.
    path = mb_write(&b, 10);
    CHECK_EQ(cd_model_load(path, NULL, &m, err, sizeof err), CD_EUNSUPPORTED);
    CHECK(strstr(err, "opset 10") != NULL);
    cd_model_opts opts = {.max_batch = 0x7fffffff};
    CHECK_EQ(cd_model_load(path, &opts, &m, err, sizeof err), CD_EPARAMS);
    unlink(path);
    mb_free(&b);
    // A node reading a value nobody produces.
    mb b2 = {0};
    input(&b2, "x", 4, xs);
    node(&b2, "Add", "x", "ghost", NULL, "y");
    output(&b2, "y");
    path = mb_write(&b2, 13);
    CHECK_EQ(cd_model_load(path, NULL, &m, err, sizeof err), CD_EMODEL);
    CHECK(strstr(err, "ghost") != NULL);
    unlink(path);
    mb_free(&b2);
}

typedef struct {
    cd_model *m;
    int batch;
    const float *x;
    float *y;
    int rc;
} runner;

static void *run_many(void *arg) {
    runner *r = arg;
    cd_exec *ex;
    r->rc = cd_exec_init(r->m, &ex);
    char err[256];
    const void *ins[1] = {r->x};
    void *outs[1] = {r->y};
    for (int i = 0; i < 20 && !r->rc; i++) r->rc = cd_model_run(ex, r->batch, ins, outs, err, sizeof err);
    cd_exec_free(ex);
    return NULL;
}

CD_TEST(model_concurrent_execs_share_one_model) {
    // Two threads, each with its own cd_exec, run the same model at different
    // batch sizes; each must get what a lone run gives.
    mb b = {0};
    int c = cd_test_randi(2, 16), h = cd_test_randi(4, 12), k = cd_test_randi(2, 24);
    int64_t xs[4] = {1, c, h, h}, ws[4] = {k, c, 3, 3}, ws2[4] = {k, 1, 3, 3};
    input(&b, "x", 4, xs);
    init_f(&b, "w", 4, ws);
    Onnx__NodeProto *cv = node(&b, "Conv", "x", "w", NULL, "c1");
    attr_ints(&b, cv, "pads", 4, (int64_t[]){1, 1, 1, 1});
    node(&b, "Relu", "c1", NULL, NULL, "r1");
    init_f(&b, "w2", 4, ws2);
    Onnx__NodeProto *dw = node(&b, "Conv", "r1", "w2", NULL, "c2");
    attr_ints(&b, dw, "pads", 4, (int64_t[]){1, 1, 1, 1});
    attr_int(&b, dw, "group", k);
    node(&b, "Add", "c2", "r1", NULL, "y");
    output(&b, "y");
    const char *path = mb_write(&b, 13);
    cd_model *m;
    char err[512];
    cd_model_opts opts = {.max_batch = 4};
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    size_t item_in = (size_t)c * h * h, item_out = (size_t)k * h * h;
    runner r[2];
    float *want[2];
    for (int t = 0; t < 2; t++) {
        r[t] = (runner){m, t ? 4 : 1, rbuf(item_in * 4), calloc(item_out * 4, 4), 0};
        want[t] = calloc(item_out * 4, 4);
        runner lone = r[t];
        lone.y = want[t];
        run_many(&lone);
        CHECK_EQ(lone.rc, 0);
    }
    pthread_t th[2];
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, run_many, &r[t]);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) {
        CHECK_EQ(r[t].rc, 0);
        CHECK_CLOSE_F32(r[t].y, want[t], item_out * (size_t)r[t].batch, 1e-6);
        free((void *)r[t].x), free(r[t].y), free(want[t]);
    }
    cd_model_free(m);
    unlink(path);
    mb_free(&b);
}
