#ifndef CD_RUNTIME_RUNTIME_H
#define CD_RUNTIME_RUNTIME_H

// The runtime's public face: what the daemon and convctl use. Models in memory:
// ONNX file -> graph -> plan -> execution on a backend. Nothing here knows of
// requests, sockets or msgpack.
//
// Thread-safety: a cd_model is immutable after cd_model_load and may be shared
// by any number of threads; each thread that runs it needs its own cd_exec.
// (Its plans of other input sizes and its pool of idle execs change behind
// their own locks: cd_model_variant_get, cd_exec_take.)

#include "core/dtype.h"
#include "core/limits.h"
#include "core/isa-cap.h"
#include "core/log.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cd_model cd_model; // a loaded, planned model
typedef struct cd_exec cd_exec;   // per-thread execution state (activation arena)

typedef struct {
    int max_batch;           // largest batch the plan and arena are sized for (>= 1)
    int threads;             // intra-op threads for this model's kernels (0 = all cores)
    const char *device;      // "cpu" (default when NULL)
    int tune;                // 1: time the dense and sparse candidates of each layer at
                             // load (results cached on disk), 0: the cost model
    const char *tune_cache;  // cache folder, NULL = $XDG_CACHE_HOME/convd (~/.cache/convd)
    int64_t max_file_bytes;  // > 0: a file (with its external data) larger than this is
                             // refused with CD_ETOO_LARGE before it is read (fstat)
    int plan;                // 0 auto (cd_runtime_options.plan), 1 dense only
                             // (no compaction: the reference plan), 2 sparse kernels
                             // wherever possible, 3 compaction with dense kernels
    const char *input_shape; // inputs with symbolic dims: the size of the first plan,
                             // "[name=]1x3x512x512[,...]" (cd_input_shape_parse); NULL or
                             // "": such a model is refused, naming the input and dim
    int max_shapes;          // input sizes planned at once (0: CD_DEFAULT_MAX_SHAPES)
} cd_model_opts;

#define CD_DEFAULT_MAX_SHAPES 8
#define CD_MAX_SHAPES 64

// The size to plan one input at (a model with symbolic dims; dim 0, the
// batch, is ignored).
typedef struct cd_input_shape_s {
    char name[128]; // the input ("": every input of this rank)
    int rank;
    int64_t shape[CD_MAX_RANK];
} cd_input_shape;

// Parses "[name=]d0xd1x...[,...]" into out[0..max-1], *n entries. Returns 0
// or CD_EPARAMS with err set.
int cd_input_shape_parse(const char *spec, cd_input_shape *out, int max, int *n, char *err, size_t errlen);
// The entry of specs[0..n-1] for an input named name of rank rank (by name
// first, then an unnamed one of that rank), or NULL.
const cd_input_shape *cd_input_shape_find(const cd_input_shape *specs, int n, const char *name, int rank);

// A model input or output. shape[0] is the batch dimension; it is reported as
// 1 (the per-item shape): a request may send any batch 1..max_batch in it, and
// every other dim must match.
typedef struct {
    const char *name;
    cd_dtype dtype;
    int rank;
    int64_t shape[CD_MAX_RANK];
    uint32_t dynamic; // inputs: bit k set when dim k (k >= 1) is symbolic in the file:
                      // shape[k] is the size of the model's first plan, and a request
                      // may send another (cd_model_variant_get)
} cd_io_desc;

