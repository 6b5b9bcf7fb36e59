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
    // The int8 convs (plan-int8.c): per op, its quantization when the
    // planner chose the int8 kernels (else in8[o].in_scale == 0), and
    // whether a FakeQuant op is done by the conv before it (then an alias).
    cd_conv_quant *in8;
    char *fq_fused;
    // Per op: the FakeQuant a conv may do itself in its float32 epilogue
    // when it runs float32 (its output's one reader, per tensor), else -1.
    int *fq_f32;
    // The int8 conv layers as planned (their descriptors, weights not
    // kept), for cd_plan_int8_storage.
    struct cd_i8layer *i8l;
    int ni8l, i8l_cap;
    // The s8 weights made so far (cd_plan_int8_weights), by the float
    // weights they come from: an op's weights are converted once, however
    // many times its layer is timed or prepared again (an op may move in
    // the list, its weights do not).
    struct cd_wq_entry *wq;
    int nwq, wq_cap;
} pctx;

// One planned int8 conv layer (or a max pool, d.op CD_BOP_POOL, which int8
// storage may pass through): its layer index, lowered op and descriptor.
typedef struct cd_i8layer {
    int layer, op;
    cd_bop_desc d;
    cd_conv_quant q;
} cd_i8layer;

// True when every reader of value v needs it in NCHW anyway (graph outputs,
// reshapes, Gemm, Softmax, Transpose).
int cd_plan_readers_want_nchw(pctx *p, int v);
// The GEMM part of a backend op descriptor for a Gemm op.
void cd_plan_gemm_desc(const cd_op *op, cd_bop_desc *d);
// The op family and parameters of a Pad, Slice, Reduce or LayerNorm op
// (plan-ops.c): ops that run in NCHW and need no layout choice. 0, or
// CD_EINTERNAL for an op of another kind.
int cd_plan_nchw_op_desc(const cd_op *op, cd_bop_desc *d);
// The FLOPs, weights and density of a ConvTranspose layer (plan-ops.c).
void cd_plan_convt_figures(const cd_op *op, cd_layer *l);
// Tensor descriptor of a value (activation per item, or constant padded to rank).
cd_tdesc cd_plan_value_desc(const cd_value *v, cd_layout l, int rank);
// Fills p->ch for every live conv/FC op. Returns 0 or CD_ENOMEM.
int cd_plan_choose_kernels(pctx *p, const char *live);
// After cd_plan_choose_kernels: fills p->in8 and p->ch[o].int8 for the live
// convs of a quantized model, by cd_runtime_options.int8 and measured
// times. Returns 0 or CD_ENOMEM.
// It may fuse a QDQ residual block (an int8 conv, its quantization, an Add
// and the Add's quantization) into one layer: the conv's op moves to the
// Add's place and the ops it absorbs stop being live.
int cd_plan_choose_int8(pctx *p, char *live);
// plan-int8.c's helpers, shared with plan-int8-border.c: the signedness of
// a u8/s8 quantization (-1 other); a conv's nonzero weights; its timing
// descriptor (NCHW, batch 1); the ms of FakeQuant op fq in layout l; 1 when
// value v comes from a conv (through aliases and FakeQuants); the int8
// candidate as it runs between int8 neighbours (NHWC integers dense, NCHW
// sparse; 1 when *di was changed, *qn its quantization).
int cd_plan_i8_type_signed(const cd_quant *q);
size_t cd_plan_i8_weights_nnz(const cd_op *op);
void cd_plan_i8_timing_desc(pctx *p, const cd_op *op, cd_bop_desc *d);
int cd_plan_i8_time_fakequant(pctx *p, int fq, cd_layout l, double *ms);
int cd_plan_i8_value_from_conv(const cd_graph *g, const int *prod, int v);
int cd_plan_i8_nhwc_candidate(pctx *p, int int_in, const cd_quant *skip, const cd_conv_quant *q, cd_conv_quant *qn,
                              cd_bop_desc *di);
