#include "runtime/graph.h"

#include "core/checked.h"
#include "core/errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int cd_graph_find(const cd_graph *g, const char *name) {
    if (!g->hash_cap || !name) return -1;
    size_t mask = (size_t)g->hash_cap - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
        int id = g->hash[i];
        if (id < 0) return -1;
        if (strcmp(g->values[id].name, name) == 0) return id;
    }
}

// Keeps the table at most half full; capacity is a power of two.
static int rehash(cd_graph *g, int cap) {
    int *h = malloc((size_t)cap * sizeof *h);
    if (!h) return CD_ENOMEM;
    for (int i = 0; i < cap; i++) h[i] = -1;
    size_t mask = (size_t)cap - 1;
    for (int id = 0; id < g->nvalues; id++) {
        size_t i = name_hash(g->values[id].name) & mask;
        while (h[i] >= 0) i = (i + 1) & mask;
        h[i] = id;
    }
    free(g->hash);
    g->hash = h;
    g->hash_cap = cap;
    return 0;
}

int cd_graph_add_value(cd_graph *g, const char *name) {
    if (cd_graph_find(g, name) >= 0) return CD_EMODEL;
    if (g->nvalues == g->values_cap) {
        int cap = g->values_cap ? g->values_cap * 2 : 64;
        cd_value *v = realloc(g->values, (size_t)cap * sizeof *v);
        if (!v) return CD_ENOMEM;
        g->values = v;
        g->values_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return CD_ENOMEM;
    int id = g->nvalues++;
    memset(&g->values[id], 0, sizeof g->values[id]);
    g->values[id].name = copy;
    g->values[id].producer_op = -1;
    if ((g->nvalues) * 2 > g->hash_cap) {
        if (rehash(g, g->hash_cap ? g->hash_cap * 2 : 128)) {
            g->nvalues--;
            free(copy);
            return CD_ENOMEM;
        }
    } else {
        size_t mask = (size_t)g->hash_cap - 1, i = name_hash(copy) & mask;
        while (g->hash[i] >= 0) i = (i + 1) & mask;
        g->hash[i] = id;
    }
    return id;
}

int cd_graph_add_op(cd_graph *g, cd_op_kind kind, const char *name) {
    if (g->nops == g->ops_cap) {
        int cap = g->ops_cap ? g->ops_cap * 2 : 64;
        cd_op *o = realloc(g->ops, (size_t)cap * sizeof *o);
        if (!o) return CD_ENOMEM;
        g->ops = o;
        g->ops_cap = cap;
    }
    cd_op *op = &g->ops[g->nops];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->out = -1;
    snprintf(op->name, sizeof op->name, "%s", name ? name : "");
    return g->nops++;
}

cd_activation *cd_op_act_slot(cd_op *op) {
    if (!op) return NULL;
    switch (op->kind) {
    case CD_OP_CONV: return &op->u.conv.d.act;
    case CD_OP_GEMM: return &op->u.gemm.d.act;
    case CD_OP_BINARY: return &op->u.binary.act;
    case CD_OP_CONVT: return &op->u.convt.d.act;
    default: return NULL;
    }
}

void cd_op_free(cd_op *op) {
    free(op->analysis);
    op->analysis = NULL;
    if (op->kind == CD_OP_CONV) {
        free(op->u.conv.w);
        free(op->u.conv.bias);
        free(op->u.conv.wscale);
        op->u.conv.w = op->u.conv.bias = op->u.conv.wscale = NULL;
    } else if (op->kind == CD_OP_GEMM) {
        free(op->u.gemm.w);
        free(op->u.gemm.bias);
        op->u.gemm.w = op->u.gemm.bias = NULL;
    } else if (op->kind == CD_OP_FAKEQUANT) {
        cd_quant_clear(&op->u.fq);
    } else if (op->kind == CD_OP_LAYERNORM) {
        free(op->u.ln.gamma);
        free(op->u.ln.beta);
        op->u.ln.gamma = op->u.ln.beta = NULL;
    } else if (op->kind == CD_OP_CONVT) {
        free(op->u.convt.w);
        free(op->u.convt.bias);
        op->u.convt.w = op->u.convt.bias = NULL;
    } else if (op->kind == CD_OP_GATHER) {
        free(op->u.gather.idx);
        op->u.gather.idx = NULL;
        op->u.gather.d.idx = NULL;
    }
}

void cd_quant_clear(cd_quant *q) {
    free(q->scale);
    free(q->zero_point);
    q->scale = q->zero_point = NULL;
}

int cd_quant_copy(const cd_quant *q, cd_quant *out) {
    size_t n = (size_t)(q->d.channels > 0 ? q->d.channels : 1);
    *out = *q;
    out->scale = malloc(n * sizeof(float));
    out->zero_point = malloc(n * sizeof(float));
    if (!out->scale || !out->zero_point) {
        cd_quant_clear(out);
        return CD_ENOMEM;
    }
    memcpy(out->scale, q->scale, n * sizeof(float));
    memcpy(out->zero_point, q->zero_point, n * sizeof(float));
    return 0;
}

void cd_graph_free(cd_graph *g) {
    if (!g) return;
    cd_onnx_release(g);
    for (int i = 0; i < g->nvalues; i++) {
        free(g->values[i].name);
        free(g->values[i].f);
        free(g->values[i].i);
        free(g->values[i].batch_mark);
        if (g->values[i].q) cd_quant_clear(g->values[i].q);
        free(g->values[i].q);
    }
    for (int i = 0; i < g->nnodes; i++) {
        free(g->nodes[i].inputs);
        free(g->nodes[i].outputs);
    }
    for (int i = 0; i < g->nops; i++) cd_op_free(&g->ops[i]);
    free(g->values);
    free(g->hash);
    free(g->nodes);
    free(g->inputs);
    free(g->input_dyn);
    free(g->outputs);
    free(g->ops);
    free(g->dir);
    memset(g, 0, sizeof *g);
}

int64_t cd_shape_numel(int rank, const int64_t *shape) {
    int64_t n;
    return cd_ck_shape_numel(rank, shape, &n) ? -1 : n;
}
