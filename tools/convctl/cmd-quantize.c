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

#include "tools/convctl/convctl.h"
#include "tools/convctl/onnx-rewrite.h"
#include "tools/convctl/quant-graph.h"
#include "tools/convctl/quant-range.h"

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

const char ctl_quantize_help[] =
    "Offline: reads the float32 model IN, calibrates its activations by running it\n"
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

typedef enum { METHOD_MINMAX, METHOD_PERCENTILE, METHOD_ENTROPY } calib_method;

// An activation that OUT quantizes.
typedef struct {
    char *name;        // the ONNX value (owned: the rewrite renames node inputs)
    char *src;         // the value whose numbers it is (itself, or a reshape's source; owned)
    int all_readers;   // 1: every reader gets the DequantizeLinear (a conv's output);
                       // 0: only the quantized layers reading it
    ctl_qstat st;      // calibration statistics of src
    double lo, hi;     // the range chosen
    float scale;       // its quantization
    int zero_point;
    char *qname, *dqname; // outputs of its QuantizeLinear and DequantizeLinear
} qval;

// A Conv/Gemm/MatMul of IN.
typedef struct {
    int node;           // index in IN's graph
    const char *key;    // its name (as convd names its layer)
    const char *op;     // op type
    char *weight;       // the constant weight's name (owned)
    int axis;           // the weight's output-channel axis
    int quantize;       // 1 quantized, 0 kept float32 (why says why)
    const char *why;
    int in_q, out_q;    // qval indices of its input and (convs) output, -1 none
    const char *cmp;    // the value its SQNR compares: a conv's quantized output, else its output
    int64_t params, zeros_before, zeros_after;
    double sig, noise;     // sums of ref^2 and (ref - quantized)^2 over the inputs
    float *ref, *got;      // this input's values of cmp in IN and OUT
    size_t nref, ngot;
} qlayer;

// Where the calibration inputs come from.
typedef struct {
    char **files; // --calib: sorted .npy paths
    int nfiles;
    int random_n; // --calib-random
    uint64_t seed;
    int rank;                   // the model input's rank
    int64_t shape[CD_MAX_RANK]; // its shape, shape[0] = 1
    size_t item;                // elements per item
    int items;                  // total items
} calib_src;

typedef struct {
    const char *in, *out;
    calib_method method;
    double percentile;
    int act_u8;
    calib_src cal;
    ctl_onnx_model model;
    qlayer *L;
    int nl;
    qval *V;
    int nv;
    int progress; // stderr is a terminal: progress redrawn in place
    // The measurement.
    double out_sig, out_noise;
    int64_t zero_before, zero_after;
    double calib_s, write_s, measure_s;
} qctx;

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

static char *str_cat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
    }
    return s;
}

// ---- choosing the layers -----------------------------------------------------------

static int find_qval(const qctx *q, const char *name) {
    for (int i = 0; i < q->nv; i++)
        if (strcmp(q->V[i].name, name) == 0) return i;
    return -1;
}

// The qval for value name (added when new). Returns its index or -1 (out of memory).
static int add_qval(qctx *q, const char *name, int all_readers) {
    int i = find_qval(q, name);
    if (i < 0) {
        qval *v = realloc(q->V, (size_t)(q->nv + 1) * sizeof *v);
        if (!v) return -1;
        q->V = v;
        i = q->nv++;
        qval *x = &q->V[i];
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
        if (!(x->name = strdup(name)) || !(x->src = strdup(src)) || !(x->qname = str_cat(name, "_QuantizeLinear_Output")) ||
            !(x->dqname = str_cat(name, "_DequantizeLinear_Output")))
            return -1;
    }
    q->V[i].all_readers |= all_readers;
    return i;
}

