// Whole-runtime tests on ONNX models built here with protobuf-c: static shape
// inference (auto_pad, strides, dilations, ceil_mode, Reshape 0/-1, folded
// Shape->Gather->Unsqueeze->Concat), batch consistency, BN folding, arena
// reuse, and load/run errors.

#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "onnx.pb-c.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"

#include <pthread.h>
#include <unistd.h>

#include "tests/unit/onnx-builder.h"

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
    mb_input(&b, "x", 4, xs);
    mb_init_f(&b, "w", 4, ws);
    mb_init_f(&b, "b", 1, bs);
    Onnx__NodeProto *cv = mb_node(&b, "Conv", "x", "w", "b", "c1");
    mb_attr_str(&b, cv, "auto_pad", "SAME_UPPER");
    mb_attr_ints(&b, cv, "strides", 2, (int64_t[]){2, 2});
    int64_t ws2[4] = {k, k, 3, 3};
    mb_init_f(&b, "w2", 4, ws2);
    Onnx__NodeProto *cv2 = mb_node(&b, "Conv", "c1", "w2", NULL, "c2");
    mb_attr_ints(&b, cv2, "dilations", 2, (int64_t[]){2, 1});
    mb_attr_ints(&b, cv2, "pads", 4, (int64_t[]){1, 0, 2, 1});
    Onnx__NodeProto *mp = mb_node(&b, "MaxPool", "c2", NULL, NULL, "p");
    mb_attr_ints(&b, mp, "kernel_shape", 2, (int64_t[]){2, 2});
    mb_attr_ints(&b, mp, "strides", 2, (int64_t[]){2, 2});
    mb_attr_int(&b, mp, "ceil_mode", 1);
    mb_output(&b, "p");
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
    mb_input(&b, "x", 4, xs);
    mb_node(&b, "Shape", "x", NULL, NULL, "s");
    mb_init_i(&b, "zero", 1, (int64_t[]){0}, 1);
    mb_node(&b, "Gather", "s", "zero", NULL, "n");
    mb_init_i(&b, "ax", 1, (int64_t[]){0}, 0);
    mb_node(&b, "Unsqueeze", "n", "ax", NULL, "n1");
    mb_init_i(&b, "m1", 1, (int64_t[]){-1}, 0);
    Onnx__NodeProto *cc = mb_node(&b, "Concat", "n1", "m1", NULL, "shape");
    mb_attr_int(&b, cc, "axis", 0);
    mb_node(&b, "Reshape", "x", "shape", NULL, "flat");
    mb_node(&b, "Relu", "flat", NULL, NULL, "y");
    mb_output(&b, "y");
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
    // Fewer input channels than the smallest block (8): the conv then reads
    // its NCHW input as it is and the whole model is one layer at every ISA.
    int c = cd_test_randi(1, 7), k = cd_test_randi(1, 8), h = cd_test_randi(3, 9);
    int64_t xs[4] = {1, c, h, h}, ws[4] = {k, c, 1, 1}, ks[1] = {k};
    mb_input(&b, "x", 4, xs);
    mb_init_f(&b, "w", 4, ws);
    mb_node(&b, "Conv", "x", "w", NULL, "c");
    mb_init_f(&b, "g", 1, ks);
    mb_init_f(&b, "be", 1, ks);
    mb_init_f(&b, "mu", 1, ks);
    mb_init_f(&b, "var", 1, ks);
    for (int i = 0; i < b.ninits; i++)
        if (strcmp(b.inits[i]->name, "var") == 0)
            for (int j = 0; j < k; j++) b.inits[i]->float_data[j] = fabsf(b.inits[i]->float_data[j]) + 0.1f;
    Onnx__NodeProto *bn = mb_node(&b, "BatchNormalization", "c", "g", "be", "bn");
    bn->input[3] = mb_str(&b, "mu");
    bn->input[4] = mb_str(&b, "var");
    bn->n_input = 5;
    mb_node(&b, "Relu", "bn", NULL, NULL, "y");
    mb_output(&b, "y");
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
    mb_input(&b, "x", 4, xs);
    char prev[16] = "x", cur[16];
    for (int i = 0; i < steps; i++) {
        snprintf(cur, sizeof cur, "t%d", i);
        mb_node(&b, i % 2 ? "Sigmoid" : "Relu", prev, NULL, NULL, cur);
        strcpy(prev, cur);
    }
    mb_output(&b, prev);
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

