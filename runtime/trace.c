// cd_model_run_traced (runtime.h): a run that shows every planned layer's
// output to a callback, in NCHW float32, for offline tools (convctl quantize
// calibrates and measures per-layer error with it). It is a copy of the plain
// run loop with a synchronise, a download (device backends) and a layout
// conversion after each layer: slow by design, never used to serve.

#include "runtime/model.h"

#include "core/checked.h"
#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "runtime/executor.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    cd_exec *ex;
    int batch;
    const void *const *inputs;
    void *const *outputs;
    cd_trace_fn cb;
    void *ud;
    char *err;
    size_t errlen;
    int rc;
} trace_job;

// Bytes of one item of t as float32 (padding channels included).
static size_t float_item_bytes(const cd_ptensor *t) {
    const cd_tdesc *d = &t->t;
    size_t n = 1;
    if (d->rank == 4)
        n = cd_layout_numel(d->layout, 1, (int)d->shape[1], (int)d->shape[2], (int)d->shape[3]);
    else
        for (int k = 1; k < d->rank; k++) n *= (size_t)d->shape[k];
    return n * sizeof(float);
}

// Shows layer li's output (already computed and synchronised) to the
// callback. host and nchw are scratch buffers of at least the largest
// tensor's bytes at this batch. Returns 0 or the download's error.
static int show_layer(trace_job *j, int li, void *host, float *nchw) {
    cd_exec *ex = j->ex;
    const cd_model *m = ex->m;
    const cd_layer *l = &m->layers[li];
    const cd_ptensor *t = &m->tensors[l->out];
    const cd_btensor *b = &ex->bt[l->out];
    // An output stored as 8-bit integers (between two int8 convs) has no
    // float32 values to show.
    if (float_item_bytes(t) > t->item_bytes) return 0;
    const size_t bytes = t->item_bytes * (size_t)j->batch;
    const void *src = b->data;
    if (cd_backend_get_caps(m->be).device_memory) {
        int rc = cd_backend_download_async(m->be, ex->ctx, host, b->data, bytes);
        if (!rc) rc = cd_backend_synchronize(m->be, ex->ctx);
        if (rc) return rc;
        src = host;
    }
    const float *out = src;
    if (b->layout != CD_LAYOUT_NCHW && b->rank == 4) {
        cd_ref_reorder(b->layout, CD_LAYOUT_NCHW, (int)b->shape[0], (int)b->shape[1], (int)b->shape[2],
                       (int)b->shape[3], src, nchw);
        out = nchw;
    }
    j->cb(j->ud, li, l->name, l->label, out, b->rank, b->shape);
    return 0;
}

static void trace_run(void *arg) {
    trace_job *j = arg;
    cd_exec *ex = j->ex;
    const cd_model *m = ex->m;
    const int batch = j->batch;
    size_t most = 64;
    for (int i = 0; i < m->ntensors; i++) {
        const cd_ptensor *t = &m->tensors[i];
        size_t f = float_item_bytes(t);
        if (!t->t.is_const && (t->item_bytes > most || f > most)) most = t->item_bytes > f ? t->item_bytes : f;
    }
    size_t scratch;
    if (cd_ck_mul_size(most, (size_t)batch, &scratch)) {
        j->rc = cd_errf(CD_ETOO_LARGE, j->err, j->errlen, "a traced tensor does not fit in memory");
        return;
    }
    void *host = malloc(scratch);
    float *nchw = malloc(scratch);
    int rc = host && nchw ? 0 : cd_errf(CD_ENOMEM, j->err, j->errlen, "out of memory for the trace");
    for (int i = 0; i < m->ntensors && !rc; i++)
        if (!m->tensors[i].t.is_const) ex->bt[i].shape[0] = batch;
    for (int i = 0; i < m->ninputs && !rc; i++) {
        const int ti = m->inputs[i].tensor;
        rc = cd_backend_upload_async(m->be, ex->ctx, ex->bt[ti].data, j->inputs[i],
                                     m->tensors[ti].item_bytes * (size_t)batch);
        if (rc) rc = cd_errf(rc, j->err, j->errlen, "upload of input '%s' failed", m->inputs[i].d.name);
    }
    for (int li = 0; li < m->nlayers && !rc; li++) {
        const cd_layer *l = &m->layers[li];
        rc = cd_exec_run_layer(ex, l, batch);
        if (!rc) rc = cd_backend_synchronize(m->be, ex->ctx);
        if (!rc) rc = show_layer(j, li, host, nchw);
        if (rc)
            rc = cd_errf(rc == CD_ENOMEM ? rc : CD_EINTERNAL, j->err, j->errlen, "layer %d '%s' (%s) failed: %s", li,
                         l->name, l->label, cd_strerror(rc));
    }
    for (int i = 0; i < m->noutputs && !rc; i++) {
        const int ti = m->outputs[i].tensor;
        rc = cd_backend_download_async(m->be, ex->ctx, j->outputs[i], ex->bt[ti].data,
                                       m->tensors[ti].item_bytes * (size_t)batch);
        if (rc) rc = cd_errf(rc, j->err, j->errlen, "download of output '%s' failed", m->outputs[i].d.name);
    }
    int sync = cd_backend_synchronize(m->be, ex->ctx);
    if (!rc && sync) rc = cd_errf(CD_EINTERNAL, j->err, j->errlen, "synchronize failed: %s", cd_strerror(sync));
    free(host);
    free(nchw);
    j->rc = rc;
}

int cd_model_run_traced(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, cd_trace_fn cb,
                        void *ud, char *err, size_t errlen) {
    const cd_model *m = ex->m;
    if (ex->pending) return cd_errf(CD_EPARAMS, err, errlen, "a submitted run was not waited for");
    if (batch < 1 || batch > m->max_batch)
        return cd_errf(CD_ESHAPE, err, errlen, "batch %d out of range (1..%d)", batch, m->max_batch);
    if (!cb) return cd_errf(CD_EPARAMS, err, errlen, "no trace callback");
    for (int i = 0; i < m->ninputs; i++)
        if (!inputs || !inputs[i]) return cd_errf(CD_EPARAMS, err, errlen, "input %d missing", i);
    for (int i = 0; i < m->noutputs; i++)
        if (!outputs || !outputs[i]) return cd_errf(CD_EPARAMS, err, errlen, "output %d missing", i);
    trace_job j = {ex, batch, inputs, outputs, cb, ud, err, errlen, 0};
    // Where the backend computes, as cd_model_run does: the CPU executor for
    // host kernels, this thread for a device backend.
    if (cd_backend_get_caps(m->be).device_memory)
        trace_run(&j);
    else
        cd_executor_run(trace_run, &j, m->threads);
    return j.rc;
}
