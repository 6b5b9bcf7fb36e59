// convctl quantize: offline static quantization of an f32 ONNX model into
// standard QDQ, calibrated on convd's own runtime.
//
//   convctl quantize IN.onnx OUT.onnx [--calib DIR | --calib-random N] [--seed S]
//                    [--method minmax|percentile|entropy] [--percentile P]
//                    [--act u8|s8] [--exclude NAME,...] [--quantize-all] [--json]
//
// 1. Choose the layers: every Conv (4-D constant weight), Gemm and MatMul
//    (constant B) but the first Conv and the last Gemm/MatMul (unless
//    --quantize-all) and the --exclude'd ones.
// 2. Calibrate: run IN (plan dense, batch 1) on every calibration input with
//    cd_model_run_traced and gather the statistics (quant-range.h) of the
//    activations the output will quantize: the input of each quantized
//    layer, and each quantized conv's output after its BatchNormalization and
//    Relu/Clip (the value the next op reads).
// 3. Write OUT: the weights become per-channel symmetric s8 (axis = output
//    channel, scale max|w| / 127, zero point 0, so a pruned 0 stays exactly 0)
//    behind a DequantizeLinear; each quantized activation gets a
//    QuantizeLinear + DequantizeLinear pair (u8 asymmetric or s8 symmetric,
//    per tensor); biases stay float32. Opset >= 13 (per-channel axis).
// 4. Measure: run IN and OUT traced on the same inputs and print each
//    quantized layer's SQNR and the output's relative L2 error.

#include "tools/convctl/quantize.h"

#include "tools/convctl/convctl.h"
#include "tools/convctl/quant-graph.h"

#include "core/errors.h"
#include "runtime/runtime.h"
#include "tools/common/npy.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char ctl_quantize_help[] = "Offline: reads the float32 model IN, calibrates its activations by running it\n"
                                 "on convd's runtime, writes OUT in the QDQ form (QuantizeLinear/DequantizeLinear\n"
                                 "pairs) that onnxruntime and convd load. No daemon, no Python.\n"
                                 "  --calib DIR        every *.npy in DIR is a batch for the model's input:\n"
                                 "                     float32, shape [N, per-item dims]\n"
                                 "  --calib-random N   N random inputs, uniform in [-1, 1] (default 16)\n"
                                 "  --seed S           seed of the random inputs (default 0)\n"
                                 "  --method M         minmax (default): the range seen; percentile: clip |x| at\n"
                                 "                     its --percentile P (default 99.99); entropy: the clip of\n"
                                 "                     least KL divergence (2048 bins, TensorRT's search)\n"
                                 "  --act u8|s8        activations: u8 asymmetric (default) or s8 symmetric\n"
                                 "  --exclude LIST     comma-separated node names to keep float32 (repeatable)\n"
                                 "  --quantize-all     also quantize the first Conv and the last Gemm/MatMul\n"
                                 "                     (kept float32 by default)\n"
                                 "Weights: per output channel, symmetric s8 (zero point 0: a pruned weight\n"
                                 "stays exactly 0). Biases stay float32. Prints each quantized layer's SQNR\n"
                                 "(dB) against the float model on the calibration inputs and the output's\n"
                                 "relative L2 error; --json prints the same as JSON. See docs/QUANTIZATION.md.";

#define MAX_EXCLUDE 256

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int64_t attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt) {
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (a && a->name && strcmp(a->name, name) == 0 && a->has_i) return a->i;
    }
    return dflt;
}

// ---- choosing the layers -----------------------------------------------------------

