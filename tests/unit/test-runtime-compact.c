// runtime/compact.c: structured-sparsity compaction of lowered graphs.
//
// Graphs are built directly as cd_op lists (graph.h), run by a small
// reference interpreter (kernels/cpu/ref.h, NCHW) before and after
// compaction: the outputs must agree (relative error <= 1e-5) and keep their
// shapes, and the tests check what was dropped: zero filters whose
// act(bias) folds into 1x1/unpadded consumers, border maps behind padded
// consumers, the union rule of residual Adds, unread input channels,
// block-diagonal connections turned into groups, an all-zero layer.

#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "runtime/graph.h"
#include "sparse/analysis.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- building ----------------------------------------------------------------------

static int act_value(cd_graph *g, const char *name, int c, int h, int w) {
    int v = cd_graph_add_value(g, name);
    CHECK(v >= 0);
    cd_value *val = &g->values[v];
    val->kind = CD_VAL_ACT;
    val->rank = 4;
    val->shape[0] = 1;
    val->shape[1] = c;
    val->shape[2] = h;
    val->shape[3] = w;
    val->numel = (int64_t)c * h * w;
    return v;
}

static void add_input(cd_graph *g, int v) {
    g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->ninputs + 1));
    g->inputs[g->ninputs++] = v;
}

static void add_output(cd_graph *g, int v) {
    g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->noutputs + 1));
    g->outputs[g->noutputs++] = v;
    g->values[v].is_output = 1;
}

static int vcount;

static int new_value(cd_graph *g, int c, int h, int w) {
    char name[32];
    snprintf(name, sizeof name, "v%d", vcount++);
    return act_value(g, name, c, h, w);
}

// Conv with random weights (nonzero), random bias in [-1, 1]; returns the output value.
static int conv(cd_graph *g, int in, int res, int k, int rs, int pad, int stride, int groups, cd_act act) {
    const cd_value *x = &g->values[in];
    cd_conv_desc d = cd_conv_square((int)x->shape[1], (int)x->shape[2], (int)x->shape[3], k, rs, stride, pad);
    d.groups = groups;
    d.act = (cd_activation){act, 0.0f, 6.0f};
    d.has_residual = res >= 0;
    int out = new_value(g, k, d.oh, d.ow);
    int o = cd_graph_add_op(g, CD_OP_CONV, "conv");
    CHECK(o >= 0);
    cd_op *op = &g->ops[o];
    op->nin = res >= 0 ? 2 : 1;
    op->in[0] = in;
    op->in[1] = res;
    op->out = out;
    op->u.conv.d = d;
    size_t nw = (size_t)k * (d.c / groups) * rs * rs;
    op->u.conv.w = malloc(nw * sizeof(float));
    op->u.conv.bias = malloc((size_t)k * sizeof(float));
    for (size_t i = 0; i < nw; i++) {
        float v = cd_test_randf(-1.0f, 1.0f);
        op->u.conv.w[i] = v == 0.0f ? 0.25f : v;
    }
    for (int i = 0; i < k; i++) op->u.conv.bias[i] = cd_test_randf(-1.0f, 1.0f);
    return out;
}

static cd_op *producer(cd_graph *g, int v) {
    for (int k = 0; k < g->nops; k++)
        if (g->ops[k].out == v) return &g->ops[k];
    return NULL;
}

// Zeroes filter o of the conv writing v (its bias stays).
static void zero_filter(cd_graph *g, int v, int o) {
    cd_op *op = producer(g, v);
    const cd_conv_desc *d = &op->u.conv.d;
    size_t per = (size_t)(d->c / d->groups) * d->r * d->s;
    memset(op->u.conv.w + per * o, 0, per * sizeof(float));
}

// Zeroes input channel c (all filters) of the conv writing v (groups == 1).
static void zero_in_channel(cd_graph *g, int v, int c) {
    cd_op *op = producer(g, v);
    const cd_conv_desc *d = &op->u.conv.d;
    int rs = d->r * d->s;
    for (int o = 0; o < d->k; o++) memset(op->u.conv.w + ((size_t)o * d->c + c) * rs, 0, rs * sizeof(float));
}

