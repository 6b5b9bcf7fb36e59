#ifndef CD_TESTS_UNIT_BACKEND_RUN_H
#define CD_TESTS_UNIT_BACKEND_RUN_H

// One op on one backend through the device interface alone, for the
// conformance table (test-backend-ops.c) and the HIP backend's tests.

#include "backends/backend.h"

#include <stddef.h>

// A rank-`rank` NCHW tensor description of the given shape.
cd_tdesc cd_test_tdesc(int rank, const int64_t *shape);
// Elements of t for `batch` items (a constant: its own dim 0).
size_t cd_test_numel(const cd_tdesc *t, int batch);

// Prepares d on be, uploads the NCHW host data srcs[i] in the layout each
// d->src[i] asks for, runs `batch` items on a fresh context, downloads the
// output into dst (converted back to NCHW); the op's kernel name goes to
// kernel when it is not NULL. Fails the test on any error.
void cd_test_backend_run(cd_backend_t be, const cd_bop_desc *d, int batch, float *const *srcs, float *dst, char *kernel,
                         size_t klen);

#endif // CD_TESTS_UNIT_BACKEND_RUN_H
