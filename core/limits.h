#ifndef CD_CORE_LIMITS_H
#define CD_CORE_LIMITS_H

#include "core/errors.h"

#include <stdint.h>
#include <stdio.h>

// Hard limits on what arrives from the wire. Every declared length is checked
// against these before anything is allocated for it.

#define CD_MAX_MESSAGE_DEFAULT (64u << 20) // one message, bytes (--max-message)
#define CD_MAX_MESSAGE_MIN (4u << 10)      // smallest allowed --max-message
#define CD_MAX_DEPTH 16                    // nesting of arrays/maps
#define CD_MAX_CONTAINER 65536             // elements of one array or map
#define CD_MAX_STR 4096                    // bytes of one str (names, paths)
#define CD_MAX_RANK 8                      // tensor rank
#define CD_MAX_TENSORS 64                  // tensors in one inputs/outputs map
#define CD_MAX_NAME 255                    // model and tensor names
#define CD_MAX_METHOD 64                   // method name
// Largest max_batch of a model: the daemon's --max-batch, a model's .conf and
// `load` params, and the runtime's cd_model_opts.max_batch are all checked
// against it (the scheduler sizes its per-worker batch arrays by it).
#define CD_MAX_BATCH 4096

// The two batch checks, one bound each, stated here only. At load: a
// model's max_batch is 1..CD_MAX_BATCH, else CD_EPARAMS. Per request: its
// batch is 1..the model's max_batch, else CD_ESHAPE. `what` names the
// model or input in the message.
static inline int cd_max_batch_check(int64_t max_batch, char *err, size_t errlen) {
    if (max_batch >= 1 && max_batch <= CD_MAX_BATCH) return 0;
    if (err && errlen) snprintf(err, errlen, "max_batch %lld out of range (1..%d)", (long long)max_batch, CD_MAX_BATCH);
    return CD_EPARAMS;
}

static inline int cd_batch_check(int64_t batch, int64_t max_batch, const char *what, char *err, size_t errlen) {
    if (batch >= 1 && batch <= max_batch) return 0;
    if (err && errlen)
        snprintf(err, errlen, "%s: batch %lld out of range (1..max_batch %lld)", what, (long long)batch,
                 (long long)max_batch);
    return CD_ESHAPE;
}
// Inputs of one operation (Concat, Sum...): the graph's ops and the backends'
// op descriptions size their input arrays by it.
#define CD_OP_MAX_IN 64

// Limits on what a model file may declare (runtime/). Files come from
// programs we do not control: each declared size is checked against these
// (with overflow-checked arithmetic, core/checked.h) before anything is
// allocated for it. A value over one is CD_ETOO_LARGE naming what and where.
// Nodes of one graph. CNNs have hundreds to a few thousand; every layer costs
// the backend some kilobytes and tens of microseconds to prepare, so 100,000
// loads in about 2 s and under 1 GiB, while 1,000,000 would take a minute and
// 8 GiB: a file that large is refused before anything is built for it.
#define CD_MAX_MODEL_NODES 100000
// Memory protobuf-c may allocate unpacking a file: RATIO times its bytes
// plus SLACK. Weights (raw_data, packed floats) unpack to about their size,
// nodes with their names to a few times theirs; a file built to unpack to
// far more (millions of empty strings or messages, 2 bytes each) is refused
// when the unpack reaches the budget.
#define CD_ONNX_UNPACK_RATIO 8
#define CD_ONNX_UNPACK_SLACK ((size_t)256 << 20)
// Elements of one initializer or Constant tensor (8 GiB as float32; files are
// at most 2 GiB, larger weights come as external data).
#define CD_MAX_CONST_ELEMS ((int64_t)1 << 31)
#define CD_MAX_CONST_DIM INT32_MAX // one dim of a constant: fits an int
// Elements of a constant computed at load (folded Add/Mul/Concat... on
// constants) beyond the size of its operands: shape sub-graphs fold to a few
// values, so 64 Mi (256 MiB as float32, 512 MiB as int64) is generous, and it
// stops two tiny constants from broadcasting into gigabytes during the load.
#define CD_MAX_FOLD_ELEMS ((int64_t)1 << 26)
// Elements of one activation per batch item (4 GiB as float32), as for graph
// inputs; every dim of an activation then fits an int.
#define CD_MAX_ACT_ELEMS ((int64_t)1 << 30)

#endif // CD_CORE_LIMITS_H
