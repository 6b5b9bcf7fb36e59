#ifndef CD_DAEMON_MODELS_H
#define CD_DAEMON_MODELS_H

// The model side of the daemon: the registry of loaded models and the
// methods that use it (models, load, unload, infer). Everything here runs on
// the loop thread except the `work` parts of requests, which run on workers.

#include "daemon/methods.h"

#include <msgpack.h>
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

// Method handlers (see methods.h for the cd_call contract).
int cd_method_models(cd_call *call);
int cd_method_load(cd_call *call);
int cd_method_unload(cd_call *call);
int cd_method_infer(cd_call *call);
// plan: the model's layers as planned, profiled on the profiler thread
// (daemon/model-plan.c).
int cd_method_plan(cd_call *call);

#endif // CD_DAEMON_MODELS_H
