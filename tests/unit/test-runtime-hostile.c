// Hostile model files against the loader and the lowering, driven directly:
// int64 constant folding at its edges (overflow, INT64_MIN / -1, division by
// zero), integer broadcasts, the node cap and the time a graph at the cap
// takes to load (the topological sort and the arena are linear). Each case
// asserts the exact error code; the suite runs this binary under ASan/UBSan
// too (make SAN=1), where any undefined behaviour ends the test.

#include "core/checked.h"
#include "core/errors.h"
#include "core/limits.h"
#include "onnx.pb-c.h"
#include "runtime/graph.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/onnx-builder.h"

#include <stdint.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// x [N, 4] -> Relu -> y, plus c = op(a, b) on int64 initializers (folded at
// load even though nothing reads c). Returns the load's status; *c0 gets c[0].
static int fold(const char *op, int na, const int64_t *a, int nb, const int64_t *b, char *err, size_t errlen) {
    mb m = {0};
    mb_input(&m, "x", 2, (int64_t[]){1, 4});
    mb_init_i(&m, "a", na, a, 0);
    mb_init_i(&m, "b", nb, b, 0);
    mb_node(&m, op, "a", "b", NULL, "fold_c");
    mb_node(&m, "Relu", "x", NULL, NULL, "y");
    mb_output(&m, "y");
    const char *path = mb_write(&m, 13);
    cd_model *model = NULL;
    int rc = cd_model_load(path, NULL, &model, err, errlen);
    cd_model_free(model);
    unlink(path);
    mb_free(&m);
    return rc;
}

static void fold_fails(const char *op, int64_t x, int64_t y, int code) {
    char err[512] = "";
    int rc = fold(op, 1, &x, 1, &y, err, sizeof err);
    if (rc != code)
        CD_CHECK_FAIL_("%s(%lld, %lld): rc %d (%s), expected %d", op, (long long)x, (long long)y, rc, err, code);
    CHECK(strstr(err, "fold_c") != NULL); // the message names the node
}

CD_TEST(hostile_fold_div_int64_min_by_minus_one) {
    fold_fails("Div", INT64_MIN, -1, CD_EMODEL); // was SIGFPE
}

CD_TEST(hostile_fold_div_by_zero) {
    fold_fails("Div", 7, 0, CD_EMODEL);
    fold_fails("Div", INT64_MIN, 0, CD_EMODEL);
}

CD_TEST(hostile_fold_add_overflow) {
    fold_fails("Add", INT64_MAX, 1, CD_EMODEL);
    fold_fails("Add", INT64_MIN, -1, CD_EMODEL);
}

CD_TEST(hostile_fold_sub_overflow) {
    fold_fails("Sub", INT64_MIN, 1, CD_EMODEL);
    fold_fails("Sub", 0, INT64_MIN, CD_EMODEL);
}

CD_TEST(hostile_fold_mul_overflow) {
    fold_fails("Mul", INT64_MAX, 2, CD_EMODEL);
    fold_fails("Mul", INT64_MIN, -1, CD_EMODEL);
    fold_fails("Mul", (int64_t)1 << 32, (int64_t)1 << 31, CD_EMODEL);
}

CD_TEST(hostile_fold_mod_is_unsupported) {
    // There is no Mod in the supported ops: refused by name, before any arithmetic.
    fold_fails("Mod", INT64_MIN, -1, CD_EUNSUPPORTED);
}

CD_TEST(hostile_fold_edges_that_are_fine) {
    // Right at the edges nothing overflows: these load.
    char err[512];
    struct {
        const char *op;
        int64_t x, y;
    } ok[] = {{"Add", INT64_MAX, 0},  {"Add", INT64_MIN, INT64_MAX}, {"Sub", -1, INT64_MIN}, {"Mul", INT64_MIN, 1},
              {"Mul", -1, INT64_MAX}, {"Div", INT64_MIN, 1},         {"Div", INT64_MIN, 2},  {"Div", INT64_MAX, -1}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int rc = fold(ok[i].op, 1, &ok[i].x, 1, &ok[i].y, err, sizeof err);
        if (rc) CD_CHECK_FAIL_("%s(%lld, %lld): %s", ok[i].op, (long long)ok[i].x, (long long)ok[i].y, err);
    }
}

