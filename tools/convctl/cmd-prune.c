// convctl prune: offline one-shot magnitude pruning of an ONNX model.
//
//   convctl prune IN.onnx OUT.onnx --sparsity S [--mode M] [--per-layer]
//                 [--skip first,last,NAME,...] [--include-depthwise] [--json]
//
// Finds the weights of Conv (input 1), Gemm (B) and MatMul (its constant 2-D
// operand), prunes them with sparse/prune.c and writes the model back with the
// pruned weights as float32 raw_data; everything else is written as read. The
// pruning rules (units, scores, the global rule, ties) are in sparse/prune.h
// and docs/SPARSITY.md.

#include "tools/convctl/convctl.h"
#include "tools/convctl/onnx-rewrite.h"

#include "core/errors.h"
#include "core/host.h"
#include "sparse/prune.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char ctl_prune_help[] = "Offline: reads IN, prunes the float32 weights of Conv, Gemm (B) and MatMul\n"
                              "(constant 2-D operand) by magnitude, writes OUT (onnxruntime still loads it;\n"
                              "the pruned weights become float32 raw_data). No daemon is needed.\n"
                              "  --sparsity S       fraction of the selected weights to zero: 0..1 (0.9) or\n"
                              "                     a percentage (90%). Not needed with nm:N:M.\n"
                              "  --mode M           unstructured (default): the smallest |w|;\n"
                              "                     filter[:l1|:l2]: whole output channels by norm (L2);\n"
                              "                     channel[:l1|:l2]: whole input channels (per group);\n"
                              "                     block:RxC: R consecutive filters x C consecutive input\n"
                              "                     positions (ci,kh,kw), by L2 norm, e.g. block:4x1;\n"
                              "                     nm:N:M: keep the N largest of every M consecutive\n"
                              "                     weights along the input axis, e.g. nm:2:4.\n"
                              "  --per-layer        every selected layer reaches S on its own. Default:\n"
                              "                     global, one ranking over all selected layers (plain |w|\n"
                              "                     for unstructured; structured scores divided by their\n"
                              "                     layer's mean |w| (L1) or RMS (L2)).\n"
                              "  --skip LIST        comma-separated layers to leave alone: first, last (the\n"
                              "                     first/last Conv in graph order), a node name, a weight\n"
                              "                     name, or an op type (Conv, Gemm, MatMul). Repeatable.\n"
                              "  --include-depthwise  also prune depthwise convs (group == Cin == Cout) in\n"
                              "                     filter/channel modes (skipped by default).\n"
                              "Prints one row per layer (name, op, weight shape, parameters, sparsity\n"
                              "before and after, structure found) and the totals; --json prints the same\n"
                              "as JSON. See docs/SPARSITY.md.";

#define MAX_SKIP 256

// One weight found in the model.
typedef struct {
    const char *node;     // node name (or its first output)
    const char *op;       // "Conv", "Gemm", "MatMul"
    const char *weight;   // tensor name
    Onnx__TensorProto *t; // the tensor
    int rank;
    int64_t dims[8]; // file shape (rank <= 8 listed; larger are skipped)
    int transposed;  // the file holds [in, out]: canonical is the transpose
    int is_conv, depthwise;
    cd_prune_shape shape; // canonical shape; k == 0 when the weight's shape is unusable
    int primary;          // index of the layer owning the tensor (itself unless shared)
    char skip[160];       // why it is not pruned ("" = pruned)
    float *w;             // canonical weights (NULL when undecodable)
    size_t params, zeros_before, zeros_after;
    cd_prune_stat stat; // after pruning, for the mode
} layer;

typedef struct {
    layer *v;
    int n, cap;
} layer_list;

// A node's name for the table: its name, else its first output, else its op.
static const char *node_label(const Onnx__NodeProto *n) {
    if (n->name && *n->name) return n->name;
    if (n->n_output && n->output[0] && *n->output[0]) return n->output[0];
    return n->op_type;
}

static int64_t attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt) {
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (a && a->name && strcmp(a->name, name) == 0 && a->has_i) return a->i;
    }
    return dflt;
}

static layer *add_layer(layer_list *l) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        layer *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        l->v = v;
        l->cap = cap;
    }
    layer *y = &l->v[l->n++];
    memset(y, 0, sizeof *y);
    y->primary = l->n - 1;
    return y;
}