static int unary(cd_graph *g, cd_op_kind kind, int in, cd_act act) {
    const cd_value *x = &g->values[in];
    int c = (int)x->shape[1], h = (int)x->shape[2], w = (int)x->shape[3];
    int o = cd_graph_add_op(g, kind, kind == CD_OP_POOL ? "pool" : "act");
    cd_op *op = &g->ops[o];
    op->nin = 1;
    op->in[0] = in;
    if (kind == CD_OP_POOL) {
        cd_pool_desc p = {.kind = CD_POOL_MAX,
                          .n = 1,
                          .c = c,
                          .h = h,
                          .w = w,
                          .kh = 2,
                          .kw = 2,
                          .stride_h = 2,
                          .stride_w = 2,
                          .dil_h = 1,
                          .dil_w = 1};
        cd_pool_out_dims(&p);
        op->u.pool = p;
        h = p.oh;
        w = p.ow;
    } else {
        op->u.act = (cd_activation){act, 0.1f, 0.0f};
    }
    int out = new_value(g, c, h, w);
    g->ops[o].out = out;
    return out;
}

static int binary(cd_graph *g, int a, int b, cd_binary_kind kind, cd_act act) {
    const cd_value *x = &g->values[a];
    int out = new_value(g, (int)x->shape[1], (int)x->shape[2], (int)x->shape[3]);
    int o = cd_graph_add_op(g, CD_OP_BINARY, "add");
    cd_op *op = &g->ops[o];
    op->nin = 2;
    op->in[0] = a;
    op->in[1] = b;
    op->out = out;
    op->u.binary.kind = kind;
    op->u.binary.act = (cd_activation){act, 0, 0};
    return out;
}

static int concat(cd_graph *g, int a, int b) {
    const cd_value *x = &g->values[a], *y = &g->values[b];
    int out = new_value(g, (int)(x->shape[1] + y->shape[1]), (int)x->shape[2], (int)x->shape[3]);
    int o = cd_graph_add_op(g, CD_OP_CONCAT, "concat");
    cd_op *op = &g->ops[o];
    op->nin = 2;
    op->in[0] = a;
    op->in[1] = b;
    op->out = out;
    op->u.concat.axis = 1;
    return out;
}

// ---- the interpreter -----------------------------------------------------------------

// Runs g on input x (batch n) and returns a copy of output 0 (malloc'd, *count elements).
static float *interpret(const cd_graph *g, int n, const float *x, size_t *count) {
    float **buf = calloc((size_t)g->nvalues, sizeof(float *));
    int in = g->inputs[0];
    buf[in] = malloc(sizeof(float) * (size_t)g->values[in].numel * n);
    memcpy(buf[in], x, sizeof(float) * (size_t)g->values[in].numel * n);
    for (int k = 0; k < g->nops; k++) {
        const cd_op *op = &g->ops[k];
        const cd_value *ov = &g->values[op->out];
        float *dst = buf[op->out] = malloc(sizeof(float) * ((size_t)ov->numel * n + 1));
        int64_t oshape[4] = {n, ov->shape[1], ov->shape[2], ov->shape[3]};
        switch (op->kind) {
        case CD_OP_CONV: {
            cd_conv_desc d = op->u.conv.d;
            d.n = n;
            cd_ref_conv2d(&d, buf[op->in[0]], op->u.conv.w, op->u.conv.bias, d.has_residual ? buf[op->in[1]] : NULL,
                          dst);
            break;
        }
        case CD_OP_ACT: cd_ref_activation(op->u.act, (size_t)ov->numel * n, buf[op->in[0]], dst); break;
        case CD_OP_POOL: {
            cd_pool_desc p = op->u.pool;
            p.n = n;
            cd_ref_pool2d(&p, buf[op->in[0]], dst);
            break;
        }
        case CD_OP_BINARY: {
            // Activations are batched; a constant operand ([1, C, H, W]) broadcasts.
            int64_t s[2][4];
            const float *p[2];
            for (int i = 0; i < 2; i++) {
                const cd_value *v = &g->values[op->in[i]];
                for (int j = 0; j < 4; j++) s[i][j] = v->shape[j];
                if (v->kind == CD_VAL_ACT) s[i][0] = n;
                p[i] = v->kind == CD_VAL_CONST_F32 ? v->f : buf[op->in[i]];
            }
            cd_ref_binary(op->u.binary.kind, 4, s[0], p[0], s[1], p[1], oshape, op->u.binary.act, dst);
            break;
        }
        case CD_OP_CONCAT: {
            int64_t s0[4], s1[4];
            const cd_value *a = &g->values[op->in[0]], *b = &g->values[op->in[1]];
            for (int i = 0; i < 4; i++) {
                s0[i] = i ? a->shape[i] : n;
                s1[i] = i ? b->shape[i] : n;
            }
            const int64_t *shapes[2] = {s0, s1};
            const float *srcs[2] = {buf[op->in[0]], buf[op->in[1]]};
            cd_ref_concat(4, 1, 2, shapes, srcs, dst);
            break;
        }
        default: CHECK(0);
        }
    }
    int out = g->outputs[0];
    *count = (size_t)g->values[out].numel * n;
    float *r = malloc(sizeof(float) * (*count + 1));
    memcpy(r, buf[out], sizeof(float) * *count);
    for (int v = 0; v < g->nvalues; v++) free(buf[v]);
    free(buf);
    return r;
}

