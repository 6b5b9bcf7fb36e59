#ifndef CD_RUNTIME_PLANNER_H
#define CD_RUNTIME_PLANNER_H

// The per-layer kernel choice for conv and FC layers:
// dense (the backend's kernel, oneDNN on nChw16c on the CPU; after
// compaction that is "compacted dense") or sparse (CSR / BSR kernels of
// sparse/sparse-conv.h, NCHW). Internal to runtime/.
//
// Two ways to decide:
//   - the cost model (default): predicted time = work / rate, with the rates
//     of dense 1x1, dense kxk, dense FC, CSR and BSR kernels and of a layout
//     reorder measured once per process on this machine by a few
//     micro-runs (about 0.1 s, at the first load that has a sparse
//     candidate; cached on disk next to the tune results);
//   - tuning (cd_model_opts.tune, `convd --tune`, `convctl plan --tune`): both
//     candidates are built and timed at load, at min(max_batch, 8); results
//     are cached on disk keyed by shape, nonzeros, structure, batch, threads
//     and CPU model, so a second load costs nothing.
// A sparse candidate exists only for density <= CD_PLANNER_MAX_DENSITY and
// only wins with a margin (CD_PLANNER_MARGIN) after the reorders it implies
// (NCHW in and out, the dense chain is nChw16c): low sparsity stays dense.

#include "backends/backend.h"

#define CD_PLANNER_MAX_DENSITY 0.5

// 1 for a grouped (not depthwise) conv whose groups are not whole blocks of
// blk channels: oneDNN 2.6 has no blocked jit kernel for it (RegNet's groups
// of 8 at a block of 16 ran on its gemm path, 9.1 ms against onnxruntime's
// 1.7). Such a layer is timed against our sparse kernels at load whatever its
// density (dense weights are full rows of a CSR/BSR), cached like --tune.
int cd_planner_dense_off_jit(const cd_conv_desc *c, int blk);
// 1 when d may run on the sparse kernels: density at most
// CD_PLANNER_MAX_DENSITY (a Gemm of one row, a conv that is not depthwise),
// or a conv off oneDNN's jit kernels (above) at any density. blk: the
// backend's block of channels.
int cd_planner_sparse_candidate(const cd_bop_desc *d, size_t nnz, size_t total, int blk);
#define CD_PLANNER_MARGIN 1.15 // sparse must be this much faster than dense

typedef enum {
    CD_PLAN_AUTO = 0,   // cost model / tuning
    CD_PLAN_DENSE = 1,  // no compaction, dense kernels only (the reference plan)
    CD_PLAN_SPARSE = 2, // sparse kernels wherever the backend has them (tests)
    CD_PLAN_COMPACT = 3 // compaction, dense kernels only
} cd_plan_mode;

// The sparse-or-dense int8 choice over sparse weights (cd_runtime_options.int8_pick,
// cd_planner_opts.i8_pick; runtime/model-int8-pick.c).
typedef enum {
    CD_I8_PICK_AUTO = 0,   // by the layers' sums, then both plans timed whole
    CD_I8_PICK_LAYERS = 1, // by the layers' sums alone
    CD_I8_PICK_DENSE = 2,  // forced: the dense int8 kernels
    CD_I8_PICK_SPARSE = 3  // forced: the sparse int8 kernels
} cd_i8_pick;

typedef struct {
    cd_plan_mode mode;
    int tune;               // time candidates at load
    const char *tune_cache; // folder of the cache, NULL = $XDG_CACHE_HOME/convd or ~/.cache/convd
    int max_batch;
    cd_i8_pick i8_pick; // AUTO: cd_runtime_options.int8_pick; DENSE/SPARSE: the whole-model
                        // pick of runtime/model-int8-pick.c plans each way
} cd_planner_opts;

