#ifndef CD_TESTS_ONNX_BUILDER_H
#define CD_TESTS_ONNX_BUILDER_H

// Builds small ONNX models with protobuf-c for the runtime's C tests. Every
// allocation is tracked by the builder and freed by mb_free. Float
// initializers get random values (cd_test_randf); the first input dim is the
// symbolic batch "N".

#include "onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    void *ptrs[4096];
    int n;
    Onnx__NodeProto *nodes[64];
    int nnodes;
    Onnx__TensorProto *inits[64];
    int ninits;
    Onnx__ValueInfoProto *ins[8], *outs[8];
    int nins, nouts;
} mb;

void *mb_alloc(mb *b, size_t n);
char *mb_str(mb *b, const char *s);
void mb_free(mb *b);
Onnx__NodeProto *mb_node(mb *b, const char *op, const char *in0, const char *in1, const char *in2, const char *out);
Onnx__AttributeProto *mb_attr(mb *b, Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType t);
void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v);
void mb_attr_int(mb *b, Onnx__NodeProto *n, const char *name, int64_t v);
void mb_attr_str(mb *b, Onnx__NodeProto *n, const char *name, const char *v);
void mb_init_f(mb *b, const char *name, int rank, const int64_t *dims);
void mb_init_i(mb *b, const char *name, int n, const int64_t *v, int scalar);
Onnx__ValueInfoProto *mb_vinfo(mb *b, const char *name, int rank, const int64_t *dims);
void mb_input(mb *b, const char *name, int rank, const int64_t *dims);
void mb_output(mb *b, const char *name);
const char *mb_write(mb *b, int opset);

// A tiny random CNN written to a temporary file whose path goes into path:
// x [N, c, h, h] -> Conv kxk (pad, bias, 1..max_groups groups) -> Relu ->
// Conv 1x1 -> y. *c and *h (may be NULL) receive the input's sizes.
const char *mb_write_small_cnn(char *path, size_t len, int max_groups, int *c, int *h);

#endif // CD_TESTS_ONNX_BUILDER_H
