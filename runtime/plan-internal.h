#ifndef CD_RUNTIME_PLAN_INTERNAL_H
#define CD_RUNTIME_PLAN_INTERNAL_H

// What the files of the planning step (plan.c: layouts, layers, arena;
// plan-kernels.c: the dense/sparse choice) share. Internal to runtime/.

#include "runtime/model.h"

// The state of one cd_plan_build.
typedef struct {
    cd_model *m;
    cd_graph *g;
    int *vt;                       // value id -> tensor index (-1 none)
    int (*reord)[CD_LAYOUT_COUNT]; // tensor -> its copy in each layout (-1 none)
    cd_plan_choice *ch;            // per op: the planner's choice (conv/FC)
    char *err;
    size_t errlen;
    cd_layout blk; // the backend's blocked layout (NCHW: it has none)
} pctx;

// True when every reader of value v needs it in NCHW anyway (graph outputs,
// reshapes, Gemm, Softmax, Transpose).
int cd_plan_readers_want_nchw(pctx *p, int v);
// The GEMM part of a backend op descriptor for a Gemm op.
void cd_plan_gemm_desc(const cd_op *op, cd_bop_desc *d);
// Tensor descriptor of a value (activation per item, or constant padded to rank).
cd_tdesc cd_plan_value_desc(const cd_value *v, cd_layout l, int rank);
// Fills p->ch for every live conv/FC op. Returns 0 or CD_ENOMEM.
int cd_plan_choose_kernels(pctx *p, const char *live);

#endif // CD_RUNTIME_PLAN_INTERNAL_H