// A residual block: x -> Conv A -> s -> Conv B (3x3) -> Relu -> Conv C ->
// Add(., s) -> Relu -> y. The Conv C + Add layer is s's last reader, so it
// writes y into s's storage (the residual in place, runtime/plan-in-place.c),
// unless s is read after it (keep_skip: z = y + s, a second output). The
// weights are those of `like` when given.
static cd_model *load_residual_block(mb *b, const mb *like, int c, int k, int h, int keep_skip, int mb_) {
    int64_t xs[4] = {1, c, h, h}, wa[4] = {k, c, 1, 1}, wb[4] = {k, k, 3, 3}, wc[4] = {k, k, 1, 1};
    int64_t pads[4] = {1, 1, 1, 1};
    mb_input(b, "x", 4, xs);
    mb_init_f(b, "wa", 4, wa);
    mb_init_f(b, "wb", 4, wb);
    mb_init_f(b, "wc", 4, wc);
    const size_t wn[3] = {(size_t)k * c, (size_t)k * k * 9, (size_t)k * k};
    for (int i = 0; like && i < 3; i++)
        memcpy(b->inits[i]->float_data, like->inits[i]->float_data, sizeof(float) * wn[i]);
    mb_node(b, "Conv", "x", "wa", NULL, "s");
    Onnx__NodeProto *cb = mb_node(b, "Conv", "s", "wb", NULL, "t1");
    mb_attr_ints(b, cb, "pads", 4, pads);
    mb_node(b, "Relu", "t1", NULL, NULL, "t2");
    mb_node(b, "Conv", "t2", "wc", NULL, "t");
    mb_node(b, "Add", "t", "s", NULL, "u");
    mb_node(b, "Relu", "u", NULL, NULL, "y");
    mb_output(b, "y");
    if (keep_skip) {
        mb_node(b, "Add", "y", "s", NULL, "z");
        mb_output(b, "z");
    }
    const char *path = mb_write(b, 13);
    cd_model *m;
    char err[512];
    cd_model_opts opts = {.max_batch = mb_};
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    unlink(path);
    return m;
}

CD_TEST(model_residual_conv_writes_into_its_skip_tensor) {
    int c = cd_test_randi(1, 24), k = cd_test_randi(1, 40), h = cd_test_randi(3, 20), mb_ = cd_test_randi(1, 3);
    mb a = {0}, b = {0};
    cd_model *in_place = load_residual_block(&a, NULL, c, k, h, 0, mb_);
    cd_model *kept = load_residual_block(&b, &a, c, k, h, 1, mb_); // the same weights
    cd_model_summary sa, sb;
    cd_model_get_summary(in_place, &sa);
    cd_model_get_summary(kept, &sb);
    CHECK_EQ(sa.residual_in_place, 1);
    CHECK_EQ(sb.residual_in_place, 0); // s is read after that layer
    const size_t n = (size_t)mb_ * k * h * h;
    float *x = rbuf((size_t)mb_ * c * h * h), *y = calloc(n, 4), *y2 = calloc(n, 4), *z2 = calloc(n, 4);
    cd_exec *ea, *eb;
    CHECK_EQ(cd_exec_init(in_place, &ea), 0);
    CHECK_EQ(cd_exec_init(kept, &eb), 0);
    char err[256];
    const void *ins[1] = {x};
    void *oa[1] = {y}, *ob[2] = {y2, z2};
    CHECK_EQ(cd_model_run(ea, mb_, ins, oa, err, sizeof err), 0);
    CHECK_EQ(cd_model_run(eb, mb_, ins, ob, err, sizeof err), 0);
    CHECK_CLOSE_F32(y, y2, n, 1e-4);
    cd_exec_free(ea);
    cd_exec_free(eb);
    cd_model_free(in_place);
    cd_model_free(kept);
    free(x), free(y), free(y2), free(z2);
    mb_free(&a);
    mb_free(&b);
}

