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
#include "core/errors.h"
#include "backends/devices.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The kernels run on OpenMP (libgomp, through oneDNN too), on the one team of
// the runtime's executor (runtime/executor.h). Between two layers, and for a
// short while after a request, its threads spin instead of sleeping, so a hot
// request pays no futex sleep and wake-up per layer; then they sleep, so an
// idle daemon uses no CPU. libgomp's default spin (300,000 polls) lasts about
// 11 ms here, long enough to steal a core from the loop and the workers after
// every request; passive waiting (no spin) cost ~50 us per layer. convd sets
// GOMP_SPINCOUNT to CD_GOMP_SPINCOUNT (~40 us here; docs/OPERATIONS.md,
// "Compute threads") unless the environment chose a policy or a count.
// libgomp reads both when it is loaded, before main, hence the one re-exec.
#define CD_GOMP_SPINCOUNT "1000"

static void ensure_omp_wait_policy(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", CD_GOMP_SPINCOUNT, 1) != 0) return;
    execv("/proc/self/exe", argv);
    // Not fatal: the daemon works either way, only with libgomp's longer spin.
    fprintf(stderr, "convd: could not re-exec with GOMP_SPINCOUNT=%s; continuing\n", CD_GOMP_SPINCOUNT);
}

// Checks --device at start-up (backends/backend.h cd_backend_probe): "cpu",
// "hip-emu", or "hip[:N]", which loads the GPU=hip plugin and probes the
// device. Returns 0 (usable; logs what it found), 1 (a device name this
// machine or build cannot run: no GPU, plugin missing) or 2 (not a device
// name); prints the reason.
static int check_device(const char *dev) {
    char info[512] = "", err[768] = "";
    int rc = cd_backend_probe(dev, info, sizeof info, err, sizeof err);
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
    if (set->max_isa > 0) snprintf(o.max_isa, sizeof o.max_isa, "%s", cd_max_isa_names[set->max_isa]);
    snprintf(o.hip_plugin, sizeof o.hip_plugin, "%s", set->hip_plugin);
    o.log = runtime_log;
    cd_runtime_configure(&o);
}

int main(int argc, char **argv) {
    ensure_omp_wait_policy(argv);
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
    int rc = check_device(set.device);
    if (rc != 0) return rc;
    return cd_server_run(&set, argc, argv);
}