static void set_skip(layer *y, const char *reason) {
    if (!y->skip[0]) snprintf(y->skip, sizeof y->skip, "%s", reason);
}

// Fills the canonical shape (and depthwise) of y from its file shape and
// group; a shape that cannot be pruned gets a skip reason instead.
static void set_shape(layer *y, int64_t group) {
    if (y->rank > 8) {
        set_skip(y, "weight rank above 8");
        return;
    }
    int64_t k, cpg, ks = 1;
    if (y->is_conv) {
        if (y->rank < 3) {
            set_skip(y, "conv weight of rank < 3");
            return;
        }
        k = y->dims[0];
        cpg = y->dims[1];
        for (int i = 2; i < y->rank; i++) {
            if (y->dims[i] < 1 || y->dims[i] > INT_MAX || ks > INT_MAX / y->dims[i]) {
                set_skip(y, "empty or oversized kernel");
                return;
            }
            ks *= y->dims[i];
        }
    } else {
        if (y->rank != 2) {
            set_skip(y, "weight not 2-D (batched MatMul constant)");
            return;
        }
        k = y->transposed ? y->dims[1] : y->dims[0];
        cpg = y->transposed ? y->dims[0] : y->dims[1];
    }
    if (k < 1 || cpg < 1 || k > INT_MAX || cpg > INT_MAX) {
        set_skip(y, "empty or oversized weight");
        return;
    }
    if (group < 1 || group > k || k % group) {
        set_skip(y, "group does not divide the output channels");
        return;
    }
    y->shape = (cd_prune_shape){(int)k, (int)cpg, (int)ks, (int)group};
    if (!cd_prune_numel(&y->shape)) {
        set_skip(y, "oversized weight");
        return;
    }
    y->depthwise = y->is_conv && group > 1 && cpg == 1 && k == group;
}

// Lists the weights of the main graph's Conv/Gemm/MatMul nodes in graph
// order. Returns 0 or CD_ENOMEM.
static int find_layers(const ctl_onnx_model *m, layer_list *out) {
    const Onnx__GraphProto *g = m->proto->graph;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n || !n->op_type || (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)) continue;
        const int conv = strcmp(n->op_type, "Conv") == 0, gemm = strcmp(n->op_type, "Gemm") == 0,
                  matmul = strcmp(n->op_type, "MatMul") == 0;
        if (!conv && !gemm && !matmul) continue;
        if (n->n_input < 2) continue;
        Onnx__TensorProto *t0 = ctl_onnx_find_const(m, n->input[0]);
        Onnx__TensorProto *t1 = ctl_onnx_find_const(m, n->input[1]);
        Onnx__TensorProto *t = NULL;
        int wi = 1, transposed = 0;
        if (conv || gemm) {
            t = t1;
            transposed = gemm && attr_int(n, "transB", 0) == 0;
        } else if (t1 && !t0) {
            t = t1;
            transposed = 1; // X @ W, W [K, N]
        } else if (t0 && !t1) {
            t = t0;
            wi = 0; // W @ X, W [M, K]
        }
        if (!t) continue;
        layer *y = add_layer(out);
        if (!y) return CD_ENOMEM;
        const char *label = node_label(n);
        y->node = label;
        y->op = n->op_type;
        y->weight = n->input[wi];
        y->t = t;
        y->is_conv = conv;
        y->transposed = transposed;
        y->rank = (int)t->n_dims;
        for (int d = 0; d < y->rank && d < 8; d++) y->dims[d] = t->dims[d];
        for (int j = 0; j < out->n - 1; j++)
            if (out->v[j].t == t) {
                y->primary = j;
                char r[sizeof y->skip];
                snprintf(r, sizeof r, "shares weight with %.100s", out->v[j].node);
                set_skip(y, r);
                break;
            }
        if (!t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
            char r[64];
            snprintf(r, sizeof r, "data type %d (float32 only)", t->has_data_type ? t->data_type : 0);
            set_skip(y, r);
        }
        set_shape(y, conv ? attr_int(n, "group", 1) : 1);
    }
    return 0;
}

