// The micro-kernel registry (from sparse/spmm-ukernels.inc) and the CPUID
// selection of the instruction set the sparse kernels use, under the ISA cap
// (core/isa-cap.h: --max-isa, CONVD_MAX_ISA).

#include "sparse/spmm-ukernel.h"

#include "core/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cd_spmm_ukernel_info g_ukernels[] = {
#define CD_SPMM_UKERNEL(name_, isa_, mr_, nr_) {.name = #name_, .fn = name_, .isa = isa_, .mr = mr_, .nr = nr_},
#include "sparse/spmm-ukernels.inc"
#undef CD_SPMM_UKERNEL
};

const cd_spmm_ukernel_info *cd_spmm_ukernels(size_t *count) {
    *count = sizeof g_ukernels / sizeof g_ukernels[0];
    return g_ukernels;
}

const char *cd_sparse_isa_name(cd_sparse_isa isa) {
    switch (isa) {
    case CD_SPARSE_ISA_AUTO: return "auto";
    case CD_SPARSE_ISA_SCALAR: return "scalar";
    case CD_SPARSE_ISA_AVX2: return "avx2";
    case CD_SPARSE_ISA_AVX512F: return "avx512f";
    case CD_SPARSE_ISA_AVX512VNNI: return "avx512vnni";
    }
    return "unknown";
}

// What the CPU runs, without the cap.
static int cpu_runs(cd_sparse_isa isa) {
    __builtin_cpu_init(); // idempotent; needed when called from a constructor
    switch (isa) {
    case CD_SPARSE_ISA_SCALAR: return 1;
    case CD_SPARSE_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CD_SPARSE_ISA_AVX512F:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("fma");
    case CD_SPARSE_ISA_AVX512VNNI: return cpu_runs(CD_SPARSE_ISA_AVX512F) && __builtin_cpu_supports("avx512vnni");
    case CD_SPARSE_ISA_AUTO: return 0;
    }
    return 0;
}

#define CD_SPARSE_ISA_TOP CD_SPARSE_ISA_AVX512VNNI

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cd_isa_cap g_cap_set;                    // cd_sparse_isa_set_cap
static cd_sparse_isa g_cap = CD_SPARSE_ISA_TOP; // that cap, or the top
static cd_sparse_isa g_best = CD_SPARSE_ISA_SCALAR;
static int g_capped; // the cap lowered g_best

// The best ISA the CPU runs at or below `cap`.
static cd_sparse_isa best_below(cd_sparse_isa cap) {
    for (int i = cap; i > CD_SPARSE_ISA_SCALAR; i--)
        if (cpu_runs((cd_sparse_isa)i)) return (cd_sparse_isa)i;
    return CD_SPARSE_ISA_SCALAR;
}

void cd_sparse_isa_set_cap(cd_isa_cap cap) { g_cap_set = cap; }

// Runs once: the cap (parsed by whoever set it) as our top ISA.
static void isa_init(void) {
    __builtin_cpu_init();
    switch (g_cap_set) {
    case CD_ISA_CAP_AVX512VNNI: g_cap = CD_SPARSE_ISA_AVX512VNNI; break;
    case CD_ISA_CAP_AVX512: g_cap = CD_SPARSE_ISA_AVX512F; break;
    case CD_ISA_CAP_AVX2: g_cap = CD_SPARSE_ISA_AVX2; break;
    case CD_ISA_CAP_SCALAR: g_cap = CD_SPARSE_ISA_SCALAR; break;
    case CD_ISA_CAP_NONE:
    case CD_ISA_CAP_COUNT: g_cap = CD_SPARSE_ISA_TOP; break;
    }
    g_best = best_below(g_cap);
    g_capped = g_best != best_below(CD_SPARSE_ISA_TOP);
}

static pthread_once_t g_log_once = PTHREAD_ONCE_INIT;

static void log_best(void) {
    cd_rt_log(CD_RT_LOG_INFO, "convd: sparse kernels use %s%s", cd_sparse_isa_name(g_best),
              g_capped ? " (capped by CONVD_MAX_ISA)" : "");
}

int cd_sparse_isa_supported(cd_sparse_isa isa) {
    if (isa < CD_SPARSE_ISA_SCALAR || isa > CD_SPARSE_ISA_TOP) return 0;
    pthread_once(&g_once, isa_init);
    return isa <= g_cap && cpu_runs(isa);
}

cd_sparse_isa cd_sparse_isa_best(void) {
    pthread_once(&g_once, isa_init);
    pthread_once(&g_log_once, log_best);
    return g_best;
}

int cd_sparse_isa_capped(void) {
    pthread_once(&g_once, isa_init);
    return g_capped;
}

const cd_spmm_ukernel_info *cd_spmm_ukernel_find(cd_sparse_isa isa, int nr) {
    if (!cd_sparse_isa_supported(isa)) return NULL;
    isa = cd_sparse_isa_f32(isa);
    for (size_t i = 0; i < sizeof g_ukernels / sizeof g_ukernels[0]; i++)
        if (g_ukernels[i].isa == isa && g_ukernels[i].nr == nr) return &g_ukernels[i];
    return NULL;
}
