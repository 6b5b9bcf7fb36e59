#ifndef CD_DAEMON_MODELS_H
#define CD_DAEMON_MODELS_H

// The model side of the daemon: the registry of loaded models and the
// methods that use it. daemon/models.c: start-up, models, load, unload, the
// SIGHUP rescan and the per-model stats; daemon/infer.c: infer (validate,
// submit, the batch callback, finish, pack). Everything here runs on the
// loop thread except the `work` parts of requests and the batch callback,
// which run on workers.

#include "daemon/call.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cd_server cd_server;

// Creates the registry and loads every *.onnx of --models (a bad model is
// logged and skipped). Returns 0 or a negative code (start-up fails then).
int cd_models_init(cd_server *srv);
// Drops every model (at exit, after the workers are joined).
void cd_models_free(cd_server *srv);

// SIGHUP: rescans --models, the operator's source of truth: loads new *.onnx
// files, reloads those whose file or .conf changed (mtime/size), unloads
// models that came from the directory and whose file is gone. A model a
// client loaded (`load`) does not survive: under a name the directory has,
// the directory's version is loaded over it; under any other name it is
// unloaded. Loads run on the workers. Logs what changed. Returns 0 or a
// negative code.
int cd_models_rescan(cd_server *srv);

// Number of loaded models.
int64_t cd_models_count(cd_server *srv);
// Packs {name: {requests, errors, batches}} for `stats`.
int cd_models_pack_stats(cd_server *srv, msgpack_packer *pk);

// Method handlers (see call.h for the cd_call contract).
int cd_method_models(cd_call *call);
int cd_method_load(cd_call *call);
int cd_method_unload(cd_call *call);
int cd_method_infer(cd_call *call);
// plan: the model's layers as planned, profiled on the profiler thread
// (daemon/model-plan.c).
int cd_method_plan(cd_call *call);

// ---- daemon/infer.c: what a model entry's queue runs -------------------------

typedef struct cd_model_entry cd_model_entry;
typedef struct cd_request cd_request;

// The batch callback of every model queue (cd_batch_fn): runs reqs[0..n-1],
// one model version, joined along dim 0, on worker `worker` and sets each
// request's status.
void cd_infer_run_batch(cd_request **reqs, int n, int worker);
// How e's queue forms batches: double buffering per --double-buffer
// (double_buffer: 0 auto, 1 off, 2 on; see infer.c), else filled batches
// (--fill-batches; workers.h, cd_sched_queue.fill) when fill is set and e
// computes on the CPU executor.
void cd_infer_set_batching(cd_model_entry *e, int64_t double_buffer, bool fill);
// Makes e's queue batch only requests whose inputs have one size (models
// with symbolic dims take several).
void cd_infer_set_same_size(cd_model_entry *e);

#endif // CD_DAEMON_MODELS_H
