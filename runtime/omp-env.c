// libgomp's environment for convd's programs (runtime.h,
// cd_runtime_omp_setup): the wait between layers, and no thread binding.

#include "runtime/runtime.h"

#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

// What convd removes, set to anything but "false": libgomp's binding
// variables, and OMP_DYNAMIC (libgomp would size each team by the load
// average: a 2-core machine with one busy core ran every layer on one thread).
static const struct {
    const char *name;
    int binds; // binding: the thread gets its places' CPUs back first
} k_vars[] = {{"OMP_PROC_BIND", 1}, {"OMP_PLACES", 1}, {"GOMP_CPU_AFFINITY", 1}, {"OMP_DYNAMIC", 0}};
static const char *const k_why[2] = {
    "libgomp would size each team by the load average; the teams have --threads threads",
    "OpenMP's binding would put every compute thread on one CPU; they spread over the CPUs of its places instead "
    "(which CPUs: taskset; how many threads: --threads)"};

// The CPUs of every OpenMP place into this thread's affinity mask: libgomp
// bound it to the first place, and the mask outlives the exec. The places
// cover the mask libgomp started from (or the CPUs GOMP_CPU_AFFINITY named).
static void unbind_this_thread(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int places = omp_get_num_places();
    for (int p = 0; p < places; p++) {
        int n = omp_get_place_num_procs(p);
        if (n <= 0) continue;
        int *ids = malloc(sizeof(int) * (size_t)n);
        if (!ids) return;
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < CPU_SETSIZE) CPU_SET(ids[i], &set);
        free(ids);
    }
    if (CPU_COUNT(&set) > 0) (void)sched_setaffinity(0, sizeof set, &set);
}

void cd_runtime_omp_setup(char **argv, const char *prog) {
    int again = 0, unbound = 0;
    for (size_t i = 0; i < sizeof k_vars / sizeof k_vars[0]; i++) {
        const char *v = getenv(k_vars[i].name);
        if (!v || strcasecmp(v, "false") == 0) continue;
        fprintf(stderr, "%s: ignoring %s=%s: %s\n", prog, k_vars[i].name, v, k_why[k_vars[i].binds]);
        if (k_vars[i].binds && !unbound) { // while libgomp still knows its places
            unbind_this_thread();
            unbound = 1;
        }
        if (unsetenv(k_vars[i].name) == 0) again = 1;
    }
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT") && setenv("GOMP_SPINCOUNT", CD_GOMP_SPINCOUNT, 1) == 0)
        again = 1;
    if (!again) return;
    execv("/proc/self/exe", argv);
    // Not fatal: the program works either way, only with libgomp's own spin
    // (and on one CPU if a binding was asked for).
    fprintf(stderr, "%s: could not re-exec with libgomp's environment changed; continuing\n", prog);
}