// Whole-model figures for `models`/`stats`/`convctl info`.
typedef struct {
    int64_t params;           // weight elements as loaded from the file
    int64_t flops;            // multiply-adds * 2 at batch 1
    int64_t weight_bytes;     // bytes of packed weights held in memory
    int64_t activation_bytes; // peak activation arena bytes at max_batch
    int64_t zero_params;      // weight elements that are exactly zero
    int nlayers;              // planned layers (after folding/fusion)
    int int8_layers;          // of them, convs on the int8 kernels
    int max_batch;
    int64_t device_bytes;  // device memory held now: weights, constants, the
                           // arenas and workspaces of live execs (0 on cpu)
    int batch_split;       // 1: batches > 1 run image by image, each with
                           // its activations in cache (runtime/batch-split.c)
    int slice_views;       // Slice/Split outputs read in place as views of their
                           // source (no copy; runtime/plan-view.c)
    int slice_copies;      // Slice/Split outputs copied (Slice layers)
    int residual_in_place; // residual convs (Conv + Add) that write their output
                           // into the skip tensor's storage (runtime/plan-in-place.c)
    // Split batches in lanes (runtime/batch-lanes.c): the batch-1 arena of
    // each lane after the first (an exec makes threads - 1 of them, on its
    // first batch run in lanes, and keeps them).
    int64_t lane_activation_bytes;
    // A quantized model whose convs over sparse weights could run int8 on
    // either the sparse or the dense int8 kernels (runtime/model-int8-pick.c):
    // int8_pick 0 no such choice, 1 the dense int8 kernels, 2 the sparse
    // ones; int8_pick_by what decided it ("layers": the layers' timed sums,
    // "model": both plans timed whole at load, "cache": those times from
    // the cache, "forced": CONVD_INT8_PICK), and the two figures compared
    // (ms at batch 1, dense then sparse; -1 unknown). With a max batch above
    // 1 the model pick times both plans at int8_pick_batch too (the batch
    // ms; else int8_pick_batch 1 and -1) and takes the smaller product of
    // each plan's two times.
    int int8_pick;
    const char *int8_pick_by;
    double int8_pick_dense_ms, int8_pick_sparse_ms;
    int int8_pick_batch;
    double int8_pick_dense_batch_ms, int8_pick_sparse_batch_ms;
} cd_model_summary;

// The sparsity of a conv/FC layer's weights as loaded (from its analysis;
// all 0 for the other layers).
typedef struct {
    int zero_filters;                      // all-zero output channels
    int zero_in_channels;                  // input channels no filter reads
    int64_t zero_connections, connections; // all-zero R x S kernels of K x Cin
    int best_block_h, best_block_w;        // best block shape with fill >= 0.75 (0 none)
    double best_block_fill;
    double nm_2_4;      // fraction of 4-groups with <= 2 nonzeros
    int is_2_4, is_4_8; // N:M conformance
} cd_layer_sparsity;

// One planned layer, for `convctl info/plan`.
typedef struct {
    const char *name;      // ONNX node name (or a generated one)
    const char *op;        // e.g. "Conv", "Conv+Relu", "Add+Relu", "MaxPool"
    const char *kernel;    // the kernel chosen, e.g. "dnnl:jit:avx2", "sparse:csr:..."
    const char *dtype;     // what it computes in: "int8" (the int8 kernels of a
                           // quantized model's conv) or "f32"
    const char *out_dtype; // how its output is stored: "int8" (the integers of a
                           // quantized activation, between int8 convs) or "f32"
    int reference;         // 1: a Conv/Gemm/Pool left on a reference kernel (slow;
                           // load warned about it)
    const char *layout;    // layout of the output: "NCHW", "NCHW16C", "NCHW8C"
    int in_rank, out_rank;
    int64_t in_shape[CD_MAX_RANK];  // first input, batch 1
    int64_t out_shape[CD_MAX_RANK]; // first output, batch 1
    int64_t params;
    int64_t flops;  // at batch 1
    double density; // nonzero fraction of the weights (1 when none)
    // Conv/FC layers (0 / "" / -1 for the others):
    int is_weighted;        // 1 for conv/FC layers (the fields below are set)
    const char *structure;  // analysis of the weights as loaded, one line
    const char *compaction; // what compaction did ("" nothing)
    int sparse;             // 1: runs on the sparse kernels (NCHW)
    cd_layer_sparsity an;   // the weights' sparsity (as loaded)
    double pred_ms;         // predicted ms of the chosen kernel at batch 1 (-1 unknown)
    double pred_dense_ms;   // predicted ms of the dense kernel at batch 1 (-1 unknown)
    double pred_reorder_ms; // predicted reorders a sparse choice implies
    double tuned_ms;        // --tune: measured ms of the chosen kernel (-1 not tuned)
    double tuned_dense_ms;  // --tune: measured ms of the dense kernel (-1 not tuned)
    double tuned_sparse_ms; // --tune: measured ms of the sparse kernel (-1 not tuned)
    double pred_sparse_ms;  // predicted ms of the sparse kernel at batch 1, no reorders (-1 unknown)
    int tune_batch;         // batch of the tuned times
    int64_t flops_dense;    // FLOPs of the layer as loaded, batch 1
    int64_t flops_skipped;  // flops_dense minus what the chosen kernel computes
    // A quantized model's conv under --int8 auto (-1 not timed): the timed
    // ms of its int8 kernels (those it runs, when it runs int8), of the
    // dense int8 kernels over sparse weights, and of its float32 choice
    // with the FakeQuant and residual tail the int8 layer would fuse.
    double int8_ms, int8_dense_ms, int8_f32_ms;
} cd_layer_info;

