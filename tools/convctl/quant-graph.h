#ifndef CD_TOOLS_CONVCTL_QUANT_GRAPH_H
#define CD_TOOLS_CONVCTL_QUANT_GRAPH_H

// Questions convctl quantize asks of an ONNX graph: who produces and who
// reads a value, and which ONNX value a planned layer of convd computes
// (the trace names a layer by its first node and its fused ops' label).
// Plain scans: the graphs are a few hundred nodes and every answer the
// callers need per layer is asked once and kept.

#include "onnx.pb-c.h"

// A node's name as convd names its layer: its name, else its first output,
// else its op type.
const char *ctl_qg_node_key(const Onnx__NodeProto *n);

// The index of the node whose key is key, or -1.
int ctl_qg_find_node(const Onnx__GraphProto *g, const char *key);

// The index of the node that outputs value, or -1 (a graph input, an
// initializer or nothing).
int ctl_qg_producer(const Onnx__GraphProto *g, const char *value);

// How many node inputs read value (plus one when it is a graph output);
// *only gets the reading node when exactly one node input reads it, else -1.
int ctl_qg_readers(const Onnx__GraphProto *g, const char *value, int *only);

// 1 when value is one of the graph's outputs.
int ctl_qg_is_output(const Onnx__GraphProto *g, const char *value);

// The ONNX value a planned layer outputs, from its name (first node's key)
// and label ("Conv+BN+Relu": each "+" is one more node merged in, each the
// only reader of the value before it). NULL when the layer is no node's
// (a reorder) or the chain cannot be followed.
const char *ctl_qg_layer_value(const Onnx__GraphProto *g, const char *name, const char *label);

// Ops that only give their input a new shape: the value they output holds
// the same numbers as their input 0.
int ctl_qg_is_reshape_op(const char *op);

#endif // CD_TOOLS_CONVCTL_QUANT_GRAPH_H