// Applies --skip tokens. Returns 0, or the exit code after an unknown token.
static int apply_skips(layer_list *L, char **tokens, int ntok) {
    for (int i = 0; i < ntok; i++) {
        const char *tok = tokens[i];
        int hit = 0;
        if (strcmp(tok, "first") == 0 || strcmp(tok, "last") == 0) {
            const int first = tok[0] == 'f';
            for (int j = first ? 0 : L->n - 1; j >= 0 && j < L->n; j += first ? 1 : -1)
                if (L->v[j].is_conv) {
                    char r[64];
                    snprintf(r, sizeof r, "--skip %s (the %s conv)", tok, tok);
                    set_skip(&L->v[j], r);
                    set_skip(&L->v[L->v[j].primary], r);
                    hit = 1;
                    break;
                }
        } else {
            for (int j = 0; j < L->n; j++) {
                layer *y = &L->v[j];
                if (strcmp(tok, y->node) == 0 || strcmp(tok, y->weight) == 0 || strcmp(tok, y->op) == 0) {
                    char r[160];
                    snprintf(r, sizeof r, "--skip %.100s", tok);
                    set_skip(y, r);
                    set_skip(&L->v[y->primary], r);
                    hit = 1;
                }
            }
        }
        if (!hit && (strcmp(tok, "first") == 0 || strcmp(tok, "last") == 0))
            return ctl_fail_msg("E_PARAMS: --skip %s: the model has no Conv", tok);
        if (!hit)
            return ctl_fail_msg("E_PARAMS: --skip %s: no Conv/Gemm/MatMul node, weight or op type of "
                                "that name among the prunable layers",
                                tok);
    }
    return 0;
}

// Canonical [out][in] copy of a [in][out] matrix.
static int transpose(float **w, size_t rows, size_t cols) {
    float *t = malloc(rows * cols * sizeof *t + 1);
    if (!t) return CD_ENOMEM;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) t[c * rows + r] = (*w)[r * cols + c];
    free(*w);
    *w = t;
    return 0;
}

static size_t count_zeros(const float *w, size_t n) {
    size_t z = 0;
    for (size_t i = 0; i < n; i++) z += w[i] == 0.0f;
    return z;
}

static double frac(size_t a, size_t b) { return b ? (double)a / (double)b : 0.0; }

// "zero filters 8/16" etc. for a pruned layer.
static const char *structure(const layer *y, const cd_prune_mode *m, char *buf, size_t len) {
    const size_t a = y->stat.zero_units, b = y->stat.units;
    switch (m->kind) {
    case CD_PRUNE_UNSTRUCTURED: snprintf(buf, len, "unstructured"); break;
    case CD_PRUNE_FILTER: snprintf(buf, len, "zero filters %zu/%zu", a, b); break;
    case CD_PRUNE_CHANNEL: snprintf(buf, len, "zero in-channels %zu/%zu", a, b); break;
    case CD_PRUNE_BLOCK: snprintf(buf, len, "zero %dx%d blocks %zu/%zu", m->bh, m->bw, a, b); break;
    case CD_PRUNE_NM: snprintf(buf, len, "%d:%d runs %zu/%zu", m->n, m->m, a, b); break;
    }
    return buf;
}

typedef struct {
    const char *in, *out;
    cd_prune_mode mode;
    double sparsity;
    int per_layer;
} run_info;

