// cd_model_submit / cd_model_wait (runtime.h): two execs of one model used
// alternately as a double buffer (batch i+1 submitted before batch i is
// waited for) give the outputs of cd_model_run, on the cpu and the hip-emu
// backends; the caller's inputs are free once submit returns; misuse (two
// submits, a wait with nothing pending, a failed submit) leaves the exec
// usable; freeing an exec with a run pending is clean.

#include "onnx.pb-c.h"
#include "proto/errors.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"

#include <unistd.h>

// ---- a tiny model: x -> Conv kxk (pad) -> Relu -> Conv 1x1 -> y ---------------

typedef struct {
    void *ptrs[256];
    int n;
} arena;

static void *aalloc(arena *a, size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p || a->n == 256) abort();
    a->ptrs[a->n++] = p;
    return p;
}

static char *astr(arena *a, const char *s) {
    char *p = aalloc(a, strlen(s) + 1);
    strcpy(p, s);
    return p;
}

static Onnx__NodeProto *node(arena *a, const char *op, const char *in0, const char *in1, const char *in2,
                             const char *out) {
    Onnx__NodeProto *n = aalloc(a, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = astr(a, op);
    n->name = astr(a, out);
    const char *ins[3] = {in0, in1, in2};
    n->input = aalloc(a, 3 * sizeof(char *));
    for (int i = 0; i < 3 && ins[i]; i++) n->input[n->n_input++] = astr(a, ins[i]);
    n->output = aalloc(a, sizeof(char *));
    n->output[0] = astr(a, out);
    n->n_output = 1;
    return n;
}

static void attr_pads(arena *a, Onnx__NodeProto *n, int p) {
    Onnx__AttributeProto *at = aalloc(a, sizeof *at);
    onnx__attribute_proto__init(at);
    at->name = astr(a, "pads");
    at->has_type = 1;
    at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    at->ints = aalloc(a, 4 * sizeof(int64_t));
    for (int i = 0; i < 4; i++) at->ints[i] = p;
    at->n_ints = 4;
    n->attribute = aalloc(a, sizeof(void *));
    n->attribute[0] = at;
    n->n_attribute = 1;
}

static Onnx__TensorProto *weights(arena *a, const char *name, int rank, const int64_t *dims) {
    Onnx__TensorProto *t = aalloc(a, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = astr(a, name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->dims = aalloc(a, (size_t)rank * sizeof(int64_t));
    memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    t->n_dims = (size_t)rank;
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    t->float_data = aalloc(a, n * sizeof(float));
    for (size_t i = 0; i < n; i++) t->float_data[i] = cd_test_randf(-0.5f, 0.5f);
    t->n_float_data = n;
    return t;
}

static Onnx__ValueInfoProto *vinfo(arena *a, const char *name, int rank, const int64_t *dims) {
    Onnx__ValueInfoProto *v = aalloc(a, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = astr(a, name);
    Onnx__TypeProto *tp = aalloc(a, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = aalloc(a, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    if (rank > 0) {
        Onnx__TensorShapeProto *sp = aalloc(a, sizeof *sp);
        onnx__tensor_shape_proto__init(sp);
        sp->dim = aalloc(a, (size_t)rank * sizeof(void *));
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = aalloc(a, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (i == 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = astr(a, "N");
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

// Writes the model with random sizes to a temporary file; returns its path.
static const char *write_model(char *path, size_t len) {
    arena a = {0};
    int c = cd_test_randi(1, 8), k1 = cd_test_randi(1, 24), k2 = cd_test_randi(1, 12), h = cd_test_randi(3, 17);
    int r = cd_test_randi(0, 1) ? 3 : 1;
    int64_t xs[4] = {1, c, h, h}, w1[4] = {k1, c, r, r}, b1[1] = {k1}, w2[4] = {k2, k1, 1, 1};
    Onnx__NodeProto *nodes[3];
    nodes[0] = node(&a, "Conv", "x", "w1", "b1", "c1");
    attr_pads(&a, nodes[0], r / 2);
    nodes[1] = node(&a, "Relu", "c1", NULL, NULL, "r1");
    nodes[2] = node(&a, "Conv", "r1", "w2", NULL, "y");
    Onnx__TensorProto *inits[3] = {weights(&a, "w1", 4, w1), weights(&a, "b1", 1, b1), weights(&a, "w2", 4, w2)};
    Onnx__ValueInfoProto *ins[1] = {vinfo(&a, "x", 4, xs)}, *outs[1] = {vinfo(&a, "y", 0, NULL)};
    Onnx__OperatorSetIdProto os;
    onnx__operator_set_id_proto__init(&os);
    os.domain = (char *)"";
    os.has_version = 1;
    os.version = 13;
    Onnx__OperatorSetIdProto *osp = &os;
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = (char *)"submit";
    g.node = nodes;
    g.n_node = 3;
    g.initializer = inits;
    g.n_initializer = 3;
    g.input = ins;
    g.n_input = 1;
    g.output = outs;
    g.n_output = 1;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.opset_import = &osp;
    m.n_opset_import = 1;
    m.graph = &g;
    size_t n = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(n);
    CHECK(buf != NULL);
    onnx__model_proto__pack(&m, buf);
    snprintf(path, len, "/tmp/cd-test-submit-%d.onnx", (int)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
    for (int i = 0; i < a.n; i++) free(a.ptrs[i]);
    return path;
}

static int64_t item_numel(const cd_io_desc *d) {
    int64_t n = 1;
    for (int i = 1; i < d->rank; i++) n *= d->shape[i];
    return n;
}

// Loads a random model on `device`, then runs `nb` random batches through two
// execs alternately, each submitted before the previous one is waited for,
// and compares every output with cd_model_run on a third exec.
static void check_double_buffer(const char *device) {
    char path[64], err[512];
    write_model(path, sizeof path);
    int max_batch = cd_test_randi(1, 5);
    cd_model_opts opts = {.max_batch = max_batch, .device = device};
    cd_model *m;
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load on %s: %s", device, err);
    unlink(path);
    int64_t ni = item_numel(cd_model_input(m, 0)), no = item_numel(cd_model_output(m, 0));
    enum { NB = 7 };
    int batch[NB];
    float *x[NB], *xkeep[NB], *y[NB], *ref = malloc((size_t)(no * max_batch) * sizeof(float));
    for (int i = 0; i < NB; i++) {
        batch[i] = cd_test_randi(1, max_batch);
        size_t nx = (size_t)(ni * batch[i]);
        x[i] = malloc(nx * sizeof(float));
        xkeep[i] = malloc(nx * sizeof(float));
        for (size_t j = 0; j < nx; j++) x[i][j] = xkeep[i][j] = cd_test_randf(-1, 1);
        y[i] = malloc((size_t)(no * batch[i]) * sizeof(float));
        for (int64_t j = 0; j < no * batch[i]; j++) y[i][j] = NAN; // must all be written
    }
    cd_exec *ex[2], *rex;
    CHECK_EQ(cd_exec_init(m, &ex[0]), 0);
    CHECK_EQ(cd_exec_init(m, &ex[1]), 0);
    CHECK_EQ(cd_exec_init(m, &rex), 0);
    const void *in0[1] = {x[0]};
    void *out0[1] = {y[0]};
    CHECK_EQ(cd_model_submit(ex[0], batch[0], in0, out0, err, sizeof err), 0);
    memset(x[0], 0xff, (size_t)(ni * batch[0]) * sizeof(float)); // the input is the caller's again
    for (int i = 0; i < NB; i++) {
        if (i + 1 < NB) {
            const void *in[1] = {x[i + 1]};
            void *out[1] = {y[i + 1]};
            CHECK_EQ(cd_model_submit(ex[(i + 1) % 2], batch[i + 1], in, out, err, sizeof err), 0);
            memset(x[i + 1], 0xff, (size_t)(ni * batch[i + 1]) * sizeof(float));
        }
        CHECK_EQ(cd_model_wait(ex[i % 2], err, sizeof err), 0);
        const void *rin[1] = {xkeep[i]};
        void *rout[1] = {ref};
        CHECK_EQ(cd_model_run(rex, batch[i], rin, rout, err, sizeof err), 0);
        CHECK_CLOSE_F32(y[i], ref, (size_t)(no * batch[i]), 1e-5);
    }
    // Misuse: a second submit while one is pending, a wait with nothing
    // pending, a failing submit (bad batch) leaves nothing pending.
    CHECK_EQ(cd_model_submit(ex[0], batch[0], (const void *const *)&xkeep[0], (void *const *)&y[0], err, sizeof err), 0);
    CHECK_EQ(cd_model_submit(ex[0], batch[0], (const void *const *)&xkeep[0], (void *const *)&y[0], err, sizeof err),
             CD_EPARAMS);
    CHECK_EQ(cd_model_run(ex[0], batch[0], (const void *const *)&xkeep[0], (void *const *)&y[0], err, sizeof err),
             CD_EPARAMS);
    CHECK_EQ(cd_model_wait(ex[0], err, sizeof err), 0);
    CHECK_EQ(cd_model_wait(ex[0], err, sizeof err), CD_EPARAMS);
    CHECK(strstr(err, "nothing") != NULL || strstr(err, "no submitted") != NULL);
    CHECK_EQ(cd_model_submit(ex[1], max_batch + 1, (const void *const *)&xkeep[0], (void *const *)&y[0], err,
                             sizeof err),
             CD_ESHAPE);
    CHECK_EQ(cd_model_wait(ex[1], err, sizeof err), CD_EPARAMS);
    const void *none[1] = {NULL};
    CHECK_EQ(cd_model_submit(ex[1], 1, none, (void *const *)&y[0], err, sizeof err), CD_EPARAMS);
    CHECK_EQ(cd_model_wait(ex[1], err, sizeof err), CD_EPARAMS);
    // Both execs still work, and one is freed with a run pending.
    CHECK_EQ(cd_model_run(ex[1], batch[1], (const void *const *)&xkeep[1], (void *const *)&y[1], err, sizeof err), 0);
    CHECK_EQ(cd_model_run(rex, batch[1], (const void *const *)&xkeep[1], (void *const *)&ref, err, sizeof err), 0);
    CHECK_CLOSE_F32(y[1], ref, (size_t)(no * batch[1]), 1e-5);
    CHECK_EQ(cd_model_submit(ex[0], batch[2], (const void *const *)&xkeep[2], (void *const *)&y[2], err, sizeof err), 0);
    cd_exec_free(ex[0]);
    cd_exec_free(ex[1]);
    cd_exec_free(rex);
    cd_model_free(m);
    for (int i = 0; i < NB; i++) free(x[i]), free(xkeep[i]), free(y[i]);
    free(ref);
}

CD_TEST(runtime_submit_wait_double_buffer_cpu) { check_double_buffer("cpu"); }

CD_TEST(runtime_submit_wait_double_buffer_hip_emu) { check_double_buffer("hip-emu"); }