// Compacts g and checks the output against the uncompacted run at batch n.
static void check_compaction_exact(cd_graph *g, int n) {
    int in = g->inputs[0], out = g->outputs[0];
    int64_t out_shape[4];
    memcpy(out_shape, g->values[out].shape, sizeof out_shape);
    size_t nin = (size_t)g->values[in].numel * n, c0, c1;
    float *x = malloc(sizeof(float) * nin);
    for (size_t i = 0; i < nin; i++) x[i] = cd_test_randf(-1.0f, 1.0f);
    float *want = interpret(g, n, x, &c0);
    char err[256] = "";
    CHECK_EQ(cd_graph_compact(g, 1, err, sizeof err), 0);
    CHECK(memcmp(out_shape, g->values[out].shape, sizeof out_shape) == 0); // outputs keep their shape
    float *got = interpret(g, n, x, &c1);
    CHECK_EQ(c0, c1);
    double worst = 0;
    for (size_t i = 0; i < c0; i++) {
        double e = fabs((double)got[i] - want[i]) / fmax(1.0, fabs((double)want[i]));
        if (e > worst) worst = e;
    }
    if (worst > 1e-5 && getenv("CD_COMPACT_DEBUG"))
        for (int k = 0; k < g->nops; k++) {
            const cd_op *op = &g->ops[k];
            fprintf(stderr, "op %d kind %d in %d,%d out %d (C %lld) %s", k, op->kind, op->in[0],
                    op->nin > 1 ? op->in[1] : -1, op->out, (long long)g->values[op->out].shape[1], op->compact);
            if (op->kind == CD_OP_CONV)
                fprintf(stderr, " conv c%d k%d %dx%d pad%d g%d res%d act%d", op->u.conv.d.c, op->u.conv.d.k,
                        op->u.conv.d.r, op->u.conv.d.s, op->u.conv.d.pad_t, op->u.conv.d.groups,
                        op->u.conv.d.has_residual, op->u.conv.d.act.kind);
            fprintf(stderr, "\n");
        }
    if (worst > 1e-5) CD_CHECK_FAIL_("compacted output differs: max relative error %g", worst);
    free(x);
    free(want);
    free(got);
}

static cd_graph *graph_new(void) {
    cd_graph *g = calloc(1, sizeof *g);
    vcount = 0;
    return g;
}

static void graph_free(cd_graph *g) {
    cd_graph_free(g);
    free(g);
}

// The conv computing v (through a border-map Add when there is one).
static cd_op *conv_of(cd_graph *g, int v) {
    cd_op *op = producer(g, v);
    return op->kind == CD_OP_BINARY ? producer(g, op->in[0]) : op;
}