static int print_json(const run_info *ri, const layer_list *L) {
    ctl_mp m;
    ctl_mp_init(&m);
    msgpack_packer *pk = &m.pk;
    char mname[64];
    msgpack_pack_map(pk, 7);
    ctl_mp_kv_str(pk, "input", ri->in);
    ctl_mp_kv_str(pk, "output", ri->out);
    ctl_mp_kv_str(pk, "mode", cd_prune_mode_name(&ri->mode, mname, sizeof mname));
    ctl_mp_kv_f64(pk, "sparsity", ri->sparsity);
    ctl_mp_kv_str(pk, "scope", ri->per_layer ? "per-layer" : "global");
    ctl_mp_str(pk, "layers");
    msgpack_pack_array(pk, (size_t)L->n);
    size_t tp = 0, tzb = 0, tza = 0, pp = 0, pzb = 0, pza = 0, npruned = 0;
    for (int i = 0; i < L->n; i++) {
        const layer *y = &L->v[i];
        const int pruned = !y->skip[0];
        msgpack_pack_map(pk, 16);
        ctl_mp_kv_str(pk, "name", y->node);
        ctl_mp_kv_str(pk, "op", y->op);
        ctl_mp_kv_str(pk, "weight", y->weight);
        ctl_mp_str(pk, "shape");
        msgpack_pack_array(pk, (size_t)(y->rank < 8 ? y->rank : 8));
        for (int d = 0; d < y->rank && d < 8; d++) msgpack_pack_int64(pk, y->dims[d]);
        ctl_mp_kv_u64(pk, "groups", (uint64_t)(y->shape.groups ? y->shape.groups : 1));
        ctl_mp_kv_bool(pk, "depthwise", y->depthwise);
        ctl_mp_kv_u64(pk, "params", y->params);
        ctl_mp_kv_u64(pk, "zeros_before", y->zeros_before);
        ctl_mp_kv_u64(pk, "zeros_after", y->zeros_after);
        ctl_mp_kv_f64(pk, "sparsity_before", frac(y->zeros_before, y->params));
        ctl_mp_kv_f64(pk, "sparsity_after", frac(y->zeros_after, y->params));
        ctl_mp_kv_bool(pk, "pruned", pruned);
        ctl_mp_kv_str(pk, "skipped", pruned ? NULL : y->skip);
        ctl_mp_kv_u64(pk, "units", y->stat.units);
        ctl_mp_kv_u64(pk, "zero_units", y->stat.zero_units);
        char sbuf[96];
        ctl_mp_kv_str(pk, "structure", pruned ? structure(y, &ri->mode, sbuf, sizeof sbuf) : NULL);
        if (y->primary != i) continue; // shared weights count once
        tp += y->params, tzb += y->zeros_before, tza += y->zeros_after;
        if (pruned) pp += y->params, pzb += y->zeros_before, pza += y->zeros_after, npruned++;
    }
    ctl_mp_str(pk, "total");
    msgpack_pack_map(pk, 11);
    ctl_mp_kv_u64(pk, "layers", (uint64_t)L->n);
    ctl_mp_kv_u64(pk, "pruned_layers", npruned);
    ctl_mp_kv_u64(pk, "params", tp);
    ctl_mp_kv_u64(pk, "zeros_before", tzb);
    ctl_mp_kv_u64(pk, "zeros_after", tza);
    ctl_mp_kv_f64(pk, "sparsity_before", frac(tzb, tp));
    ctl_mp_kv_f64(pk, "sparsity_after", frac(tza, tp));
    ctl_mp_kv_u64(pk, "pruned_params", pp);
    ctl_mp_kv_u64(pk, "pruned_zeros_before", pzb);
    ctl_mp_kv_u64(pk, "pruned_zeros_after", pza);
    ctl_mp_kv_f64(pk, "pruned_sparsity_after", frac(pza, pp));
    return ctl_mp_print(&m);
}

static const char *pct(char *buf, size_t len, size_t a, size_t b) {
    snprintf(buf, len, "%.2f%%", 100.0 * frac(a, b));
    return buf;
}

