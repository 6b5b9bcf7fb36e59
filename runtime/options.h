#ifndef CD_RUNTIME_OPTIONS_H
#define CD_RUNTIME_OPTIONS_H

// The runtime's options in force (runtime/options.c), for the runtime's own
// files: set once by cd_runtime_configure (runtime.h) at start-up, read by
// the planner (plan, int8), the executor (profile) and wherever the runtime
// creates a backend (its switches). Nothing below the runtime reads them:
// the backends get theirs at cd_backend_create, sparse/ its ISA cap.

#include "backends/backend-opts.h"
#include "runtime/runtime.h"

// The options in force (never NULL; zeroed until configured).
const cd_runtime_options *cd_runtime_opts(void);

// The backend switches of the options in force, for cd_backend_create.
const cd_backend_opts *cd_runtime_backend_opts(void);

#endif // CD_RUNTIME_OPTIONS_H
