// The options in force (core/options.h).
#include "core/options.h"

static cd_runtime_options g_opts;

const cd_runtime_options *cd_runtime_opts(void) { return &g_opts; }

void cd_runtime_opts_set(const cd_runtime_options *o) { g_opts = *o; }