// The instruction sets and layout the CPU backend uses on this machine, for
// `convd --version`, `health`, `stats` and `convctl plan`. All decided once
// from the running CPU (and its caps), the first time they are asked for.
typedef struct {
    const char *kernels_isa; // our own kernels: "avx512vnni", "avx512f", "avx2" or "scalar"
    int kernels_capped;      // 1: lowered by CONVD_MAX_ISA
    const char *dnnl_isa;    // oneDNN's: "avx512_core", "avx2", ... (honours
                             // ONEDNN_MAX_CPU_ISA)
    const char *layout;      // blocked layout of dense chains: "NCHW16C",
                             // "NCHW8C", or "NCHW" (none)
    int block;               // its channels per block: 16, 8 (1: none)
} cd_cpu_info;

// Fills out (static strings). Initialises oneDNN if needed.
void cd_runtime_cpu_info(cd_cpu_info *out);

// ---- the runtime's options --------------------------------------------------
//
// Every knob of the runtime and the libraries under it, in one struct. The
// daemon fills it from its settings table (daemon/settings.toml); the tools,
// benchmarks and tests fill it with cd_runtime_options_from_env(), the one
// place the runtime's environment variables are read. Zeroed = the defaults.
// cd_runtime_configure hands each part to what uses it: the ISA cap to
// sparse/ (cd_sparse_isa_set_cap), the log sink to core/log.h (the one truly
// process-wide switch: every library's messages go to the one host), the
// backend switches (cpu_kernels_ref, int8 on, hip_plugin) to each
// cd_backend_create, and profile, plan and int8 to the runtime's own code.
typedef struct {
    int profile;           // 1: each cd_exec logs the mean time of every layer
                           // when freed (CONVD_PROFILE=1)
    int cpu_kernels_ref;   // 1: the CPU backend runs every op on the reference
                           // kernels in NCHW, the tests' oracle
                           // (CONVD_CPU_KERNELS=ref)
    int plan;              // plan of models loaded with cd_model_opts.plan 0:
                           // 0 auto, 1 dense, 2 sparse, 3 compact
                           // (CONVD_PLAN=auto|dense|sparse|compact)
    int int8;              // the int8 kernels for the convs of quantized models:
                           // 0 auto (where the planner predicts them faster),
                           // 1 off, 2 on (wherever a conv can run them),
                           // 3 on, the dense int8 kernels also over sparse
                           // weights (CONVD_INT8=auto|off|on|dense)
    int int8_pick;         // under int8 auto, the sparse-or-dense int8 choice
                           // over sparse weights: 0 auto (both plans timed
                           // whole at load, cached), 1 by the layers' timed
                           // sums alone, 2 dense, 3 sparse
                           // (CONVD_INT8_PICK=auto|layers|dense|sparse)
    int winograd;          // our Winograd 3x3 conv (cd_backend_opts.winograd):
                           // 0 auto, 1 off, 2 on, 3 f2, 4 f4, 5 f6, 6 onednn (CONVD_WINOGRAD)
    int dw3x3;             // our depthwise 3x3 conv (cd_backend_opts.dw3x3):
                           // 0 auto, 1 off, 2 on (CONVD_DW3X3)
    int bf16;              // the dense f32 convs in bf16 (cd_backend_opts.bf16),
                           // an opt-in precision: 0 off, 1 auto, 2 on (CONVD_BF16)
    int batch_split;       // batches > 1 run image by image: 0 auto (models
                           // mostly on sparse kernels), 1 off, 2 on
                           // (CONVD_BATCH_SPLIT=auto|off|on)
    int fq_fuse;           // a QDQ model's FakeQuant after a float32 conv done in
                           // the conv's epilogue where its kernel can: 0 on,
                           // 1 off (CONVD_FQ_FUSE=on|off)
    int batch_lanes;       // a split batch on more than one thread: 0 auto,
                           // 1 off (each image on all threads in turn), 2 on
                           // (whole images per thread; CONVD_BATCH_LANES)
    cd_isa_cap max_isa;    // cap of our own kernels (core/isa-cap.h; NONE:
                           // the CPU's best; CONVD_MAX_ISA). oneDNN has its
                           // own, ONEDNN_MAX_CPU_ISA.
    char hip_plugin[4096]; // the GPU=hip plugin ("": <dir of the executable>/
                           // ../lib/libconvd-hip.so; CONVD_HIP_PLUGIN)
    cd_rt_log_fn log;      // where the libraries' messages go (NULL: stderr)
    void *log_ud;          // passed to log
} cd_runtime_options;