CD_TEST(model_run_rejects_bad_batch) {
    mb b = {0};
    int64_t xs[4] = {1, 2, 3, 3};
    mb_input(&b, "x", 4, xs);
    mb_node(&b, "Relu", "x", NULL, NULL, "y");
    mb_output(&b, "y");
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

// Inputs written into the buffers the backend hands out (cd_exec_stage_inputs:
// the arena on the cpu, pinned staging on hip-emu) give what copied inputs
// give, at a batch below max_batch, through run and submit/wait alike; a
// staged submit without staging, or of another batch, is refused.
static void check_staged_inputs(const char *device) {
    mb b = {0};
    int c = cd_test_randi(1, 8), h = cd_test_randi(1, 9), maxb = cd_test_randi(2, 5);
    int batch = cd_test_randi(1, maxb);
    int64_t xs[4] = {1, c, h, h};
    mb_input(&b, "x", 4, xs);
    mb_input(&b, "z", 4, xs);
    mb_node(&b, "Add", "x", "z", NULL, "s");
    mb_node(&b, "Sigmoid", "s", NULL, NULL, "y");
    mb_output(&b, "y");
    const char *path = mb_write(&b, 13);
    cd_model *m;
    char err[512];
    cd_model_opts opts = {.max_batch = maxb, .device = device};
    CHECK_EQ(cd_model_load(path, &opts, &m, err, sizeof err), 0);
    size_t n = (size_t)batch * (size_t)(c * h * h);
    float *x = rbuf(n), *z = rbuf(n), *y = calloc(n, 4), *y2 = calloc(n, 4);
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(m, &ex), 0);
    const void *ins[2] = {x, z};
    void *outs[1] = {y}, *outs2[1] = {y2};
    CHECK_EQ(cd_model_run(ex, batch, ins, outs, err, sizeof err), 0);
    CHECK_EQ(cd_model_submit_staged(ex, batch, outs2, err, sizeof err), CD_EPARAMS); // nothing staged
    void *host[2] = {NULL, NULL};
    CHECK_EQ(cd_exec_stage_inputs(ex, maxb + 1, host), CD_ESHAPE);
    CHECK_EQ(cd_exec_stage_inputs(ex, batch, host), 0);
    CHECK(host[0] != NULL && host[1] != NULL && host[0] != host[1]);
    memcpy(host[0], x, n * 4);
    memcpy(host[1], z, n * 4);
    CHECK_EQ(cd_model_submit_staged(ex, batch, outs2, err, sizeof err), 0);
    CHECK_EQ(cd_model_wait(ex, err, sizeof err), 0);
    CHECK_CLOSE_F32(y2, y, n, 0);
    memset(y2, 0, n * 4);
    CHECK_EQ(cd_exec_stage_inputs(ex, batch, host), 0); // again: a run may reuse the input's storage
    memcpy(host[0], x, n * 4);
    memcpy(host[1], z, n * 4);
    if (batch > 1) CHECK_EQ(cd_model_submit_staged(ex, batch - 1, outs2, err, sizeof err), CD_EPARAMS);
    CHECK_EQ(cd_model_submit_staged(ex, batch, outs2, err, sizeof err), 0);
    CHECK_EQ(cd_model_wait(ex, err, sizeof err), 0);
    CHECK_CLOSE_F32(y2, y, n, 0);
    cd_exec_free(ex);
    free(x), free(z), free(y), free(y2);
    cd_model_free(m);
    unlink(path);
    mb_free(&b);
}

CD_TEST(model_staged_inputs_match_copied_cpu) { check_staged_inputs("cpu"); }
CD_TEST(model_staged_inputs_match_copied_hip_emu) { check_staged_inputs("hip-emu"); }

CD_TEST(model_load_errors_name_the_problem) {
    char err[512];
    cd_model *m = (cd_model *)1;
    CHECK_EQ(cd_model_load("/nonexistent/x.onnx", NULL, &m, err, sizeof err), CD_EIO);
    CHECK(m == NULL);
    mb b = {0};
    int64_t xs[4] = {1, 2, 3, 3};
    mb_input(&b, "x", 4, xs);
    mb_node(&b, "NonMaxSuppression", "x", NULL, NULL, "y");
    mb_output(&b, "y");
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
    mb_input(&b2, "x", 4, xs);
    mb_node(&b2, "Add", "x", "ghost", NULL, "y");
    mb_output(&b2, "y");
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
    mb_input(&b, "x", 4, xs);
    mb_init_f(&b, "w", 4, ws);
    Onnx__NodeProto *cv = mb_node(&b, "Conv", "x", "w", NULL, "c1");
    mb_attr_ints(&b, cv, "pads", 4, (int64_t[]){1, 1, 1, 1});
    mb_node(&b, "Relu", "c1", NULL, NULL, "r1");
    mb_init_f(&b, "w2", 4, ws2);
    Onnx__NodeProto *dw = mb_node(&b, "Conv", "r1", "w2", NULL, "c2");
    mb_attr_ints(&b, dw, "pads", 4, (int64_t[]){1, 1, 1, 1});
    mb_attr_int(&b, dw, "group", k);
    mb_node(&b, "Add", "c2", "r1", NULL, "y");
    mb_output(&b, "y");
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