// The ctl_qval for value name (added when new). Returns its index or -1 (out of memory).
static int add_qval(ctl_qctx *q, const char *name, int all_readers) {
    int i = ctl_quant_find_qval(q, name);
    if (i < 0) {
        ctl_qval *v = realloc(q->V, (size_t)(q->nv + 1) * sizeof *v);
        if (!v) return -1;
        q->V = v;
        i = q->nv++;
        ctl_qval *x = &q->V[i];
        memset(x, 0, sizeof *x);
        ctl_qstat_init(&x->st);
        // A reshape's output holds its input's numbers: the statistics come from there.
        const Onnx__GraphProto *g = q->model.proto->graph;
        const char *src = name;
        for (int depth = 0; depth < 16; depth++) {
            int p = ctl_qg_producer(g, src);
            if (p < 0 || !ctl_qg_is_reshape_op(g->node[p]->op_type) || g->node[p]->n_input < 1) break;
            src = g->node[p]->input[0];
        }
        if (!(x->name = strdup(name)) || !(x->src = strdup(src)) ||
            !(x->qname = ctl_str_cat(name, "_QuantizeLinear_Output")) ||
            !(x->dqname = ctl_str_cat(name, "_DequantizeLinear_Output")))
            return -1;
    }
    q->V[i].all_readers |= all_readers;
    return i;
}

// Finds the candidate layers and decides which are quantized. Returns the
// exit status (the error printed).
static int choose_layers(ctl_qctx *q, char **exclude, int nexclude, int quantize_all) {
    const Onnx__GraphProto *g = q->model.proto->graph;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        const char *op = n->op_type ? n->op_type : "";
        if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) continue;
        if (strstr(op, "QuantizeLinear") || strstr(op, "DequantizeLinear") || strncmp(op, "QLinear", 7) == 0 ||
            strstr(op, "Integer"))
            return ctl_fail_msg("E_PARAMS: %s is already quantized (node '%s' is %s); quantize its float32 "
                                "original",
                                q->in, ctl_qg_node_key(n), op);
        int is_conv = !strcmp(op, "Conv"), is_gemm = !strcmp(op, "Gemm"), is_mm = !strcmp(op, "MatMul");
        if (!is_conv && !is_gemm && !is_mm) continue;
        if (n->n_input < 2 || n->n_output < 1) continue;
        Onnx__TensorProto *w = ctl_onnx_find_const(&q->model, n->input[1]);
        if (!w || ctl_onnx_find_const(&q->model, n->input[0])) continue;
        if (is_conv && w->n_dims != 4) continue;
        if (!is_conv && w->n_dims != 2) continue;
        if (is_gemm && attr_int(n, "transA", 0)) continue;
        if (!w->has_data_type || w->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            return ctl_fail_msg("E_UNSUPPORTED: %s: the weight '%s' of node '%s' has data type %d, not float32: "
                                "only float32 models are quantized",
                                q->in, n->input[1], ctl_qg_node_key(n), w->has_data_type ? w->data_type : 0);
        ctl_qlayer *L = realloc(q->L, (size_t)(q->nl + 1) * sizeof *L);
        if (!L) return ctl_fail_msg("E_NOMEM: out of memory");
        q->L = L;
        ctl_qlayer *y = &q->L[q->nl++];
        memset(y, 0, sizeof *y);
        y->node = (int)i;
        y->key = ctl_qg_node_key(n);
        y->op = op;
        if (!(y->weight = strdup(n->input[1]))) return ctl_fail_msg("E_NOMEM: out of memory");
        y->axis = is_conv ? 0 : is_gemm && attr_int(n, "transB", 0) ? 0 : 1;
        y->quantize = 1;
        y->in_q = y->out_q = -1;
    }
    if (!q->nl)
        return ctl_fail_msg("E_PARAMS: %s has no Conv, Gemm or MatMul with a constant weight to quantize", q->in);
    int first_conv = -1, last_fc = -1;
    for (int i = 0; i < q->nl; i++) {
        if (first_conv < 0 && !strcmp(q->L[i].op, "Conv")) first_conv = i;
        if (strcmp(q->L[i].op, "Conv")) last_fc = i;
    }
    if (!quantize_all) {
        if (first_conv >= 0) q->L[first_conv].quantize = 0, q->L[first_conv].why = "first conv";
        if (last_fc >= 0) q->L[last_fc].quantize = 0, q->L[last_fc].why = "last FC";
    }
    for (int e = 0; e < nexclude; e++) {
        int hit = 0;
        for (int i = 0; i < q->nl; i++)
            if (!strcmp(q->L[i].key, exclude[e])) {
                q->L[i].quantize = 0;
                q->L[i].why = "--exclude";
                hit = 1;
            }
        if (!hit)
            return ctl_fail_msg("E_PARAMS: --exclude %s: no Conv, Gemm or MatMul node of %s has that name", exclude[e],
                                q->in);
    }
    for (int i = 0; i < q->nl; i++) {
        ctl_qlayer *y = &q->L[i];
        const Onnx__NodeProto *n = g->node[y->node];
        y->cmp = n->output[0];
        if (!y->quantize) continue;
        if ((y->in_q = add_qval(q, n->input[0], 0)) < 0) return ctl_fail_msg("E_NOMEM: out of memory");
    }
    return CTL_EXIT_OK;
}

