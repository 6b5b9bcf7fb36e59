// Channel Slice/Split as views (runtime/plan-view.c): on the CPU a split
// whose parts feed convs, a Concat and a model output is planned with no
// Slice layer, at offsets that are and are not whole blocks (16 / 8), and
// a batch of different images gives what each image gives alone and what
// the hip-emu backend (which keeps the copies) gives. Slices that are not
// one run per item (a step, an H window) stay copies.

#include "core/errors.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/onnx-builder.h"

#include <string.h>
#include <unistd.h>

#define MAX_PARTS 3

static int64_t item_numel(const cd_io_desc *d) {
    int64_t n = 1;
    for (int i = 1; i < d->rank; i++) n *= d->shape[i];
    return n;
}

// x [N, c, h, h] -> Conv 3x3 (c -> C) + Relu -> Split into parts (sizes
// s[]) -> part 0: Conv 1x1 -> y0; part 1: Concat(part 1, Conv 1x1(part 1))
// -> y1; part 2 (when there are 3): the model output y2 itself.
static const char *write_split_model(mb *b, int c, int h, int parts, const int64_t *s) {
    int64_t C = 0;
    for (int j = 0; j < parts; j++) C += s[j];
    mb_input(b, "x", 4, (int64_t[]){1, c, h, h});
    mb_init_f(b, "w", 4, (int64_t[]){C, c, 3, 3});
    Onnx__NodeProto *cv = mb_node(b, "Conv", "x", "w", NULL, "t");
    mb_attr_ints(b, cv, "pads", 4, (int64_t[]){1, 1, 1, 1});
    mb_node(b, "Relu", "t", NULL, NULL, "r");
    mb_init_i(b, "sizes", parts, s, 0);
    Onnx__NodeProto *sp = mb_node(b, "Split", "r", "sizes", NULL, "p0");
    mb_attr_int(b, sp, "axis", 1);
    static const char *names[MAX_PARTS] = {"p0", "p1", "p2"};
    sp->output = mb_alloc(b, MAX_PARTS * sizeof(char *));
    for (int j = 0; j < parts; j++) sp->output[j] = mb_str(b, names[j]);
    sp->n_output = (size_t)parts;
    mb_init_f(b, "w0", 4, (int64_t[]){5, s[0], 1, 1});
    mb_node(b, "Conv", "p0", "w0", NULL, "y0");
    mb_init_f(b, "w1", 4, (int64_t[]){s[1], s[1], 1, 1});
    mb_node(b, "Conv", "p1", "w1", NULL, "q1");
    Onnx__NodeProto *cat = mb_node(b, "Concat", "p1", "q1", NULL, "y1");
    mb_attr_int(b, cat, "axis", 1);
    mb_output(b, "y0");
    mb_output(b, "y1");
    if (parts == 3) mb_output(b, "p2");
    return mb_write(b, 13);
}

// Runs m on x (batch images); outputs into ys (allocated here).
static void run_all(cd_model *m, int batch, const float *x, float **ys) {
    int no = cd_model_num_outputs(m);
    void *outs[MAX_PARTS];
    for (int o = 0; o < no; o++) {
        ys[o] = calloc((size_t)(item_numel(cd_model_output(m, o)) * batch), sizeof(float));
        outs[o] = ys[o];
    }
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(m, &ex), 0);
    char err[256];
    const void *ins[1] = {x};
    CHECK_EQ(cd_model_run(ex, batch, ins, outs, err, sizeof err), 0);
    cd_exec_free(ex);
}

// The number of layers whose op is `op`.
static int count_layers(const cd_model *m, const char *op) {
    int n = 0;
    for (int i = 0; i < cd_model_num_layers(m); i++) {
        cd_layer_info li;
        cd_model_layer(m, i, &li);
        n += strcmp(li.op, op) == 0;
    }
    return n;
}

