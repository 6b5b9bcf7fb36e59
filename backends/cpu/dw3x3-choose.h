// The per-op choice between oneDNN's depthwise primitive and our own kernel
// (backends/cpu/dw3x3.h), made once at load by timing both.
#ifndef CD_BACKENDS_CPU_DW3X3_CHOOSE_H
#define CD_BACKENDS_CPU_DW3X3_CHOOSE_H

#include "backends/cpu/dnnl.h"
#include "backends/cpu/dw3x3.h"

// How the choice is made (the CPU backend's switch cd_backend_opts.dw3x3,
// CONVD_DW3X3=auto|off|on): CD_DW3X3_AUTO times both (the default),
// CD_DW3X3_ON takes ours wherever it applies, CD_DW3X3_OFF never.
typedef enum { CD_DW3X3_AUTO = 0, CD_DW3X3_OFF = 1, CD_DW3X3_ON = 2 } cd_dw3x3_mode;

// Our kernel for conv op `op` (just built, batch 1 prepared, running
// oneDNN) when it applies and the mode takes it: in AUTO, when its best of 5
// batch-1 runs, interleaved with oneDNN's, is faster. NULL otherwise (also
// on any failure: oneDNN then stays).
cd_cpu_dw3x3 *cd_cpu_dw3x3_choose(cd_dnnl_op *op, const cd_conv_desc *d, cd_layout src, cd_layout dst, const float *w,
                                  const float *bias, cd_dw3x3_mode mode);

#endif // CD_BACKENDS_CPU_DW3X3_CHOOSE_H