static void progress(const ctl_qctx *q, const char *what, int i, int n) {
    if (q->progress)
        fprintf(stderr, "\rconvctl quantize: %s %d/%d%s", what, i, n, i == n ? "\n" : "");
    else if (i == 0)
        fprintf(stderr, "convctl quantize: %s (%d inputs)\n", what, n);
}

// ---- tracing -------------------------------------------------------------------------

// One model being traced: what each of its layers outputs in ONNX terms.
typedef struct {
    cd_model *m;
    cd_exec *ex;
    const Onnx__GraphProto *g; // the graph m was loaded from
    const char **value;        // per layer: the ONNX value it outputs (NULL unknown)
    int *known;                // per layer: value resolved
    float *out;                // the model's output for one item
    size_t nout;
} traced;

static int traced_open(traced *t, const char *path, const Onnx__GraphProto *g) {
    memset(t, 0, sizeof *t);
    char err[1024];
    cd_model_opts o = {.max_batch = 1, .plan = 1};
    int rc = cd_model_load(path, &o, &t->m, err, sizeof err);
    if (rc) return ctl_fail_msg("%s: %s", cd_err_name(rc), err);
    if (cd_model_num_inputs(t->m) != 1 || cd_model_num_outputs(t->m) != 1)
        return ctl_fail_msg("E_UNSUPPORTED: %s has %d inputs and %d outputs; convctl quantize calibrates models "
                            "of one input and one output",
                            path, cd_model_num_inputs(t->m), cd_model_num_outputs(t->m));
    const cd_io_desc *od = cd_model_output(t->m, 0);
    t->nout = 1;
    for (int k = 1; k < od->rank; k++) t->nout *= (size_t)od->shape[k];
    int nl = cd_model_num_layers(t->m);
    t->g = g;
    t->value = calloc((size_t)nl + 1, sizeof *t->value);
    t->known = calloc((size_t)nl + 1, sizeof *t->known);
    t->out = malloc(t->nout * sizeof(float));
    if (!t->value || !t->known || !t->out || cd_exec_init(t->m, &t->ex)) return ctl_fail_msg("E_NOMEM: out of memory");
    return CTL_EXIT_OK;
}

static void traced_close(traced *t) {
    cd_exec_free(t->ex);
    cd_model_free(t->m);
    free(t->value);
    free(t->known);
    free(t->out);
}

static const char *traced_value(traced *t, int layer, const char *name, const char *label) {
    if (!t->known[layer]) {
        t->value[layer] = ctl_qg_layer_value(t->g, name, label);
        t->known[layer] = 1;
    }
    return t->value[layer];
}

static size_t numel_of(int rank, const int64_t *shape) {
    size_t n = 1;
    for (int k = 0; k < rank; k++) n *= (size_t)shape[k];
    return n;
}

// The output of each quantized conv is quantized where convd's fused layer
// of it ends (after BatchNormalization, Relu/Clip and a residual Add): the
// value the next op reads, and the one an int8 kernel requantizes into.
static int add_conv_outputs(ctl_qctx *q, traced *t) {
    for (int i = 0; i < cd_model_num_layers(t->m); i++) {
        cd_layer_info li;
        cd_model_layer(t->m, i, &li);
        for (int k = 0; k < q->nl; k++) {
            ctl_qlayer *y = &q->L[k];
            if (!y->quantize || strcmp(y->op, "Conv") || strcmp(y->key, li.name)) continue;
            const char *v = traced_value(t, i, li.name, li.op);
            if (!v) continue;
            y->cmp = v;
            if ((y->out_q = add_qval(q, v, 1)) < 0) return ctl_fail_msg("E_NOMEM: out of memory");
        }
    }
    return CTL_EXIT_OK;
}

