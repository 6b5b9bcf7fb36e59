#ifndef CD_KERNELS_CPU_RESIZE_TABLES_H
#define CD_KERNELS_CPU_RESIZE_TABLES_H

// The CPU's Resize (kernels/cpu/resize-tables.c): the source indices and
// weights of every output row and column computed once at load (with the
// same formulas as cd_ref_resize), so a run only gathers and mixes.
// Linear: each output row mixes its two input rows once over the input width
// (contiguous, vectorised), then each output column mixes two of those.

#include "kernels/op-desc.h"

#include <stddef.h>

typedef struct cd_resize_tables cd_resize_tables;

// Builds the tables of d. 0, CD_EPARAMS or CD_ENOMEM.
int cd_resize_tables_create(const cd_resize_desc *d, cd_resize_tables **out);
void cd_resize_tables_free(cd_resize_tables *t);

// Floats of scratch one run needs (linear: one mixed input row).
size_t cd_resize_tables_scratch_floats(const cd_resize_tables *t);

// dst = src resized (batch items, NCHW), scratch as sized above.
void cd_resize_tables_run(const cd_resize_tables *t, int batch, const float *src, float *dst, float *scratch);

#endif // CD_KERNELS_CPU_RESIZE_TABLES_H