static void print_table(const run_info *ri, const layer_list *L) {
    char mname[64];
    cd_prune_mode_name(&ri->mode, mname, sizeof mname);
    if (ri->mode.kind == CD_PRUNE_NM)
        printf("pruned %s -> %s: mode %s (%.2f%% per run)\n\n", ri->in, ri->out, mname, 100.0 * ri->sparsity);
    else
        printf("pruned %s -> %s: mode %s, sparsity %.2f%% %s\n\n", ri->in, ri->out, mname, 100.0 * ri->sparsity,
               ri->per_layer ? "per layer" : "global");
    static const char *heads[] = {"layer", "op", "shape", "params", "before", "after", "structure"};
    static const bool numeric[] = {false, false, false, true, true, true, false};
    ctl_table t;
    ctl_table_init(&t, 7, heads, numeric);
    size_t tp = 0, tzb = 0, tza = 0, npruned = 0, ndw = 0;
    for (int i = 0; i < L->n; i++) {
        const layer *y = &L->v[i];
        char sh[160], params[32], b[32], a[32], st[200];
        ctl_fmt_shape(sh, sizeof sh, y->rank < 8 ? y->rank : 8, y->dims);
        snprintf(params, sizeof params, "%zu", y->params);
        if (y->skip[0])
            snprintf(st, sizeof st, "skipped: %s", y->skip);
        else
            structure(y, &ri->mode, st, sizeof st);
        ctl_table_add(&t, y->node, y->op, sh, params, pct(b, sizeof b, y->zeros_before, y->params),
                      pct(a, sizeof a, y->zeros_after, y->params), st);
        ndw += y->depthwise && strstr(y->skip, "depthwise") != NULL;
        if (y->primary != i) continue;
        tp += y->params, tzb += y->zeros_before, tza += y->zeros_after;
        npruned += !y->skip[0];
    }
    char params[32], b[32], a[32], st[64];
    snprintf(params, sizeof params, "%zu", tp);
    snprintf(st, sizeof st, "%zu of %d layers pruned", npruned, L->n);
    ctl_table_add(&t, "total", "", "", params, pct(b, sizeof b, tzb, tp), pct(a, sizeof a, tza, tp), st);
    ctl_table_print(&t, 0);
    ctl_table_free(&t);
    if (ndw)
        printf("\n%zu depthwise conv%s skipped in %s mode (--include-depthwise prunes them).\n", ndw,
               ndw == 1 ? "" : "s", ri->mode.kind == CD_PRUNE_FILTER ? "filter" : "channel");
}

// Warns when tensors left in external data would be looked up next to a
// model written into another folder.
static void warn_external(const ctl_onnx_model *m, const char *out) {
    size_t n = 0;
    const Onnx__GraphProto *g = m->proto->graph;
    for (size_t i = 0; i < g->n_initializer; i++)
        n += g->initializer[i]->has_data_location &&
             g->initializer[i]->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (!n || !m->dir) return;
    char real[PATH_MAX];
    if (cd_host_real_dir(out, real) && strcmp(real, m->dir) == 0) return;
    fprintf(stderr,
            "convctl prune: warning: %zu tensor%s not pruned still refer%s to external data "
            "in %s; copy the external data file(s) next to the output\n",
            n, n == 1 ? "" : "s", n == 1 ? "s" : "", m->dir);
}

// Parses "--opt V" / "--opt=V": returns the value (advancing *i) or NULL when
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

// Decodes the weights of every layer with a usable shape (skipped layers
// too: their sparsity is reported), in (k, cpg) order. Returns CTL_EXIT_OK,
// or an exit status after printing the error (also when no layer is left
// to prune).
static int decode_weights(ctl_onnx_model *model, layer_list *L, const run_info *ri) {
    int rc, st;
    char err[512];
    // Decode the weights (skipped layers too: their sparsity is reported).
    int nsel = 0;
    for (int i = 0; i < L->n; i++) {
        layer *y = &L->v[i];
        if (!y->shape.k) continue; // no usable shape (reason set)
        if (y->primary != i) {
            // Shared tensor: report the primary's numbers (filled below).
            continue;
        }
        if (!y->t->has_data_type || y->t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) continue;
        size_t n;
        if ((st = ctl_onnx_read_f32(model, y->t, &y->w, &n, err, sizeof err))) {
            rc = ctl_fail_msg("%s: %s: %s", cd_err_name(st), ri->in, err);
            return rc;
        }
        if (n != cd_prune_numel(&y->shape)) {
            rc = ctl_fail_msg("E_MODEL: %s: weight '%s' holds %zu values, its shape %zu", ri->in, y->weight, n,
                              cd_prune_numel(&y->shape));
            return rc;
        }
        if (y->transposed && transpose(&y->w, (size_t)y->shape.cpg, (size_t)y->shape.k)) {
            rc = ctl_fail_msg("E_NOMEM: out of memory");
            return rc;
        }
        y->params = n;
        y->zeros_before = count_zeros(y->w, n);
        nsel += !y->skip[0];
    }
    if (nsel == 0) {
        rc = ctl_fail_msg("E_PARAMS: no prunable layer left in %s (%d found, all skipped: see --skip and "
                          "the depthwise rule)",
                          ri->in, L->n);
        return rc;
    }

    return CTL_EXIT_OK;
}