// One layer's decision and what it is based on (times in ms at batch 1 for
// predictions, at the tune batch for measurements; -1 when not known).
typedef struct {
    int sparse;             // 1: run on the sparse kernels
    int format;             // cd_sparse_format for them (0 = auto)
    double pred_dense_ms;   // cost model: the dense kernel
    double pred_sparse_ms;  // cost model: the sparse kernel (no reorders)
    double reorder_ms;      // cost model: reorders the sparse choice implies
    double tuned_dense_ms;  // --tune: measured dense
    double tuned_sparse_ms; // --tune: measured sparse
    int tune_batch;         // batch of the measurements
    int from_cache;         // tuned times came from the disk cache
    // Convs of quantized models (runtime/plan-int8.c):
    int int8;      // 1: run on the int8 kernels (sparse: their sparse ones)
    int i8_dense;  // 1: sparse, but the int8 layer runs on the dense int8 kernels
    double i8d_ms; // measured ms of the int8 candidate on the dense int8 kernels (-1 not timed)
    double i8_ms;  // measured ms of the int8 candidate at batch 1 (-1 not timed)
    double f32_ms; // measured ms of the float32 choice it was compared with (-1)
} cd_plan_choice;

// The planning mode: opts->mode unless it is AUTO, then the process's
// cd_runtime_options.plan (the daemon's --plan, CONVD_PLAN for the tools).
cd_plan_mode cd_planner_mode(const cd_planner_opts *po);

// Fills c with the cost-model figures for conv/FC desc d (CONV2D or GEMM,
// weights d->w, nonzeros nnz of total; fill4 / fill8 the fill of its 4x1 /
// 8x1 output-channel blocks from the analysis, <= 0 when unknown) and
// decides by them, reorders not counted yet (see cd_planner_reorder_ms).
// The sparse format is the cheapest predicted of CSR (nnz weights at the
// CSR rate), BSR4 and BSR8 (nnz / fill stored weights at their rates) and is
// set in c->format. Returns 0 or a negative code (calibration failed: the
// choice is then dense).
int cd_planner_predict(cd_backend_t be, const cd_planner_opts *po, const cd_bop_desc *d, size_t nnz, size_t total,
                       double fill4, double fill8, cd_plan_choice *c);

// The machine string the calibration and tune caches are keyed by: the CPU
// model and the instruction sets in force, e.g. "AMD EPYC [avx2 avx2]".
const char *cd_planner_cpu_name(void);

// Predicted ms of reordering `bytes` of activations (one direction) at batch 1.
double cd_planner_reorder_ms(double bytes);

// --tune: measures the dense and the sparse candidate of d on be (or takes
// them from the cache) and fills c->tuned_*; the caller then decides.
// Returns 0 or a negative code (c left untuned).
int cd_planner_tune(cd_backend_t be, const cd_planner_opts *po, const cd_bop_desc *d, size_t nnz, int best_block,
                    cd_plan_choice *c);

// Times a prepared-on-the-fly op d on be at `batch`: the minimum over `reps`
// runs after one warm-up, in ms, into *ms. Returns 0 or a negative code.
int cd_planner_time_op(cd_backend_t be, const cd_bop_desc *d, int batch, int reps, double *ms);
// The best of reps runs of each of the n (1..4) ops d[], run in turn (so a
// burst of load from elsewhere slows all of them alike), after a warm-up
// round: ms[i]. Returns 0 or the first error.
int cd_planner_time_ops(cd_backend_t be, int n, const cd_bop_desc *const *d, int batch, int reps, double *ms);

// The key of op d in the timing caches: machine, threads, batch, shape,
// nonzeros (what the time depends on).
void cd_planner_op_key(const cd_bop_desc *d, size_t nnz, int batch, char *key, size_t n);

// Small timing caches beside the tune cache (file `name` in its folder, a
// line per key with two times): get is 1 when key was found (a, b > 0);
// put appends. Both are no-ops without a cache folder.
int cd_planner_cache_get(const cd_planner_opts *po, const char *name, const char *key, double *a, double *b);
void cd_planner_cache_put(const cd_planner_opts *po, const char *name, const char *key, double a, double b);

#endif // CD_RUNTIME_PLANNER_H
