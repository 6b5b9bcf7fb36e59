#ifndef CD_RUNTIME_MODEL_H
#define CD_RUNTIME_MODEL_H

// A loaded model: the plan (layers on a backend, tensors, arena layout).
// Internal to runtime/; the public face is runtime.h.

#include "backends/backend.h"
#include "runtime/graph.h"
#include "runtime/planner.h"
#include "runtime/runtime.h"

#include <pthread.h>

// A planned tensor. Activations live in the per-exec arena; constants (the
// second operand of broadcast ops) in the model's constant buffer.
typedef struct {
    cd_tdesc t;        // per-item shape (dim 0 = 1 unless a constant) and layout
    size_t item_bytes; // bytes of one batch item (the whole tensor for a constant)
    int root;          // tensor whose storage this one shares (itself unless an alias)
    int first, last;   // lifetime in layer steps (roots only; -1 = model input)
    size_t offset;     // byte offset in the arena / constant buffer (roots)
    int cvalue;        // constants: the graph value holding the data (-1 otherwise)
    // A view (runtime/plan-view.c): a channel window of root, view_offset
    // bytes into each of its items; items are root's item_bytes apart, not
    // this tensor's. Layers reading one run image by image at batch > 1.
    int view;
    size_t view_offset;
} cd_ptensor;

typedef struct {
    cd_bop op;
    int nin;
    int in[CD_OP_MAX_IN]; // tensor indices
    int out;
    cd_op_state *st;
    char name[128];
    char label[48];
    char kernel[64];
    int reference;         // a Conv/Gemm/Pool on a reference kernel (the slow last resort)
    int64_t params, flops; // weights; multiply-adds * 2 at batch 1
    double density;
    // Conv/FC layers (planner.h, compact.c):
    int64_t flops_dense;   // dense FLOPs of the layer as loaded (before compaction), batch 1
    int64_t flops_run;     // FLOPs the chosen kernel does (2 * nonzeros * pixels when sparse)
    int sparse;            // runs on the sparse kernels
    int int8;              // runs on the int8 kernels (plan-int8.c)
    int has_analysis;      // an, structure and choice are filled
    cd_plan_choice choice; // the planner's figures
    char structure[192];   // the analysis as one line (cd_sparse_analysis_format)
    char compact[96];      // what compaction did ("" nothing)
    cd_layer_sparsity an;  // the analysis' figures, as cd_layer_info shows them
    int view_in;           // reads a view (cd_ptensor.view): runs image by image at batch > 1
} cd_layer;

typedef struct {
    cd_io_desc d;
    int tensor;
} cd_io;

struct cd_model {
    cd_backend_t be;
    int max_batch;
    int threads;
    cd_ptensor *tensors;
    int ntensors, tensors_cap;
    cd_layer *layers;
    int nlayers, layers_cap;
    cd_io *inputs, *outputs;
    int ninputs, noutputs;
    size_t arena_bytes; // at max_batch
    void *consts;       // backend buffer of constant operands
    size_t const_bytes;
    cd_model_summary summary;
    cd_planner_opts popts; // planning mode, tuning, cache
    char *tune_cache;      // owned copy of the cache folder (popts points to it)
    // Input sizes (variants.c): the plans of other sizes of a model with
    // symbolic dims (NULL: static, or itself a variant), and the execs
    // cd_exec_give returned, ready for cd_exec_take.
    struct cd_variants *var;
    pthread_mutex_t idle_lock; // guards idle, nidle
    cd_exec **idle;            // CD_MAX_IDLE_EXECS slots
    int nidle;
    int batch_split;       // batches run image by image (batch-split.c)
    int slice_views;       // Slice/Split outputs planned as views (plan-view.c)
    int residual_in_place; // residual convs writing into their skip tensor (plan-in-place.c)
};

#define CD_MAX_IDLE_EXECS 16

// Builds a model from an ONNX file's bytes (cd_model_load without the file
// read): import at the input sizes specs[0..nspecs-1] gives, lower, plan.
// Returns 0 or a negative code with err set (not prefixed with a file name).
int cd_model_build(const uint8_t *buf, size_t len, const char *dir, const cd_model_opts *opts,
                   const cd_input_shape *specs, int nspecs, cd_model **out, char *err, size_t errlen);
// cd_model_build's one plan: i8_pick as cd_planner_opts.i8_pick (AUTO: the
// runtime's option; DENSE/SPARSE the dense/sparse int8 kernels over sparse weights).
int cd_model_build_plan(const uint8_t *buf, size_t len, const char *dir, const cd_model_opts *opts,
                        const cd_input_shape *specs, int nspecs, cd_i8_pick i8_pick, cd_model **out, char *err,
                        size_t errlen);
// Where *m's plan chose between the sparse and the dense int8 kernels over
// sparse weights by the layers' sums: plans the model the other way too,
// times both whole (or takes the times from the cache) and leaves the
// faster in *m, the other freed (model-int8-pick.c). 0 or a negative code
// (*m then freed and NULL).
int cd_model_int8_pick(const uint8_t *buf, size_t len, const char *dir, const cd_model_opts *opts,
                       const cd_input_shape *specs, int nspecs, cd_model **m, char *err, size_t errlen);
