// Graph questions for convctl quantize (quant-graph.h).

#include "tools/convctl/quant-graph.h"

#include <string.h>

const char *ctl_qg_node_key(const Onnx__NodeProto *n) {
    if (n->name && *n->name) return n->name;
    if (n->n_output && n->output[0] && *n->output[0]) return n->output[0];
    return n->op_type ? n->op_type : "";
}

int ctl_qg_find_node(const Onnx__GraphProto *g, const char *key) {
    for (size_t i = 0; i < g->n_node; i++)
        if (strcmp(ctl_qg_node_key(g->node[i]), key) == 0) return (int)i;
    return -1;
}

int ctl_qg_producer(const Onnx__GraphProto *g, const char *value) {
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t j = 0; j < g->node[i]->n_output; j++)
            if (g->node[i]->output[j] && strcmp(g->node[i]->output[j], value) == 0) return (int)i;
    return -1;
}

int ctl_qg_is_output(const Onnx__GraphProto *g, const char *value) {
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i]->name && strcmp(g->output[i]->name, value) == 0) return 1;
    return 0;
}

int ctl_qg_readers(const Onnx__GraphProto *g, const char *value, int *only) {
    int n = ctl_qg_is_output(g, value), last = -1;
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t j = 0; j < g->node[i]->n_input; j++)
            if (g->node[i]->input[j] && strcmp(g->node[i]->input[j], value) == 0) {
                n++;
                last = (int)i;
            }
    if (only) *only = n == 1 ? last : -1;
    return n;
}

const char *ctl_qg_layer_value(const Onnx__GraphProto *g, const char *name, const char *label) {
    int ni = ctl_qg_find_node(g, name);
    if (ni < 0 || g->node[ni]->n_output < 1) return NULL;
    const char *v = g->node[ni]->output[0];
    for (const char *p = strchr(label, '+'); p && v; p = strchr(p + 1, '+')) {
        int next;
        ctl_qg_readers(g, v, &next);
        if (next < 0 || g->node[next]->n_output < 1) return NULL;
        v = g->node[next]->output[0];
    }
    return v;
}

int ctl_qg_is_reshape_op(const char *op) {
    static const char *const ops[] = {"Flatten", "Reshape", "Identity", "Dropout", "Squeeze", "Unsqueeze"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(op, ops[i]) == 0) return 1;
    return 0;
}