CD_TEST(hostile_fold_int_broadcast_to_new_shape) {
    // [2] (x) [3]: do not broadcast. [2,1] x [1,2] would index past both
    // operands if taken element by element: refused.
    char err[512];
    int64_t a[3] = {1, 2, 3};
    CHECK_EQ(fold("Add", 2, a, 3, a, err, sizeof err), CD_EMODEL);
    mb m = {0};
    mb_input(&m, "x", 2, (int64_t[]){1, 4});
    mb_init_i(&m, "a", 2, a, 0);
    mb_init_i(&m, "b", 2, a, 0);
    m.inits[0]->dims = mb_alloc(&m, 2 * sizeof(int64_t));
    m.inits[0]->dims[0] = 2;
    m.inits[0]->dims[1] = 1;
    m.inits[0]->n_dims = 2;
    m.inits[1]->dims = mb_alloc(&m, 2 * sizeof(int64_t));
    m.inits[1]->dims[0] = 1;
    m.inits[1]->dims[1] = 2;
    m.inits[1]->n_dims = 2;
    mb_node(&m, "Mul", "a", "b", NULL, "fold_c");
    mb_node(&m, "Relu", "x", NULL, NULL, "y");
    mb_output(&m, "y");
    const char *path = mb_write(&m, 13);
    cd_model *model = NULL;
    int rc = cd_model_load(path, NULL, &model, err, sizeof err);
    cd_model_free(model);
    unlink(path);
    mb_free(&m);
    CHECK_EQ(rc, CD_EUNSUPPORTED);
    CHECK(strstr(err, "fold_c") != NULL);
}

CD_TEST(hostile_checked_helpers) {
    int64_t r;
    size_t z;
    CHECK_EQ(cd_ck_mul_i64(INT64_MAX, 2, &r), 1);
    CHECK_EQ(cd_ck_add_i64(INT64_MAX, -1, &r), 0);
    CHECK_EQ(r, INT64_MAX - 1);
    CHECK_EQ(cd_ck_sub_i64(INT64_MIN, 1, &r), 1);
    CHECK_EQ(cd_ck_mul_size(SIZE_MAX / 2, 3, &z), 1);
    CHECK_EQ(cd_ck_align_size(SIZE_MAX - 2, 64, &z), 1);
    CHECK_EQ(cd_ck_align_size(65, 64, &z), 0);
    CHECK_EQ(z, 128);
    CHECK_EQ(cd_ck_bytes(-1, 4, &z), 1);
    CHECK_EQ(cd_ck_bytes((int64_t)1 << 62, 8, &z), 1);
    // Zero dims do not hide an overflowing product of the others.
    int64_t s1[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0};
    CHECK_EQ(cd_ck_shape_numel(3, s1, &r), 1);
    CHECK_EQ(cd_shape_numel(3, s1), -1);
    int64_t s2[3] = {(int64_t)1 << 40, 0, 5};
    CHECK_EQ(cd_ck_shape_numel(3, s2, &r), 0);
    CHECK_EQ(r, 0);
    int64_t s3[2] = {3, -1};
    CHECK_EQ(cd_shape_numel(2, s3), -1);
}

