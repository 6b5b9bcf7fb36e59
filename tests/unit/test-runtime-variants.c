// Input sizes other than the first plan's (runtime/variants.c): a model whose
// input has symbolic H and W gets a plan per size, built on first use,
// reused, bounded by max_shapes with the least recently used idle one
// dropped, never one in use; a size that cannot be planned fails alone; a
// build holds no lock that requests of a known size need.

#include "core/errors.h"
#include "onnx.pb-c.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/onnx-builder.h"

// x [N, c, H, W] -> Conv 3x3 (pads pad) -> Relu -> MaxPool 2x2 s2 -> Conv
// 1x1 -> y, with H and W symbolic (dim_param) when dynamic. With pad 0 an
// input under 3x3 cannot be planned (the conv's output would be empty).
typedef struct {
    mb b;
    int c, k;
    char path[96];
} test_model;

static void make_model(test_model *t, int pad) {
    memset(t, 0, sizeof *t);
    t->c = cd_test_randi(1, 6);
    t->k = cd_test_randi(1, 12);
    int64_t xs[4] = {1, t->c, 8, 8}, w1[4] = {t->k, t->c, 3, 3}, w2[4] = {3, t->k, 1, 1};
    mb *b = &t->b;
    Onnx__NodeProto *cv = mb_node(b, "Conv", "x", "w1", NULL, "c1");
    mb_attr_ints(b, cv, "pads", 4, (int64_t[]){pad, pad, pad, pad});
    mb_node(b, "Relu", "c1", NULL, NULL, "r1");
    Onnx__NodeProto *p = mb_node(b, "MaxPool", "r1", NULL, NULL, "p1");
    mb_attr_ints(b, p, "kernel_shape", 2, (int64_t[]){2, 2});
    mb_attr_ints(b, p, "strides", 2, (int64_t[]){2, 2});
    mb_node(b, "Conv", "p1", "w2", NULL, "y");
    mb_init_f(b, "w1", 4, w1);
    mb_init_f(b, "w2", 4, w2);
    mb_input(b, "x", 4, xs);
    mb_output(b, "y");
}

// Writes t's model with H and W symbolic (dynamic) or fixed at h x w.
static const char *write_model(test_model *t, int dynamic, int h, int w) {
    Onnx__TensorShapeProto *sp = t->b.ins[0]->type->tensor_type->shape;
    for (int k = 2; k < 4; k++) {
        Onnx__TensorShapeProto__Dimension *d = sp->dim[k];
        if (dynamic) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = mb_str(&t->b, k == 2 ? "H" : "W");
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = k == 2 ? h : w;
        }
    }
    snprintf(t->path, sizeof t->path, "%s", mb_write(&t->b, 13));
    return t->path;
}

static cd_model *load(const char *path, const char *shape, int max_shapes) {
    cd_model *m = NULL;
    char err[512];
    cd_model_opts opts = {.max_batch = 2, .input_shape = shape, .max_shapes = max_shapes};
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    return m;
}

// Per-item input shape [1, c, h, w] as cd_model_variant_get takes it.
typedef struct {
    int64_t s[CD_MAX_RANK];
    const int64_t *p[1];
} in_shape;

static const int64_t *const *shape_of(in_shape *x, int c, int h, int w) {
    memset(x, 0, sizeof *x);
    x->s[0] = 1, x->s[1] = c, x->s[2] = h, x->s[3] = w;
    x->p[0] = x->s;
    return x->p;
}

