#ifndef CD_RUNTIME_GRAPH_H
#define CD_RUNTIME_GRAPH_H

// The runtime's internal model representation, between the ONNX file and the
// plan:
//
//   onnx-import.c  file -> cd_graph (values: inputs, initializers; nodes in
//                  topological order, attributes still in the protobuf)
//   lower.c        nodes -> cd_op list (shape inference at batch 1, shape
//                  sub-graphs folded to constants, BatchNorm folded, activations
//                  and residual adds fused)
//   plan.c         cd_op list -> layers on a backend (layouts, arena offsets)
//
// Activation shapes are kept per batch item: dim 0 of every activation is the
// batch and is stored as 1; at batch B it is B. The lowering rejects any op
// that would mix the batch into other dims (Reshape/Flatten/Transpose/Softmax/
// Concat over dim 0), so every activation scales linearly with the batch.

#include "core/limits.h"
#include "kernels/op-desc.h"

#include <stddef.h>
#include <stdint.h>

// The default domain's opsets convd reads. Where 13 or 18 moved an
// attribute to an input (Split, ReduceSum; Pad's axes, the other
// reductions), the lowering reads each form at its opsets; otherwise 18 to
// 21 brought new types (float8, int4) and the attributes that come with them
// (Q/DQ block_size, output_dtype, saturate; AveragePool dilations), which
// are refused by name where they matter.
#define CD_OPSET_MIN 11
#define CD_OPSET_MAX 21

typedef enum {
    CD_VAL_NONE = 0,  // declared but not yet produced
    CD_VAL_ACT,       // float32 activation computed per request
    CD_VAL_CONST_F32, // float constant (initializer, Constant, folded)
    CD_VAL_CONST_I64, // integer constant (shapes, indices, axes)
} cd_val_kind;

// The quantization of a tensor (QuantizeLinear/DequantizeLinear, the QLinear*
// ops): q = saturate(round(x / scale) + zero_point), x = (q - zero_point) * scale.
typedef struct {
    cd_fakequant_desc d; // channels (1: per tensor), axis, the range of dtype
    float *scale;        // d.channels values (owned)
    float *zero_point;   // d.channels integer values (owned)
    int dtype;           // ONNX element type of q (UINT8, INT8, INT32 ...)
} cd_quant;

typedef struct {
    char *name;
    cd_val_kind kind;
    int rank;
    int64_t shape[CD_MAX_RANK]; // dim 0 of an activation is the batch, stored as 1
    int64_t numel;              // elements (constants; per item for activations)
    float *f;                   // CD_VAL_CONST_F32 data
    int64_t *i;                 // CD_VAL_CONST_I64 data
    uint8_t *batch_mark;        // CD_VAL_CONST_I64: 1 where the element is the batch size
    int nconsumers;             // node inputs reading it (+1 when a graph output)
    int is_output;              // a graph output
    int producer_op;            // index into the op list, -1 when none
    int dtype;                  // constants: the ONNX element type stored in the file (0 when computed)
    int dynq, dynq_src;         // a part of a DynamicQuantizeLinear pattern (runtime/lower-dynquant.c)
    cd_quant *q;                // CD_VAL_ACT of a quantized (integer) tensor: it holds the dequantized
                                // values (q - zero_point) * scale, and these are q's parameters (owned);
                                // CD_VAL_CONST_F32 folded from a DequantizeLinear of symmetric int8
                                // (zero points 0): the integers' scales (int8 kernels use them)
} cd_value;

typedef struct {
    const char *name;  // node name (points into the protobuf or the value name)
    const char *op;    // op_type
    const void *proto; // const Onnx__NodeProto * (valid during the load only)
    int ninputs, noutputs;
    int *inputs;  // value ids, -1 for an omitted optional input
    int *outputs; // value ids, -1 for an omitted optional output
} cd_node;

