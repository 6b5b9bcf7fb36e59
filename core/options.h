#ifndef CD_CORE_OPTIONS_H
#define CD_CORE_OPTIONS_H

// The process's runtime options, where every layer can read them: the
// runtime sets them (cd_runtime_configure, runtime/options.c), the backends
// and the kernels read them with cd_runtime_opts(). Zeroed until configured.

#include "core/log.h"

// ---- process-wide options -------------------------------------------------
//
// Every knob of the runtime and the libraries under it, in one struct. The
// daemon fills it from its settings table (daemon/settings.toml); the tools,
// benchmarks and tests fill it with cd_runtime_options_from_env(), the one
// place the runtime's environment variables are read. Zeroed = the defaults.
typedef struct {
    int profile;           // 1: each cd_exec logs the mean time of every layer
                           // when freed (CONVD_PROFILE=1)
    int cpu_kernels_ref;   // 1: the CPU backend runs every op on the reference
                           // kernels in NCHW, the tests' oracle
                           // (CONVD_CPU_KERNELS=ref)
    int plan;              // plan of models loaded with cd_model_opts.plan 0:
                           // 0 auto, 1 dense, 2 sparse, 3 compact
                           // (CONVD_PLAN=auto|dense|sparse|compact)
    int int8;              // the int8 kernels for the convs of quantized models:
                           // 0 auto (where the planner predicts them faster),
                           // 1 off, 2 on (wherever a conv can run them)
                           // (CONVD_INT8=auto|off|on)
    int winograd;          // our Winograd 3x3 conv beside oneDNN's
                           // (backends/cpu/winograd.h): 0 auto (where it
                           // times faster), 1 off, 2 on (wherever a conv
                           // qualifies), 3 on with F(2x2) only, 4 F(4x4) only
                           // (CONVD_WINOGRAD=auto|off|on|f2|f4)
    char max_isa[16];      // cap of our own kernels: "avx512", "avx2" or
                           // "scalar", any case ("": the CPU's best;
                           // CONVD_MAX_ISA). oneDNN has its own,
                           // ONEDNN_MAX_CPU_ISA.
    char hip_plugin[4096]; // the GPU=hip plugin ("": <dir of the executable>/
                           // ../lib/libconvd-hip.so; CONVD_HIP_PLUGIN)
    cd_rt_log_fn log;      // where the libraries' messages go (NULL: stderr)
    void *log_ud;          // passed to log
} cd_runtime_options;

// The options in force (never NULL).
const cd_runtime_options *cd_runtime_opts(void);

// Makes *o the options in force (copied); cd_runtime_configure calls it.
void cd_runtime_opts_set(const cd_runtime_options *o);

#endif // CD_CORE_OPTIONS_H