// Prunes the selected layers together (or one by one with --per-layer),
// counts what changed and writes the weights back into the model. Returns
// CTL_EXIT_OK, or an exit status after printing the error.
static int prune_layers(layer_list *L, const run_info *ri) {
    int rc, st;
    int nsel = 0;
    for (int i = 0; i < L->n; i++) nsel += L->v[i].w && !L->v[i].skip[0];
    // Prune.
    cd_prune_layer *sel = malloc((size_t)nsel * sizeof *sel);
    if (!sel) {
        rc = ctl_fail_msg("E_NOMEM: out of memory");
        return rc;
    }
    nsel = 0;
    for (int i = 0; i < L->n; i++)
        if (L->v[i].w && !L->v[i].skip[0]) sel[nsel++] = (cd_prune_layer){L->v[i].w, L->v[i].shape};
    st = cd_prune_run(sel, nsel, &ri->mode, ri->sparsity, !ri->per_layer);
    free(sel);
    if (st) {
        rc = ctl_fail_msg("%s: pruning failed", cd_err_name(st));
        return rc;
    }
    for (int i = 0; i < L->n; i++) {
        layer *y = &L->v[i];
        if (!y->w) continue;
        y->zeros_after = count_zeros(y->w, y->params);
        cd_prune_count(y->w, &y->shape, &ri->mode, &y->stat);
        if (!y->skip[0] && y->zeros_after == y->params && y->zeros_before < y->params && ri->sparsity < 1.0)
            fprintf(stderr, "convctl prune: warning: every weight of %s is zero now\n", y->node);
        if (y->skip[0]) continue;
        // Back to the file's layout and into the model.
        if (y->transposed && transpose(&y->w, (size_t)y->shape.k, (size_t)y->shape.cpg)) {
            rc = ctl_fail_msg("E_NOMEM: out of memory");
            return rc;
        }
        if (ctl_onnx_write_f32(y->t, y->w, y->params)) {
            rc = ctl_fail_msg("E_NOMEM: out of memory");
            return rc;
        }
    }
    for (int i = 0; i < L->n; i++) { // shared weights: the primary's numbers
        layer *y = &L->v[i];
        if (y->primary == i) continue;
        const layer *p = &L->v[y->primary];
        y->params = p->params, y->zeros_before = p->zeros_before, y->zeros_after = p->zeros_after;
        y->stat = p->stat;
    }
    return CTL_EXIT_OK;
}

// --mode and --sparsity into ri (N:M modes fix the sparsity). Returns
// CTL_EXIT_OK, or the usage exit status after printing the error.
static int parse_mode(const char *prog, run_info *ri, const char *mode_s, const char *sparsity_s) {
    int rc;
    char err[512];
    if (cd_prune_parse_mode(mode_s, &ri->mode, err, sizeof err)) {
        rc = ctl_usage_error(prog, "--mode: %s", err);
        return rc;
    }
    if (sparsity_s && cd_prune_parse_sparsity(sparsity_s, &ri->sparsity, err, sizeof err)) {
        rc = ctl_usage_error(prog, "--sparsity: %s", err);
        return rc;
    }
    if (ri->mode.kind == CD_PRUNE_NM) {
        const double fixed = 1.0 - (double)ri->mode.n / ri->mode.m;
        if (sparsity_s && fabs(ri->sparsity - fixed) > 5e-5) {
            rc = ctl_usage_error(prog,
                                 "--sparsity %s contradicts --mode %s, which prunes %.2f%% (leave "
                                 "--sparsity out)",
                                 sparsity_s, mode_s, 100.0 * fixed);
            return rc;
        }
        ri->sparsity = fixed;
    } else if (!sparsity_s) {
        rc = ctl_usage_error(prog, "--sparsity S is required (0..1 or 0..100%%)");
        return rc;
    }
    return CTL_EXIT_OK;
}