// ---- calibration ---------------------------------------------------------------

typedef struct {
    ctl_qctx *q;
    traced *t;
    int pass; // 1: ranges, 2: histograms
    int failed;
    const char *what;
} calib_run;

static void stat_add(calib_run *c, const char *value, const float *x, size_t n) {
    for (int i = 0; i < c->q->nv; i++) {
        ctl_qval *v = &c->q->V[i];
        if (strcmp(v->src, value) != 0) continue;
        if (c->pass == 1)
            ctl_qstat_add_range(&v->st, x, n);
        else if (ctl_qstat_add_hist(&v->st, x, n))
            c->failed = 1;
    }
}

static void calib_layer(void *ud, int layer, const char *name, const char *label, const float *x, int rank,
                        const int64_t *shape) {
    calib_run *c = ud;
    const char *v = traced_value(c->t, layer, name, label);
    if (v) stat_add(c, v, x, numel_of(rank, shape));
}

static int calib_item(void *ud, const float *x, int index) {
    calib_run *c = ud;
    progress(c->q, c->what, index, c->q->cal.items);
    const cd_io_desc *in = cd_model_input(c->t->m, 0);
    stat_add(c, in->name, x, c->q->cal.item); // the graph input is no layer's output
    char err[1024];
    const void *ins[1] = {x};
    void *outs[1] = {c->t->out};
    int rc = cd_model_run_traced(c->t->ex, 1, ins, outs, calib_layer, c, err, sizeof err);
    if (rc) return ctl_fail_msg("%s: calibration run: %s", cd_err_name(rc), err);
    if (c->failed) return ctl_fail_msg("E_NOMEM: out of memory");
    progress(c->q, c->what, index + 1, c->q->cal.items);
    return 0;
}

// Runs the calibration passes on IN and sets every ctl_qval's range and
// quantization. Returns the exit status.
static int calibrate(ctl_qctx *q, traced *t) {
    calib_run c = {q, t, 1, 0, "calibrating (ranges)"};
    int rc = ctl_calib_each(&q->cal, calib_item, &c);
    if (!rc && q->method != CTL_QMETHOD_MINMAX) {
        c.pass = 2;
        c.what = "calibrating (histograms)";
        rc = ctl_calib_each(&q->cal, calib_item, &c);
    }
    if (rc) return rc;
    for (int i = 0; i < q->nv; i++) {
        ctl_qval *v = &q->V[i];
        if (!v->st.count)
            return ctl_fail_msg("E_INTERNAL: the calibration never saw the values of '%s' (read by a layer to "
                                "quantize); --exclude that layer",
                                v->name);
        v->lo = v->st.min;
        v->hi = v->st.max;
        if (q->method != CTL_QMETHOD_MINMAX) {
            double T = q->method == CTL_QMETHOD_PERCENTILE ? ctl_qstat_percentile(&v->st, q->percentile)
                                                           : ctl_qstat_entropy(&v->st);
            v->lo = fmax(v->lo, -T);
            v->hi = fmin(v->hi, T);
        }
        ctl_qparams(v->lo, v->hi, q->act_u8, &v->scale, &v->zero_point);
    }
    return CTL_EXIT_OK;
}

// ---- measuring OUT against IN -----------------------------------------------------

typedef struct {
    ctl_qctx *q;
    traced *t;
    int got; // 0: IN's values go to ref, 1: OUT's to got
    int failed;
} measure_run;

// The IN value a layer of OUT computes: OUT keeps IN's names, and a
// quantized activation's QuantizeLinear/DequantizeLinear outputs stand for it.
static const char *canonical(const ctl_qctx *q, const char *v) {
    for (int i = 0; i < q->nv; i++)
        if (!strcmp(q->V[i].qname, v) || !strcmp(q->V[i].dqname, v)) return q->V[i].name;
    return v;
}