static int conv_k(cd_graph *g, int v) { return conv_of(g, v)->u.conv.d.k; }
static int conv_c(cd_graph *g, int v) { return conv_of(g, v)->u.conv.d.c; }

// ---- tests ---------------------------------------------------------------------------

CD_TEST(compact_zero_filters_with_bias_fold_into_unpadded_consumer) {
    // A (3x3) has zero filters with nonzero relu(bias): a constant plane per
    // dropped channel, folded into B's (1x1, no padding) bias.
    cd_graph *g = graph_new();
    int h = cd_test_randi(3, 9), w = cd_test_randi(3, 9), k = cd_test_randi(4, 12);
    int x = new_value(g, 3, h, w);
    add_input(g, x);
    int a = conv(g, x, -1, k, 3, 1, 1, 1, CD_ACT_RELU);
    producer(g, a)->u.conv.bias[0] = 0.75f; // relu(bias) > 0: the fold is not a no-op
    zero_filter(g, a, 0);
    zero_filter(g, a, k - 1);
    int b = conv(g, a, -1, 5, 1, 0, 1, 1, CD_ACT_NONE);
    add_output(g, b);
    check_compaction_exact(g, cd_test_randi(1, 3));
    CHECK_EQ(conv_k(g, a), k - 2);
    CHECK_EQ(conv_c(g, b), k - 2);
    CHECK_EQ(g->values[a].shape[1], k - 2);
    graph_free(g);
}

CD_TEST(compact_zero_filter_bias_behind_padding_becomes_border_map) {
    // With a padded 3x3 consumer a constant plane k != 0 does not fold into
    // a bias (the border sees zeros): it becomes a constant map added after
    // the consumer (the consumer's activation moves behind it); a zero
    // constant (relu of a negative bias) simply drops.
    cd_graph *g = graph_new();
    int x = new_value(g, 2, cd_test_randi(3, 8), cd_test_randi(3, 8));
    add_input(g, x);
    int a = conv(g, x, -1, 6, 1, 0, 1, 1, CD_ACT_RELU);
    zero_filter(g, a, 1);
    zero_filter(g, a, 4);
    producer(g, a)->u.conv.bias[1] = 0.5f;  // constant 0.5: kept
    producer(g, a)->u.conv.bias[4] = -0.5f; // constant relu(-0.5) = 0: dropped
    int b = conv(g, a, -1, 3, 3, 1, 1, 1, CD_ACT_RELU);
    add_output(g, b);
    check_compaction_exact(g, cd_test_randi(1, 4));
    CHECK_EQ(conv_k(g, a), 4);
    int nmaps = 0;
    for (int k = 0; k < g->nops; k++) {
        const cd_op *op = &g->ops[k];
        if (op->kind != CD_OP_BINARY) continue;
        nmaps++;
        CHECK_EQ(op->out, b); // the output is still the model output
        CHECK_EQ(op->u.binary.act.kind, CD_ACT_RELU);
        CHECK_EQ(g->values[op->in[1]].kind, CD_VAL_CONST_F32);
        CHECK_EQ(g->ops[k - 1].u.conv.d.c, 4);
        CHECK_EQ(g->ops[k - 1].u.conv.d.act.kind, CD_ACT_NONE);
    }
    CHECK_EQ(nmaps, 1);
    graph_free(g);
}

