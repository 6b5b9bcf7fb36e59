// The runtime's public API (runtime.h): load = import + lower + plan; the
// per-thread execution state and the run loop.

#include "runtime/model.h"

#include "kernels/cpu/dnnl.h"
#include "proto/errors.h"

#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_threads;

int cd_runtime_init(int threads) {
    if (threads < 0) return CD_EPARAMS;
    pthread_mutex_lock(&g_init_lock);
    int rc = cd_dnnl_init();
    if (!rc) {
        int n = threads ? threads : omp_get_num_procs();
        if (n < 1) n = 1;
        rc = cd_dnnl_set_threads(n);
        if (!rc) {
            omp_set_num_threads(n);
            __atomic_store_n(&g_threads, n, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&g_init_lock);
    return rc;
}

void cd_model_free(cd_model *m) {
    if (!m) return;
    for (int i = 0; i < m->nlayers; i++) cd_backend_op_state_free(m->be, m->layers[i].st);
    if (m->consts) cd_backend_buffer_free(m->be, m->consts);
    for (int i = 0; i < m->ninputs; i++) free((char *)m->inputs[i].d.name);
    for (int i = 0; i < m->noutputs; i++) free((char *)m->outputs[i].d.name);
    free(m->inputs);
    free(m->outputs);
    free(m->layers);
    free(m->tensors);
    cd_backend_free(m->be);
    free(m);
}

int cd_model_load(const char *path, const cd_model_opts *opts, cd_model **out, char *err, size_t errlen) {
    *out = NULL;
    if (err && errlen) err[0] = '\0';
    int max_batch = opts && opts->max_batch ? opts->max_batch : 1;
    if (max_batch < 1 || max_batch > 4096) return fail(err, errlen, CD_EPARAMS, "max_batch %d out of range (1..4096)", max_batch);
    if (!__atomic_load_n(&g_threads, __ATOMIC_ACQUIRE)) {
        int rc = cd_runtime_init(0);
        if (rc) return fail(err, errlen, rc, "runtime initialisation failed");
    }
    cd_graph g;
    memset(&g, 0, sizeof g);
    cd_model *m = calloc(1, sizeof *m);
    if (!m) return fail(err, errlen, CD_ENOMEM, "out of memory");
    m->max_batch = max_batch;
    m->threads = opts ? opts->threads : 0;
    char e[700] = "";
    int rc = cd_backend_create(opts ? opts->device : NULL, &m->be, e, sizeof e);
    if (!rc) rc = cd_onnx_import(path, &g, e, sizeof e);
    if (!rc) rc = cd_graph_lower(&g, e, sizeof e);
    if (!rc) rc = cd_plan_build(m, &g, e, sizeof e);
    if (rc) {
        const char *base = strrchr(path, '/');
        fail(err, errlen, rc, "%s: %s", base ? base + 1 : path, e[0] ? e : cd_strerror(rc));
        // Names come from the file: keep the message printable ASCII (logs, the wire's UTF-8 strings).
        for (char *c = err; err && *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
        cd_graph_free(&g);
        cd_model_free(m);
        return rc;
    }
    if (m->threads > 0) cd_dnnl_set_threads(m->threads);
    cd_model_summary *s = &m->summary;
    s->params = g.params;
    s->zero_params = g.zero_params;
    s->max_batch = max_batch;
    s->activation_bytes = (int64_t)m->arena_bytes;
    s->weight_bytes = (int64_t)m->const_bytes;
    for (int i = 0; i < m->nlayers; i++) {
        s->flops += m->layers[i].flops;
        s->weight_bytes += (int64_t)cd_backend_op_weight_bytes(m->be, m->layers[i].st);
    }
    s->nlayers = m->nlayers;
    cd_graph_free(&g);
    *out = m;
    return 0;
}

int cd_model_num_inputs(const cd_model *m) { return m->ninputs; }
int cd_model_num_outputs(const cd_model *m) { return m->noutputs; }

const cd_io_desc *cd_model_input(const cd_model *m, int i) {
    return i >= 0 && i < m->ninputs ? &m->inputs[i].d : NULL;
}

const cd_io_desc *cd_model_output(const cd_model *m, int i) {
    return i >= 0 && i < m->noutputs ? &m->outputs[i].d : NULL;
}

void cd_model_get_summary(const cd_model *m, cd_model_summary *out) { *out = m->summary; }

int cd_model_num_layers(const cd_model *m) { return m->nlayers; }

void cd_model_layer(const cd_model *m, int i, cd_layer_info *out) {
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= m->nlayers) return;
    const cd_layer *l = &m->layers[i];
    out->name = l->name;
    out->op = l->label;
    out->kernel = l->kernel;
    const cd_tdesc *in = &m->tensors[l->in[0]].t, *o = &m->tensors[l->out].t;
    out->in_rank = in->rank;
    out->out_rank = o->rank;
    memcpy(out->in_shape, in->shape, sizeof out->in_shape);
    memcpy(out->out_shape, o->shape, sizeof out->out_shape);
    out->params = l->params;
    out->flops = l->flops;
    out->density = l->density;
}

// ---- execution ----------------------------------------------------------------------

void cd_exec_free(cd_exec *ex) {
    if (!ex) return;
    if (ex->prof && ex->prof_runs) {
        // CD_PROFILE=1: mean time per layer over the runs of this exec.
        double total = 0;
        for (int i = 0; i < ex->m->nlayers; i++) total += ex->prof[i];
        fprintf(stderr, "profile: %d runs, %.3f ms per run\n", ex->prof_runs, total / ex->prof_runs);
        for (int i = 0; i < ex->m->nlayers; i++) {
            const cd_layer *l = &ex->m->layers[i];
            fprintf(stderr, "profile: %4d %-24.24s %-22.22s %-24.24s %9.4f ms %5.1f%%\n", i, l->name, l->label, l->kernel,
                    ex->prof[i] / ex->prof_runs, total > 0 ? 100.0 * ex->prof[i] / total : 0.0);
        }
    }
    free(ex->prof);
    if (ex->arena) cd_backend_buffer_free(ex->m->be, ex->arena);
    cd_backend_ctx_free(ex->m->be, ex->ctx);
    free(ex->bt);
    free(ex);
}

int cd_exec_init(const cd_model *m, cd_exec **out) {
    *out = NULL;
    cd_exec *ex = calloc(1, sizeof *ex);
    if (!ex) return CD_ENOMEM;
    ex->m = m;
    ex->bt = calloc((size_t)m->ntensors + 1, sizeof *ex->bt);
    int rc = ex->bt ? 0 : CD_ENOMEM;
    if (!rc) rc = cd_backend_buffer_alloc(m->be, m->arena_bytes ? m->arena_bytes : 64, &ex->arena);
    if (!rc) rc = cd_backend_ctx_create(m->be, &ex->ctx);
    const char *prof = getenv("CD_PROFILE");
    if (!rc && prof && *prof && strcmp(prof, "0") != 0 && !(ex->prof = calloc((size_t)m->nlayers + 1, sizeof(double))))
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
        if (t->t.is_const) b->data = (char *)m->consts + t->offset;
        else b->data = (char *)ex->arena + m->tensors[t->root].offset;
    }
    *out = ex;
    return 0;
}

int cd_model_run(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err, size_t errlen) {
    const cd_model *m = ex->m;
    if (batch < 1 || batch > m->max_batch)
        return fail(err, errlen, CD_ESHAPE, "batch %d out of range (1..%d)", batch, m->max_batch);
    for (int i = 0; i < m->ntensors; i++)
        if (!m->tensors[i].t.is_const) ex->bt[i].shape[0] = batch;
    int rc;
    for (int i = 0; i < m->ninputs; i++) {
        const cd_ptensor *t = &m->tensors[m->inputs[i].tensor];
        if (!inputs || !inputs[i]) return fail(err, errlen, CD_EPARAMS, "input %d missing", i);
        rc = cd_backend_upload(m->be, ex->bt[m->inputs[i].tensor].data, inputs[i], t->item_bytes * (size_t)batch);
        if (rc) return fail(err, errlen, rc, "upload of input '%s' failed", m->inputs[i].d.name);
    }
    for (int li = 0; li < m->nlayers; li++) {
        const cd_layer *l = &m->layers[li];
        const cd_btensor *srcs[CD_OP_MAX_IN];
        for (int i = 0; i < l->nin; i++) srcs[i] = &ex->bt[l->in[i]];
        double t0 = ex->prof ? now_ms() : 0;
        rc = cd_backend_op_run(m->be, l->op, ex->ctx, l->st, batch, srcs, &ex->bt[l->out]);
        if (ex->prof) ex->prof[li] += now_ms() - t0;
        if (rc) return fail(err, errlen, rc == CD_ENOMEM ? rc : CD_EINTERNAL, "layer %d '%s' (%s) failed: %s", li, l->name,
                            l->label, cd_strerror(rc));
    }
    if (ex->prof) ex->prof_runs++;
    rc = cd_backend_synchronize(m->be, ex->ctx);
    if (rc) return fail(err, errlen, CD_EINTERNAL, "synchronize failed: %s", cd_strerror(rc));
    for (int i = 0; i < m->noutputs; i++) {
        const cd_ptensor *t = &m->tensors[m->outputs[i].tensor];
        if (!outputs || !outputs[i]) return fail(err, errlen, CD_EPARAMS, "output %d missing", i);
        rc = cd_backend_download(m->be, outputs[i], ex->bt[m->outputs[i].tensor].data, t->item_bytes * (size_t)batch);
        if (rc) return fail(err, errlen, rc, "download of output '%s' failed", m->outputs[i].d.name);
    }
    return 0;
}
