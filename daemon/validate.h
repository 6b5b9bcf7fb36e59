#ifndef CD_DAEMON_VALIDATE_H
#define CD_DAEMON_VALIDATE_H

// From a decoded message to a validated request, without the server: the
// params envelope and the whole check of an infer's params against a model's
// signature (keys, inputs decoded as tensors, dtypes, shapes, batch, outputs,
// reply size, timeout). The daemon calls these (methods.c, infer.c);
// so does the wire fuzz target (tests/fuzz/fuzz-rpc-reader.c), with no socket,
// loop or model behind them.

#include "core/limits.h"
#include "proto/region.h"
#include "proto/rpc.h"
#include "runtime/runtime.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The params map of a request: [] / [nil] / nil give NULL; [map] the map.
// Returns 0 or CD_EPARAMS with err.
int cd_params_map(const cd_rpc_msg *msg, const msgpack_object **out, char *err, size_t errlen);

// What an infer is checked against: a model's inputs and outputs (at most
// CD_MAX_TENSORS each), its batch limit and the daemon's --max-reply.
typedef struct {
    const char *model; // name, for messages
    int nin, nout;
    const cd_io_desc *in[CD_MAX_TENSORS];
    const cd_io_desc *out[CD_MAX_TENSORS];
    int max_batch;
    uint64_t max_reply;
} cd_infer_sig;

// A validated infer: views into the message, and what the reply will hold.
typedef struct {
    int batch;                      // shape[0] of the inputs
    const void *in[CD_MAX_TENSORS]; // input data in model order (into msg)
    size_t in_bytes[CD_MAX_TENSORS];
    size_t out_bytes[CD_MAX_TENSORS];
    bool want[CD_MAX_TENSORS]; // outputs to return
    int64_t timeout_ms;        // 0 = none
    // Shared-memory regions (proto/region.h; name NULL: inline). An input
    // named in a region has in[] NULL until the daemon resolves it.
    cd_region_ref in_ref[CD_MAX_TENSORS];
    cd_region_ref out_ref[CD_MAX_TENSORS]; // outputs written into a region ('into')
    // Inputs of a model with symbolic dims may come in other sizes: their
    // per-item shapes (dim 0 = 1), and whether they differ from the model's
    // first plan. Then out_bytes is left 0: the plan of that size gives the
    // outputs (cd_infer_check_outputs with its descriptions).
    int64_t shape[CD_MAX_TENSORS][CD_MAX_RANK];
    bool other_size;
} cd_infer_args;

// The keys infer takes (model, inputs, outputs, timeout_ms, into), each at most
// once; anything else is CD_EPARAMS.
int cd_infer_check_keys(const msgpack_object *params, char *err, size_t errlen);

// Validates inputs/outputs/timeout_ms of an infer against sig and fills *a.
// Returns 0, CD_EPARAMS, CD_EDTYPE, CD_ESHAPE or CD_ETOO_LARGE with err.
int cd_infer_validate(const msgpack_object *params, const cd_infer_sig *sig, cd_infer_args *a, char *err,
                      size_t errlen);

// The outputs' part of cd_infer_validate: a->out_bytes from sig's output
// descriptions at a->batch, and the reply-size checks. Returns 0 or
// CD_ETOO_LARGE with err.
int cd_infer_check_outputs(const cd_infer_sig *sig, cd_infer_args *a, char *err, size_t errlen);

// Upper bound of the bytes of the reply to a validated infer.
uint64_t cd_infer_reply_bytes(const cd_infer_sig *sig, const cd_infer_args *a);

#endif // CD_DAEMON_VALIDATE_H