// The ms of Add op add (its second operand constant value map, or -1: an
// activation) and FakeQuant f2 in float32, NCHW: what the float32 choice
// runs after a conv whose int8 form fuses them.
int cd_plan_i8_time_add_fq(pctx *p, int add, int map, int f2, double *ms);
// A compacted conv's border map done by the int8 conv (plan-int8-border.c):
// conv -> Add(., map) [+ act] -> FakeQuant f2.
typedef struct {
    int add, f2, map;
    cd_activation act;
} cd_plan_i8_border;
// 1 when the ops after conv c form that block (*bb filled).
int cd_plan_i8_match_border(const pctx *p, const char *live, const int *reader, int c, cd_plan_i8_border *bb);
// The ms of int8 conv c doing block bb itself (*ms) and of the Add and
// FakeQuant the float32 choice runs after it (*tail), cached; both left
// alone where the backend does not fuse it. 0 or a negative code.
int cd_plan_i8_time_border(pctx *p, const int *prod, int c, const cd_plan_i8_border *bb, const cd_conv_quant *q0,
                           const int8_t *wq, int sparse, double *ms, double *tail);
// Int8 conv c (taken, on the dense kernels) does the block after it: it
// writes the Add's output quantized, the Add stops being live, f2 becomes an
// alias, prod follows. 1 when fused.
int cd_plan_i8_fuse_border(pctx *p, char *live, const int *reader, int *prod, int c);
// A dense float32 conv whose output's FakeQuant (pctx fq_f32) its kernel may
// do in its epilogue: fills d's fq_* and returns that FakeQuant op, or -1
// (d untouched; CONVD_FQ_FUSE=off too). After the conv was prepared with
// them, _done: fused, the FakeQuant is planned as an alias and the layer's
// label says "+FQ"; not, d's fq_* are cleared again.
int cd_plan_fq_f32_desc(pctx *p, const cd_op *op, cd_bop_desc *d);
void cd_plan_fq_f32_done(pctx *p, const cd_op *op, int f, int fused, cd_bop_desc *d);
// The s8 weights of conv op (rint(w / wscale[k])), kept by p until the
// plan is built (cd_plan_int8_free), or NULL (out of memory).
const int8_t *cd_plan_int8_weights(pctx *p, const cd_op *op);
// Frees what the int8 planning kept in p.
void cd_plan_int8_free(pctx *p);
// Records layer li, planned from op with descriptor d, when it is an int8
// conv or a max pool of a quantized model. 0 or CD_ENOMEM.
int cd_plan_int8_record(pctx *p, int li, const cd_op *op, const cd_bop_desc *d);
// After the layers: an activation written by an int8 conv and read only by
// int8 convs (as their input, in the same layout) is stored as its 1-byte
// integers: those layers are prepared again with dst_int / src_int. Before
// the arena is planned. Returns 0 or a negative code (errors other than a
// backend declining, which keeps float32).
int cd_plan_int8_storage(pctx *p);
// With the roots' lifetimes set, before the arena: a residual conv that is
// its skip tensor's last reader writes into the skip tensor's storage, where
// the backend allows it (plan-in-place.c); the skip root's life extends to
// the output's.
void cd_plan_residual_in_place(cd_model *m);

// plan.c's helpers for plan-view.c: a new tensor (its index or CD_ENOMEM /
// CD_ETOO_LARGE), src in layout l (src, or a reorder made once), and a new
// layer prepared from d (st: already prepared, else NULL; its index or a
// negative code with err set).
int cd_plan_add_tensor(pctx *p, const cd_tdesc *t);
int cd_plan_in_layout(pctx *p, int src, cd_layout l);
int cd_plan_emit(pctx *p, cd_bop_desc *d, cd_op_state *st, int nin, const int *in, int out, const char *name,
                 const char *label);
// Slice op (input tensor in0) as a view of its source when the layout
// allows (runtime/plan-view.c): 1 with p->vt set, 0 when it must be a
// copy, or a negative code with err set.
int cd_plan_slice_view(pctx *p, const cd_op *op, int in0);
// Tensor id as an alias of tensor src: the same storage (root), and the
// same window of it when src is a view.
void cd_plan_alias_of(cd_model *m, int src, int id);
// Tensor t, or when it is a view its packed copy (a layer named
// "NAME(copy)"): for model outputs. The tensor or a negative code.
int cd_plan_unview(pctx *p, int t, const char *name);

#endif // CD_RUNTIME_PLAN_INTERNAL_H
