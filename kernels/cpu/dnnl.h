#ifndef CD_KERNELS_CPU_DNNL_H
#define CD_KERNELS_CPU_DNNL_H

// The oneDNN wrappers moved to backends/cpu/dnnl.h. This header remains only
// for kernels/cpu/dwconv-3x3.c, which is being removed as dead code; delete
// it (and its entry in scripts/check-deps.py EXCEPTIONS) together with that file.

#include "backends/cpu/dnnl.h"

#endif // CD_KERNELS_CPU_DNNL_H