// Finds the candidate layers and decides which are quantized. Returns the
// exit status (the error printed).
static int choose_layers(qctx *q, char **exclude, int nexclude, int quantize_all) {
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
        qlayer *L = realloc(q->L, (size_t)(q->nl + 1) * sizeof *L);
        if (!L) return ctl_fail_msg("E_NOMEM: out of memory");
        q->L = L;
        qlayer *y = &q->L[q->nl++];
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
        qlayer *y = &q->L[i];
        const Onnx__NodeProto *n = g->node[y->node];
        y->cmp = n->output[0];
        if (!y->quantize) continue;
        if ((y->in_q = add_qval(q, n->input[0], 0)) < 0) return ctl_fail_msg("E_NOMEM: out of memory");
    }
    return CTL_EXIT_OK;
}

// ---- calibration inputs ----------------------------------------------------------

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Lists and checks every .npy of dir (dtype, rank, per-item dims) before
// anything runs. Returns the exit status.
static int calib_open_dir(calib_src *c, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return ctl_fail_msg("E_IO: --calib %s: cannot open the folder: %s", dir, strerror(errno));
    int cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".npy") != 0) continue;
        if (c->nfiles == cap) {
            cap = cap ? cap * 2 : 16;
            char **f = realloc(c->files, (size_t)cap * sizeof *f);
            if (!f) {
                closedir(d);
                return ctl_fail_msg("E_NOMEM: out of memory");
            }
            c->files = f;
        }
        char *p = malloc(strlen(dir) + len + 2);
        if (!p) {
            closedir(d);
            return ctl_fail_msg("E_NOMEM: out of memory");
        }
        sprintf(p, "%s/%s", dir, e->d_name);
        c->files[c->nfiles++] = p;
    }
    closedir(d);
    if (!c->nfiles) return ctl_fail_msg("E_PARAMS: --calib %s: no .npy file in the folder", dir);
    qsort(c->files, (size_t)c->nfiles, sizeof *c->files, cmp_str);
    char want[128], err[512];
    ctl_fmt_shape(want, sizeof want, c->rank, c->shape);
    for (int i = 0; i < c->nfiles; i++) {
        cd_npy a;
        int rc = cd_npy_read(c->files[i], &a, err, sizeof err);
        if (rc) return ctl_fail_msg("%s: --calib: %s", cd_err_name(rc), err);
        int ok = a.dtype == CD_DTYPE_F32 && a.rank == c->rank && a.shape[0] >= 1;
        for (int k = 1; ok && k < c->rank; k++) ok = a.shape[k] == c->shape[k];
        if (!ok) {
            char got[128];
            ctl_fmt_shape(got, sizeof got, a.rank, a.shape);
            cd_npy_free(&a);
            return ctl_fail_msg("E_PARAMS: --calib: %s is %s%s, the model's input wants float32 [N, ...] with "
                                "per-item dims of %s",
                                c->files[i], cd_dtype_name(a.dtype), got, want);
        }
        c->items += (int)a.shape[0];
        cd_npy_free(&a);
    }
    return CTL_EXIT_OK;
}

static void calib_close(calib_src *c) {
    for (int i = 0; i < c->nfiles; i++) free(c->files[i]);
    free(c->files);
}

