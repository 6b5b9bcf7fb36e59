// The runtime's options (runtime.h): the one place its environment variables
// are read, and where the options reach the libraries below (the ISA cap of
// sparse/, the log callback of core/log.h, the backends' switches).
#include "runtime/options.h"

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
    if ((v = env("CONVD_INT8"))) o->int8 = !strcmp(v, "off") ? 1 : !strcmp(v, "on") ? 2 : !strcmp(v, "dense") ? 3 : 0;
    if ((v = env("CONVD_INT8_PICK")))
        o->int8_pick = !strcmp(v, "layers") ? 1 : !strcmp(v, "dense") ? 2 : !strcmp(v, "sparse") ? 3 : 0;
    // Parsed here, once: from here on the cap is an enum (core/isa-cap.h).
    if ((v = env("CONVD_MAX_ISA")) && cd_isa_cap_parse(v, &o->max_isa) != 0)
        cd_rt_log(CD_RT_LOG_WARN, "convd: ignoring CONVD_MAX_ISA=%s (want avx512vnni, avx512, avx2 or scalar)", v);
    if ((v = env("CONVD_BATCH_SPLIT"))) o->batch_split = !strcmp(v, "off") ? 1 : !strcmp(v, "on") ? 2 : 0;
    if ((v = env("CONVD_BATCH_LANES"))) o->batch_lanes = !strcmp(v, "off") ? 1 : !strcmp(v, "on") ? 2 : 0;
    if ((v = env("CONVD_WINOGRAD")))
        o->winograd = !strcmp(v, "off")      ? 1
                      : !strcmp(v, "on")     ? 2
                      : !strcmp(v, "f2")     ? 3
                      : !strcmp(v, "f4")     ? 4
                      : !strcmp(v, "f6")     ? 5
                      : !strcmp(v, "onednn") ? 6
                                             : 0;
    if ((v = env("CONVD_FQ_FUSE"))) o->fq_fuse = !strcmp(v, "off");
    if ((v = env("CONVD_DW3X3"))) o->dw3x3 = !strcmp(v, "off") ? 1 : !strcmp(v, "on") ? 2 : 0;
    if ((v = env("CONVD_BF16"))) o->bf16 = !strcmp(v, "auto") ? 1 : !strcmp(v, "on") ? 2 : 0;
    if ((v = env("CONVD_HIP_PLUGIN"))) snprintf(o->hip_plugin, sizeof o->hip_plugin, "%s", v);
}

static cd_runtime_options g_opts;
static cd_backend_opts g_backend_opts;

const cd_runtime_options *cd_runtime_opts(void) { return &g_opts; }

const cd_backend_opts *cd_runtime_backend_opts(void) { return &g_backend_opts; }

void cd_runtime_configure(const cd_runtime_options *o) {
    g_opts = *o;
    g_backend_opts = (cd_backend_opts){.kernels_ref = o->cpu_kernels_ref != 0,
                                       .int8_ref = o->int8 == 2,
                                       .hip_plugin = g_opts.hip_plugin,
                                       .winograd = o->winograd,
                                       .dw3x3 = o->dw3x3,
                                       .bf16 = o->bf16};
    cd_rt_log_set(o->log, o->log_ud);
    cd_sparse_isa_set_cap(o->max_isa);
}
