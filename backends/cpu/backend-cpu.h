#ifndef CD_BACKENDS_CPU_BACKEND_CPU_H
#define CD_BACKENDS_CPU_BACKEND_CPU_H

// The CPU backend (backends/cpu/backend-cpu.c): host memory, oneDNN where it
// applies, the reference kernels and sparse/ for the rest.

#include "backends/backend-opts.h"
#include "backends/backend.h"

#include <stddef.h>

// Creates the CPU backend with its switches (NULL: the defaults; only
// kernels_ref and int8_ref concern it). Returns 0 or CD_ENOMEM.
int cd_backend_cpu_create(const cd_backend_opts *opts, cd_backend_t *out);
// The same with the defaults.
static inline int cd_backend_cpu_init(cd_backend_t *out) { return cd_backend_cpu_create(NULL, out); }

// The caps of the CPU backend, without one (they are the host's).
void cd_backend_cpu_get_caps(cd_backend_caps *out);

// Initialises oneDNN once and sets its thread count (process-wide: oneDNN has
// one setting); n >= 1. 0 or a negative code.
int cd_backend_cpu_set_threads(int n);

#endif // CD_BACKENDS_CPU_BACKEND_CPU_H