// Runs plan v on random input x (batch items) into y, allocated here.
static void run_plan(const cd_model *v, int batch, const float *x, float **y) {
    const cd_io_desc *o = cd_model_output(v, 0);
    size_t no = 1;
    for (int k = 1; k < o->rank; k++) no *= (size_t)o->shape[k];
    *y = calloc(no * (size_t)batch + 1, sizeof(float));
    cd_exec *ex;
    CHECK_EQ(cd_exec_take(v, &ex), 0);
    char err[256];
    const void *ins[1] = {x};
    void *outs[1] = {*y};
    int rc = cd_model_run(ex, batch, ins, outs, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("run: %s", err);
    cd_exec_give(ex);
}

static float *rand_input(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = cd_test_randf(-1, 1);
    return p;
}

// Sizes k of m's planned shapes: 1 when h x w is among them.
static int planned(const cd_model *m, int h, int w) {
    int64_t shapes[CD_MAX_SHAPES][CD_MAX_TENSORS][CD_MAX_RANK];
    int n = cd_model_planned_shapes(m, shapes, CD_MAX_SHAPES, NULL);
    for (int k = 0; k < n; k++)
        if (shapes[k][0][2] == h && shapes[k][0][3] == w) return 1;
    return 0;
}

CD_TEST(variants_built_reused_and_equal_to_a_static_plan) {
    test_model t;
    make_model(&t, 1);
    cd_model *m = load(write_model(&t, 1, 0, 0), "x=1x1x8x8", 0); // C given wrong: fixed dims keep the file's
    CHECK(cd_model_is_dynamic(m));
    const cd_io_desc *in = cd_model_input(m, 0);
    CHECK_EQ(in->dynamic, (1u << 2) | (1u << 3));
    CHECK_EQ(in->shape[1], t.c);
    CHECK_EQ(in->shape[2], 8);
    int h = 2 * cd_test_randi(3, 12), w = 2 * cd_test_randi(3, 12);
    if (h == 8 && w == 8) h = 10;
    in_shape a, a2;
    const cd_model *v = NULL, *v2 = NULL, *own = NULL;
    char err[256];
    CHECK_EQ(cd_model_variant_get(m, shape_of(&a, t.c, 8, 8), &own, err, sizeof err), 0);
    CHECK(own == m); // the first plan's own size
    CHECK_EQ(cd_model_variant_get(m, shape_of(&a, t.c, h, w), &v, err, sizeof err), 0);
    CHECK(v != m);
    CHECK_EQ(cd_model_output(v, 0)->shape[2], h / 2);
    CHECK_EQ(cd_model_output(v, 0)->shape[3], w / 2);
    CHECK_EQ(cd_model_variant_get(m, shape_of(&a2, t.c, h, w), &v2, err, sizeof err), 0);
    CHECK(v2 == v); // built once, reused
    CHECK(planned(m, 8, 8) && planned(m, h, w));
    // Equal to the same file with H and W fixed at h x w.
    size_t n = (size_t)t.c * h * w * 2;
    float *x = rand_input(n), *y = NULL, *want = NULL;
    run_plan(v, 2, x, &y);
    cd_model *s = load(write_model(&t, 0, h, w), NULL, 0);
    CHECK(!cd_model_is_dynamic(s));
    run_plan(s, 2, x, &want);
    CHECK_CLOSE_F32(y, want, (size_t)3 * (h / 2) * (w / 2) * 2, 1e-5);
    cd_model_variant_put(m, v);
    cd_model_variant_put(m, v2);
    int64_t bytes = 0, shapes[4][CD_MAX_TENSORS][CD_MAX_RANK];
    CHECK_EQ(cd_model_planned_shapes(m, shapes, 4, &bytes), 2);
    CHECK(bytes > 0);
    free(x), free(y), free(want);
    cd_model_free(s);
    cd_model_free(m);
    unlink(t.path);
    mb_free(&t.b);
}

CD_TEST(variants_bounded_lru_idle_evicted_never_one_in_use) {
    test_model t;
    make_model(&t, 1);
    cd_model *m = load(write_model(&t, 1, 0, 0), "1x1x8x8", 3); // the first plan + 2 more
    in_shape s;
    const cd_model *a, *b, *c, *d;
    char err[256];
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 10, 10), &a, err, sizeof err), 0); // held
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 12, 12), &b, err, sizeof err), 0);
    cd_model_variant_put(m, b); // idle
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 14, 14), &c, err, sizeof err), 0);
    CHECK(planned(m, 10, 10) && planned(m, 14, 14) && !planned(m, 12, 12)); // b went, a stayed
    // Both held: a fourth size is refused, and nothing is dropped.
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 16, 16), &d, err, sizeof err), CD_EOVERLOADED);
    CHECK(strstr(err, "max_shapes") != NULL);
    CHECK(planned(m, 10, 10) && planned(m, 14, 14));
    // a (used first) goes once idle, c stays though it was put later.
    cd_model_variant_put(m, c);
    cd_model_variant_put(m, a);
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 14, 14), &c, err, sizeof err), 0);
    cd_model_variant_put(m, c); // c used last
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 16, 16), &d, err, sizeof err), 0);
    CHECK(!planned(m, 10, 10) && planned(m, 14, 14) && planned(m, 16, 16) && planned(m, 8, 8));
    // Still right after all that: d runs.
    float *x = rand_input((size_t)t.c * 16 * 16), *y = NULL;
    run_plan(d, 1, x, &y);
    cd_model_variant_put(m, d);
    free(x), free(y);
    cd_model_free(m);
    unlink(t.path);
    mb_free(&t.b);
}

CD_TEST(variants_failing_size_leaves_the_others_working) {
    test_model t;
    make_model(&t, 0); // unpadded 3x3: a 2x2 input leaves the conv nothing
    cd_model *m = load(write_model(&t, 1, 0, 0), "1x1x8x8", 0);
    in_shape s;
    const cd_model *v = NULL, *bad = NULL;
    char err[512] = "";
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 12, 12), &v, err, sizeof err), 0);
    int rc = cd_model_variant_get(m, shape_of(&s, t.c, 2, 2), &bad, err, sizeof err);
    CHECK(rc < 0);
    CHECK(bad == NULL);
    CHECK(err[0] != '\0');
    CHECK(!planned(m, 2, 2)); // not kept: a later request tries again (and fails the same way)
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 2, 2), &bad, err, sizeof err), rc);
    // A fixed dim differs: refused before any build.
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c + 1, 12, 12), &bad, err, sizeof err), CD_ESHAPE);
    CHECK(strstr(err, "dim 1") != NULL);
    float *x = rand_input((size_t)t.c * 12 * 12), *y = NULL;
    run_plan(v, 1, x, &y);
    cd_model_variant_put(m, v);
    free(x), free(y);
    cd_model_free(m);
    unlink(t.path);
    mb_free(&t.b);
}

