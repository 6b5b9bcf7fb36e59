#ifndef CD_RUNTIME_OPTIONS_H
#define CD_RUNTIME_OPTIONS_H

// The process's runtime options inside the runtime (runtime.h,
// cd_runtime_configure). Zeroed until configured.

#include "runtime/runtime.h"

const cd_runtime_options *cd_runtime_opts(void);

#endif // CD_RUNTIME_OPTIONS_H