// Fills *o from the environment: CONVD_PROFILE, CONVD_CPU_KERNELS,
// CONVD_PLAN, CONVD_INT8, CONVD_MAX_ISA, CONVD_HIP_PLUGIN (unset or empty: the default;
// an unknown CONVD_PLAN is auto; an unknown CONVD_MAX_ISA is logged here and
// ignored). log is left NULL (stderr).
void cd_runtime_options_from_env(cd_runtime_options *o);

// Makes *o the process's options (copied). Call once at start-up, before
// any other runtime call: the ISA cap is fixed the first time a kernel is
// chosen.
void cd_runtime_configure(const cd_runtime_options *o);

// libgomp's environment for convd's programs (the daemon, convd-run), which
// libgomp reads when it is loaded, before main; call it first thing in main.
// When it has to change, the program re-executes itself once with argv:
// - the wait between layers: unless the environment sets GOMP_SPINCOUNT or
//   OMP_WAIT_POLICY, GOMP_SPINCOUNT=CD_GOMP_SPINCOUNT. A thread waiting at a
//   barrier then polls ~40 us before it sleeps: a hot run pays no sleep and
//   wake-up per layer, an idle process's threads sleep a moment after its
//   last run (docs/OPERATIONS.md, "Compute threads", has the measurements);
// - no thread binding: OMP_PROC_BIND (but "false"), OMP_PLACES and
//   GOMP_CPU_AFFINITY are removed, with a note on stderr. libgomp binds the
//   initial thread to its first place when it loads, and every thread the
//   program starts inherits that one CPU: the executor's whole team ran on
//   one core (ResNet-50 u90, 2 cores: 10.5-11.2 ms against 6.5-7.1). The
//   re-executed program gets the CPUs of all the places back as its
//   affinity mask (an exec keeps the mask), and the executor spreads its
//   threads over that mask as over any (taskset, cpusets);
// - fixed team sizes: OMP_DYNAMIC (but "false") is removed too (libgomp would size
//   each team by the load average: one thread per layer on a 2-core machine
//   with one core busy); the executor also turns it off on its thread.
// Returns only when no re-exec happened (none was needed, or it failed:
// prog is named in a message on stderr then).
#define CD_GOMP_SPINCOUNT "1000"
void cd_runtime_omp_setup(char **argv, const char *prog);

// Sets up process-wide state (CPU feature detection, thread pool with
// `threads` workers, 0 = all cores). Idempotent. Returns 0 or a negative code.
int cd_runtime_init(int threads);

// Loads, checks and plans an ONNX model. Returns 0, or a negative code with a
// readable reason in err: CD_EIO (cannot read), CD_EMODEL (corrupt or
// truncated file, inconsistent graph), CD_EUNSUPPORTED (naming the op, the
// node and what is supported), CD_ENOMEM. Nothing stays allocated on failure.
int cd_model_load(const char *path, const cd_model_opts *opts, cd_model **out, char *err, size_t errlen);
void cd_model_free(cd_model *m);

int cd_model_num_inputs(const cd_model *m);
int cd_model_num_outputs(const cd_model *m);
const cd_io_desc *cd_model_input(const cd_model *m, int i);
const cd_io_desc *cd_model_output(const cd_model *m, int i);
void cd_model_get_summary(const cd_model *m, cd_model_summary *out);
int cd_model_num_layers(const cd_model *m);
// The device m runs on ("cpu", "hip", "hip-emu") and the blocked layout its
// dense layers use there ("NCHW16C", "NCHW8C", "NCHW": none).
const char *cd_model_device(const cd_model *m);
const char *cd_model_layout(const cd_model *m);
void cd_model_layer(const cd_model *m, int i, cd_layer_info *out);

// Times every layer: `runs` runs (after one warm-up) at `batch` on random
// inputs; layer_ms[nlayers] receives each layer's median ms and *total_ms
// the median of the whole runs (layer_ms NULL: plain runs, total only). Returns 0, CD_EPARAMS, CD_ENOMEM or the
// run's error (err set).
int cd_model_profile(const cd_model *m, int batch, int runs, double *layer_ms, double *total_ms, char *err,
                     size_t errlen);