CD_TEST(variants_static_model_refuses_other_sizes) {
    test_model t;
    make_model(&t, 1);
    cd_model *m = load(write_model(&t, 0, 8, 8), "1x1x16x16", 0); // a size for a static model changes nothing
    CHECK(!cd_model_is_dynamic(m));
    CHECK_EQ(cd_model_input(m, 0)->dynamic, 0u);
    CHECK_EQ(cd_model_input(m, 0)->shape[2], 8);
    in_shape s;
    const cd_model *v;
    char err[256];
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 8, 8), &v, err, sizeof err), 0);
    CHECK(v == m);
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 10, 8), &v, err, sizeof err), CD_ESHAPE);
    CHECK(strstr(err, "dim 2 must be 8") != NULL);
    cd_model_free(m);
    unlink(t.path);
    mb_free(&t.b);
}

CD_TEST(variants_symbolic_dims_without_a_size_refused_at_load) {
    test_model t;
    make_model(&t, 1);
    cd_model *m = NULL;
    char err[512];
    CHECK_EQ(cd_model_load(write_model(&t, 1, 0, 0), NULL, &m, err, sizeof err), CD_EUNSUPPORTED);
    CHECK(strstr(err, "symbolic") && strstr(err, "'H'") && strstr(err, "input-shape"));
    cd_model_opts bad = {.input_shape = "x=1x3xHx8"};
    CHECK_EQ(cd_model_load(t.path, &bad, &m, err, sizeof err), CD_EPARAMS);
    cd_model_opts none = {.input_shape = "y=1x3x8x8"}; // names no input of the model
    CHECK_EQ(cd_model_load(t.path, &none, &m, err, sizeof err), CD_EUNSUPPORTED);
    unlink(t.path);
    mb_free(&t.b);
}

// The thread test: a build blocked in the hook until a known size's request
// has run to completion on another thread.
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int builds;     // hook calls
    int in_build;   // the builder is inside the hook
    int known_done; // the known-size request finished
} gate;

static gate g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static void gate_hook(void *ud, const cd_model *m) {
    (void)m;
    gate *g = ud;
    pthread_mutex_lock(&g->mu);
    g->builds++;
    g->in_build = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->known_done) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

typedef struct {
    const cd_model *m;
    int c, h, w;
    const cd_model *v;
    int rc;
} getter;

static void *get_thread(void *arg) {
    getter *r = arg;
    in_shape s;
    char err[256];
    r->rc = cd_model_variant_get(r->m, shape_of(&s, r->c, r->h, r->w), &r->v, err, sizeof err);
    return NULL;
}

CD_TEST(variants_known_size_runs_while_a_new_one_builds) {
    test_model t;
    make_model(&t, 1);
    cd_model *m = load(write_model(&t, 1, 0, 0), "1x1x8x8", 0);
    in_shape s;
    const cd_model *known;
    char err[256];
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 10, 12), &known, err, sizeof err), 0);
    cd_variants_set_build_hook(gate_hook, &g_gate);
    getter a = {m, t.c, 14, 6, NULL, 0}, b = {m, t.c, 14, 6, NULL, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, get_thread, &a);
    pthread_mutex_lock(&g_gate.mu);
    while (!g_gate.in_build) pthread_cond_wait(&g_gate.cv, &g_gate.mu);
    pthread_mutex_unlock(&g_gate.mu);
    // a is building 14x6 and will not finish before we say so: the known
    // sizes (the first plan, and 10x12) are asked for and run meanwhile.
    pthread_create(&tb, NULL, get_thread, &b); // the same new size: waits for a's build
    const cd_model *k2;
    CHECK_EQ(cd_model_variant_get(m, shape_of(&s, t.c, 10, 12), &k2, err, sizeof err), 0);
    CHECK(k2 == known);
    float *x = rand_input((size_t)t.c * 10 * 12), *y = NULL, *x0 = rand_input((size_t)t.c * 64), *y0 = NULL;
    run_plan(k2, 1, x, &y);
    run_plan(m, 1, x0, &y0);
    cd_model_variant_put(m, k2);
    pthread_mutex_lock(&g_gate.mu);
    g_gate.known_done = 1;
    pthread_cond_broadcast(&g_gate.cv);
    pthread_mutex_unlock(&g_gate.mu);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cd_variants_set_build_hook(NULL, NULL);
    CHECK_EQ(a.rc, 0);
    CHECK_EQ(b.rc, 0);
    CHECK(a.v == b.v);
    CHECK_EQ(g_gate.builds, 1); // one build for both callers of 14x6
    CHECK_EQ(cd_model_output(a.v, 0)->shape[2], 7);
    cd_model_variant_put(m, a.v);
    cd_model_variant_put(m, b.v);
    cd_model_variant_put(m, known);
    free(x), free(y), free(x0), free(y0);
    cd_model_free(m);
    unlink(t.path);
    mb_free(&t.b);
}