int ctl_cmd_prune(ctl_ctx *ctx, int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}, *mode_s = "unstructured", *sparsity_s = NULL;
    int npos = 0, per_layer = 0, include_dw = 0, ntok = 0;
    char *tokens[MAX_SKIP];
    char *skip_copies[MAX_SKIP];
    int ncopies = 0, rc = CTL_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) {
            rc = CTL_EXIT_USAGE;
            goto out_args;
        }
        if (r > 0) continue;
        const char *a = argv[i], *v;
        int missing = 0;
        if ((v = opt_value(argc, argv, &i, "--sparsity", &missing)) || missing) {
            if (missing) {
                rc = ctl_usage_error(argv[0], "--sparsity needs a value");
                goto out_args;
            }
            sparsity_s = v;
        } else if ((v = opt_value(argc, argv, &i, "--mode", &missing)) || missing) {
            if (missing) {
                rc = ctl_usage_error(argv[0], "--mode needs a value");
                goto out_args;
            }
            mode_s = v;
        } else if ((v = opt_value(argc, argv, &i, "--skip", &missing)) || missing) {
            if (missing || !*v) {
                rc = ctl_usage_error(argv[0], "--skip needs a list (first,last,NAME,...)");
                goto out_args;
            }
            char *copy = strdup(v);
            if (!copy || ncopies == MAX_SKIP) {
                free(copy);
                rc = ctl_fail_msg("E_NOMEM: too many --skip options");
                goto out_args;
            }
            skip_copies[ncopies++] = copy;
            for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (ntok == MAX_SKIP) {
                    rc = ctl_usage_error(argv[0], "more than %d --skip names", MAX_SKIP);
                    goto out_args;
                }
                tokens[ntok++] = tok;
            }
        } else if (strcmp(a, "--per-layer") == 0) {
            per_layer = 1;
        } else if (strcmp(a, "--include-depthwise") == 0) {
            include_dw = 1;
        } else if (a[0] == '-' && a[1]) {
            rc = ctl_usage_error(argv[0], "unknown option '%s'", a);
            goto out_args;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            rc = ctl_usage_error(argv[0], "unexpected argument '%s'", a);
            goto out_args;
        }
    }
    if (npos != 2) {
        rc = ctl_usage_error(argv[0], "IN.onnx and OUT.onnx are required");
        goto out_args;
    }
    run_info ri = {pos[0], pos[1], {0}, 0, per_layer};
    char err[512];
    if ((rc = parse_mode(argv[0], &ri, mode_s, sparsity_s))) goto out_args;

    // The model and its layers.
    ctl_onnx_model model;
    layer_list L = {0};
    int st = ctl_onnx_load(ri.in, &model, err, sizeof err);
    if (st) {
        rc = ctl_fail_msg("%s: %s", cd_err_name(st), err);
        goto out_model;
    }
    if ((st = find_layers(&model, &L))) {
        rc = ctl_fail_msg("E_NOMEM: out of memory");
        goto out_model;
    }
    if (L.n == 0) {
        rc = ctl_fail_msg("E_PARAMS: %s has no prunable layer (Conv, Gemm or MatMul with a constant "
                          "weight)",
                          ri.in);
        goto out_model;
    }
    if ((rc = apply_skips(&L, tokens, ntok))) goto out_model;
    const int structured_io = ri.mode.kind == CD_PRUNE_FILTER || ri.mode.kind == CD_PRUNE_CHANNEL;
    for (int i = 0; i < L.n; i++)
        if (L.v[i].depthwise && structured_io && !include_dw) {
            set_skip(&L.v[i], ri.mode.kind == CD_PRUNE_FILTER ? "depthwise (filter mode)" : "depthwise (channel mode)");
            set_skip(&L.v[L.v[i].primary], "depthwise");
        }
    if ((rc = decode_weights(&model, &L, &ri))) goto out_model;
    if ((rc = prune_layers(&L, &ri))) goto out_model;
    warn_external(&model, ri.out);
    if ((st = ctl_onnx_save(&model, ri.out, err, sizeof err))) {
        rc = ctl_fail_msg("%s: %s", cd_err_name(st), err);
        goto out_model;
    }
    rc = ctx->json ? print_json(&ri, &L) : (print_table(&ri, &L), CTL_EXIT_OK);

out_model:
    for (int i = 0; i < L.n; i++) free(L.v[i].w);
    free(L.v);
    ctl_onnx_free(&model);
out_args:
    for (int i = 0; i < ncopies; i++) free(skip_copies[i]);
    return rc;
}