CD_TEST(compact_residual_add_keeps_union_of_branches) {
    // y = relu(convB(x) + convC(x)) as a fused residual, then a 1x1 head:
    // channel c of the sum stays unless both branches' filter c are zero.
    cd_graph *g = graph_new();
    int k = cd_test_randi(6, 16);
    int x = new_value(g, 4, cd_test_randi(2, 7), cd_test_randi(2, 7));
    add_input(g, x);
    int c = conv(g, x, -1, k, 1, 0, 1, 1, CD_ACT_NONE);
    int b = conv(g, x, c, k, 1, 0, 1, 1, CD_ACT_RELU);
    int both = 0;
    for (int o = 0; o < k; o++) {
        int zb = cd_test_randi(0, 1), zc = cd_test_randi(0, 1);
        if (zb) zero_filter(g, b, o);
        if (zc) zero_filter(g, c, o);
        both += zb && zc;
    }
    // And an unfused Add of two more branches (the same rule through CD_OP_BINARY).
    int d = conv(g, b, -1, k, 1, 0, 1, 1, CD_ACT_NONE), e = conv(g, b, -1, k, 1, 0, 1, 1, CD_ACT_NONE);
    zero_filter(g, d, 0);
    zero_filter(g, e, 0);
    zero_filter(g, d, 1);
    int s = binary(g, d, e, CD_BINARY_ADD, CD_ACT_RELU);
    int head = conv(g, s, -1, 3, 1, 0, 1, 1, CD_ACT_NONE);
    add_output(g, head);
    check_compaction_exact(g, cd_test_randi(1, 5));
    CHECK_EQ(g->values[b].shape[1], k - both);
    CHECK_EQ(g->values[c].shape[1], k - both);
    CHECK_EQ(g->values[s].shape[1], k - 1); // channel 0 zero in both, channel 1 only in d
    graph_free(g);
}

CD_TEST(compact_zero_input_channels_drop_producer_filters) {
    // B reads none of A's channels 0 and 2: A stops computing them.
    cd_graph *g = graph_new();
    int x = new_value(g, 3, 5, 6);
    add_input(g, x);
    int a = conv(g, x, -1, 7, 3, 1, 1, 1, CD_ACT_RELU);
    int b = conv(g, a, -1, 4, 3, 1, 1, 1, CD_ACT_NONE);
    zero_in_channel(g, b, 0);
    zero_in_channel(g, b, 2);
    add_output(g, b);
    check_compaction_exact(g, cd_test_randi(1, 3));
    CHECK_EQ(conv_k(g, a), 5);
    CHECK_EQ(conv_c(g, b), 5);
    graph_free(g);
}

CD_TEST(compact_block_diagonal_connections_become_grouped_conv) {
    int G = cd_test_randi(2, 4), cpg = cd_test_randi(1, 4), kpg = cd_test_randi(1, 4);
    cd_graph *g = graph_new();
    int x = new_value(g, G * cpg, 6, 5);
    add_input(g, x);
    int a = conv(g, x, -1, G * kpg, 3, 1, 1, 1, CD_ACT_RELU);
    cd_op *op = producer(g, a);
    for (int o = 0; o < G * kpg; o++)
        for (int c = 0; c < G * cpg; c++)
            if (o / kpg != c / cpg) memset(op->u.conv.w + ((size_t)o * G * cpg + c) * 9, 0, 9 * sizeof(float));
    add_output(g, a);
    check_compaction_exact(g, cd_test_randi(1, 3));
    CHECK_EQ(producer(g, a)->u.conv.d.groups, G);
    CHECK(strstr(producer(g, a)->compact, "groups") != NULL);
    graph_free(g);
}

CD_TEST(compact_all_zero_layer_and_outputs_keep_shape) {
    // A 100%-pruned layer becomes constants folded downstream; the output
    // conv (all zero too) still has its shape.
    cd_graph *g = graph_new();
    int x = new_value(g, 3, 4, 4);
    add_input(g, x);
    int a = conv(g, x, -1, 8, 3, 1, 1, 1, CD_ACT_RELU);
    for (int o = 0; o < 8; o++) zero_filter(g, a, o);
    int b = conv(g, a, -1, 6, 1, 0, 1, 1, CD_ACT_CLIP);
    int c = conv(g, b, -1, 5, 1, 0, 2, 1, CD_ACT_NONE);
    for (int o = 0; o < 5; o++) zero_filter(g, c, o);
    add_output(g, c);
    check_compaction_exact(g, cd_test_randi(1, 4));
    CHECK_EQ(g->values[c].shape[1], 5);
    CHECK(g->values[a].shape[1] >= 1); // never an empty tensor
    CHECK(g->values[b].shape[1] >= 1);
    graph_free(g);
}

