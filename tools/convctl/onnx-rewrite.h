#ifndef CD_TOOLS_CONVCTL_ONNX_REWRITE_H
#define CD_TOOLS_CONVCTL_ONNX_REWRITE_H

// Offline ONNX editing for convctl (prune, quantize): read a model file into the
// protobuf-c message, find and decode its constant tensors, replace a
// tensor's values, write the model back. Everything not replaced is written
// back as it was read (protobuf-c keeps unknown fields too).

#include "onnx.pb-c.h"

#include <stddef.h>

typedef struct {
    Onnx__ModelProto *proto; // the unpacked model
    char *dir;               // real path of the model's folder (external data)
    size_t nconst;           // constants of the main graph, sorted by name
    struct ctl_onnx_const {
        const char *name;
        Onnx__TensorProto *t;
    } * consts;
} ctl_onnx_model;

// Reads and unpacks path. Returns 0, CD_EIO (cannot read), CD_EMODEL (not an
// ONNX protobuf, no graph, a constant without a name or defined twice) or
// CD_ENOMEM, with err set. On failure *m is left empty (ctl_onnx_free is
// still safe).
int ctl_onnx_load(const char *path, ctl_onnx_model *m, char *err, size_t errlen);

void ctl_onnx_free(ctl_onnx_model *m);

// The constant tensor called name in the main graph: an initializer or the
// `value` of a Constant node. NULL when name is no such constant.
Onnx__TensorProto *ctl_onnx_find_const(const ctl_onnx_model *m, const char *name);

// Decodes a float32 tensor (raw_data, float_data or external data inside the
// model's folder) into a malloc'd array of *n values. Returns 0,
// CD_EUNSUPPORTED (not float32), CD_EMODEL (sizes disagree, bad external
// reference) or CD_ENOMEM, with err set.
int ctl_onnx_read_f32(const ctl_onnx_model *m, const Onnx__TensorProto *t, float **out, size_t *n, char *err,
                      size_t errlen);

// Replaces the values of t by n float32 values stored as little-endian
// raw_data (float_data and external data references are dropped; dims stay).
// Returns 0 or CD_ENOMEM (t unchanged).
int ctl_onnx_write_f32(Onnx__TensorProto *t, const float *v, size_t n);

// Packs the model and writes it to path through a temporary file in the same
// folder renamed over path, so path is never left half-written. Returns 0,
// CD_EMODEL (above protobuf's 2 GiB), CD_EIO or CD_ENOMEM, with err set.
int ctl_onnx_save(const ctl_onnx_model *m, const char *path, char *err, size_t errlen);

// ---- building (quantize) ------------------------------------------------------
// Everything below is malloc'd the way protobuf-c's unpacker allocates, so a
// tensor or node added to the model is freed with it by ctl_onnx_free.

// A new tensor called name of ONNX element type dtype and shape dims[rank]
// (rank 0: a scalar) holding nbytes of little-endian raw data (copied).
// NULL when out of memory.
Onnx__TensorProto *ctl_onnx_tensor_new(const char *name, int32_t dtype, int rank, const int64_t *dims, const void *raw,
                                       size_t nbytes);

// A new node of the default domain: op_type op, called name, nin inputs, one
// output; with attr != NULL one int attribute attr = value. NULL when out of
// memory.
Onnx__NodeProto *ctl_onnx_node_new(const char *op, const char *name, int nin, const char *const *in, const char *out,
                                   const char *attr, int64_t value);

// Replaces input i of n by name. Returns 0 or CD_ENOMEM (n unchanged).
int ctl_onnx_set_input(Onnx__NodeProto *n, size_t i, const char *name);

// Appends t to the main graph's initializers. Returns 0 or CD_ENOMEM (t not
// added: the caller still owns it).
int ctl_onnx_add_initializer(ctl_onnx_model *m, Onnx__TensorProto *t);

// The default domain's opset version (0 when not imported) and setting it.
int64_t ctl_onnx_opset(const ctl_onnx_model *m);
void ctl_onnx_set_opset(ctl_onnx_model *m, int64_t version);

#endif // CD_TOOLS_CONVCTL_ONNX_REWRITE_H
