// cd-tests is a tool of the runtime like convd-run: its options come from
// the environment (CONVD_MAX_ISA in the AVX2 pass of tests/run, ...), in the
// one function that reads them, before any test runs. Tests that need
// another option set it with cd_runtime_configure (each test runs in a
// process of its own).
#include "runtime/runtime.h"

__attribute__((constructor)) static void options_from_env(void) {
    cd_runtime_options o;
    cd_runtime_options_from_env(&o);
    cd_runtime_configure(&o);
}
