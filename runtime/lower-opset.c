// Which opsets each operator of the default domain exists in, and in which
// opsets its attributes and optional inputs are part of its signature. The
// model's import is CD_OPSET_MIN..CD_OPSET_MAX (onnx-import.c); here a node
// is refused when its operator is newer than that import, or when it uses an
// attribute that its opset moved to an input (opset 13: Squeeze/Unsqueeze
// axes, Split split, ReduceSum axes; 18: the other reductions' axes, Split
// num_outputs) or an input that did not exist yet. The lowerings read both
// forms; this keeps a model from mixing them. Opsets that changed only types
// (float8, int4, bfloat16) need nothing here: the types are refused where
// tensors are read.

#include "runtime/lower-internal.h"

#include <string.h>

// Operators of the default domain that appeared after CD_OPSET_MIN (every
// other supported one exists at every opset convd reads).
static const struct {
    const char *op;
    int since;
} g_since[] = {
    {"HardSwish", 14},
    {"LayerNormalization", 17},
    {"Mish", 18},
    {"Gelu", 20},
};

// Attributes whose opsets are narrower than their operator's.
static const struct {
    const char *op, *attr;
    int from, to; // the opsets where the attribute exists
} g_attr_opsets[] = {
    {"Clip", "min", 1, 10}, // inputs from opset 11
    {"Clip", "max", 1, 10},
    {"Dropout", "ratio", 1, 11}, // an input from opset 12
    {"Squeeze", "axes", 1, 12},  // an input from opset 13
    {"Unsqueeze", "axes", 1, 12},
    {"Split", "split", 1, 12},
    {"Split", "num_outputs", 18, CD_OPSET_MAX},
    {"ReduceSum", "axes", 1, 12},
    {"ReduceSum", "noop_with_empty_axes", 13, CD_OPSET_MAX},
    {"ReduceMean", "axes", 1, 17}, // an input from opset 18
    {"ReduceMean", "noop_with_empty_axes", 18, CD_OPSET_MAX},
    {"ReduceMax", "axes", 1, 17},
    {"ReduceMax", "noop_with_empty_axes", 18, CD_OPSET_MAX},
    {"Shape", "start", 15, CD_OPSET_MAX},
    {"Shape", "end", 15, CD_OPSET_MAX},
    {"Cast", "saturate", 19, CD_OPSET_MAX},
    {"QuantizeLinear", "axis", 13, CD_OPSET_MAX},
    {"QuantizeLinear", "saturate", 19, CD_OPSET_MAX},
    {"QuantizeLinear", "block_size", 21, CD_OPSET_MAX},
    {"QuantizeLinear", "output_dtype", 21, CD_OPSET_MAX},
    {"DequantizeLinear", "axis", 13, CD_OPSET_MAX},
    {"DequantizeLinear", "block_size", 21, CD_OPSET_MAX},
    {"BatchNormalization", "training_mode", 14, CD_OPSET_MAX},
};

// Optional inputs that an opset added (index from 0).
static const struct {
    const char *op;
    int input, from;
    const char *what;
} g_input_opsets[] = {
    {"Squeeze", 1, 13, "axes"},   {"Unsqueeze", 1, 13, "axes"},  {"Split", 1, 13, "split"},
    {"ReduceSum", 1, 13, "axes"}, {"ReduceMean", 1, 18, "axes"}, {"ReduceMax", 1, 18, "axes"},
    {"Pad", 3, 18, "axes"},       {"Dropout", 1, 12, "ratio"},   {"Dropout", 2, 12, "training_mode"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

int cd_lower_op_since(const char *op) {
    for (size_t i = 0; i < COUNT(g_since); i++)
        if (strcmp(g_since[i].op, op) == 0) return g_since[i].since;
    return CD_OPSET_MIN;
}

int cd_lower_attr_opsets(const char *op, const char *attr, int *from, int *to) {
    for (size_t i = 0; i < COUNT(g_attr_opsets); i++)
        if (strcmp(g_attr_opsets[i].op, op) == 0 && strcmp(g_attr_opsets[i].attr, attr) == 0) {
            *from = g_attr_opsets[i].from;
            *to = g_attr_opsets[i].to;
            return 1;
        }
    return 0;
}

int cd_lower_check_opset(lctx *c) {
    const int opset = c->g->opset;
    const char *op = c->n->op;
    const int since = cd_lower_op_since(op);
    if (opset < since)
        return node_fail(c, CD_EUNSUPPORTED, "%s exists from opset %d; the model imports opset %d", op, since, opset);
    for (size_t i = 0; i < c->np->n_attribute; i++) {
        const char *a = c->np->attribute[i]->name;
        int from, to;
        if (cd_lower_attr_opsets(op, a, &from, &to) && (opset < from || opset > to))
            return node_fail(c, CD_EUNSUPPORTED, "attribute '%s' is not in opset %d (%s has it in opsets %d to %d)", a,
                             opset, op, from, to);
    }
    for (size_t i = 0; i < COUNT(g_input_opsets); i++)
        if (strcmp(g_input_opsets[i].op, op) == 0 && opset < g_input_opsets[i].from &&
            g_input_opsets[i].input < c->n->ninputs && c->n->inputs[g_input_opsets[i].input] >= 0)
            return node_fail(c, CD_EUNSUPPORTED, "input %d (%s) is not in opset %d (%s has it from opset %d)",
                             g_input_opsets[i].input, g_input_opsets[i].what, opset, op, g_input_opsets[i].from);
    return 0;
}
