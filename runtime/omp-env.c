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

// libgomp's binding variables; OMP_PROC_BIND=false binds nothing.
static const char *const k_bind_vars[] = {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"};

static int binds(const char *name, const char *value) {
    return value && !(strcmp(name, "OMP_PROC_BIND") == 0 && strcasecmp(value, "false") == 0);
}

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
    int again = 0;
    for (size_t i = 0; i < sizeof k_bind_vars / sizeof k_bind_vars[0]; i++) {
        const char *v = getenv(k_bind_vars[i]);
        if (!binds(k_bind_vars[i], v)) continue;
        fprintf(stderr,
                "%s: ignoring %s=%s: OpenMP's binding would put every compute thread on one CPU; they spread "
                "over the CPUs of its places instead (which CPUs: taskset; how many threads: --threads)\n",
                prog, k_bind_vars[i], v);
        if (!again) unbind_this_thread(); // while libgomp still knows its places
        if (unsetenv(k_bind_vars[i]) == 0) again = 1;
    }
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT") && setenv("GOMP_SPINCOUNT", CD_GOMP_SPINCOUNT, 1) == 0)
        again = 1;
    if (!again) return;
    execv("/proc/self/exe", argv);
    // Not fatal: the program works either way, only with libgomp's own spin
    // (and on one CPU if a binding was asked for).
    fprintf(stderr, "%s: could not re-exec with libgomp's environment changed; continuing\n", prog);
}
