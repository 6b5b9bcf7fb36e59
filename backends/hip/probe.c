// The plugin's device probe (backends/hip/plugin.h): answers "can --device
// hip:N run here?" quickly and with a reason a person can act on.

#include "backends/hip/plugin.h"

#include "backends/hip/bias-act.h"
#include "backends/hip/check.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/words.h"

#if defined(__HIP_PLATFORM_AMD__)
#include "backends/hip/sparse/rocsparse-calls.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The targets the kernels were compiled for (the Makefile passes GPU_ARCHS);
// the emulated build's device reports "emu".
#ifndef CD_GPU_ARCHS
#define CD_GPU_ARCHS "emu"
#endif

#define CD_HIP_EXPORT __attribute__((visibility("default")))

// Runs relu over {-1, 2, -3, 4} on the device and checks {0, 2, 0, 4}: the
// code object for this architecture loads and executes. Returns 0 or fails.
static int probe_kernel(char *err, size_t errlen) {
    const float in[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
    float out[4] = {0};
    float *buf = NULL;
    hipError_t e = hipMalloc((void **)&buf, sizeof in);
    if (e != hipSuccess) return cd_errf(CD_EDEVICE, err, errlen, "hipMalloc: %s", hipGetErrorName(e));
    const char *what = "hipMemcpy";
    e = hipMemcpy(buf, in, sizeof in, hipMemcpyHostToDevice);
    if (e == hipSuccess) {
        cd_activation relu = {CD_ACT_RELU, 0.0f, 0.0f};
        what = "test kernel";
        if (cd_hip_bias_act(1, 4, 1, buf, NULL, NULL, relu, buf, NULL) != 0)
            e = hipErrorLaunchFailure;
        else if ((e = hipDeviceSynchronize()) == hipSuccess) {
            what = "hipMemcpy";
            e = hipMemcpy(out, buf, sizeof out, hipMemcpyDeviceToHost);
        }
    }
    CD_HIP_CHECK_LOG(hipFree(buf));
    if (e != hipSuccess) return cd_errf(CD_EDEVICE, err, errlen, "%s: %s", what, hipGetErrorName(e));
    if (out[0] != 0.0f || out[1] != 2.0f || out[2] != 0.0f || out[3] != 4.0f)
        return cd_errf(CD_EDEVICE, err, errlen, "test kernel returned wrong results");
    return 0;
}

// One tiny rocSPARSE call (cd_rocsparse_probe): rocSPARSE is a separate
// library with its own list of GPU targets, and one without code for this
// device would otherwise fail at the first sparse layer. Under the emulator
// there is no rocSPARSE; CD_HIP_EMU_ROCSPARSE_PROBE=fail stands in for such
// a library (tests). Returns 0 or CD_EDEVICE naming rocSPARSE and the arch.
static int probe_sparse(const cd_hip_device_info *info, char *err, size_t errlen) {
    char why[160] = "";
    int rc = 0;
#if defined(__HIP_PLATFORM_AMD__)
    rc = cd_rocsparse_probe(why, sizeof why);
#else
    const char *inj = getenv("CD_HIP_EMU_ROCSPARSE_PROBE");
    if (inj && strcmp(inj, "fail") == 0) {
        snprintf(why, sizeof why, "rocsparse_saxpyi: hipErrorNoBinaryForGpu (injected)");
        rc = CD_EDEVICE;
    }
#endif
    if (!rc) return 0;
    return cd_errf(CD_EDEVICE, err, errlen,
                   "rocSPARSE cannot run on device %d (%s, %s): %s; is librocsparse built for %s?", info->device,
                   info->name, info->arch, why, info->arch);
}

CD_HIP_EXPORT int cd_hip_plugin_abi(void) { return CD_HIP_PLUGIN_ABI; }

CD_HIP_EXPORT void cd_hip_plugin_set_log(cd_rt_log_fn fn, void *ud) { cd_rt_log_set(fn, ud); }

CD_HIP_EXPORT int cd_hip_plugin_probe(int device, cd_hip_device_info *out, char *err, size_t errlen) {
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    if (e != hipSuccess || count == 0) {
        const char *hint = access("/dev/kfd", F_OK) != 0 ? "; /dev/kfd is missing: is the amdgpu kernel driver loaded?"
                                                         : "; /dev/kfd exists: is this user in the render/video group?";
        const char *name = e == hipSuccess ? "0 devices" : hipGetErrorName(e);
        const char *text = e == hipSuccess ? "" : hipGetErrorString(e);
        int same = strcmp(name, text) == 0 || !*text;
        return cd_errf(CD_EDEVICE, err, errlen, "no AMD GPU found (hipGetDeviceCount: %s%s%s)%s", name,
                       same ? "" : ": ", same ? "" : text, hint);
    }
    if (device < 0 || device >= count)
        return cd_errf(CD_EDEVICE, err, errlen, "no HIP device %d (this machine has %d: 0..%d)", device, count,
                       count - 1);
    if ((e = hipSetDevice(device)) != hipSuccess)
        return cd_errf(CD_EDEVICE, err, errlen, "hipSetDevice(%d): %s", device, hipGetErrorName(e));
    hipDeviceProp_t prop;
    if ((e = hipGetDeviceProperties(&prop, device)) != hipSuccess)
        return cd_errf(CD_EDEVICE, err, errlen, "hipGetDeviceProperties(%d): %s", device, hipGetErrorName(e));
    cd_hip_device_info info;
    memset(&info, 0, sizeof info);
    info.device = device;
    info.count = count;
    snprintf(info.name, sizeof info.name, "%s", prop.name);
    size_t arch_len = strcspn(prop.gcnArchName, ":");
    if (arch_len >= sizeof info.arch) arch_len = sizeof info.arch - 1;
    memcpy(info.arch, prop.gcnArchName, arch_len);
    info.total_mem = (int64_t)prop.totalGlobalMem;
    info.compute_units = prop.multiProcessorCount;
    info.warp_size = prop.warpSize;
    if (!cd_word_in_list(info.arch, CD_GPU_ARCHS)) // an entry of the comma-separated list
        return cd_errf(CD_EDEVICE, err, errlen,
                       "device %d (%s) is %s, but the plugin was built for %s "
                       "(rebuild with make GPU=hip GPU_ARCHS=...,%s)",
                       device, info.name, info.arch, CD_GPU_ARCHS, info.arch);
    int rc = probe_kernel(err, errlen);
    if (!rc) rc = probe_sparse(&info, err, errlen);
    if (rc) return rc;
    if (out) *out = info;
    return 0;
}
