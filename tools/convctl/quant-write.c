// convctl quantize's rewrite of the model into QDQ (quantize.h): s8
// per-channel weights behind DequantizeLinear, QuantizeLinear +
// DequantizeLinear pairs on the quantized activations, nodes kept in
// topological order, the float weights nothing reads dropped.

#include "tools/convctl/quantize.h"

#include "core/errors.h"
#include "core/words.h"
#include "tools/convctl/convctl.h"
#include "tools/convctl/quant-graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *ctl_str_cat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
    }
    return s;
}

int ctl_quant_find_qval(const ctl_qctx *q, const char *name) {
    for (int i = 0; i < q->nv; i++)
        if (strcmp(q->V[i].name, name) == 0) return i;
    return -1;
}

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

static int add_init(ctl_qctx *q, const char *name, int32_t dtype, int rank, const int64_t *dims, const void *raw,
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
static int emit_qdq(ctl_qctx *q, const ctl_qval *v, node_list *l) {
    char *s = ctl_str_cat(v->name, "_scale"), *z = ctl_str_cat(v->name, "_zero_point"),
         *qn = ctl_str_cat(v->name, "_QuantizeLinear"), *dn = ctl_str_cat(v->name, "_DequantizeLinear");
    int rc = s && z && qn && dn ? 0 : CD_ENOMEM;
    uint8_t zp = (uint8_t)(q->act_u8 ? v->zero_point : (int8_t)v->zero_point);
    if (!rc) rc = add_init(q, s, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, &v->scale, 4);
    if (!rc)
        rc = add_init(q, z, q->act_u8 ? ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 : ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 0,
                      NULL, &zp, 1);
    if (!rc)
        rc = push_node(l,
                       ctl_onnx_node_new("QuantizeLinear", qn, 3, (const char *[]){v->name, s, z}, v->qname, NULL, 0));
    if (!rc)
        rc = push_node(
            l, ctl_onnx_node_new("DequantizeLinear", dn, 3, (const char *[]){v->qname, s, z}, v->dqname, NULL, 0));
    free(s);
    free(z);
    free(qn);
    free(dn);
    return rc;
}

// Quantizes layer y's weight: the s8 integers, scales and zero points as
// initializers and their DequantizeLinear appended to l; the layer reads it.
static int quantize_weight(ctl_qctx *q, ctl_qlayer *y, node_list *l, Onnx__NodeProto *n) {
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
    char *qn = ctl_str_cat(y->weight, "_quantized"), *sn = ctl_str_cat(y->weight, "_scale"),
         *zn = ctl_str_cat(y->weight, "_zero_point"), *dq = ctl_str_cat(y->weight, "_DequantizeLinear"),
         *dqo = ctl_str_cat(y->weight, "_DequantizeLinear_Output");
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
        rc = push_node(
            l, ctl_onnx_node_new("DequantizeLinear", dq, 3, (const char *[]){qn, sn, zn}, dqo, "axis", y->axis));
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

static const ctl_qlayer *layer_of_node(const ctl_qctx *q, int node) {
    for (int i = 0; i < q->nl; i++)
        if (q->L[i].node == node) return &q->L[i];
    return NULL;
}

static int is_quantized_weight(const ctl_qctx *q, const char *name) {
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
static int ensure_opset13(ctl_qctx *q) {
    int64_t v = ctl_onnx_opset(&q->model);
    if (v >= 13) return CTL_EXIT_OK;
    // The ops whose opset 13 definitions read an older file the same way.
    static const char same[] = "Conv,Relu,BatchNormalization,Add,Mul,Sub,Gemm,MatMul,MaxPool,AveragePool,"
                               "GlobalAveragePool,Flatten,Reshape,Clip,Concat,Identity,Sigmoid,Constant";
    const Onnx__GraphProto *g = q->model.proto->graph;
    for (size_t i = 0; i < g->n_node; i++) {
        const char *op = g->node[i]->op_type ? g->node[i]->op_type : "?";
        if (!cd_word_in_list(op, same))
            return ctl_fail_msg("E_UNSUPPORTED: %s imports opset %lld; per-channel QuantizeLinear needs 13 and "
                                "its %s node '%s' changed since: convert the model first "
                                "(onnx.version_converter.convert_version(model, 13))",
                                q->in, (long long)v, g->node[i]->op_type, ctl_qg_node_key(g->node[i]));
    }
    ctl_onnx_set_opset(&q->model, 13);
    return CTL_EXIT_OK;
}

// Rewrites the model in memory into its QDQ form. Returns the exit status.
int ctl_quant_rewrite(ctl_qctx *q) {
    int rc = ensure_opset13(q);
    if (rc) return rc;
    Onnx__GraphProto *g = q->model.proto->graph;
    const size_t n0 = g->n_node;
    // Which readers read a quantized activation's DequantizeLinear.
    for (size_t i = 0; i < n0; i++) {
        Onnx__NodeProto *n = g->node[i];
        const ctl_qlayer *y = layer_of_node(q, (int)i);
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j]) continue;
            int vi = ctl_quant_find_qval(q, n->input[j]);
            if (vi < 0 || !(q->V[vi].all_readers || (y && y->quantize && j == 0))) continue;
            if (ctl_onnx_set_input(n, j, q->V[vi].dqname)) return ctl_fail_msg("E_NOMEM: out of memory");
        }
    }
    node_list l = {0};
    for (size_t i = 0; i < g->n_input && !rc; i++) {
        int vi = ctl_quant_find_qval(q, g->input[i]->name);
        if (vi >= 0 && emit_qdq(q, &q->V[vi], &l)) rc = ctl_fail_msg("E_NOMEM: out of memory");
    }
    for (size_t i = 0; i < n0 && !rc; i++) {
        Onnx__NodeProto *n = g->node[i];
        ctl_qlayer *y = NULL;
        for (int k = 0; k < q->nl; k++)
            if (q->L[k].node == (int)i) y = &q->L[k];
        if (y && y->quantize && (rc = quantize_weight(q, y, &l, n))) break;
        if (push_node(&l, n)) {
            rc = ctl_fail_msg("E_NOMEM: out of memory");
            break;
        }
        g->node[i] = NULL; // now in l
        for (size_t j = 0; j < n->n_output && !rc; j++) {
            int vi = n->output[j] ? ctl_quant_find_qval(q, n->output[j]) : -1;
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