static void measure_layer(void *ud, int layer, const char *name, const char *label, const float *x, int rank,
                          const int64_t *shape) {
    measure_run *r = ud;
    const char *v = traced_value(r->t, layer, name, label);
    if (!v) return;
    v = canonical(r->q, v);
    size_t n = numel_of(rank, shape);
    for (int i = 0; i < r->q->nl; i++) {
        ctl_qlayer *y = &r->q->L[i];
        if (!y->quantize || strcmp(y->cmp, v) != 0) continue;
        float **buf = r->got ? &y->got : &y->ref;
        size_t *len = r->got ? &y->ngot : &y->nref;
        if (*len != n) {
            free(*buf);
            *buf = malloc(n * sizeof(float));
            *len = *buf ? n : 0;
            if (!*buf) {
                r->failed = 1;
                continue;
            }
        }
        memcpy(*buf, x, n * sizeof(float)); // the last layer writing v wins: OUT's QuantizeLinear
    }
}

typedef struct {
    ctl_qctx *q;
    traced *f32, *qdq;
} measure_ctx;

static int measure_item(void *ud, const float *x, int index) {
    measure_ctx *c = ud;
    ctl_qctx *q = c->q;
    progress(q, "measuring the error", index, q->cal.items);
    char err[1024];
    const void *ins[1] = {x};
    measure_run r0 = {q, c->f32, 0, 0}, r1 = {q, c->qdq, 1, 0};
    for (int i = 0; i < q->nl; i++)
        q->L[i].ngot = q->L[i].nref = 0, free(q->L[i].ref), free(q->L[i].got), q->L[i].ref = q->L[i].got = NULL;
    void *o0[1] = {c->f32->out}, *o1[1] = {c->qdq->out};
    int rc = cd_model_run_traced(c->f32->ex, 1, ins, o0, measure_layer, &r0, err, sizeof err);
    if (!rc) rc = cd_model_run_traced(c->qdq->ex, 1, ins, o1, measure_layer, &r1, err, sizeof err);
    if (rc) return ctl_fail_msg("%s: measuring run: %s", cd_err_name(rc), err);
    if (r0.failed || r1.failed) return ctl_fail_msg("E_NOMEM: out of memory");
    for (int i = 0; i < q->nl; i++) {
        ctl_qlayer *y = &q->L[i];
        if (!y->quantize || !y->nref || y->nref != y->ngot) continue;
        for (size_t k = 0; k < y->nref; k++) {
            double d = (double)y->ref[k] - y->got[k];
            y->sig += (double)y->ref[k] * y->ref[k];
            y->noise += d * d;
        }
    }
    for (size_t k = 0; k < c->f32->nout; k++) {
        double d = (double)c->f32->out[k] - c->qdq->out[k];
        q->out_sig += (double)c->f32->out[k] * c->f32->out[k];
        q->out_noise += d * d;
    }
    progress(q, "measuring the error", index + 1, q->cal.items);
    return 0;
}

// ---- the command -------------------------------------------------------------------