static void check_split(int parts, int blocks) {
    const int c = cd_test_randi(1, 4), h = cd_test_randi(3, 7), batch = cd_test_randi(2, 4);
    int64_t s[MAX_PARTS];
    for (int j = 0; j < parts; j++) // whole blocks of 16 (or 8), else any size
        s[j] = blocks ? 8 * cd_test_randi(1, 4) : cd_test_randi(1, 40);
    mb b = {0};
    const char *path = write_split_model(&b, c, h, parts, s);
    cd_model *cpu, *emu;
    char err[512];
    cd_model_opts o1 = {.max_batch = 4, .device = "cpu", .plan = 1}, o2 = {.max_batch = 4, .device = "hip-emu"};
    if (cd_model_load(path, &o1, &cpu, err, sizeof err)) CD_CHECK_FAIL_("load on cpu: %s", err);
    if (cd_model_load(path, &o2, &emu, err, sizeof err)) CD_CHECK_FAIL_("load on hip-emu: %s", err);
    unlink(path);
    // The plan: views on the CPU, no Slice layer; the copies on hip-emu.
    cd_model_summary sc, se;
    cd_model_get_summary(cpu, &sc);
    cd_model_get_summary(emu, &se);
    CHECK_EQ(sc.slice_views, parts);
    CHECK_EQ(sc.slice_copies, 0);
    CHECK_EQ(count_layers(cpu, "Split"), 0);
    CHECK_EQ(count_layers(cpu, "Slice(copy)"), parts == 3); // the output part is copied out
    CHECK_EQ(se.slice_views, 0);
    CHECK_EQ(se.slice_copies, parts);
    // A batch of different images: as each alone, and as hip-emu.
    const int64_t ni = item_numel(cd_model_input(cpu, 0));
    float *x = malloc((size_t)(ni * batch) * sizeof(float));
    for (int64_t i = 0; i < ni * batch; i++) x[i] = cd_test_randf(-1, 1);
    float *yb[MAX_PARTS], *ye[MAX_PARTS], *y1[MAX_PARTS];
    run_all(cpu, batch, x, yb);
    run_all(emu, batch, x, ye);
    const int no = cd_model_num_outputs(cpu);
    for (int o = 0; o < no; o++) {
        const int64_t n = item_numel(cd_model_output(cpu, o));
        CHECK_CLOSE_F32(yb[o], ye[o], n * batch, 1e-4);
    }
    for (int i = 0; i < batch; i++) {
        run_all(cpu, 1, x + i * ni, y1);
        for (int o = 0; o < no; o++) {
            const int64_t n = item_numel(cd_model_output(cpu, o));
            CHECK_CLOSE_F32(yb[o] + i * n, y1[o], n, 1e-5);
            free(y1[o]);
        }
    }
    for (int o = 0; o < no; o++) free(yb[o]), free(ye[o]);
    free(x);
    cd_model_free(cpu);
    cd_model_free(emu);
    mb_free(&b);
}

CD_TEST(slice_view_split2_any_offsets) { check_split(2, 0); }
CD_TEST(slice_view_split3_any_offsets_output_part) { check_split(3, 0); }
CD_TEST(slice_view_split2_whole_blocks) { check_split(2, 1); }
CD_TEST(slice_view_split3_whole_blocks_output_part) { check_split(3, 1); }

// x -> Relu -> Slice (axes, starts, ends, steps) -> Relu -> y: a copy or
// a view as expected, and batch-consistent.
static void check_slice(int64_t axis, int64_t start, int64_t end, int64_t step, int want_view) {
    const int c = 6, h = 5, batch = cd_test_randi(2, 4);
    mb b = {0};
    mb_input(&b, "x", 4, (int64_t[]){1, c, h, h});
    mb_node(&b, "Relu", "x", NULL, NULL, "r");
    mb_init_i(&b, "st", 1, &start, 0);
    mb_init_i(&b, "en", 1, &end, 0);
    mb_init_i(&b, "ax", 1, &axis, 0);
    mb_init_i(&b, "sp", 1, &step, 0);
    Onnx__NodeProto *sl = mb_node(&b, "Slice", "r", "st", "en", "s");
    sl->input[sl->n_input++] = mb_str(&b, "ax");
    sl->input[sl->n_input++] = mb_str(&b, "sp");
    mb_node(&b, "Relu", "s", NULL, NULL, "y");
    mb_output(&b, "y");
    const char *path = mb_write(&b, 13);
    cd_model *m;
    char err[512];
    cd_model_opts o = {.max_batch = 4, .device = "cpu"};
    if (cd_model_load(path, &o, &m, err, sizeof err)) CD_CHECK_FAIL_("load: %s", err);
    unlink(path);
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    CHECK_EQ(s.slice_views, want_view);
    CHECK_EQ(s.slice_copies, !want_view);
    CHECK_EQ(count_layers(m, "Slice"), !want_view);
    const int64_t ni = item_numel(cd_model_input(m, 0)), no = item_numel(cd_model_output(m, 0));
    float *x = malloc((size_t)(ni * batch) * sizeof(float)), *yb[1], *y1[1];
    for (int64_t i = 0; i < ni * batch; i++) x[i] = cd_test_randf(-1, 1);
    run_all(m, batch, x, yb);
    for (int i = 0; i < batch; i++) {
        run_all(m, 1, x + i * ni, y1);
        CHECK_CLOSE_F32(yb[0] + i * no, y1[0], no, 0);
        free(y1[0]);
    }
    free(yb[0]);
    free(x);
    cd_model_free(m);
    mb_free(&b);
}

CD_TEST(slice_view_channel_step1_is_a_view) { check_slice(1, 1, 4, 1, 1); }
CD_TEST(slice_view_channel_step2_stays_a_copy) { check_slice(1, 0, 6, 2, 0); }
CD_TEST(slice_view_h_window_stays_a_copy) { check_slice(2, 1, 3, 1, 0); }
