#ifndef CD_TOOLS_CONVCTL_ONNX_REWRITE_H
#define CD_TOOLS_CONVCTL_ONNX_REWRITE_H

// Offline ONNX editing for convctl (prune): read a model file into the
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

#endif // CD_TOOLS_CONVCTL_ONNX_REWRITE_H
