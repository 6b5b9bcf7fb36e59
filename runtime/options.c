// The runtime's options (runtime.h): the one place its environment variables
// are read, and where the options reach the libraries below (the ISA cap of
// sparse/, the log callback of core/log.h).
#include "runtime/runtime.h"

#include "core/log.h"
#include "sparse/spmm-ukernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The value of environment variable name, or NULL when unset or empty.
static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void cd_runtime_options_from_env(cd_runtime_options *o) {
    memset(o, 0, sizeof *o);
    const char *v;
    if ((v = env("CONVD_PROFILE"))) o->profile = strcmp(v, "0") != 0;
    if ((v = env("CONVD_CPU_KERNELS"))) o->cpu_kernels_ref = strcmp(v, "ref") == 0;
    if ((v = env("CONVD_PLAN"))) {
        o->plan = !strcmp(v, "dense") ? 1 : !strcmp(v, "sparse") ? 2 : !strcmp(v, "compact") ? 3 : 0;
    }
    if ((v = env("CONVD_INT8"))) o->int8 = !strcmp(v, "off") ? 1 : !strcmp(v, "on") ? 2 : 0;
    if ((v = env("CONVD_WINOGRAD")))
        o->winograd = !strcmp(v, "off") ? 1 : !strcmp(v, "on") ? 2 : !strcmp(v, "f2") ? 3 : !strcmp(v, "f4") ? 4 : 0;
    if ((v = env("CONVD_MAX_ISA"))) snprintf(o->max_isa, sizeof o->max_isa, "%s", v);
    if ((v = env("CONVD_HIP_PLUGIN"))) snprintf(o->hip_plugin, sizeof o->hip_plugin, "%s", v);
}

void cd_runtime_configure(const cd_runtime_options *o) {
    cd_runtime_opts_set(o);
    cd_rt_log_set(o->log, o->log_ud);
    cd_sparse_isa_set_cap(o->max_isa);
}
