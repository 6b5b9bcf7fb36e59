#ifndef CD_BACKENDS_HIP_PLUGIN_H
#define CD_BACKENDS_HIP_PLUGIN_H

// The HIP plugin's exported C interface (build/lib/libconvd-hip.so, built by
// `make GPU=hip`; exported symbols listed in backends/hip/plugin.map). The
// daemon never links ROCm: for --device hip[:N] it dlopens the plugin and
// looks these symbols up. No ROCm header is needed to use this file.
//
// How the daemon loads it (see docs/GPU.md):
//   1. path: cd_runtime_options.hip_plugin ($CONVD_HIP_PLUGIN for the tools,
//      --hip-plugin for the daemon) if set, else <dir of /proc/self/exe>/../lib/
//      CD_HIP_PLUGIN_FILE (build/bin/convd -> build/lib/libconvd-hip.so);
//   2. dlopen(path, RTLD_NOW | RTLD_LOCAL); on failure exit 1 with
//      "--device hip: cannot load <path>: <dlerror()> (build it with make GPU=hip)";
//   3. dlsym CD_HIP_PLUGIN_ABI_SYMBOL, call it, require CD_HIP_PLUGIN_ABI;
//   4. dlsym CD_HIP_PLUGIN_PROBE_SYMBOL and call it for device N; on a
//      negative return exit 1 printing "--device hip:N: <err>";
//   5. per model: dlsym CD_HIP_PLUGIN_BACKEND_SYMBOL and create the backend.
// backends/hip/plugin-loader.c does steps 1-5 for the runtime and the daemon.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CD_HIP_PLUGIN_FILE "libconvd-hip.so"
// 2: the plugin also creates backends (CD_HIP_PLUGIN_BACKEND_SYMBOL), whose
// vtable is struct cd_backend_i of backends/backend.h: a plugin must come from
// the same source tree as the daemon that loads it.
// 3: struct cd_backend_i gained blocked_layout; cd_layout gained NCHW8C.
// 4: struct cd_backend_i has one op_init/op_run pair instead of a pair per
//    operator family, and get_caps (cd_backend_caps) instead of get_name and
//    blocked_layout.
// 5: cd_backend_caps gained residual_in_place; struct cd_backend_i gained
//    op_compute_dtype.
#define CD_HIP_PLUGIN_ABI 5
#define CD_HIP_PLUGIN_ABI_SYMBOL "cd_hip_plugin_abi"
#define CD_HIP_PLUGIN_PROBE_SYMBOL "cd_hip_plugin_probe"
#define CD_HIP_PLUGIN_BACKEND_SYMBOL "cd_hip_plugin_backend_create"

// What the probe found out about the device.
typedef struct {
    int device;        // HIP ordinal
    int count;         // devices HIP sees
    char name[256];    // marketing name
    char arch[64];     // gcnArchName up to the first ':' ("gfx90a")
    int64_t total_mem; // bytes of device memory
    int compute_units; // multiProcessorCount
    int warp_size;     // 64 (gfx9) or 32 (gfx10+)
} cd_hip_device_info;

// Optional (plugins of ABI 3 may lack it): routes the plugin's messages
// (core/log.h; its own copy, stderr until set) to fn. The runtime calls
// it right after loading the plugin with a function that forwards to the
// process's log callback.
#define CD_HIP_PLUGIN_SET_LOG_SYMBOL "cd_hip_plugin_set_log"
typedef void (*cd_hip_plugin_log_fn)(int level, const char *msg, void *ud);
void cd_hip_plugin_set_log(cd_hip_plugin_log_fn fn, void *ud);
typedef void (*cd_hip_plugin_set_log_fn)(cd_hip_plugin_log_fn fn, void *ud);

// Returns CD_HIP_PLUGIN_ABI of the plugin.
int cd_hip_plugin_abi(void);
typedef int (*cd_hip_plugin_abi_fn)(void);

// Checks that HIP device `device` exists and is usable by this build: a
// device is present, `device` is in range, its architecture is one the
// plugin was compiled for (GPU_ARCHS), and a kernel of the plugin runs on it
// and returns the right answer. Fills *out (may be NULL) and returns 0, or
// returns CD_EDEVICE with a one-line reason in err ("no AMD GPU found:
// hipGetDeviceCount: hipErrorNoDevice ...; /dev/kfd is missing, is the amdgpu
// driver loaded?"). Fast: no work beyond one tiny kernel.
int cd_hip_plugin_probe(int device, cd_hip_device_info *out, char *err, size_t errlen);
typedef int (*cd_hip_plugin_probe_fn)(int device, cd_hip_device_info *out, char *err, size_t errlen);

// Creates the HIP backend (backends/backend.h) on device `device`, which the
// probe has accepted. Returns 0, CD_EDEVICE with err set, or CD_ENOMEM.
struct cd_backend;
int cd_hip_plugin_backend_create(int device, struct cd_backend **out, char *err, size_t errlen);
typedef int (*cd_hip_plugin_backend_create_fn)(int device, struct cd_backend **out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_PLUGIN_H
