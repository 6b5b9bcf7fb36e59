// The device probe (backends/hip/plugin.h): under emulation (the same source
// the plugin exports), and the real plugin dlopened the way the daemon will.

#include "backends/hip/plugin.h"

#include "backends/hip/emu/hip-emu-api.h"
#include "core/errors.h"
#include "tests/unit/check.h"

#include <dlfcn.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

CD_TEST(hip_emu_probe_finds_the_emulated_device) {
    cd_hip_device_info info;
    char err[256] = "";
    CHECK_EQ(cd_hip_plugin_probe(0, &info, err, sizeof err), 0);
    CHECK_STREQ(info.arch, "emu");
    CHECK_EQ(info.warp_size, cd_emu_wave_size()); // 64, or CD_HIP_EMU_WAVE_SIZE
    CHECK_EQ(info.count, 1);
    CHECK_EQ(cd_hip_plugin_abi(), CD_HIP_PLUGIN_ABI);
}

CD_TEST(hip_emu_probe_device_out_of_range) {
    char err[256] = "";
    CHECK_EQ(cd_hip_plugin_probe(3, NULL, err, sizeof err), CD_EDEVICE);
    CHECK(strstr(err, "no HIP device 3") != NULL);
}

CD_TEST(hip_emu_probe_without_gpu_says_so) {
    setenv("CD_HIP_EMU_DEVICES", "0", 1);
    char err[256] = "";
    CHECK_EQ(cd_hip_plugin_probe(0, NULL, err, sizeof err), CD_EDEVICE);
    CHECK(strstr(err, "no AMD GPU found") != NULL);
    CHECK(strstr(err, "hipErrorNoDevice") != NULL);
}

// build/bin/cd-tests -> build/lib/libconvd-hip.so, as the daemon finds it.
static int plugin_path(char *out, size_t len) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    snprintf(out, len, "%s/../lib/%s", exe, CD_HIP_PLUGIN_FILE);
    return 0;
}

// Runs only where `make GPU=hip` built the plugin (CI does, before make
// test). On a machine without an AMD GPU the probe must fail fast with the
// reason; with one it must describe the device.
CD_TEST(hip_plugin_probe_fails_fast_or_finds_a_gpu) {
    char path[PATH_MAX + 64];
    CHECK_EQ(plugin_path(path, sizeof path), 0);
    if (access(path, F_OK) != 0) CD_SKIP("%s not built (make GPU=hip)", path);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) CD_CHECK_FAIL_("dlopen %s: %s", path, dlerror());
    cd_hip_plugin_abi_fn abi = (cd_hip_plugin_abi_fn)dlsym(h, CD_HIP_PLUGIN_ABI_SYMBOL);
    cd_hip_plugin_probe_fn probe = (cd_hip_plugin_probe_fn)dlsym(h, CD_HIP_PLUGIN_PROBE_SYMBOL);
    CHECK(abi != NULL && probe != NULL);
    CHECK(dlsym(h, "cd_hip_sgemm") == NULL); // only the plugin API is exported
    CHECK_EQ(abi(), CD_HIP_PLUGIN_ABI);
    cd_hip_device_info info;
    memset(&info, 0, sizeof info);
    char err[512] = "";
    int rc = probe(0, &info, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("  probe: rc %d, %.3f s, %s%s\n", rc, s, rc ? err : info.name, rc ? "" : info.arch);
    if (rc == 0) {
        CHECK(info.arch[0] != 0);
        CHECK(info.count >= 1);
    } else {
        CHECK_EQ(rc, CD_EDEVICE);
        CHECK(strlen(err) > 10);
        if (access("/dev/kfd", F_OK) != 0) CHECK(strstr(err, "no AMD GPU found") != NULL);
    }
    CHECK(s < 10.0);
}