// Parses "--opt V" / "--opt=V": the value (advancing *i) or NULL when
// argv[*i] is not opt; *missing is set when the value is absent.
static const char *opt_value(int argc, char **argv, int *i, const char *opt, int *missing) {
    const size_t n = strlen(opt);
    const char *a = argv[*i];
    if (strncmp(a, opt, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != 0) return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

// Loads IN in the runtime and sets the calibration's input shape. Returns the exit status.
static int run_quantize(ctl_ctx *ctx, ctl_qctx *q, const char *calib_dir, char **exclude, int nexclude, int all) {
    char err[1024];
    int st = ctl_onnx_load(q->in, &q->model, err, sizeof err);
    if (st) return ctl_fail_msg("%s: %s", cd_err_name(st), err);
    int rc = choose_layers(q, exclude, nexclude, all);
    if (rc) return rc;
    cd_runtime_options ropts; // CONVD_* (runtime/runtime.h)
    cd_runtime_options_from_env(&ropts);
    // OUT is measured on convd's float32 path over the quantization grid
    // (int8 off): the int8 kernels compute the same grid values, and their
    // activations between two int8 convs are integers no trace can show.
    ropts.int8 = 1;
    cd_runtime_configure(&ropts);
    if ((st = cd_runtime_init(0))) return ctl_fail_msg("%s: runtime initialisation failed", cd_err_name(st));
    traced f32 = {0}, qdq = {0};
    if ((rc = traced_open(&f32, q->in, q->model.proto->graph))) goto out;
    const cd_io_desc *in = cd_model_input(f32.m, 0);
    if (in->dtype != CD_DTYPE_F32) {
        rc = ctl_fail_msg("E_UNSUPPORTED: %s: the input '%s' is %s; convctl quantize calibrates float32 inputs", q->in,
                          in->name, cd_dtype_name(in->dtype));
        goto out;
    }
    q->cal.rank = in->rank;
    memcpy(q->cal.shape, in->shape, sizeof q->cal.shape);
    q->cal.item = numel_of(in->rank - 1, in->shape + 1);
    if (calib_dir && (rc = ctl_calib_open_dir(&q->cal, calib_dir))) goto out;
    if (!calib_dir) q->cal.items = q->cal.random_n;

    if ((rc = add_conv_outputs(q, &f32))) goto out;
    double t0 = now_s();
    if ((rc = calibrate(q, &f32))) goto out;
    q->calib_s = now_s() - t0;
    // The calibration read IN's graph; the rewrite changes it, so the traced
    // IN model resolves its layers now, before that.
    // (The names are outputs of IN's nodes, which the rewrite keeps.)
    for (int i = 0; i < cd_model_num_layers(f32.m); i++) {
        cd_layer_info li;
        cd_model_layer(f32.m, i, &li);
        traced_value(&f32, i, li.name, li.op);
    }
    if ((rc = ctl_quant_rewrite(q))) goto out;
    for (int i = 0; i < q->nl; i++) {
        q->zero_before += q->L[i].zeros_before;
        q->zero_after += q->L[i].zeros_after;
    }
    if ((st = ctl_onnx_save(&q->model, q->out, err, sizeof err))) {
        rc = ctl_fail_msg("%s: %s", cd_err_name(st), err);
        goto out;
    }
    t0 = now_s();
    if ((rc = traced_open(&qdq, q->out, q->model.proto->graph))) {
        fprintf(stderr, "convctl quantize: %s was written but convd cannot load it (a bug: please report it)\n",
                q->out);
        goto out;
    }
    measure_ctx mc = {q, &f32, &qdq};
    if ((rc = ctl_calib_each(&q->cal, measure_item, &mc))) goto out;
    q->measure_s = now_s() - t0;
    rc = ctx->json ? ctl_quant_print_json(q) : (ctl_quant_print_table(q), CTL_EXIT_OK);
out:
    traced_close(&f32);
    traced_close(&qdq);
    return rc;
}

// The --exclude names: tokens of the copied option values.
typedef struct {
    char *names[MAX_EXCLUDE];
    int n;
    char *copies[MAX_EXCLUDE];
    int ncopies;
} exclude_list;

// Adds the comma-separated names of list to ex. Returns the exit status.
static int add_excludes(const char *prog, const char *list, exclude_list *ex) {
    char *copy = strdup(list);
    if (!copy || ex->ncopies == MAX_EXCLUDE) {
        free(copy);
        return ctl_fail_msg("E_NOMEM: too many --exclude options");
    }
    ex->copies[ex->ncopies++] = copy;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (ex->n == MAX_EXCLUDE) return ctl_usage_error(prog, "more than %d --exclude names", MAX_EXCLUDE);
        ex->names[ex->n++] = tok;
    }
    return CTL_EXIT_OK;
}

int ctl_cmd_quantize(ctl_ctx *ctx, int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}, *calib_dir = NULL;
    int npos = 0, all = 0, rc = CTL_EXIT_OK;
    exclude_list ex = {.n = 0};
    ctl_qctx q;
    memset(&q, 0, sizeof q);
    q.method = CTL_QMETHOD_MINMAX;
    q.percentile = 99.99;
    q.act_u8 = 1;
    q.cal.random_n = 16;
    int random_given = 0;
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) {
            rc = CTL_EXIT_USAGE;
            goto out;
        }
        if (r > 0) continue;
        const char *a = argv[i], *v;
        int missing = 0;
        long n;
        if ((v = opt_value(argc, argv, &i, "--calib", &missing)) || missing) {
            if (missing || !*v) {
                rc = ctl_usage_error(argv[0], "--calib needs a folder of .npy files");
                goto out;
            }
            calib_dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--calib-random", &missing)) || missing) {
            if (missing || parse_long(v, 1, 1000000, &n)) {
                rc = ctl_usage_error(argv[0], "--calib-random wants a count 1..1000000");
                goto out;
            }
            q.cal.random_n = (int)n;
            random_given = 1;
        } else if ((v = opt_value(argc, argv, &i, "--seed", &missing)) || missing) {
            if (missing || parse_long(v, 0, 0x7fffffffL, &n)) {
                rc = ctl_usage_error(argv[0], "--seed wants an integer 0..2147483647");
                goto out;
            }
            q.cal.seed = (uint64_t)n;
        } else if ((v = opt_value(argc, argv, &i, "--method", &missing)) || missing) {
            if (!missing && !strcmp(v, "minmax"))
                q.method = CTL_QMETHOD_MINMAX;
            else if (!missing && !strcmp(v, "percentile"))
                q.method = CTL_QMETHOD_PERCENTILE;
            else if (!missing && !strcmp(v, "entropy"))
                q.method = CTL_QMETHOD_ENTROPY;
            else {
                rc = ctl_usage_error(argv[0], "--method must be minmax, percentile or entropy");
                goto out;
            }
        } else if ((v = opt_value(argc, argv, &i, "--percentile", &missing)) || missing) {
            char *end;
            double p = missing ? 0 : strtod(v, &end);
            if (missing || !*v || *end || !(p > 50.0 && p <= 100.0)) {
                rc = ctl_usage_error(argv[0], "--percentile wants a number in (50, 100], e.g. 99.99");
                goto out;
            }
            q.percentile = p;
        } else if ((v = opt_value(argc, argv, &i, "--act", &missing)) || missing) {
            if (missing || (strcmp(v, "u8") && strcmp(v, "s8"))) {
                rc = ctl_usage_error(argv[0], "--act must be u8 or s8");
                goto out;
            }
            q.act_u8 = !strcmp(v, "u8");
        } else if ((v = opt_value(argc, argv, &i, "--exclude", &missing)) || missing) {
            if (missing || !*v) {
                rc = ctl_usage_error(argv[0], "--exclude needs a list of node names");
                goto out;
            }
            if ((rc = add_excludes(argv[0], v, &ex))) goto out;
        } else if (strcmp(a, "--quantize-all") == 0) {
            all = 1;
        } else if (a[0] == '-' && a[1]) {
            rc = ctl_usage_error(argv[0], "unknown option '%s'", a);
            goto out;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            rc = ctl_usage_error(argv[0], "unexpected argument '%s'", a);
            goto out;
        }
    }
    if (npos != 2) {
        rc = ctl_usage_error(argv[0], "IN.onnx and OUT.onnx are required");
        goto out;
    }
    if (calib_dir && random_given) {
        rc = ctl_usage_error(argv[0], "--calib and --calib-random exclude each other");
        goto out;
    }
    q.in = pos[0];
    q.out = pos[1];
    q.progress = isatty(STDERR_FILENO);
    rc = run_quantize(ctx, &q, calib_dir, ex.names, ex.n, all);
out:
    for (int i = 0; i < q.nl; i++) {
        free(q.L[i].ref);
        free(q.L[i].got);
        free(q.L[i].weight);
    }
    free(q.L);
    for (int i = 0; i < q.nv; i++) {
        ctl_qstat_free(&q.V[i].st);
        free(q.V[i].name);
        free(q.V[i].src);
        free(q.V[i].qname);
        free(q.V[i].dqname);
    }
    free(q.V);
    ctl_calib_close(&q.cal);
    ctl_onnx_free(&q.model);
    for (int i = 0; i < ex.ncopies; i++) free(ex.copies[i]);
    return rc;
}
