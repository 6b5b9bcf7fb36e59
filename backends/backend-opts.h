#ifndef CD_BACKENDS_BACKEND_OPTS_H
#define CD_BACKENDS_BACKEND_OPTS_H

// The switches a backend is created with (cd_backend_create,
// backends/devices.h): each backend reads its own from the struct it was
// given, never from a process-wide global. Zeroed (or a NULL pointer) =
// the defaults. The runtime fills them from its options (runtime/options.c).

#include <stdbool.h>

typedef struct {
    // cpu: every op on the reference kernels in NCHW, the tests' oracle
    // (CONVD_CPU_KERNELS=ref, --cpu-kernels ref).
    bool kernels_ref;
    // cpu: an int8 conv no fast kernel takes runs on the reference kernels
    // rather than being refused (CONVD_INT8=on, --int8 on).
    bool int8_ref;
    // hip, hip:N: the GPU=hip plugin's path (NULL or "": next to the
    // executable; CONVD_HIP_PLUGIN). The plugin is loaded once per process:
    // the first create that loads it decides.
    const char *hip_plugin;
    // cpu: our Winograd 3x3 conv beside oneDNN's (backends/cpu/winograd.h):
    // 0 auto (where it times faster at load), 1 off, 2 on, 3 F(2x2) only,
    // 4 F(4x4) only, 5 F(6x6) only, 6 oneDNN's own Winograd only
    // (CONVD_WINOGRAD, --winograd).
    int winograd;
    // cpu: our depthwise 3x3 conv beside oneDNN's (backends/cpu/dw3x3.h): 0
    // auto (where it times faster at load), 1 off, 2 on (CONVD_DW3X3).
    int dw3x3;
    // cpu: the dense f32 convs in bf16 (backends/cpu/dnnl-conv-bf16.c), an
    // opt-in precision where oneDNN runs bf16 natively: 0 off, 1 auto (where
    // it times faster at load), 2 on (CONVD_BF16, --bf16).
    int bf16;
} cd_backend_opts;

#endif // CD_BACKENDS_BACKEND_OPTS_H