// The same, asking stop(ud) before each run (the warm-up included): when it
// returns non-zero the profile ends at once with CD_ECANCELLED (err set).
// For callers that must be able to abandon a long profile (the daemon's
// `plan`, when its client goes away or shutdown stops waiting). stop may be
// NULL; it is called on the calling thread.
int cd_model_profile_stop(const cd_model *m, int batch, int runs, double *layer_ms, double *total_ms,
                          int (*stop)(void *ud), void *ud, char *err, size_t errlen);

// Creates the per-thread execution state for m. Returns 0 or CD_ENOMEM.
int cd_exec_init(const cd_model *m, cd_exec **out);
void cd_exec_free(cd_exec *ex);

// Host buffers for the inputs of a run of `batch` items on ex: host[i] (room
// for cd_model_num_inputs) gets where input i goes, `batch` items in C order.
// Fill them, then cd_model_submit_staged: nothing is copied again on the way
// in (on the cpu they are ex's arena itself; on a device, pinned staging that
// the run uploads from). Valid until that submit. Returns 0, CD_ESHAPE (batch
// out of 1..max_batch), CD_EPARAMS (a run pending on ex) or CD_ENOMEM.
int cd_exec_stage_inputs(cd_exec *ex, int batch, void **host);

// Runs the model on `batch` items (1..max_batch). inputs[i] holds input i in
// C order with shape[0] == batch;
// outputs[i] receives output i likewise
// (caller-allocated). Returns 0, or CD_ESHAPE / CD_EINTERNAL with err set.
int cd_model_run(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err, size_t errlen);

// cd_model_run in two halves, so that a caller with two execs of one model
// can queue batch i+1 on one while batch i computes on the other (on an
// asynchronous backend: real HIP; on cpu and hip-emu submit computes
// everything and wait only checks). cd_model_run(...) == cd_model_submit(...)
// then cd_model_wait(...).
//
// cd_model_submit stages the inputs (the caller may reuse them as soon as it
// returns) and queues the whole run on ex's stream without waiting. outputs
// must stay valid until cd_model_wait returns; they hold the results only
// after it returned 0. At most one run per exec may be pending. Returns 0
// (run pending), or CD_ESHAPE / CD_EPARAMS (a run already pending, a missing
// tensor) / CD_ENOMEM / CD_EINTERNAL with err set; on failure nothing stays
// pending (work already queued was waited for).
int cd_model_submit(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err, size_t errlen);
// Waits for the run cd_model_submit queued on ex. Returns 0 (outputs valid),
// CD_EPARAMS (nothing pending) or CD_EINTERNAL with err set. ex is idle after
// it in every case. cd_exec_free also waits for a pending run.
// cd_model_submit of the inputs cd_exec_stage_inputs handed out for the same
// batch (CD_EPARAMS with err set when none were).
int cd_model_submit_staged(cd_exec *ex, int batch, void *const *outputs, char *err, size_t errlen);
int cd_model_wait(cd_exec *ex, char *err, size_t errlen);
// 1 when cd_model_submit returns before the run is computed, i.e. two execs
// used as a double buffer overlap (the real "hip" backend); 0 when it
// computes everything before returning (cpu, hip-emu).
int cd_model_overlaps(const cd_model *m);
// 1 when m's runs compute on the process's CPU executor (runtime/executor.h:
// host kernels, one wide run at a time), 0 on a device backend (its runs go
// from the calling thread).
int cd_model_on_executor(const cd_model *m);

// Batches this process ran image by image in lanes, each thread whole
// images on an exec of its own (runtime/batch-lanes.c; CONVD_BATCH_LANES);
// *images (may be NULL): the images of theirs the lanes ran.
unsigned long long cd_runtime_lane_batches(unsigned long long *images);

// A layer's output as cd_model_run_traced shows it: layer is its index
// (cd_model_layer), name and label its ONNX node and fused ops as
// cd_layer_info gives them (name is the first fused node's, label e.g.
// "Conv+BN+Relu": the output is the last fused node's ONNX value); nchw holds
// the whole batch in NCHW float32 (shape[0] = batch), valid only during the
// call (the arena is reused by the next layer): copy what you keep.
typedef void (*cd_trace_fn)(void *ud, int layer, const char *name, const char *label, const float *nchw, int rank,
                            const int64_t *shape);
