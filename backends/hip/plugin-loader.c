// The devices "hip" and "hip:N": the HIP backend lives in the GPU=hip plugin
// (build/lib/libconvd-hip.so, backends/hip/plugin.h), which is dlopened here on
// first use so that nothing else in the process links ROCm. The plugin stays
// loaded for the life of the process (its HIP runtime cannot be unloaded
// safely while any device memory exists).

#include "backends/hip/plugin-loader.h"
#include "backends/backend.h"

#include "backends/hip/plugin.h"
#include "core/errors.h"
#include "core/log.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_handle;                           // the loaded plugin (NULL until loaded)
static cd_hip_plugin_probe_fn g_probe;           // its probe
static cd_hip_plugin_backend_create_fn g_create; // its backend constructor

int cd_hip_device_parse(const char *device, int *ordinal) {
    if (!device || strncmp(device, "hip", 3) != 0) return 0;
    if (device[3] == '\0') {
        *ordinal = 0;
        return 1;
    }
    if (device[3] != ':' || device[4] < '0' || device[4] > '9') return 0;
    char *end;
    long v = strtol(device + 4, &end, 10);
    if (*end || v < 0 || v > 1023) return 0;
    *ordinal = (int)v;
    return 1;
}

// given (cd_backend_opts.hip_plugin: CONVD_HIP_PLUGIN, --hip-plugin), else next to the executable:
// <bindir>/../lib/convd/libconvd-hip.so as `make install` lays it out, else
// <bindir>/../lib/libconvd-hip.so as in the build tree (also the path named
// when neither exists).
static void plugin_path(const char *given, char *out, size_t len) {
    if (given && *given) {
        snprintf(out, len, "%s", given);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, len, "%s", CD_HIP_PLUGIN_FILE);
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(out, len, "%s/../lib/convd/%s", exe, CD_HIP_PLUGIN_FILE);
    if (access(out, F_OK) != 0) snprintf(out, len, "%s/../lib/%s", exe, CD_HIP_PLUGIN_FILE);
}

// The plugin's messages, into the process's log (core/log.h).
static void forward_log(int level, const char *msg, void *ud) {
    (void)ud;
    cd_rt_log(level, "%s", msg);
}

// Loads the plugin once and resolves its entry points. 0 or CD_EDEVICE.
static int plugin_load(const char *given, char *err, size_t errlen) {
    pthread_mutex_lock(&g_lock);
    int rc = 0;
    if (!g_handle) {
        char path[PATH_MAX + 64];
        plugin_path(given, path, sizeof path);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            rc = cd_errf(CD_EDEVICE, err, errlen, "cannot load %s: %s (build it with make GPU=hip)", path,
                         why ? why : "?");
        } else {
            cd_hip_plugin_abi_fn abi = (cd_hip_plugin_abi_fn)dlsym(h, CD_HIP_PLUGIN_ABI_SYMBOL);
            g_probe = (cd_hip_plugin_probe_fn)dlsym(h, CD_HIP_PLUGIN_PROBE_SYMBOL);
            g_create = (cd_hip_plugin_backend_create_fn)dlsym(h, CD_HIP_PLUGIN_BACKEND_SYMBOL);
            int got = abi ? abi() : -1;
            if (!abi || !g_probe || !g_create || got != CD_HIP_PLUGIN_ABI) {
                rc = cd_errf(
                    CD_EDEVICE, err, errlen,
                    "%s is not a convd HIP plugin of this version (ABI %d, need %d): rebuild it with make GPU=hip",
                    path, got, CD_HIP_PLUGIN_ABI);
                dlclose(h);
                g_probe = NULL;
                g_create = NULL;
            } else {
                g_handle = h;
                cd_hip_plugin_set_log_fn set_log = (cd_hip_plugin_set_log_fn)dlsym(h, CD_HIP_PLUGIN_SET_LOG_SYMBOL);
                if (set_log) set_log(forward_log, NULL);
            }
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

int cd_backend_hip_plugin_probe(int device, const char *path, char *info, size_t infolen, char *err, size_t errlen) {
    int rc = plugin_load(path, err, errlen);
    if (rc) return rc;
    cd_hip_device_info di;
    char why[512] = "";
    if (g_probe(device, &di, why, sizeof why) != 0)
        return cd_errf(CD_EDEVICE, err, errlen, "%s", why[0] ? why : "device probe failed");
    if (info && infolen)
        snprintf(info, infolen, "hip:%d: %s (%s, %d compute units, %lld MiB, wave%d)", device, di.name, di.arch,
                 di.compute_units, (long long)(di.total_mem >> 20), di.warp_size);
    return 0;
}

int cd_backend_hip_plugin_create(int device, const char *path, cd_backend_t *out, char *err, size_t errlen) {
    *out = NULL;
    int rc = cd_backend_hip_plugin_probe(device, path, NULL, 0, err, errlen);
    if (rc) return rc;
    return g_create(device, out, err, errlen);
}