// A lowered operation on activations.
typedef enum {
    CD_OP_CONV = 0,
    CD_OP_GEMM, // rows x K times K x N (Gemm, MatMul), bias, act
    CD_OP_POOL,
    CD_OP_BINARY, // with NumPy broadcasting, act
    CD_OP_ACT,
    CD_OP_SOFTMAX,
    CD_OP_CONCAT,
    CD_OP_TRANSPOSE,
    CD_OP_ALIAS,     // Reshape, Flatten, Identity, Dropout, Squeeze, Unsqueeze:
                     // same bytes, new shape
    CD_OP_FAKEQUANT, // QuantizeLinear of a float activation (quantize, then dequantize)
    CD_OP_PAD,       // Pad not folded into a conv or pool
    CD_OP_SLICE,     // Slice, one output of Split
    CD_OP_REDUCE,    // ReduceSum/Mean/Max (not the global pools they can be)
    CD_OP_LAYERNORM, // LayerNormalization, or its older exported pattern fused
    CD_OP_RESIZE,    // Resize, Upsample (H and W of NCHW)
    CD_OP_CONVT,     // ConvTranspose (2-D), bias and activation fused
    CD_OP_GATHER,    // Gather over an activation (u.gather; indices owned)
    CD_OP_TILE,      // Tile or Expand of an activation (no parameters: the shapes)
} cd_op_kind;

typedef struct {
    cd_op_kind kind;
    char name[128]; // ONNX node name (or op type + index)
    char label[48]; // "Conv+BN+Relu", "Add+Relu" ...
    int nin;
    int in[CD_OP_MAX_IN]; // value ids (activations; BINARY may have one constant)
    int out;              // value id
    // CONV/GEMM, filled by the compaction pass (compact.c): the structure of
    // the weights as loaded (owned; cd_sparse_analysis), the dense FLOPs at
    // batch 1 before compaction, and what compaction did ("" when nothing).
    void *analysis;
    int64_t flops0;
    char compact[96];
    union {
        struct {
            cd_conv_desc d; // n = 1; act and has_residual after fusion
            float *w;       // OIHW, owned
            float *bias;    // K, owned (always present after lowering)
            float *wscale;  // K, owned, or NULL: the weights are int8 integers times wscale[k]
                            // (from a quantized file; the int8 kernels' weights), kept through
                            // BN folding and compaction
        } conv;
        struct {
            cd_gemm_desc d; // act after fusion
            float *w;       // N x K, owned (alpha folded in)
            float *bias;    // N or NULL, owned (beta folded in)
        } gemm;
        cd_pool_desc pool; // n = 1
        cd_binary_desc binary;
        cd_activation act;
        cd_softmax_desc softmax;
        struct {
            int axis;
        } concat;
        struct {
            int perm[CD_MAX_RANK];
        } transpose;
        cd_quant fq; // FAKEQUANT (owned arrays; dtype of the quantized tensor)
        cd_pad_desc pad;
        cd_slice_desc slice;
        cd_reduce_desc reduce;
        struct {
            cd_layernorm_desc d;
            float *gamma; // d.len, owned
            float *beta;  // d.len or NULL, owned
        } ln;
        cd_resize_desc resize;
        struct {
            cd_deconv_desc d;
            float *w;    // [c][k / groups][r][s], owned
            float *bias; // k or NULL, owned
        } convt;
        struct {
            cd_gather_desc d; // d.idx points at idx
            int64_t *idx;     // d.nidx indices in [0, len), owned
        } gather;
    } u;
} cd_op;

typedef struct {
    cd_value *values;
    int nvalues, values_cap;
    int *hash; // open-addressing name table of value ids (-1 empty)
    int hash_cap;
    cd_node *nodes; // topological order
    int nnodes;
    int *inputs, ninputs;   // graph inputs (activations)
    int *outputs, noutputs; // graph outputs
    int opset;
    cd_op *ops;
    int nops, ops_cap;
    int64_t params, zero_params; // weight elements seen by the lowering
    void *model_proto;           // Onnx__ModelProto * during the load, then NULL
    char *dir;                   // real path of the model's folder (external data)
    size_t max_bytes;            // limit on the file plus its external data (0: none)
    size_t bytes_read;           // what the import has read of them so far
    // Inputs with symbolic dims (dynamic H and W): the sizes to plan them at,
    // set by the caller before the import (runtime/variants.c), and which
    // dims were symbolic, filled by it.
    const struct cd_input_shape_s *shape_spec; // n_shape_spec entries (may be NULL)
    int n_shape_spec;
    uint32_t *input_dyn; // per graph input: bit k set when dim k (k >= 1) is symbolic
} cd_graph;