CD_TEST(compact_random_graphs_match_uncompacted) {
    // Random chains with pools, activations, concats, depthwise convs,
    // fused and unfused residual adds, and random zero filters / input
    // channels at 0%, 50%, 90%, 100%.
    static const double fracs[4] = {0.0, 0.5, 0.9, 1.0};
    for (int round = 0; round < 12; round++) {
        cd_graph *g = graph_new();
        int c0 = cd_test_randi(1, 5);
        int x = new_value(g, c0, cd_test_randi(4, 12), cd_test_randi(4, 12));
        add_input(g, x);
        int cur = x, prev = -1;
        int nops = cd_test_randi(3, 9);
        for (int i = 0; i < nops; i++) {
            const cd_value *v = &g->values[cur];
            int C = (int)v->shape[1], kind = cd_test_randi(0, 6);
            int k = cd_test_randi(1, 12), rs = cd_test_randi(0, 1) ? 1 : 3, pad = rs == 3 ? cd_test_randi(0, 1) : 0;
            if (v->shape[2] < 3 || v->shape[3] < 3) rs = 1, pad = 0;
            cd_act act = (cd_act)cd_test_randi(CD_ACT_NONE, CD_ACT_LEAKYRELU);
            int nxt;
            if (kind <= 2) {
                int res = kind == 2 && prev >= 0 && g->values[prev].shape[2] == v->shape[2] &&
                                  g->values[prev].shape[3] == v->shape[3] && (rs == 1 || pad)
                              ? prev
                              : -1;
                if (res >= 0) k = (int)g->values[res].shape[1];
                nxt = conv(g, cur, res, k, rs, pad, 1, 1, act);
                double f = fracs[cd_test_randi(0, 3)];
                for (int o = 0; o < k; o++)
                    if (cd_test_randf(0, 1) < f) zero_filter(g, nxt, o);
                if (cd_test_randi(0, 1))
                    for (int c = 0; c < C; c++)
                        if (cd_test_randf(0, 1) < f) zero_in_channel(g, nxt, c);
            } else if (kind == 3) {
                nxt = conv(g, cur, -1, C, 3, 1, 1, C, CD_ACT_RELU); // depthwise
                if (cd_test_randi(0, 1)) zero_filter(g, nxt, cd_test_randi(0, C - 1));
            } else if (kind == 4) {
                nxt = v->shape[2] >= 2 && v->shape[3] >= 2 ? unary(g, CD_OP_POOL, cur, CD_ACT_NONE)
                                                           : unary(g, CD_OP_ACT, cur, CD_ACT_SIGMOID);
            } else if (kind == 5) {
                int side = conv(g, cur, -1, cd_test_randi(1, 6), 1, 0, 1, 1, CD_ACT_RELU);
                zero_filter(g, side, 0);
                nxt = concat(g, cur, side);
            } else {
                int other = conv(g, cur, -1, C, 1, 0, 1, 1, CD_ACT_NONE);
                if (C > 1) zero_filter(g, other, 0);
                nxt = binary(g, cur, other, cd_test_randi(0, 1) ? CD_BINARY_ADD : CD_BINARY_MUL, act);
            }
            prev = cur;
            cur = nxt;
        }
        int head = conv(g, cur, -1, cd_test_randi(1, 4), 1, 0, 1, 1, CD_ACT_NONE);
        add_output(g, head);
        check_compaction_exact(g, cd_test_randi(1, 4));
        graph_free(g);
    }
}

CD_TEST(compact_disabled_only_records_analysis) {
    cd_graph *g = graph_new();
    int x = new_value(g, 3, 5, 5);
    add_input(g, x);
    int a = conv(g, x, -1, 6, 3, 1, 1, 1, CD_ACT_RELU);
    zero_filter(g, a, 2);
    int b = conv(g, a, -1, 4, 1, 0, 1, 1, CD_ACT_NONE);
    add_output(g, b);
    char err[128];
    CHECK_EQ(cd_graph_compact(g, 0, err, sizeof err), 0);
    CHECK_EQ(conv_k(g, a), 6);
    const cd_sparse_analysis *an = producer(g, a)->analysis;
    CHECK(an != NULL);
    CHECK_EQ(an->zero_out_channels, 1);
    CHECK_EQ(producer(g, a)->flops0, 2LL * 6 * 3 * 9 * 25);
    graph_free(g);
}
