// The table of devices (backends/devices.h).

#include "backends/devices.h"

#include "backends/cpu/backend-cpu.h"
#include "backends/hip/backend-hip.h"
#include "backends/hip/plugin-loader.h"
#include "core/errors.h"

#include <stdio.h>
#include <string.h>

static int cpu_create(const cd_backend_opts *opts, cd_backend_t *out, char *err, size_t errlen) {
    return cd_backend_cpu_create(opts, out);
}

static int hip_emu_create(const cd_backend_opts *opts, cd_backend_t *out, char *err, size_t errlen) {
    return cd_backend_hip_init(0, out, err, errlen);
}

// The devices known by their whole name; "hip" and "hip:N" are the plugin
// loader's (cd_hip_device_parse). The first is the default.
static const struct {
    const char *name;
    int (*create)(const cd_backend_opts *opts, cd_backend_t *out, char *err, size_t errlen);
} g_devices[] = {
    {"cpu", cpu_create},
    {"hip-emu", hip_emu_create},
};

#define NDEVICES (sizeof g_devices / sizeof g_devices[0])

// The entry of g_devices named device (NULL or "" for the default), or -1.
static int device_find(const char *device) {
    if (!device || !*device) return 0;
    for (size_t i = 0; i < NDEVICES; i++)
        if (strcmp(device, g_devices[i].name) == 0) return (int)i;
    return -1;
}

static int not_a_device(const char *device, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "'%s' is not a device (cpu, hip-emu, hip, hip:N)", device);
    return CD_EUNSUPPORTED;
}

int cd_backend_create(const char *device, const cd_backend_opts *opts, cd_backend_t *out, char *err, size_t errlen) {
    static const cd_backend_opts defaults;
    if (!opts) opts = &defaults;
    *out = NULL;
    int i = device_find(device), n;
    if (i >= 0) return g_devices[i].create(opts, out, err, errlen);
    if (cd_hip_device_parse(device, &n)) return cd_backend_hip_plugin_create(n, opts->hip_plugin, out, err, errlen);
    return not_a_device(device, err, errlen);
}

int cd_backend_probe(const char *device, const cd_backend_opts *opts, char *info, size_t infolen, char *err,
                     size_t errlen) {
    static const cd_backend_opts defaults;
    if (!opts) opts = &defaults;
    int i = device_find(device), n;
    if (info && infolen) info[0] = '\0';
    if (i >= 0) {
        cd_backend_t be;
        int rc = g_devices[i].create(opts, &be, err, errlen);
        if (rc) return rc;
        if (info && infolen) snprintf(info, infolen, "%s", cd_backend_get_caps(be).description);
        cd_backend_free(be);
        return 0;
    }
    if (cd_hip_device_parse(device, &n))
        return cd_backend_hip_plugin_probe(n, opts->hip_plugin, info, infolen, err, errlen);
    return not_a_device(device, err, errlen);
}

int cd_backends_set_threads(int n) { return cd_backend_cpu_set_threads(n); }

cd_backend_caps cd_backends_host_caps(void) {
    cd_backend_caps c;
    memset(&c, 0, sizeof c);
    cd_backend_cpu_get_caps(&c);
    return c;
}