static float rand_uniform(uint64_t *s) { // xorshift64*: [-1, 1)
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    uint64_t r = *s * 0x2545F4914F6CDD1Dull;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// Calls fn(ud, item, index) on every calibration item, in the same order on
// every call. Returns 0 or the first non-zero fn or read status.
static int calib_each(const calib_src *c, int (*fn)(void *ud, const float *x, int index), void *ud) {
    if (!c->nfiles) {
        uint64_t s = c->seed * 0x9E3779B97F4A7C15ull + 0x1234567ull;
        float *x = malloc(c->item * sizeof(float));
        if (!x) return ctl_fail_msg("E_NOMEM: out of memory");
        int rc = 0;
        for (int i = 0; i < c->random_n && !rc; i++) {
            for (size_t k = 0; k < c->item; k++) x[k] = rand_uniform(&s);
            rc = fn(ud, x, i);
        }
        free(x);
        return rc;
    }
    int index = 0, rc = 0;
    char err[512];
    for (int f = 0; f < c->nfiles && !rc; f++) {
        cd_npy a;
        if ((rc = cd_npy_read(c->files[f], &a, err, sizeof err))) return ctl_fail_msg("%s: %s", cd_err_name(rc), err);
        for (int64_t i = 0; i < a.shape[0] && !rc; i++) rc = fn(ud, (const float *)a.data + (size_t)i * c->item, index++);
        cd_npy_free(&a);
    }
    return rc;
}

static void progress(const qctx *q, const char *what, int i, int n) {
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
    if (!t->value || !t->known || !t->out || cd_exec_init(t->m, &t->ex))
        return ctl_fail_msg("E_NOMEM: out of memory");
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
static int add_conv_outputs(qctx *q, traced *t) {
    for (int i = 0; i < cd_model_num_layers(t->m); i++) {
        cd_layer_info li;
        cd_model_layer(t->m, i, &li);
        for (int k = 0; k < q->nl; k++) {
            qlayer *y = &q->L[k];
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
    qctx *q;
    traced *t;
    int pass; // 1: ranges, 2: histograms
    int failed;
    const char *what;
} calib_run;

static void stat_add(calib_run *c, const char *value, const float *x, size_t n) {
    for (int i = 0; i < c->q->nv; i++) {
        qval *v = &c->q->V[i];
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

// Runs the calibration passes on IN and sets every qval's range and
// quantization. Returns the exit status.
static int calibrate(qctx *q, traced *t) {
    calib_run c = {q, t, 1, 0, "calibrating (ranges)"};
    int rc = calib_each(&q->cal, calib_item, &c);
    if (!rc && q->method != METHOD_MINMAX) {
        c.pass = 2;
        c.what = "calibrating (histograms)";
        rc = calib_each(&q->cal, calib_item, &c);
    }
    if (rc) return rc;
    for (int i = 0; i < q->nv; i++) {
        qval *v = &q->V[i];
        if (!v->st.count)
            return ctl_fail_msg("E_INTERNAL: the calibration never saw the values of '%s' (read by a layer to "
                                "quantize); --exclude that layer",
                                v->name);
        v->lo = v->st.min;
        v->hi = v->st.max;
        if (q->method != METHOD_MINMAX) {
            double T = q->method == METHOD_PERCENTILE ? ctl_qstat_percentile(&v->st, q->percentile)
                                                      : ctl_qstat_entropy(&v->st);
            v->lo = fmax(v->lo, -T);
            v->hi = fmin(v->hi, T);
        }
        ctl_qparams(v->lo, v->hi, q->act_u8, &v->scale, &v->zero_point);
    }
    return CTL_EXIT_OK;
}

// ---- writing OUT -----------------------------------------------------------------

// The grown node list of OUT.
typedef struct {
    Onnx__NodeProto **v;
    size_t n, cap;
} node_list;

static int push_node(node_list *l, Onnx__NodeProto *n) {
    if (!n) return CD_ENOMEM;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        Onnx__NodeProto **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            onnx__node_proto__free_unpacked(n, NULL);
            return CD_ENOMEM;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
    return 0;
}

static int add_init(qctx *q, const char *name, int32_t dtype, int rank, const int64_t *dims, const void *raw,
                    size_t nbytes) {
    Onnx__TensorProto *t = ctl_onnx_tensor_new(name, dtype, rank, dims, raw, nbytes);
    if (!t) return CD_ENOMEM;
    if (ctl_onnx_add_initializer(&q->model, t)) {
        onnx__tensor_proto__free_unpacked(t, NULL);
        return CD_ENOMEM;
    }
    return 0;
}

// The QuantizeLinear + DequantizeLinear of v, appended to l.
static int emit_qdq(qctx *q, const qval *v, node_list *l) {
    char *s = str_cat(v->name, "_scale"), *z = str_cat(v->name, "_zero_point"),
         *qn = str_cat(v->name, "_QuantizeLinear"), *dn = str_cat(v->name, "_DequantizeLinear");
    int rc = s && z && qn && dn ? 0 : CD_ENOMEM;
    uint8_t zp = (uint8_t)(q->act_u8 ? v->zero_point : (int8_t)v->zero_point);
    if (!rc) rc = add_init(q, s, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, &v->scale, 4);
    if (!rc)
        rc = add_init(q, z, q->act_u8 ? ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 : ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 0,
                      NULL, &zp, 1);
    if (!rc) rc = push_node(l, ctl_onnx_node_new("QuantizeLinear", qn, 3, (const char *[]){v->name, s, z}, v->qname,
                                                 NULL, 0));
    if (!rc) rc = push_node(l, ctl_onnx_node_new("DequantizeLinear", dn, 3, (const char *[]){v->qname, s, z},
                                                 v->dqname, NULL, 0));
    free(s);
    free(z);
    free(qn);
    free(dn);
    return rc;
}

// Quantizes layer y's weight: the s8 integers, scales and zero points as
// initializers and their DequantizeLinear appended to l; the layer reads it.
static int quantize_weight(qctx *q, qlayer *y, node_list *l, Onnx__NodeProto *n) {
    Onnx__TensorProto *t = ctl_onnx_find_const(&q->model, y->weight);
    float *w = NULL;
    size_t nw = 0;
    char err[512];
    int rc = ctl_onnx_read_f32(&q->model, t, &w, &nw, err, sizeof err);
    if (rc) return ctl_fail_msg("%s: %s", cd_err_name(rc), err);
    const int rank = (int)t->n_dims;
    const int64_t *dims = t->dims;
    const int64_t ch = dims[y->axis];
    int64_t inner = 1;
    for (int k = y->axis + 1; k < rank; k++) inner *= dims[k];
    float *scale = calloc((size_t)ch, sizeof *scale);
    int8_t *wq = malloc(nw ? nw : 1), *zp = calloc((size_t)ch, 1);
    char *qn = str_cat(y->weight, "_quantized"), *sn = str_cat(y->weight, "_scale"),
         *zn = str_cat(y->weight, "_zero_point"), *dq = str_cat(y->weight, "_DequantizeLinear"),
         *dqo = str_cat(y->weight, "_DequantizeLinear_Output");
    rc = scale && wq && zp && qn && sn && zn && dq && dqo ? 0 : CD_ENOMEM;
    for (size_t e = 0; !rc && e < nw; e++) {
        size_t c = (size_t)((int64_t)e / inner % ch);
        scale[c] = fmaxf(scale[c], fabsf(w[e]));
    }
    for (int64_t c = 0; !rc && c < ch; c++) // an all-zero channel: any positive scale keeps it 0
        scale[c] = scale[c] > 0 ? scale[c] / 127.0f : 1e-8f;
    y->params = (int64_t)nw;
    for (size_t e = 0; !rc && e < nw; e++) {
        size_t c = (size_t)((int64_t)e / inner % ch);
        float v = fminf(fmaxf(rintf(w[e] / scale[c]), -127.0f), 127.0f);
        wq[e] = (int8_t)v;
        y->zeros_before += w[e] == 0.0f;
        y->zeros_after += wq[e] == 0;
    }
    int64_t cdim = ch;
    // A weight two layers share is quantized once (same axis: same op kinds).
    int done = 0;
    for (size_t i = 0; !rc && i < q->model.proto->graph->n_initializer; i++)
        done |= strcmp(q->model.proto->graph->initializer[i]->name, qn) == 0;
    if (!rc && !done) rc = add_init(q, qn, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, rank, dims, wq, nw);
    if (!rc && !done) rc = add_init(q, sn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &cdim, scale, (size_t)ch * 4);
    if (!rc && !done) rc = add_init(q, zn, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 1, &cdim, zp, (size_t)ch);
    if (!rc && !done)
        rc = push_node(l, ctl_onnx_node_new("DequantizeLinear", dq, 3, (const char *[]){qn, sn, zn}, dqo, "axis",
                                            y->axis));
    if (!rc) rc = ctl_onnx_set_input(n, 1, dqo);
    free(w);
    free(scale);
    free(wq);
    free(zp);
    free(qn);
    free(sn);
    free(zn);
    free(dq);
    free(dqo);
    if (rc) return ctl_fail_msg("E_NOMEM: out of memory");
    return CTL_EXIT_OK;
}

static const qlayer *layer_of_node(const qctx *q, int node) {
    for (int i = 0; i < q->nl; i++)
        if (q->L[i].node == node) return &q->L[i];
    return NULL;
}

static int is_quantized_weight(const qctx *q, const char *name) {
    for (int i = 0; i < q->nl; i++)
        if (q->L[i].quantize && !strcmp(q->L[i].weight, name)) return 1;
    return 0;
}

static int is_graph_input(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name && !strcmp(g->input[i]->name, name)) return 1;
    return 0;
}

// Opset 13 added QuantizeLinear's axis (per channel). An older model moves to
// 13 only when none of its ops changed meaning on the way.
static int ensure_opset13(qctx *q) {
    int64_t v = ctl_onnx_opset(&q->model);
    if (v >= 13) return CTL_EXIT_OK;
    static const char *const same[] = {"Conv", "Relu", "BatchNormalization", "Add", "Mul", "Sub", "Gemm",
                                       "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten",
                                       "Reshape", "Clip", "Concat", "Identity", "Sigmoid", "Constant", "Dropout"};
    const Onnx__GraphProto *g = q->model.proto->graph;
    for (size_t i = 0; i < g->n_node; i++) {
        int ok = 0;
        for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) ok |= !strcmp(g->node[i]->op_type, same[k]);
        if (!ok)
            return ctl_fail_msg("E_UNSUPPORTED: %s imports opset %lld; per-channel QuantizeLinear needs 13 and "
                                "its %s node '%s' changed since: convert the model first "
                                "(onnx.version_converter.convert_version(model, 13))",
                                q->in, (long long)v, g->node[i]->op_type, ctl_qg_node_key(g->node[i]));
    }
    ctl_onnx_set_opset(&q->model, 13);
    return CTL_EXIT_OK;
}

// Rewrites the model in memory into its QDQ form. Returns the exit status.
static int rewrite(qctx *q) {
    int rc = ensure_opset13(q);
    if (rc) return rc;
    Onnx__GraphProto *g = q->model.proto->graph;
    const size_t n0 = g->n_node;
    // Which readers read a quantized activation's DequantizeLinear.
    for (size_t i = 0; i < n0; i++) {
        Onnx__NodeProto *n = g->node[i];
        const qlayer *y = layer_of_node(q, (int)i);
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j]) continue;
            int vi = find_qval(q, n->input[j]);
            if (vi < 0 || !(q->V[vi].all_readers || (y && y->quantize && j == 0))) continue;
            if (ctl_onnx_set_input(n, j, q->V[vi].dqname)) return ctl_fail_msg("E_NOMEM: out of memory");
        }
    }
    node_list l = {0};
    for (size_t i = 0; i < g->n_input && !rc; i++) {
        int vi = find_qval(q, g->input[i]->name);
        if (vi >= 0 && emit_qdq(q, &q->V[vi], &l)) rc = ctl_fail_msg("E_NOMEM: out of memory");
    }
    for (size_t i = 0; i < n0 && !rc; i++) {
        Onnx__NodeProto *n = g->node[i];
        qlayer *y = NULL;
        for (int k = 0; k < q->nl; k++)
            if (q->L[k].node == (int)i) y = &q->L[k];
        if (y && y->quantize && (rc = quantize_weight(q, y, &l, n))) break;
        if (push_node(&l, n)) {
            rc = ctl_fail_msg("E_NOMEM: out of memory");
            break;
        }
        g->node[i] = NULL; // now in l
        for (size_t j = 0; j < n->n_output && !rc; j++) {
            int vi = n->output[j] ? find_qval(q, n->output[j]) : -1;
            if (vi >= 0 && emit_qdq(q, &q->V[vi], &l)) rc = ctl_fail_msg("E_NOMEM: out of memory");
        }
    }
    // On failure the nodes not yet moved join l, so the model frees each once.
    for (size_t i = 0; i < n0; i++)
        if (g->node[i] && push_node(&l, g->node[i]) == 0) g->node[i] = NULL;
    free(g->node);
    g->node = l.v;
    g->n_node = l.n;
    if (rc) return rc;
    // The float weights nothing reads any more.
    size_t keep = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        if (ctl_qg_readers(g, t->name, NULL) == 0 && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
            is_quantized_weight(q, t->name) && !is_graph_input(g, t->name))
            onnx__tensor_proto__free_unpacked(t, NULL);
        else
            g->initializer[keep++] = t;
    }
    g->n_initializer = keep;
    return CTL_EXIT_OK;
}

