// The runtime's public API (runtime.h): load = import + lower + plan; the
// per-thread execution state and the run loop.

#include "core/clock.h"
#include "core/stats-util.h"
#include "runtime/model.h"
#include "backends/devices.h"
#include "runtime/options.h"

#include "core/errors.h"
#include "core/host.h"
#include "runtime/executor.h"
#include "runtime/onnx-file.h"
#include <limits.h>
#include "sparse/spmm-ukernel.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_threads;

int cd_runtime_init(int threads) {
    if (threads < 0) return CD_EPARAMS;
    pthread_mutex_lock(&g_init_lock);
    int n = threads ? threads : cd_executor_default_threads();
    if (n < 1) n = 1;
    int rc = cd_backends_set_threads(n);
    if (!rc) {
        cd_executor_init(n);
        omp_set_num_threads(n);
        __atomic_store_n(&g_threads, n, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_init_lock);
    return rc;
}

void cd_model_free(cd_model *m) {
    if (!m) return;
    cd_variants_free(m);
    cd_exec_pool_free(m);
    pthread_mutex_destroy(&m->idle_lock);
    cd_plan_free(m);
    free(m->tune_cache);
    cd_backend_free(m->be);
    free(m);
}

// Runs fn(arg) where m's backend computes: on the process's one CPU executor
// for host kernels (executor.h: its team is the only one), on the calling
// thread for a device backend (its submit only queues work on a stream, and
// the hip emulator runs launches itself).
static void compute_on(const cd_model *m, void (*fn)(void *arg), void *arg) {
    if (!cd_model_on_executor(m))
        fn(arg);
    else
        cd_executor_run(fn, arg, m->threads);
}

// Compaction and planning of a loaded graph, for a run on the executor.
typedef struct {
    cd_model *m;
    cd_graph *g;
    cd_plan_mode mode;
    char *err;
    size_t errlen;
    int rc;
} plan_job;

static void plan_job_run(void *arg) {
    plan_job *j = arg;
    j->rc = cd_graph_compact(j->g, j->mode != CD_PLAN_DENSE, j->err, j->errlen);
    if (!j->rc) j->rc = cd_plan_build(j->m, j->g, j->err, j->errlen);
}

int cd_model_build_plan(const uint8_t *buf, size_t len, const char *dir, const cd_model_opts *opts,
                        const cd_input_shape *specs, int nspecs, cd_i8_pick i8_pick, cd_model **out, char *err,
                        size_t errlen) {
    *out = NULL;
    int max_batch = opts && opts->max_batch ? opts->max_batch : 1;
    cd_graph g;
    memset(&g, 0, sizeof g);
    g.shape_spec = specs;
    g.n_shape_spec = nspecs;
    cd_model *m = calloc(1, sizeof *m);
    if (!m) return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    pthread_mutex_init(&m->idle_lock, NULL);
    m->max_batch = max_batch;
    m->threads = opts ? opts->threads : 0;
    if (opts) {
        m->popts.mode = (cd_plan_mode)opts->plan;
        m->popts.tune = opts->tune;
    }
    m->popts.max_batch = max_batch;
    m->popts.i8_pick = i8_pick;
    m->popts.tune_cache = NULL;
    if (opts && opts->tune_cache && !(m->tune_cache = strdup(opts->tune_cache))) {
        cd_model_free(m);
        return cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    }
    m->popts.tune_cache = m->tune_cache;
    if (m->threads > 0) cd_backends_set_threads(m->threads); // calibration and tuning run with them
    cd_plan_mode mode = cd_planner_mode(&m->popts);
    int rc = cd_backend_create(opts ? opts->device : NULL, cd_runtime_backend_opts(), &m->be, err, errlen);
    if (opts && opts->max_file_bytes > 0) g.max_bytes = (size_t)opts->max_file_bytes;
    g.bytes_read = len; // external data adds to it (--max-model-bytes)
    if (!rc) rc = cd_onnx_import_buffer(buf, len, dir, &g, err, errlen);
    if (!rc) rc = cd_graph_lower(&g, err, errlen);
    if (!rc) {
        plan_job j = {m, &g, mode, err, errlen, 0};
        compute_on(m, plan_job_run, &j); // calibration, tuning and packing time the run's team
        rc = j.rc;
    }
    if (rc) {
        cd_graph_free(&g);
        cd_model_free(m);
        return rc;
    }
    if (m->threads > 0) cd_backends_set_threads(m->threads);
    for (int i = 0; i < m->ninputs && i < g.ninputs; i++) m->inputs[i].d.dynamic = g.input_dyn ? g.input_dyn[i] : 0;
    cd_model_summary *s = &m->summary;
    s->params = g.params;
    s->zero_params = g.zero_params;
    s->max_batch = max_batch;
    s->activation_bytes = (int64_t)m->arena_bytes;
    s->weight_bytes = (int64_t)m->const_bytes;
    for (int i = 0; i < m->nlayers; i++) {
        s->flops += m->layers[i].flops;
        s->weight_bytes += (int64_t)cd_backend_op_weight_bytes(m->be, m->layers[i].st);
        s->int8_layers += m->layers[i].int8;
        s->slice_copies += m->layers[i].op == CD_BOP_SLICE;
    }
    s->slice_views = m->slice_views;
    s->residual_in_place = m->residual_in_place;
    s->nlayers = m->nlayers;
    m->batch_split = s->batch_split = cd_batch_split_wanted(m);
    if (m->batch_split) s->lane_activation_bytes = (int64_t)cd_batch_lanes_arena_bytes(m);
    cd_graph_free(&g);
    *out = m;
    return 0;
}

int cd_model_build(const uint8_t *buf, size_t len, const char *dir, const cd_model_opts *opts,
                   const cd_input_shape *specs, int nspecs, cd_model **out, char *err, size_t errlen) {
    int rc = cd_model_build_plan(buf, len, dir, opts, specs, nspecs, CD_I8_PICK_AUTO, out, err, errlen);
    if (!rc) rc = cd_model_int8_pick(buf, len, dir, opts, specs, nspecs, out, err, errlen);
    return rc;
}

int cd_model_load(const char *path, const cd_model_opts *opts, cd_model **out, char *err, size_t errlen) {
    *out = NULL;
    if (err && errlen) err[0] = '\0';
    int max_batch = opts && opts->max_batch ? opts->max_batch : 1;
    int brc = cd_max_batch_check(max_batch, err, errlen); // the load check (core/limits.h)
    if (brc != 0) return brc;
    if (opts && (opts->max_shapes < 0 || opts->max_shapes > CD_MAX_SHAPES))
        return cd_errf(CD_EPARAMS, err, errlen, "max_shapes %d out of range (0..%d)", opts->max_shapes, CD_MAX_SHAPES);
    if (!__atomic_load_n(&g_threads, __ATOMIC_ACQUIRE)) {
        int rc = cd_runtime_init(0);
        if (rc) return cd_errf(rc, err, errlen, "runtime initialisation failed");
    }
    char e[CD_LOAD_ERR_MAX] = "";
    // The load's message gets the room the caller's err has after the file
    // name, so that a message too long for it is shortened in words, not
    // cut (the unknown-operator refusal lists every supported op).
    const char *fname = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t elen = errlen > strlen(fname) + 2 ? errlen - strlen(fname) - 2 : 1;
    if (elen > sizeof e) elen = sizeof e;
    cd_input_shape specs[CD_MAX_TENSORS];
    int nspecs = 0;
    uint8_t *buf = NULL;
    size_t len = 0;
    char real[PATH_MAX];
    const char *dir = cd_host_real_dir(path, real);
    int rc = 0;
    if (opts && opts->input_shape && opts->input_shape[0])
        rc = cd_input_shape_parse(opts->input_shape, specs, CD_MAX_TENSORS, &nspecs, e, sizeof e);
    if (!rc)
        rc = cd_onnx_read_file(path, opts && opts->max_file_bytes > 0 ? (size_t)opts->max_file_bytes : 0, &buf, &len, e,
                               sizeof e);
    cd_model *m = NULL;
    if (!rc) rc = cd_model_build(buf, len, dir, opts, specs, nspecs, &m, e, elen);
    if (!rc && cd_model_is_dynamic(m)) {
        rc = cd_variants_init(m, buf, len, dir, opts); // keeps the bytes for the other sizes
        buf = NULL;
        if (rc) cd_errf(rc, e, sizeof e, "out of memory");
    }
    free(buf);
    if (rc) {
        cd_model_free(m);
        const char *base = strrchr(path, '/');
        cd_errf(rc, err, errlen, "%s: %s", base ? base + 1 : path, e[0] ? e : cd_strerror(rc));
        // Names come from the file: keep the message printable ASCII (logs, the wire's UTF-8 strings).
        for (char *c = err; err && *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
        return rc;
    }
    *out = m;
    return 0;
}

int cd_model_num_inputs(const cd_model *m) { return m->ninputs; }
int cd_model_num_outputs(const cd_model *m) { return m->noutputs; }

const cd_io_desc *cd_model_input(const cd_model *m, int i) { return i >= 0 && i < m->ninputs ? &m->inputs[i].d : NULL; }

const cd_io_desc *cd_model_output(const cd_model *m, int i) {
    return i >= 0 && i < m->noutputs ? &m->outputs[i].d : NULL;
}

void cd_model_get_summary(const cd_model *m, cd_model_summary *out) {
    *out = m->summary;
    out->device_bytes = (int64_t)cd_backend_device_bytes(m->be);
}

int cd_model_num_layers(const cd_model *m) { return m->nlayers; }

const char *cd_model_device(const cd_model *m) { return cd_backend_name(m->be); }

const char *cd_model_layout(const cd_model *m) { return cd_layout_name(cd_backend_blocked_layout(m->be)); }

void cd_runtime_cpu_info(cd_cpu_info *out) {
    memset(out, 0, sizeof *out);
    out->kernels_isa = cd_sparse_isa_name(cd_sparse_isa_best());
    out->kernels_capped = cd_sparse_isa_capped();
    cd_backend_caps c = cd_backends_host_caps();
    // oneDNN names its ISAs "cpu_isa_avx2", ...; runtime.h promises "avx2".
    const char *isa = c.isa ? c.isa : "none";
    out->dnnl_isa = strncmp(isa, "cpu_isa_", 8) == 0 ? isa + 8 : isa;
    cd_layout l = c.native_layout;
    out->layout = cd_layout_name(l);
    out->block = cd_layout_block(l);
}

void cd_model_layer(const cd_model *m, int i, cd_layer_info *out) {
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= m->nlayers) return;
    const cd_layer *l = &m->layers[i];
    out->name = l->name;
    out->op = l->label;
    out->kernel = l->kernel;
    const char *computes = l->int8 ? "int8" : cd_backend_op_compute_dtype(m->be, l->st); // bf16: the CPU's opt-in
    out->dtype = computes ? computes : "f32";
    out->out_dtype = m->tensors[l->out].t.int8 ? "int8" : "f32";
    out->reference = l->reference;
    out->layout = cd_layout_name(m->tensors[l->out].t.layout);
    const cd_tdesc *in = &m->tensors[l->in[0]].t, *o = &m->tensors[l->out].t;
    out->in_rank = in->rank;
    out->out_rank = o->rank;
    memcpy(out->in_shape, in->shape, sizeof out->in_shape);
    memcpy(out->out_shape, o->shape, sizeof out->out_shape);
    out->params = l->params;
    out->flops = l->flops;
    out->density = l->density;
    out->structure = out->compaction = "";
    out->pred_ms = out->pred_dense_ms = out->tuned_ms = out->tuned_dense_ms = -1;
    out->tuned_sparse_ms = out->pred_sparse_ms = -1;
    out->int8_ms = out->int8_dense_ms = out->int8_f32_ms = -1;
    if (l->op != CD_BOP_CONV2D && l->op != CD_BOP_GEMM) return;
    out->is_weighted = 1;
    out->structure = l->structure;
    out->compaction = l->compact;
    out->sparse = l->sparse;
    out->an = l->an;
    const cd_plan_choice *c = &l->choice;
    out->pred_dense_ms = c->pred_dense_ms;
    out->pred_ms = l->sparse ? (c->pred_sparse_ms >= 0 ? c->pred_sparse_ms + c->reorder_ms : -1) : c->pred_dense_ms;
    out->pred_reorder_ms = l->sparse ? c->reorder_ms : 0;
    out->tuned_dense_ms = c->tuned_dense_ms;
    out->tuned_sparse_ms = c->tuned_sparse_ms;
    out->pred_sparse_ms = c->pred_sparse_ms;
    out->tuned_ms = l->sparse ? c->tuned_sparse_ms : c->tuned_dense_ms;
    out->tune_batch = c->tune_batch;
    out->flops_dense = l->flops_dense;
    out->flops_skipped = l->flops_dense - l->flops_run;
    out->int8_ms = c->i8_ms;
    out->int8_dense_ms = c->i8d_ms;
    out->int8_f32_ms = c->f32_ms;
}

// ---- execution ----------------------------------------------------------------------

void cd_exec_free(cd_exec *ex) {
    if (!ex) return;
    if (ex->pending) cd_backend_synchronize(ex->m->be, ex->ctx); // queued work uses the arena
    if (ex->prof && ex->prof_runs) {
        // cd_runtime_options.profile: mean time per layer over the runs of this exec.
        double total = 0;
        for (int i = 0; i < ex->m->nlayers; i++) total += ex->prof[i];
        cd_rt_log(CD_RT_LOG_INFO, "profile: %d runs, %.3f ms per run", ex->prof_runs, total / ex->prof_runs);
        for (int i = 0; i < ex->m->nlayers; i++) {
            const cd_layer *l = &ex->m->layers[i];
            cd_rt_log(CD_RT_LOG_INFO, "profile: %4d %-24.24s %-22.22s %-24.24s %9.4f ms %5.1f%%", i, l->name, l->label,
                      l->kernel, ex->prof[i] / ex->prof_runs, total > 0 ? 100.0 * ex->prof[i] / total : 0.0);
        }
    }
    free(ex->prof);
    for (int i = 0; i < CD_MAX_TENSORS; i++) free(ex->own_in[i]);
    free(ex->split_buf);
    for (int i = 1; i < ex->nlane; i++) cd_exec_free(ex->lane[i]);
    free(ex->lane);
    if (ex->arena) cd_backend_buffer_free(ex->m->be, ex->arena);
    cd_backend_ctx_free(ex->m->be, ex->ctx);
    free(ex->bt);
    free(ex);
}

int cd_exec_init(const cd_model *m, cd_exec **out) { return cd_exec_init_layout(m, m->arena_bytes, NULL, out); }

int cd_exec_init_layout(const cd_model *m, size_t arena_bytes, const size_t *offsets, cd_exec **out) {
    *out = NULL;
    cd_exec *ex = calloc(1, sizeof *ex);
    if (!ex) return CD_ENOMEM;
    ex->m = m;
    ex->bt = calloc((size_t)m->ntensors + 1, sizeof *ex->bt);
    int rc = ex->bt ? 0 : CD_ENOMEM;
    if (!rc) rc = cd_backend_buffer_alloc(m->be, arena_bytes ? arena_bytes : 64, &ex->arena);
    if (!rc) rc = cd_backend_ctx_create(m->be, &ex->ctx);
    if (!rc && cd_runtime_opts()->profile && !(ex->prof = calloc((size_t)m->nlayers + 1, sizeof(double))))
        rc = CD_ENOMEM;
    if (rc) {
        cd_exec_free(ex);
        return rc;
    }
    for (int i = 0; i < m->ntensors; i++) {
        const cd_ptensor *t = &m->tensors[i];
        cd_btensor *b = &ex->bt[i];
        b->layout = t->t.layout;
        b->rank = t->t.rank;
        memcpy(b->shape, t->t.shape, sizeof b->shape);
        if (t->t.is_const)
            b->data = (char *)m->consts + t->offset;
        else
            b->data = (char *)ex->arena + (offsets ? offsets[t->root] : m->tensors[t->root].offset) + t->view_offset;
    }
    *out = ex;
    return 0;
}

int cd_exec_take(const cd_model *v, cd_exec **out) {
    cd_model *m = (cd_model *)v; // the pool is the model's only mutable part
    pthread_mutex_lock(&m->idle_lock);
    cd_exec *ex = m->nidle > 0 ? m->idle[--m->nidle] : NULL;
    pthread_mutex_unlock(&m->idle_lock);
    if (ex) {
        *out = ex;
        return 0;
    }
    return cd_exec_init(v, out);
}

void cd_exec_give(cd_exec *ex) {
    if (!ex) return;
    cd_model *m = (cd_model *)ex->m;
    pthread_mutex_lock(&m->idle_lock);
    if (!m->idle) m->idle = calloc(CD_MAX_IDLE_EXECS, sizeof *m->idle);
    int kept = m->idle && m->nidle < CD_MAX_IDLE_EXECS && !ex->pending;
    if (kept) m->idle[m->nidle++] = ex;
    pthread_mutex_unlock(&m->idle_lock);
    if (!kept) cd_exec_free(ex);
}

void cd_exec_pool_free(cd_model *m) {
    for (int i = 0; i < m->nidle; i++) cd_exec_free(m->idle[i]);
    free(m->idle);
    m->idle = NULL;
    m->nidle = 0;
}

// Input i's bytes for a run of batch items.
static size_t input_bytes(const cd_model *m, int i, int batch) {
    return m->tensors[m->inputs[i].tensor].item_bytes * (size_t)batch;
}

int cd_exec_stage_inputs(cd_exec *ex, int batch, void **host) {
    const cd_model *m = ex->m;
    if (cd_batch_check(batch, m->max_batch, "staging", NULL, 0)) return CD_ESHAPE;
    if (ex->pending) return CD_EPARAMS;
    void *dst[CD_MAX_TENSORS];
    size_t size[CD_MAX_TENSORS];
    for (int i = 0; i < m->ninputs; i++) {
        dst[i] = ex->bt[m->inputs[i].tensor].data;
        size[i] = input_bytes(m, i, batch);
    }
    int rc = cd_backend_stage_inputs(m->be, ex->ctx, m->ninputs, dst, size, host);
    if (rc == CD_EUNSUPPORTED) { // a device that stages nothing: host buffers of ex's own
        for (int i = 0; i < m->ninputs && rc != CD_ENOMEM; i++) {
            if (!ex->own_in[i]) ex->own_in[i] = malloc(input_bytes(m, i, m->max_batch) + 1);
            rc = ex->own_in[i] ? 0 : CD_ENOMEM;
            host[i] = ex->own_in[i];
        }
    }
    if (!rc) {
        ex->staged = batch;
        memcpy(ex->stage_host, host, sizeof(void *) * (size_t)m->ninputs);
    }
    return rc;
}

// Queues the uploads of the inputs: from the caller's buffers (inputs), or
// from what cd_exec_stage_inputs handed out (inputs NULL).
static int upload_inputs(cd_exec *ex, int batch, const void *const *inputs, char *err, size_t errlen) {
    const cd_model *m = ex->m;
    void *dst[CD_MAX_TENSORS];
    size_t size[CD_MAX_TENSORS];
    for (int i = 0; i < m->ninputs; i++) {
        dst[i] = ex->bt[m->inputs[i].tensor].data;
        size[i] = input_bytes(m, i, batch);
    }
    int rc = 0;
    if (!inputs && !ex->own_in[0]) rc = cd_backend_upload_staged(m->be, ex->ctx, m->ninputs, dst, ex->stage_host, size);
    for (int i = 0; i < m->ninputs && !rc && (inputs || ex->own_in[0]); i++)
        rc = cd_backend_upload_async(m->be, ex->ctx, dst[i], inputs ? inputs[i] : ex->own_in[i], size[i]);
    if (rc) {
        cd_backend_synchronize(m->be, ex->ctx);
        return cd_errf(rc, err, errlen, "upload of the inputs failed: %s", cd_strerror(rc));
    }
    return 0;
}

// Queues a whole run on ex's context: uploads, every layer, downloads; with
// layer_ms (profiling) each layer is synchronised and timed. Returns 0 with
// the work queued (outputs valid after cd_backend_synchronize), or a negative
// code with err set; on an error after work was queued it first waits for
// that work, so ex is idle whenever this fails.
static int submit_impl(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err,
                       size_t errlen, double *layer_ms) {
    const cd_model *m = ex->m;
    int rc = cd_batch_check(batch, m->max_batch, "run", err, errlen); // core/limits.h's one bound
    if (rc) return rc;
    if (!inputs && ex->staged != batch)
        return cd_errf(CD_EPARAMS, err, errlen, "no inputs staged for a batch of %d", batch);
    for (int i = 0; i < m->ninputs; i++)
        if (inputs && !inputs[i]) return cd_errf(CD_EPARAMS, err, errlen, "input %d missing", i);
    for (int i = 0; i < m->noutputs; i++)
        if (!outputs || !outputs[i]) return cd_errf(CD_EPARAMS, err, errlen, "output %d missing", i);
    if (batch > 1 && m->batch_split)
        return cd_batch_split_run(ex, batch, inputs, outputs, err, errlen, layer_ms, submit_impl);
    for (int i = 0; i < m->ntensors; i++)
        if (!m->tensors[i].t.is_const) ex->bt[i].shape[0] = batch;
    ex->staged = 0;
    rc = upload_inputs(ex, batch, inputs, err, errlen);
    if (rc) return rc;
    for (int li = 0; li < m->nlayers; li++) {
        const cd_layer *l = &m->layers[li];
        double t0 = ex->prof || layer_ms ? cd_now_ms() : 0;
        rc = cd_exec_run_layer(ex, l, batch);
        if (layer_ms) {
            if (!rc) rc = cd_backend_synchronize(m->be, ex->ctx);
            layer_ms[li] += cd_now_ms() - t0;
        }
        if (ex->prof) ex->prof[li] += cd_now_ms() - t0;
        if (rc) {
            cd_backend_synchronize(m->be, ex->ctx);
            return cd_errf(rc == CD_ENOMEM ? rc : CD_EINTERNAL, err, errlen, "layer %d '%s' (%s) failed: %s", li,
                           l->name, l->label, cd_strerror(rc));
        }
    }
    if (ex->prof) ex->prof_runs++;
    // Downloads are queued behind the layers (async on a device backend); the
    // outputs are complete once synchronize returns.
    for (int i = 0; i < m->noutputs; i++) {
        const cd_ptensor *t = &m->tensors[m->outputs[i].tensor];
        rc = cd_backend_download_async(m->be, ex->ctx, outputs[i], ex->bt[m->outputs[i].tensor].data,
                                       t->item_bytes * (size_t)batch);
        if (rc) {
            cd_backend_synchronize(m->be, ex->ctx);
            return cd_errf(rc, err, errlen, "download of output '%s' failed", m->outputs[i].d.name);
        }
    }
    return 0;
}

// submit_impl's arguments and result, for a run on the executor.
typedef struct {
    cd_exec *ex;
    int batch;
    const void *const *inputs;
    void *const *outputs;
    char *err;
    size_t errlen;
    double *layer_ms;
    int rc;
} submit_job;

static void submit_job_run(void *arg) {
    submit_job *j = arg;
    j->rc = submit_impl(j->ex, j->batch, j->inputs, j->outputs, j->err, j->errlen, j->layer_ms);
}

// submit_impl where the backend computes (compute_on).
static int submit_run(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err, size_t errlen,
                      double *layer_ms) {
    submit_job j = {ex, batch, inputs, outputs, err, errlen, layer_ms, 0};
    compute_on(ex->m, submit_job_run, &j);
    return j.rc;
}

// Waits for the work queued on ex. Returns 0 or CD_EINTERNAL with err set.
static int wait_impl(cd_exec *ex, char *err, size_t errlen) {
    int rc = cd_backend_synchronize(ex->m->be, ex->ctx);
    if (rc) return cd_errf(CD_EINTERNAL, err, errlen, "synchronize failed: %s", cd_strerror(rc));
    return 0;
}

// cd_model_run, with the ms of every layer added to layer_ms when not NULL.
static int run_impl(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err, size_t errlen,
                    double *layer_ms) {
    int rc = submit_run(ex, batch, inputs, outputs, err, errlen, layer_ms);
    return rc ? rc : wait_impl(ex, err, errlen);
}

int cd_model_run(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err, size_t errlen) {
    if (ex->pending) return cd_errf(CD_EPARAMS, err, errlen, "a submitted run was not waited for");
    return run_impl(ex, batch, inputs, outputs, err, errlen, NULL);
}

int cd_model_submit(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err, size_t errlen) {
    if (ex->pending) return cd_errf(CD_EPARAMS, err, errlen, "a submitted run was not waited for");
    int rc = submit_run(ex, batch, inputs, outputs, err, errlen, NULL);
    if (!rc) ex->pending = 1;
    return rc;
}

int cd_model_submit_staged(cd_exec *ex, int batch, void *const *outputs, char *err, size_t errlen) {
    return cd_model_submit(ex, batch, NULL, outputs, err, errlen);
}

int cd_model_wait(cd_exec *ex, char *err, size_t errlen) {
    if (!ex->pending) return cd_errf(CD_EPARAMS, err, errlen, "no submitted run to wait for");
    ex->pending = 0;
    return wait_impl(ex, err, errlen);
}

int cd_model_overlaps(const cd_model *m) { return cd_backend_get_caps(m->be).async; }

int cd_model_on_executor(const cd_model *m) { return !cd_backend_get_caps(m->be).device_memory; }

int cd_model_profile(const cd_model *m, int batch, int runs, double *layer_ms, double *total_ms, char *err,
                     size_t errlen) {
    return cd_model_profile_stop(m, batch, runs, layer_ms, total_ms, NULL, NULL, err, errlen);
}

int cd_model_profile_stop(const cd_model *m, int batch, int runs, double *layer_ms, double *total_ms,
                          int (*stop)(void *ud), void *ud, char *err, size_t errlen) {
    if (runs < 1 || batch < 1 || batch > m->max_batch)
        return cd_errf(CD_EPARAMS, err, errlen, "batch %d / runs %d out of range", batch, runs);
    int n = m->nlayers, rc = 0;
    cd_exec *ex = NULL;
    void **ins = calloc((size_t)m->ninputs + 1, sizeof *ins), **outs = calloc((size_t)m->noutputs + 1, sizeof *outs);
    double *samples = calloc((size_t)(n + 1) * (size_t)(runs + 1), sizeof(double)),
           *tot = calloc((size_t)runs + 1, sizeof(double));
    if (!ins || !outs || !samples || !tot) rc = CD_ENOMEM;
    uint64_t seed = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < m->ninputs && !rc; i++) {
        size_t cnt = m->tensors[m->inputs[i].tensor].item_bytes / 4 * (size_t)batch;
        float *f = malloc(cnt * sizeof(float) + 4);
        if (!(ins[i] = f)) rc = CD_ENOMEM;
        for (size_t j = 0; f && j < cnt; j++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            f[j] = (float)((seed >> 40) & 0xffff) / 65536.0f * 2.0f - 1.0f;
        }
    }
    for (int i = 0; i < m->noutputs && !rc; i++)
        if (!(outs[i] = malloc(m->tensors[m->outputs[i].tensor].item_bytes * (size_t)batch + 4))) rc = CD_ENOMEM;
    if (!rc) rc = cd_exec_init(m, &ex);
    if (rc) cd_errf(rc, err, errlen, "%s", cd_strerror(rc));
    for (int r = 0; r <= runs && !rc; r++) {
        if (stop && stop(ud)) {
            rc = cd_errf(CD_ECANCELLED, err, errlen, "profile stopped after %d of %d runs", r ? r - 1 : 0, runs);
            break;
        }
        // Run 0 (warm-up) goes to the spare row; without layer_ms, plain runs.
        double *row = layer_ms ? samples + (size_t)(r ? r - 1 : runs) * (size_t)n : NULL;
        double t0 = cd_now_ms();
        rc = run_impl(ex, batch, (const void *const *)ins, outs, err, errlen, row);
        if (r) tot[r - 1] = cd_now_ms() - t0;
    }
    if (!rc) {
        double *col = malloc(sizeof(double) * (size_t)runs);
        if (!col) rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        for (int li = 0; li < n && col && layer_ms; li++) {
            for (int r = 0; r < runs; r++) col[r] = samples[(size_t)r * n + li];
            qsort(col, (size_t)runs, sizeof(double), cd_cmp_double);
            layer_ms[li] = col[runs / 2];
        }
        free(col);
        qsort(tot, (size_t)runs, sizeof(double), cd_cmp_double);
        if (total_ms) *total_ms = tot[runs / 2];
    }
    cd_exec_free(ex);
    for (int i = 0; ins && i < m->ninputs; i++) free(ins[i]);
    for (int i = 0; outs && i < m->noutputs; i++) free(outs[i]);
    free(ins);
    free(outs);
    free(samples);
    free(tot);
    return rc;
}