// ---- graph.c ----------------------------------------------------------------

// Value by name, or -1.
int cd_graph_find(const cd_graph *g, const char *name);
// Adds a value named name (copied) of kind NONE. Returns its id, or
// CD_EMODEL when the name exists already, CD_ENOMEM.
int cd_graph_add_value(cd_graph *g, const char *name);
// Appends an op (zeroed, name copied) and returns its index or CD_ENOMEM.
int cd_graph_add_op(cd_graph *g, cd_op_kind kind, const char *name);
void cd_op_free(cd_op *op);
// The activation an op applies in its epilogue (conv, Gemm, binary op,
// ConvTranspose: where a following activation is fused), or NULL.
cd_activation *cd_op_act_slot(cd_op *op);
// Frees q's arrays (not q itself).
void cd_quant_clear(cd_quant *q);
// A deep copy of q into *out. 0 or CD_ENOMEM.
int cd_quant_copy(const cd_quant *q, cd_quant *out);
void cd_graph_free(cd_graph *g);
// Elements of a shape, or -1 on negative dims or when the product of the
// non-zero dims overflows (core/checked.h).
int64_t cd_shape_numel(int rank, const int64_t *shape);

// ---- onnx-import.c ------------------------------------------------------------

// Reads and validates an ONNX file into g (values for initializers and
// inputs, nodes in topological order). Returns 0, CD_EIO, CD_EMODEL,
// CD_EUNSUPPORTED or CD_ENOMEM with err set. g must be zeroed; on failure the
// caller frees it with cd_graph_free.
// g->max_bytes (0: none) bounds the file and its external data together:
// over it, CD_ETOO_LARGE before the part that passes it is read.
int cd_onnx_import(const char *path, cd_graph *g, char *err, size_t errlen);
// The same from the file's bytes in memory (buf is only read during the
// call); dir is the real path of the folder external data resolves in (NULL:
// external data is refused).
int cd_onnx_import_buffer(const uint8_t *buf, size_t len, const char *dir, cd_graph *g, char *err, size_t errlen);
// Frees the protobuf held during the load.
void cd_onnx_release(cd_graph *g);
// Converts a TensorProto (const Onnx__TensorProto *) into constant data in v
// (kind, rank, shape, numel, f or i). Float types become float32, integer
// types int64; v->dtype is the file's element type. External data resolves inside g->dir only. Returns 0,
// CD_EMODEL (sizes disagree, bad external reference), CD_EUNSUPPORTED (dtype)
// or CD_ENOMEM. what names the tensor in messages.
int cd_onnx_tensor_value(cd_graph *g, const void *tensor, const char *what, cd_value *v, char *err, size_t errlen);

// ---- lower.c ----------------------------------------------------------------

// Lowers every node of g into g->ops (see above). Returns 0, CD_EMODEL
// (inconsistent shapes, bad attributes values), CD_EUNSUPPORTED (naming the
// op, node and what is supported) or CD_ENOMEM.
int cd_graph_lower(cd_graph *g, char *err, size_t errlen);

// ---- fuse-patterns.c ------------------------------------------------------------

// Fuses the multi-op patterns older exporters write for LayerNormalization
// and the Erf form of GELU into one op each (see fuse-patterns.c); called at
// the end of cd_graph_lower. Returns 0 or CD_ENOMEM.
int cd_graph_fuse_patterns(cd_graph *g, char *err, size_t errlen);

// ---- compact.c ----------------------------------------------------------------

// Structured-sparsity compaction of a lowered graph (see compact.c): drops
// filters and input channels nobody needs, folds constant channels (a zero
// filter's act(bias)) into the consumers' biases where exact, turns
// block-diagonal connection patterns into grouped convs, and records the
// weight analysis of every conv/FC (op->analysis, op->flops0). With
// enable = 0 only the analysis is recorded. Model inputs and outputs keep
// their shapes. Returns 0 or CD_ENOMEM.
int cd_graph_compact(cd_graph *g, int enable, char *err, size_t errlen);

#endif // CD_RUNTIME_GRAPH_H