// cd_model_run that calls cb after every planned layer with its float32
// output (a layer whose output is stored as 8-bit integers is skipped;
// runtime/trace.c), on the thread that computes (do not run a model from
// cb). Slow: each layer is synchronised, downloaded and converted to NCHW.
// For offline tools (convctl quantize); plan the model with plan = 1 (dense)
// so every value keeps its full shape. Returns what cd_model_run returns.
int cd_model_run_traced(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, cd_trace_fn cb,
                        void *ud, char *err, size_t errlen);

// ---- input sizes (runtime/variants.c) ---------------------------------------------
//
// A model whose inputs have symbolic dims (dynamic H and W) holds one plan
// per input size: the one made at load (cd_model_input's shapes) and up to
// max_shapes - 1 more, each made on first use from the file's bytes kept in
// memory, least recently used dropped when idle. Static models have only the
// first: every call below then gives m itself for its own shapes and
// CD_ESHAPE for others.

// 1 when some input of m has a symbolic dim.
int cd_model_is_dynamic(const cd_model *m);

// The plan of m for per-item input shapes shapes[i] (cd_model_num_inputs
// entries, each of input i's rank; dim 0 ignored), with a hold on it:
// *out is m itself for m's own shapes, else a variant built now (on the
// calling thread; no lock is held while it builds, and concurrent callers of
// the same new size wait for that one build). Returns 0, CD_ESHAPE (a
// fixed dim differs, the rank differs), CD_EOVERLOADED (max_shapes sizes
// planned, all in use), or the build's error (CD_EUNSUPPORTED, CD_EMODEL
// ... e.g. a size too small for the model's pooling; the failure is not
// kept), with err set. Release with cd_model_variant_put.
int cd_model_variant_get(const cd_model *m, const int64_t *const *shapes, const cd_model **out, char *err,
                         size_t errlen);
// Drops the hold cd_model_variant_get gave on v.
void cd_model_variant_put(const cd_model *m, const cd_model *v);

// An exec of v from its pool of idle ones (or a new one), for a caller that
// does not keep one per thread. Returns 0 or CD_ENOMEM. Give it back with
// cd_exec_give while holding v; the pool goes with v.
int cd_exec_take(const cd_model *v, cd_exec **out);
void cd_exec_give(cd_exec *ex);

// The input sizes m has plans for now (the first at load included):
// fills shapes[k][i] (per-item shape of input i in plan k) for k <
// max, and returns the count; bytes (may be NULL) gets the memory the
// variants beyond the first hold (weights, constants, idle execs' arenas).
int cd_model_planned_shapes(const cd_model *m, int64_t (*shapes)[CD_MAX_TENSORS][CD_MAX_RANK], int max, int64_t *bytes);

// For tests: called on the thread that builds a new variant, before it
// builds (NULL: none). Process-wide.
void cd_variants_set_build_hook(void (*hook)(void *ud, const cd_model *m), void *ud);
// ---- the operators the loader reads (runtime/op-info.c) ----

// An err buffer of this size holds every cd_model_load message whole (the
// refusal of an unknown operator lists every supported one).
#define CD_LOAD_ERR_MAX 4096

// One operator of the lowering's table, for `convctl ops` and
// docs/OPERATORS.md. Static strings except runs_as and backends.
typedef struct {
    const char *op;           // ONNX op_type
    const char *domain;       // "" for the default domain (ai.onnx), else e.g. "com.microsoft"
    const char *attrs;        // accepted attribute names, comma-separated ("" for none)
    int opset_from, opset_to; // default domain: the opsets it is read at; 0, 0 for other domains
    char runs_as[96];         // the backend op families it becomes ("Conv2d, Activation"), or
                              // "folded at load" / "a view (no copy)" when it computes nothing per
                              // request, "refused (with the reason)" for one listed only to explain
                              // its refusal
    char backends[64];        // the devices whose supports_op takes every family of runs_as
                              // ("cpu, hip, hip-emu": hip runs the kernels hip-emu runs); "any" for no
                              // family, "none" for a refused one
} cd_op_info;

// The number of operators in the table.
int cd_op_info_count(void);
// Fills *out for operator i. The first call asks the devices (makes a cpu and
// a hip-emu backend once). Returns 0, CD_EPARAMS (i out of range) or the
// code of a device that cannot be made.
int cd_op_info_get(int i, cd_op_info *out);
// 1 with *from, *to the opsets attribute attr of op exists in, where they
// are narrower than the operator's; 0 otherwise.
int cd_op_attr_opsets(const char *op, const char *attr, int *from, int *to);

#endif // CD_RUNTIME_RUNTIME_H