// ---- measuring OUT against IN -----------------------------------------------------

typedef struct {
    qctx *q;
    traced *t;
    int got; // 0: IN's values go to ref, 1: OUT's to got
    int failed;
} measure_run;

// The IN value a layer of OUT computes: OUT keeps IN's names, and a
// quantized activation's QuantizeLinear/DequantizeLinear outputs stand for it.
static const char *canonical(const qctx *q, const char *v) {
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
        qlayer *y = &r->q->L[i];
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
    qctx *q;
    traced *f32, *qdq;
} measure_ctx;

static int measure_item(void *ud, const float *x, int index) {
    measure_ctx *c = ud;
    qctx *q = c->q;
    progress(q, "measuring the error", index, q->cal.items);
    char err[1024];
    const void *ins[1] = {x};
    measure_run r0 = {q, c->f32, 0, 0}, r1 = {q, c->qdq, 1, 0};
    for (int i = 0; i < q->nl; i++) q->L[i].ngot = q->L[i].nref = 0, free(q->L[i].ref), free(q->L[i].got),
                                     q->L[i].ref = q->L[i].got = NULL;
    void *o0[1] = {c->f32->out}, *o1[1] = {c->qdq->out};
    int rc = cd_model_run_traced(c->f32->ex, 1, ins, o0, measure_layer, &r0, err, sizeof err);
    if (!rc) rc = cd_model_run_traced(c->qdq->ex, 1, ins, o1, measure_layer, &r1, err, sizeof err);
    if (rc) return ctl_fail_msg("%s: measuring run: %s", cd_err_name(rc), err);
    if (r0.failed || r1.failed) return ctl_fail_msg("E_NOMEM: out of memory");
    for (int i = 0; i < q->nl; i++) {
        qlayer *y = &q->L[i];
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

// SQNR in dB of a signal and its error; +inf when there is no error.
static double sqnr_db(double sig, double noise) {
    if (!(noise > 0)) return INFINITY;
    return 10.0 * log10(sig / noise);
}

// ---- output -----------------------------------------------------------------------

static const char *method_name(calib_method m) {
    return m == METHOD_MINMAX ? "minmax" : m == METHOD_PERCENTILE ? "percentile" : "entropy";
}

static void print_table(const qctx *q) {
    static const char *heads[] = {"NODE", "OP", "DTYPE", "IN SCALE", "IN ZP", "OUT SCALE", "OUT ZP", "ZEROS", "SQNR dB"};
    static const bool num[] = {false, false, false, true, true, true, true, true, true};
    ctl_table t;
    ctl_table_init(&t, 9, heads, num);
    int nq = 0;
    for (int i = 0; i < q->nl; i++) {
        const qlayer *y = &q->L[i];
        char is[32] = "-", iz[16] = "-", os[32] = "-", oz[16] = "-", zs[48] = "-", sq[32] = "-", dt[48];
        if (y->quantize) {
            nq++;
            const qval *a = &q->V[y->in_q];
            snprintf(is, sizeof is, "%.4g", a->scale);
            snprintf(iz, sizeof iz, "%d", a->zero_point);
            if (y->out_q >= 0) {
                snprintf(os, sizeof os, "%.4g", q->V[y->out_q].scale);
                snprintf(oz, sizeof oz, "%d", q->V[y->out_q].zero_point);
            }
            snprintf(zs, sizeof zs, "%.1f%%", y->params ? 100.0 * y->zeros_after / y->params : 0.0);
            snprintf(sq, sizeof sq, "%.1f", sqnr_db(y->sig, y->noise));
            snprintf(dt, sizeof dt, "int8");
        } else {
            snprintf(dt, sizeof dt, "f32 (%s)", y->why);
        }
        ctl_table_add(&t, y->key, y->op, dt, is, iz, os, oz, zs, sq);
    }
    ctl_table_print(&t, 0);
    ctl_table_free(&t);
    printf("\n%d of %d layers quantized (weights s8 per channel, activations %s per tensor, %s); biases float32\n",
           nq, q->nl, q->act_u8 ? "u8" : "s8", method_name(q->method));
    printf("pruned zeros: %lld weights were 0, %lld are 0 now (of the quantized layers)\n",
           (long long)q->zero_before, (long long)q->zero_after);
    printf("output vs float32 on %d calibration input%s: relative L2 %.3g, SQNR %.1f dB\n", q->cal.items,
           q->cal.items == 1 ? "" : "s", sqrt(q->out_noise / (q->out_sig > 0 ? q->out_sig : 1)),
           sqnr_db(q->out_sig, q->out_noise));
    printf("wrote %s (calibration %.1f s, measurement %.1f s)\n", q->out, q->calib_s, q->measure_s);
}

static void kv_db(msgpack_packer *pk, const char *k, double v) {
    if (isfinite(v)) {
        ctl_mp_kv_f64(pk, k, v);
    } else {
        ctl_mp_str(pk, k);
        msgpack_pack_nil(pk); // no error at all: JSON has no infinity
    }
}

static int print_json(const qctx *q) {
    ctl_mp m;
    ctl_mp_init(&m);
    msgpack_packer *pk = &m.pk;
    msgpack_pack_map(pk, 11);
    ctl_mp_kv_str(pk, "in", q->in);
    ctl_mp_kv_str(pk, "out", q->out);
    ctl_mp_kv_str(pk, "method", method_name(q->method));
    ctl_mp_kv_str(pk, "act", q->act_u8 ? "u8" : "s8");
    ctl_mp_kv_str(pk, "bias", "float32");
    ctl_mp_kv_i64(pk, "calib_inputs", q->cal.items);
    ctl_mp_kv_str(pk, "calib", q->cal.nfiles ? "dir" : "random");
    ctl_mp_str(pk, "layers");
    msgpack_pack_array(pk, (size_t)q->nl);
    for (int i = 0; i < q->nl; i++) {
        const qlayer *y = &q->L[i];
        msgpack_pack_map(pk, 12);
        ctl_mp_kv_str(pk, "node", y->key);
        ctl_mp_kv_str(pk, "op", y->op);
        ctl_mp_kv_str(pk, "weight", y->weight);
        ctl_mp_kv_bool(pk, "quantized", y->quantize);
        ctl_mp_kv_str(pk, "kept_f32_because", y->quantize ? NULL : y->why);
        ctl_mp_kv_str(pk, "input", y->quantize ? q->V[y->in_q].name : NULL);
        ctl_mp_kv_f64(pk, "input_scale", y->quantize ? q->V[y->in_q].scale : 0);
        ctl_mp_kv_i64(pk, "input_zero_point", y->quantize ? q->V[y->in_q].zero_point : 0);
        ctl_mp_kv_str(pk, "output", y->cmp);
        ctl_mp_kv_f64(pk, "output_scale", y->out_q >= 0 ? q->V[y->out_q].scale : 0);
        ctl_mp_kv_i64(pk, "zero_weights", y->zeros_after);
        kv_db(pk, "sqnr_db", y->quantize ? sqnr_db(y->sig, y->noise) : NAN);
    }
    ctl_mp_str(pk, "output");
    msgpack_pack_map(pk, 2);
    ctl_mp_kv_f64(pk, "rel_l2", sqrt(q->out_noise / (q->out_sig > 0 ? q->out_sig : 1)));
    kv_db(pk, "sqnr_db", sqnr_db(q->out_sig, q->out_noise));
    ctl_mp_str(pk, "zeros");
    msgpack_pack_map(pk, 2);
    ctl_mp_kv_i64(pk, "before", q->zero_before);
    ctl_mp_kv_i64(pk, "after", q->zero_after);
    ctl_mp_str(pk, "seconds");
    msgpack_pack_map(pk, 2);
    ctl_mp_kv_f64(pk, "calibration", q->calib_s);
    ctl_mp_kv_f64(pk, "measurement", q->measure_s);
    return ctl_mp_print(&m);
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
static int run_quantize(ctl_ctx *ctx, qctx *q, const char *calib_dir, char **exclude, int nexclude, int all) {
    char err[1024];
    int st = ctl_onnx_load(q->in, &q->model, err, sizeof err);
    if (st) return ctl_fail_msg("%s: %s", cd_err_name(st), err);
    int rc = choose_layers(q, exclude, nexclude, all);
    if (rc) return rc;
    cd_runtime_options ropts; // CONVD_* (runtime/runtime.h)
    cd_runtime_options_from_env(&ropts);
    cd_runtime_configure(&ropts);
    if ((st = cd_runtime_init(0))) return ctl_fail_msg("%s: runtime initialisation failed", cd_err_name(st));
    traced f32 = {0}, qdq = {0};
    if ((rc = traced_open(&f32, q->in, q->model.proto->graph))) goto out;
    const cd_io_desc *in = cd_model_input(f32.m, 0);
    if (in->dtype != CD_DTYPE_F32) {
        rc = ctl_fail_msg("E_UNSUPPORTED: %s: the input '%s' is %s; convctl quantize calibrates float32 inputs",
                          q->in, in->name, cd_dtype_name(in->dtype));
        goto out;
    }
    q->cal.rank = in->rank;
    memcpy(q->cal.shape, in->shape, sizeof q->cal.shape);
    q->cal.item = numel_of(in->rank - 1, in->shape + 1);
    if (calib_dir && (rc = calib_open_dir(&q->cal, calib_dir))) goto out;
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
    if ((rc = rewrite(q))) goto out;
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
    if ((rc = calib_each(&q->cal, measure_item, &mc))) goto out;
    q->measure_s = now_s() - t0;
    rc = ctx->json ? print_json(q) : (print_table(q), CTL_EXIT_OK);
out:
    traced_close(&f32);
    traced_close(&qdq);
    return rc;
}

int ctl_cmd_quantize(ctl_ctx *ctx, int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}, *calib_dir = NULL;
    int npos = 0, all = 0, nexclude = 0, ncopies = 0, rc = CTL_EXIT_OK;
    char *exclude[MAX_EXCLUDE], *copies[MAX_EXCLUDE];
    qctx q;
    memset(&q, 0, sizeof q);
    q.method = METHOD_MINMAX;
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
                q.method = METHOD_MINMAX;
            else if (!missing && !strcmp(v, "percentile"))
                q.method = METHOD_PERCENTILE;
            else if (!missing && !strcmp(v, "entropy"))
                q.method = METHOD_ENTROPY;
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
            char *copy = strdup(v);
            if (!copy || ncopies == MAX_EXCLUDE) {
                free(copy);
                rc = ctl_fail_msg("E_NOMEM: too many --exclude options");
                goto out;
            }
            copies[ncopies++] = copy;
            for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (nexclude == MAX_EXCLUDE) {
                    rc = ctl_usage_error(argv[0], "more than %d --exclude names", MAX_EXCLUDE);
                    goto out;
                }
                exclude[nexclude++] = tok;
            }
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
    rc = run_quantize(ctx, &q, calib_dir, exclude, nexclude, all);
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
    calib_close(&q.cal);
    ctl_onnx_free(&q.model);
    for (int i = 0; i < ncopies; i++) free(copies[i]);
    return rc;
}
