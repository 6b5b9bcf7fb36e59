// The few calls by which backends/cpu/dnnl-conv.c hands a conv to our
// Winograd (backends/cpu/winograd.h) once cd_wino_offer has chosen it:
// defined in winograd-choose.c, beside the choice.
#ifndef CD_BACKENDS_CPU_WINOGRAD_HOOK_H
#define CD_BACKENDS_CPU_WINOGRAD_HOOK_H

#include "backends/cpu/dnnl-impl.h"
#include "backends/cpu/winograd.h"

// The conv's build for a batch when Winograd runs it: no oneDNN primitive,
// only the scratch it needs. 0.
int cd_wino_build(const cd_wino *wg, int batch, cd_dnnl_prim *p);
// The conv's exec: src[0] the input, src[1] the residual when the conv has
// one, scratch from ctx. 0 or CD_ENOMEM.
int cd_wino_exec(const cd_wino *wg, cd_dnnl_ctx *ctx, int batch, const float *const *src, float *dst);
// After the choice: frees oneDNN's packed weights (read no more) and counts
// Winograd's in op->weight_bytes.
void cd_wino_adopt(cd_dnnl_op *op, const cd_wino *wg, cd_dnnl_weights *wts);

#endif // CD_BACKENDS_CPU_WINOGRAD_HOOK_H