// Writes a chain x -> op -> op -> ... (n nodes) -> y with protobuf-c.
static const char *write_chain(int n, const char *op) {
    Onnx__NodeProto *nodes = calloc((size_t)n, sizeof *nodes);
    Onnx__NodeProto **np = calloc((size_t)n, sizeof *np);
    char(*names)[16] = calloc((size_t)n + 1, sizeof *names);
    char **ins = calloc((size_t)n, sizeof *ins), **outs = calloc((size_t)n, sizeof *outs);
    CHECK(nodes && np && names && ins && outs);
    snprintf(names[0], sizeof names[0], "x");
    for (int i = 0; i < n; i++) {
        snprintf(names[i + 1], sizeof names[i + 1], i == n - 1 ? "y" : "v%d", i + 1);
        onnx__node_proto__init(&nodes[i]);
        nodes[i].op_type = (char *)op;
        ins[i] = names[i];
        outs[i] = names[i + 1];
        nodes[i].input = &ins[i];
        nodes[i].n_input = 1;
        nodes[i].output = &outs[i];
        nodes[i].n_output = 1;
        np[i] = &nodes[i];
    }
    mb m = {0};
    mb_input(&m, "x", 2, (int64_t[]){1, 4});
    mb_output(&m, "y");
    // mb_write takes its nodes from the builder's fixed array: write by hand.
    Onnx__OperatorSetIdProto os;
    onnx__operator_set_id_proto__init(&os);
    os.domain = (char *)"";
    os.has_version = 1;
    os.version = 13;
    Onnx__OperatorSetIdProto *osp = &os;
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = (char *)"chain";
    g.node = np;
    g.n_node = (size_t)n;
    g.input = m.ins;
    g.n_input = 1;
    g.output = m.outs;
    g.n_output = 1;
    Onnx__ModelProto mp;
    onnx__model_proto__init(&mp);
    mp.has_ir_version = 1;
    mp.ir_version = 8;
    mp.opset_import = &osp;
    mp.n_opset_import = 1;
    mp.graph = &g;
    size_t len = onnx__model_proto__get_packed_size(&mp);
    uint8_t *buf = malloc(len);
    CHECK(buf != NULL);
    onnx__model_proto__pack(&mp, buf);
    static char path[64];
    snprintf(path, sizeof path, "/tmp/cd-test-chain-%d.onnx", (int)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
    mb_free(&m);
    free(nodes);
    free(np);
    free(names);
    free(ins);
    free(outs);
    return path;
}

// Loads a chain of n `op` nodes; returns the seconds the load took (it must
// succeed). The timings below are ratios between loads in the same process,
// so a loaded machine or a sanitizer build slows both sides alike.
static double chain_load_seconds(int n, const char *op) {
    const char *path = write_chain(n, op);
    char err[512];
    cd_model *m = NULL;
    double t0 = now_s();
    int rc = cd_model_load(path, NULL, &m, err, sizeof err);
    double dt = now_s() - t0;
    unlink(path);
    if (rc) CD_CHECK_FAIL_("load of a %d-node %s chain: %s", n, op, err);
    cd_model_free(m);
    return dt;
}

CD_TEST(hostile_million_node_chain_refused_fast) {
    const char *path = write_chain(1000000, "Identity");
    char err[512];
    cd_model *m = NULL;
    double t0 = now_s();
    int rc = cd_model_load(path, NULL, &m, err, sizeof err);
    double dt = now_s() - t0;
    unlink(path);
    cd_model_free(m);
    // Refused before any per-node work: faster than loading a chain of a
    // quarter of the cap (40x fewer nodes, each a layer) whole.
    const double quarter = chain_load_seconds(CD_MAX_MODEL_NODES / 4, "Relu");
    printf("1,000,000-node chain: %s in %.2f s (a %d-node Relu chain loads in %.2f s)\n", err, dt,
           CD_MAX_MODEL_NODES / 4, quarter);
    CHECK_EQ(rc, CD_ETOO_LARGE);
    CHECK(strstr(err, "nodes") != NULL);
    CHECK(dt < quarter);
}

CD_TEST(hostile_node_cap_chain_loads_in_linear_time) {
    // A Relu chain at the node cap: every node a layer with its own
    // activation, so the topological sort, lowering, planning and arena all
    // see CD_MAX_MODEL_NODES of them (each was quadratic once). Against an
    // eighth of it, measured here: linear work takes ~8x as long, quadratic
    // ~64x; the bound sits between with a wide margin either way.
    const double eighth = chain_load_seconds(CD_MAX_MODEL_NODES / 8, "Relu");
    const char *path = write_chain(CD_MAX_MODEL_NODES, "Relu");
    char err[512];
    cd_model *m = NULL;
    double t0 = now_s();
    int rc = cd_model_load(path, NULL, &m, err, sizeof err);
    double dt = now_s() - t0;
    unlink(path);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    printf("%d-node Relu chain loaded in %.2f s, %d nodes in %.2f s (x%.1f)\n", CD_MAX_MODEL_NODES, dt,
           CD_MAX_MODEL_NODES / 8, eighth, dt / eighth);
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    CHECK_EQ(s.nlayers, CD_MAX_MODEL_NODES);
    cd_model_free(m);
    CHECK(dt < 24 * eighth);
}
