// The micro-kernel registry (from sparse/spmm-ukernels.inc) and the CPUID
// selection of the instruction set the sparse kernels use.

#include "sparse/spmm-ukernel.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cd_spmm_ukernel_info g_ukernels[] = {
#define CD_SPMM_UKERNEL(name_, isa_, mr_, nr_)                                \
    {.name = #name_, .fn = name_, .isa = isa_, .mr = mr_, .nr = nr_},
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
    }
    return "unknown";
}

int cd_sparse_isa_supported(cd_sparse_isa isa) {
    __builtin_cpu_init(); // idempotent; needed when called from a constructor
    switch (isa) {
    case CD_SPARSE_ISA_SCALAR: return 1;
    case CD_SPARSE_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CD_SPARSE_ISA_AVX512F:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("fma");
    case CD_SPARSE_ISA_AUTO: return 0;
    }
    return 0;
}

static pthread_once_t g_best_once = PTHREAD_ONCE_INIT;
static cd_sparse_isa g_best = CD_SPARSE_ISA_SCALAR;

// Runs once: the best supported ISA under the CONVD_SPARSE_ISA cap, logged.
static void best_init(void) {
    __builtin_cpu_init();
    cd_sparse_isa cap = CD_SPARSE_ISA_AVX512F;
    const char *env = getenv("CONVD_SPARSE_ISA");
    if (env && *env) {
        for (int i = CD_SPARSE_ISA_SCALAR; i <= CD_SPARSE_ISA_AVX512F; i++)
            if (strcmp(env, cd_sparse_isa_name((cd_sparse_isa)i)) == 0) cap = (cd_sparse_isa)i;
    }
    for (int i = cap; i >= CD_SPARSE_ISA_SCALAR; i--)
        if (cd_sparse_isa_supported((cd_sparse_isa)i)) {
            g_best = (cd_sparse_isa)i;
            break;
        }
    fprintf(stderr, "convd: sparse kernels use %s%s\n", cd_sparse_isa_name(g_best),
            env && *env ? " (capped by CONVD_SPARSE_ISA)" : "");
}

cd_sparse_isa cd_sparse_isa_best(void) {
    pthread_once(&g_best_once, best_init);
    return g_best;
}

const cd_spmm_ukernel_info *cd_spmm_ukernel_find(cd_sparse_isa isa, int nr) {
    if (!cd_sparse_isa_supported(isa)) return NULL;
    for (size_t i = 0; i < sizeof g_ukernels / sizeof g_ukernels[0]; i++)
        if (g_ukernels[i].isa == isa && g_ukernels[i].nr == nr) return &g_ukernels[i];
    return NULL;
}