// Keeps buf (taken) for m's other input sizes. Returns 0 or CD_ENOMEM
// (buf freed).
int cd_variants_init(cd_model *m, uint8_t *buf, size_t len, const char *dir, const cd_model_opts *opts);
void cd_variants_free(cd_model *m);
// Frees m's idle execs (model.c).
void cd_exec_pool_free(cd_model *m);

struct cd_exec {
    const cd_model *m;
    void *arena; // backend buffer, m->arena_bytes
    cd_backend_ctx *ctx;
    cd_btensor *bt; // one per plan tensor, data fixed, shape[0] set per run
    double *prof;   // options.profile: accumulated ms per layer (else NULL)
    int prof_runs;
    int pending;                      // cd_model_submit queued a run not yet waited for
    int staged;                       // the batch cd_exec_stage_inputs handed out buffers for (0: none)
    void *stage_host[CD_MAX_TENSORS]; // those buffers
    void *own_in[CD_MAX_TENSORS];     // host inputs of our own where the backend stages none
    char *split_buf;                  // batch-split.c: staged images 1.. copied aside
    size_t split_cap;
    // batch-lanes.c: the batch-1 execs of the other lanes of a split batch
    // (lane 0 is this exec), made on first use, freed with this one.
    struct cd_exec **lane;
    int nlane;
};

// Lays out m's activations (root tensors holding them, each alive from the
// layer that writes it first to the last that reads it) for `batch` items:
// offsets[i] for each such root i, the other entries untouched (NULL: not
// wanted), *bytes the arena's size. 0,
// CD_ENOMEM, or CD_ETOO_LARGE when the sizes overflow.
int cd_model_arena_layout(const cd_model *m, int batch, size_t *offsets, size_t *bytes);

// cd_exec_init with an arena of arena_bytes in which root tensor i starts at
// offsets[i] (NULL: the plan's, m->arena_bytes).
int cd_exec_init_layout(const cd_model *m, size_t arena_bytes, const size_t *offsets, cd_exec **out);

// Runs layer l of ex's plan at batch (ex->bt's shapes set): image by image
// when it reads a view (runtime/view-run.c). The backend's op_run result.
int cd_exec_run_layer(cd_exec *ex, const cd_layer *l, int batch);

// Builds the plan for a lowered graph on m->be (m->max_batch set). Returns 0
// or a negative code with err set; the caller frees m on failure.
int cd_plan_build(cd_model *m, cd_graph *g, char *err, size_t errlen);
// Frees what cd_plan_build made: the layers' op states, the constants, the
// inputs and outputs, the tensors. The model and its backend stay.
void cd_plan_free(cd_model *m);

// Batches image by image (runtime/batch-split.c). Whether m (planned)
// should run its batches so: CONVD_BATCH_SPLIT (cd_runtime_options) off/on,
// else where most of its FLOPs run on the sparse kernels (host memory only).
int cd_batch_split_wanted(const cd_model *m);
// One run of `batch` images as cd_model_submit does it (model.c's submit).
typedef int (*cd_run_one_fn)(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err,
                             size_t errlen, double *layer_ms);
#define CD_SPLIT_MAX_IO 16
// Runs the images of a batch one after the other through `one` (batch 1),
// inputs filled in place copied aside first; at most CD_SPLIT_MAX_IO inputs
// and outputs, else the whole batch at once. Returns one's result.
int cd_batch_split_run(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err,
                       size_t errlen, double *layer_ms, cd_run_one_fn one);

// A split batch's images in lanes (runtime/batch-lanes.c): one OpenMP
// region, each thread taking whole images on an exec of its own for batch 1.
// The lanes a split batch of `batch` images run now (in a job of
// omp_get_max_threads() threads, not yet in a parallel region) takes: 0
// (none: one thread, in a lane already, or CONVD_BATCH_LANES=off), else
// min(threads, batch).
int cd_batch_lanes_wanted(const cd_model *m, int batch);
// The bytes of the arena of one batch-1 lane exec (its activations).
size_t cd_batch_lanes_arena_bytes(const cd_model *m);
// Runs images 0..batch-1 (of a split batch of at least batch) in lanes and writes image b's outputs to item b
// of outputs. Image b >= first reads input i at src[i] + (b - first) input
// items; first 1: image 0 is staged in ex's arena and runs there in place.
// The first error wins (err set) and no image runs twice. 0 or that error.
int cd_batch_lanes_run(cd_exec *ex, int batch, const char *const *src, int first, void *const *outputs, char *err,
                       size_t errlen, cd_run_one_fn one);
// Tests: image `image` of the next lanes runs fails with CD_EINTERNAL
// before it runs (-1: none).
void cd_batch_lanes_fail_at(int image);

#endif // CD_RUNTIME_MODEL_H
