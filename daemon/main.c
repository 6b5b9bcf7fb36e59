// convd: the sparse-CNN inference daemon. Parses the settings (flags, config
// file), then runs the server until SIGINT/SIGTERM.
//   exit 0: clean shutdown (or --help/--version)
//   exit 1: cannot start (socket used by a live daemon, device unavailable)
//   exit 2: bad flag, value or config file
#include "backends/devices.h"
#include "core/errors.h"
#include "daemon/access.h"
#include "daemon/features.h"
#include "daemon/log.h"
#include "daemon/server.h"
#include "daemon/settings.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Checks --device at start-up (backends/devices.h cd_backend_probe): "cpu",
// "hip-emu", or "hip[:N]", which loads the GPU=hip plugin and probes the
// device. Returns 0 (usable; logs what it found), 1 (a device name this
// machine or build cannot run: no GPU, plugin missing) or 2 (not a device
// name); prints the reason.
static int check_device(const cd_settings *set) {
    const char *dev = set->device;
    char info[512] = "", err[768] = "";
    // The switches the runtime will create it with (runtime/options.c).
    cd_backend_opts bo = {
        .kernels_ref = set->cpu_kernels == 1, .int8_ref = set->int8 == 2, .hip_plugin = set->hip_plugin};
    int rc = cd_backend_probe(dev, &bo, info, sizeof info, err, sizeof err);
    if (rc == 0) {
        if (strcmp(info, dev) != 0) fprintf(stderr, "convd: --device %s: %s\n", dev, info); // more than a name
        return 0;
    }
    fprintf(stderr, "convd: --device %s: %s\n", dev, err);
    return rc == CD_EUNSUPPORTED ? 2 : 1;
}

// The runtime's messages (core/log.h) as lines of the daemon's log.
static void runtime_log(int level, const char *msg, void *ud) {
    (void)ud;
    cd_log((cd_log_level)level, "%s", msg);
}

// The runtime's options from the settings table, and its log into ours.
static void runtime_configure(const cd_settings *set) {
    cd_runtime_options o;
    memset(&o, 0, sizeof o);
    o.profile = set->profile != 0;
    o.cpu_kernels_ref = set->cpu_kernels == 1;
    o.plan = (int)set->plan;
    o.int8 = (int)set->int8;
    o.max_isa = (cd_isa_cap)set->max_isa; // cd_max_isa_names is in cd_isa_cap's order
    o.batch_split = (int)set->batch_split;
    o.batch_lanes = (int)set->batch_lanes;
    o.winograd = (int)set->winograd;
    o.bf16 = (int)set->bf16;
    snprintf(o.hip_plugin, sizeof o.hip_plugin, "%s", set->hip_plugin);
    o.log = runtime_log;
    cd_runtime_configure(&o);
}

int main(int argc, char **argv) {
    // One team, a short spin between layers, no OpenMP binding (runtime.h; the executor:
    // runtime/executor.h).
    cd_runtime_omp_setup(argv, "convd");
    static cd_settings set;
    switch (cd_settings_parse(&set, argc, argv)) {
    case CD_SETTINGS_RUN: break;
    case CD_SETTINGS_HELP:
    case CD_SETTINGS_MARKDOWN: return 0;
    case CD_SETTINGS_VERSION: // after the version line: what this CPU runs
        cd_cpu_print(stdout);
        return 0;
    case CD_SETTINGS_BAD: return 2;
    }
    char err[512];
    if (cd_access_init(&set, err, sizeof err) != 0) {
        fprintf(stderr, "convd: --%s\n", err);
        return 2;
    }
    cd_log_set_level((cd_log_level)set.log_level);
    runtime_configure(&set);
    int rc = check_device(&set);
    if (rc != 0) return rc;
    return cd_server_run(&set, argc, argv);
}
