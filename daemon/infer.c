// The infer path of the daemon (see models.h): validate and queue on the
// loop (cd_method_infer), submit and finish a batch on a worker (the batch
// callback of every model queue), then the model's counters, the packing of
// the answer and the release of the request.
#include "daemon/models.h"

#include "core/bigbuf.h"
#include "daemon/log.h"
#include "daemon/regions.h"
#include "daemon/registry.h"
#include "daemon/reply.h"
#include "daemon/request.h"
#include "daemon/server-state.h"
#include "daemon/validate.h"
#include "core/errors.h"
#include "core/limits.h"
#include "proto/params.h"
#include "proto/region.h"
#include "proto/rpc.h"
#include "proto/tensor.h"
#include "runtime/runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

// The outputs of one batched run, shared by its requests: each request's
// out[] points into them, and the last request released frees them. refs is
// set on the worker before the requests go back to the loop and dropped on
// the loop only (infer_release), so it needs no lock.
typedef struct {
    int refs;
    void *buf[CD_MAX_TENSORS];
} batch_outputs;

typedef struct {
    cd_model_entry *entry; // reference held until release
    int batch;             // shape[0] of the inputs
    int nin, nout;
    const void *in[CD_MAX_TENSORS]; // input data in model order (into msg)
    size_t in_bytes[CD_MAX_TENSORS];
    void *out[CD_MAX_TENSORS]; // output data: its own buffers, or into `shared`
    batch_outputs *shared;     // a batch's outputs (the first request's from
                               // infer_submit, every request's after infer_finish)
    size_t out_bytes[CD_MAX_TENSORS];
    bool want[CD_MAX_TENSORS]; // outputs to return
    int64_t timeout_ms;        // 0 = none
    // Shared-memory regions (daemon/regions.c): the uses it holds (they keep
    // the mappings alive), and where a region output goes: out[] itself for a
    // run of its own, else pack copies its rows of the batch there.
    cd_region_use in_use[CD_MAX_TENSORS];
    cd_region_use out_use[CD_MAX_TENSORS];
    cd_region_ref out_ref[CD_MAX_TENSORS]; // name views into the request's message
    void *out_dst[CD_MAX_TENSORS];         // NULL: an inline output
    // Inputs of another size than the model's first plan (symbolic dims):
    int64_t shape[CD_MAX_TENSORS][CD_MAX_RANK];     // per-item input shapes
    bool other_size;                                // they differ from the first plan's
    const cd_model *plan;                           // the plan of that size, held from plan_other_size to
                                                    // the end of infer_finish (worker), NULL otherwise
    int64_t out_shape[CD_MAX_TENSORS][CD_MAX_RANK]; // the outputs' shapes at that size
    cd_exec *ex;                                    // the exec of plan a batch runs on (its leader's,
                                                    // from submit to finish)
    uint64_t max_reply;                             // --max-reply, for the outputs' check at that size
} infer_state;

// Joins input i of reqs[0..n-1] along dim 0 into dst (the sum of their
// in_bytes[i]): one copy per request, from its message.
static void join_input(cd_request **reqs, int n, int i, char *dst) {
    for (int r = 0; r < n; r++) {
        infer_state *st = reqs[r]->state;
        memcpy(dst, st->in[i], st->in_bytes[i]);
        dst += st->in_bytes[i];
    }
}

// The inputs of reqs[0..n-1] joined along dim 0 (total items) straight
// into the host buffers ex's backend hands out (cd_exec_stage_inputs: the
// arena on the cpu, pinned staging on a device): each request's tensor is
// copied once, from its message, and the run copies nothing more on the
// host. Returns 0 or the staging's error.
static int join_inputs(cd_request **reqs, int n, int total, cd_exec *ex) {
    infer_state *st0 = reqs[0]->state;
    void *host[CD_MAX_TENSORS];
    int rc = cd_exec_stage_inputs(ex, total, host);
    for (int i = 0; i < st0->nin && rc == 0; i++) join_input(reqs, n, i, host[i]);
    return rc;
}

// Output buffers for a run of reqs[0..n-1]: a single request's own, or the
// batch's concatenated ones in st0->shared (handed out by infer_finish).
// Returns 0 or CD_ENOMEM.
static int alloc_outputs(cd_request **reqs, int n, int total, void **out) {
    infer_state *st0 = reqs[0]->state;
    if (n > 1 && !(st0->shared = calloc(1, sizeof *st0->shared))) return CD_ENOMEM;
    if (n > 1) st0->shared->refs = 1;
    for (int o = 0; o < st0->nout; o++) {
        size_t bytes = st0->out_bytes[o] / (size_t)st0->batch * (size_t)total;
        void **p = n == 1 ? &st0->out[o] : &st0->shared->buf[o];
        if (n == 1 && st0->out_dst[o]) { // straight into the client's region
            out[o] = *p = st0->out_dst[o];
            continue;
        }
        if (!(*p = cd_bigbuf_get(bytes))) return CD_ENOMEM;
        out[o] = *p;
    }
    return 0;
}

// Drops one request's hold on a batch's outputs; the last one frees them.
static void batch_outputs_unref(batch_outputs *b) {
    if (!b || --b->refs > 0) return;
    for (int i = 0; i < CD_MAX_TENSORS; i++) cd_bigbuf_put(b->buf[i]);
    free(b);
}

// Requests of another input size (worker thread): each gets a hold on the
// plan of its size (built now on first use, by this worker, holding no lock
// that other sizes need) and its outputs' sizes, checked as the loop checks
// those of the first plan. Returns 0 or the error for the whole batch (its
// requests share one size) with reqs[0]->err set.
static int plan_other_size(cd_request **reqs, int n) {
    infer_state *st0 = reqs[0]->state;
    const cd_model *m = st0->entry->model;
    for (int r = 0; r < n; r++) {
        infer_state *st = reqs[r]->state;
        const int64_t *shapes[CD_MAX_TENSORS];
        for (int i = 0; i < st->nin; i++) shapes[i] = st->shape[i];
        int rc = cd_model_variant_get(m, shapes, &st->plan, reqs[0]->err, sizeof reqs[0]->err);
        if (rc != 0) return rc;
        cd_infer_sig sig = {.model = st0->entry->name, .nin = st->nin, .nout = st->nout, .max_reply = st->max_reply};
        for (int o = 0; o < st->nout; o++) sig.out[o] = cd_model_output(st->plan, o);
        cd_infer_args a;
        memset(&a, 0, sizeof a);
        a.batch = st->batch;
        memcpy(a.want, st->want, sizeof a.want);
        rc = cd_infer_check_outputs(&sig, &a, reqs[0]->err, sizeof reqs[0]->err);
        if (rc != 0) return rc;
        memcpy(st->out_bytes, a.out_bytes, sizeof st->out_bytes);
        for (int o = 0; o < st->nout; o++) memcpy(st->out_shape[o], sig.out[o]->shape, sizeof st->out_shape[o]);
    }
    return 0;
}

// The scheduler's submit half (worker thread): requests of one model
// version, sum of batches <= max_batch, queued on the worker's exec `slot`.
// Several requests are concatenated along dim 0 into one run (infer_finish
// points each at its part of the outputs). Until infer_finish, reqs[0]->
// status/err hold the submit's result and, for several requests, st0->shared
// the concatenated outputs.
static void infer_submit(cd_request **reqs, int n, int worker, int slot) {
    infer_state *st0 = reqs[0]->state;
    cd_model_entry *e = st0->entry;
    cd_exec **exp = &e->execs[2 * worker + slot];
    reqs[0]->status = 0;
    if (st0->other_size) { // the plan of that size, and an exec of its own pool
        int rc = plan_other_size(reqs, n);
        if (rc == 0 && cd_exec_take(st0->plan, &st0->ex) != 0) {
            rc = CD_ENOMEM;
            snprintf(reqs[0]->err, sizeof reqs[0]->err, "cannot allocate the execution state");
        }
        if (rc != 0) {
            reqs[0]->status = rc;
            return;
        }
        exp = &st0->ex;
    }
    if (!*exp && cd_exec_init(e->model, exp) != 0) {
        reqs[0]->status = CD_ENOMEM;
        snprintf(reqs[0]->err, sizeof reqs[0]->err, "cannot allocate the execution state");
        return;
    }
    int total = 0;
    for (int r = 0; r < n; r++) total += ((infer_state *)reqs[r]->state)->batch;
    void *out[CD_MAX_TENSORS] = {0};
    int rc = join_inputs(reqs, n, total, *exp);
    if (rc == 0) rc = alloc_outputs(reqs, n, total, out);
    if (rc != 0)
        snprintf(reqs[0]->err, sizeof reqs[0]->err, "%s for the %stensors",
                 rc == CD_ENOMEM ? "out of memory" : cd_strerror(rc), n == 1 ? "" : "batch ");
    if (rc == 0) rc = cd_model_submit_staged(*exp, total, out, reqs[0]->err, sizeof reqs[0]->err);
    reqs[0]->status = rc;
}

// The scheduler's finish half: waits for what infer_submit queued with the
// same arguments and sets every request's status (0 or CD_E*, err filled);
// each request of a batch gets its rows of the shared outputs, not a copy.
static void infer_finish(cd_request **reqs, int n, int worker, int slot) {
    infer_state *st0 = reqs[0]->state;
    cd_exec *ex = st0->ex ? st0->ex : st0->entry->execs[2 * worker + slot];
    int rc = reqs[0]->status;
    char err[256];
    snprintf(err, sizeof err, "%s", reqs[0]->err);
    if (rc == 0) rc = cd_model_wait(ex, err, sizeof err);
    if (st0->ex) { // back to its plan's pool
        cd_exec_give(st0->ex);
        st0->ex = NULL;
    }
    // The holds on the plan go before the answers do: a client that has its
    // answer and sends a new size finds this one idle (max_shapes).
    for (int r = 0; r < n; r++) {
        infer_state *st = reqs[r]->state;
        if (st->plan) cd_model_variant_put(st->entry->model, st->plan);
        st->plan = NULL;
    }
    if (n == 1) {
        reqs[0]->status = rc;
        if (rc != 0) snprintf(reqs[0]->err, sizeof reqs[0]->err, "%s", err);
        return;
    }
    batch_outputs *b = st0->shared;
    size_t off[CD_MAX_TENSORS] = {0};
    for (int r = 0; r < n; r++) {
        infer_state *st = reqs[r]->state;
        reqs[r]->status = rc;
        if (rc != 0) {
            snprintf(reqs[r]->err, sizeof reqs[r]->err, "%s", err);
            continue; // st0 keeps its hold: infer_release frees the buffers
        }
        for (int o = 0; o < st0->nout; o++) {
            st->out[o] = (char *)b->buf[o] + off[o];
            off[o] += st->out_bytes[o];
        }
        st->shared = b;
    }
    if (rc == 0) b->refs = n;
}

// The scheduler's batch callback without double buffering: submit on the
// worker's first exec, then wait.
void cd_infer_run_batch(cd_request **reqs, int n, int worker) {
    infer_submit(reqs, n, worker, 0);
    infer_finish(reqs, n, worker, 0);
}

// 1 when a and b have inputs of one size (cd_sched_queue.same).
static bool same_size(const cd_request *a, const cd_request *b) {
    const infer_state *x = a->state, *y = b->state;
    if (!x->other_size && !y->other_size) return true;
    if (x->other_size != y->other_size) return false;
    for (int i = 0; i < x->nin; i++)
        if (memcmp(x->shape[i], y->shape[i], sizeof x->shape[i]) != 0) return false;
    return true;
}

void cd_infer_set_same_size(cd_model_entry *e) {
    if (cd_model_is_dynamic(e->model)) e->queue.same = same_size;
}

// Double buffering per --double-buffer (double_buffer): auto where it
// overlaps (the real hip backend: cd_model_overlaps), on also where it does
// not (the synchronous backends then give the same results without overlap:
// how the path is tested), off never. Otherwise, fill batches per
// --fill-batches where the runs share the CPU executor, which computes one
// wide run at a time: a second batch formed while one runs would only wait
// for it (double buffering takes the next batch early on purpose).
void cd_infer_set_batching(cd_model_entry *e, int64_t double_buffer, bool fill) {
    const bool db = double_buffer == 2 || (double_buffer == 0 && cd_model_overlaps(e->model) != 0);
    e->queue.submit = db ? infer_submit : NULL;
    e->queue.finish = db ? infer_finish : NULL;
    e->queue.fill = fill && !db && cd_model_on_executor(e->model);
}

// Counts an error answer of a model under its code.
static void count_error(cd_model_counters *c, int status) {
    int i = -status;
    if (i <= 0 || i >= CD_STATS_NERR) i = -CD_EINTERNAL;
    c->errors++;
    c->by_code[i]++;
}

// Loop side after the scheduler: the model's counters and histograms (the
// response may already be out: written by the worker, cd_conn_respond).
static void infer_done(cd_request *req) {
    infer_state *st = req->state;
    cd_model_counters *c = cd_registry_counters(req->srv->registry, st->entry->name, strlen(st->entry->name));
    if (!c) return; // unloaded meanwhile
    if (req->status == 0) {
        c->ok++;
        if (req->batch_leader) {
            c->batches++;
            c->items += (uint64_t)req->batch_items;
            cd_histogram_record(&c->batch_size, (uint64_t)req->batch_items);
        }
        cd_histogram_record(&c->queue_ns, req->t_start_ns - req->t_received_ns);
        cd_histogram_record(&c->compute_ns, req->t_end_ns - req->t_start_ns);
    } else {
        count_error(c, req->status);
    }
    // Total: until the response went out (by the worker, when it wrote it),
    // not until this bookkeeping ran.
    uint64_t end = req->t_sent_ns ? req->t_sent_ns : uv_hrtime();
    cd_histogram_record(&c->total_ns, end - req->t_received_ns);
}

static int infer_pack(cd_request *req, msgpack_packer *pk) {
    infer_state *st = req->state;
    size_t n = 0;
    for (int i = 0; i < st->nout; i++) n += st->want[i];
    int rc = msgpack_pack_map(pk, 1);
    rc |= cd_pack_str(pk, "outputs");
    rc |= msgpack_pack_map(pk, n);
    for (int i = 0; i < st->nout && !rc; i++) {
        if (!st->want[i]) continue;
        const cd_io_desc *d = cd_model_output(st->entry->model, i);
        const int64_t *shape = st->other_size ? st->out_shape[i] : d->shape;
        cd_tensor t = {.dtype = CD_DTYPE_F32, .rank = d->rank, .data = st->out[i], .nbytes = st->out_bytes[i]};
        for (int k = 0; k < d->rank; k++) t.shape[k] = k == 0 ? st->batch : shape[k];
        rc |= cd_pack_str(pk, d->name);
        if (st->out_dst[i]) { // in the region already, or this request's rows of a batch
            if (st->out[i] != st->out_dst[i]) memcpy(st->out_dst[i], st->out[i], st->out_bytes[i]);
            rc |= cd_tensor_ref_pack(pk, &t, st->out_ref[i].name, st->out_ref[i].name_len, st->out_ref[i].offset);
            continue;
        }
        // The body is sent from the output buffer itself when pk packs a
        // reply (daemon/reply.h): the request keeps the buffer until then.
        int trc = cd_tensor_pack_head(pk, &t);
        if (trc == CD_ETOO_LARGE) return trc; // over 4 GiB: refused, not cut (infer_validate checks first)
        if (trc == 0) trc = cd_reply_bin_body(pk, t.data, t.nbytes);
        rc |= trc;
    }
    return rc ? CD_ENOMEM : 0;
}

// Drops the request's holds on its regions (loop thread).
static void release_regions(infer_state *st) {
    for (int i = 0; i < CD_MAX_TENSORS; i++) {
        cd_region_release(&st->in_use[i]);
        cd_region_release(&st->out_use[i]);
    }
}

// Resolves the region tensors of a validated infer in the client's regions: inputs
// point into their mappings, outputs get their destinations. Returns 0 or
// CD_ENOT_FOUND / CD_EREGION with err (holds taken so far are dropped).
static int acquire_regions(cd_region_set *regions, infer_state *st, const cd_infer_args *a, char *err, size_t errlen) {
    int rc = 0;
    for (int i = 0; i < st->nin && rc == 0; i++) {
        if (!a->in_ref[i].name) continue;
        st->in_use[i].owner = st;
        void *p;
        rc = cd_region_acquire(regions, &a->in_ref[i], a->in_bytes[i], false, &st->in_use[i], &p, err, errlen);
        if (rc == 0) st->in[i] = p;
    }
    for (int i = 0; i < st->nout && rc == 0; i++) {
        if (!a->out_ref[i].name) continue;
        st->out_use[i].owner = st;
        st->out_ref[i] = a->out_ref[i];
        rc = cd_region_acquire(regions, &a->out_ref[i], a->out_bytes[i], true, &st->out_use[i], &st->out_dst[i], err,
                               errlen);
    }
    if (rc != 0) {
        release_regions(st);
        memset(st->out_dst, 0, sizeof st->out_dst);
    }
    return rc;
}

static void infer_release(cd_request *req) {
    infer_state *st = req->state;
    if (!st) return;
    if (st->shared)
        batch_outputs_unref(st->shared);
    else
        for (int i = 0; i < CD_MAX_TENSORS; i++)
            if (st->out[i] != st->out_dst[i]) cd_bigbuf_put(st->out[i]);
    release_regions(st);
    if (st->plan) cd_model_variant_put(st->entry->model, st->plan); // not run (infer_finish drops it)
    cd_model_entry_unref(st->entry);
    free(st);
}

// Run by the model queue's batch function (no work part); packed on the
// worker when it can (pack_on_worker).
static void infer_answered(cd_request *req) { release_regions(req->state); }

static const cd_request_ops infer_ops = {NULL, infer_done, infer_pack, infer_release, infer_answered};

// Validates an infer call against e (daemon/validate.c) and fills st
// (with its regions, from the client's).
static int infer_validate(cd_region_set *regions, const msgpack_object *params, cd_model_entry *e,
                          const cd_settings *set, infer_state *st, char *err, size_t errlen) {
    const cd_model *m = e->model;
    cd_infer_sig sig = {.model = e->name,
                        .nin = cd_model_num_inputs(m),
                        .nout = cd_model_num_outputs(m),
                        .max_batch = (int)e->conf.max_batch,
                        .max_reply = (uint64_t)set->max_reply};
    for (int i = 0; i < sig.nin; i++) // at most CD_MAX_TENSORS: check_io_counts at load
        sig.in[i] = cd_model_input(m, i);
    for (int i = 0; i < sig.nout; i++) sig.out[i] = cd_model_output(m, i);
    cd_infer_args a;
    memset(&a, 0, sizeof a);
    st->nin = sig.nin;
    st->nout = sig.nout;
    int rc = cd_infer_validate(params, &sig, &a, err, errlen);
    if (rc != 0) return rc;
    st->batch = a.batch;
    memcpy(st->in, a.in, sizeof st->in);
    memcpy(st->in_bytes, a.in_bytes, sizeof st->in_bytes);
    memcpy(st->out_bytes, a.out_bytes, sizeof st->out_bytes);
    memcpy(st->want, a.want, sizeof st->want);
    st->timeout_ms = a.timeout_ms;
    memcpy(st->shape, a.shape, sizeof st->shape);
    st->other_size = a.other_size;
    st->max_reply = (uint64_t)set->max_reply;
    // An output's size at another input size is known only once the plan of
    // that size exists (on the worker): its place in a region cannot be
    // checked here, so it is refused rather than written unchecked.
    for (int i = 0; i < st->nout; i++)
        if (st->other_size && a.out_ref[i].name)
            return cd_errf(CD_EREGION, err, errlen,
                           "output '%s' into a region: the inputs are of another size than the model's first plan, "
                           "whose outputs' sizes are not known before it runs (send it inline)",
                           cd_model_output(m, i)->name);
    return acquire_regions(regions, st, &a, err, errlen);
}

int cd_method_infer(cd_call *call) {
    char name[CD_MAX_NAME + 1];
    int rc = cd_infer_check_keys(call->params, call->err, sizeof call->err);
    if (rc != 0) return rc;
    rc = cd_param_str(call->params, "model", name, sizeof name, call->err, sizeof call->err);
    if (rc == 1) {
        snprintf(call->err, sizeof call->err, "infer needs 'model'");
        return CD_EPARAMS;
    }
    if (rc != 0) return rc;
    cd_registry *reg = call->srv->registry;
    cd_model_entry *e = cd_registry_get(reg, name, strlen(name));
    if (!e) {
        char shown[80];
        snprintf(call->err, sizeof call->err, "no model named '%s'",
                 cd_sanitize(shown, sizeof shown, name, strlen(name)));
        return CD_ENOT_FOUND;
    }
    cd_model_counters *counters = cd_registry_counters(reg, name, strlen(name));
    counters->requests++;
    infer_state *st = calloc(1, sizeof *st);
    if (!st) {
        cd_model_entry_unref(e);
        count_error(counters, CD_ENOMEM);
        return CD_ENOMEM;
    }
    st->entry = e;
    rc = infer_validate(call->from->regions, call->params, e, call->srv->set, st, call->err, sizeof call->err);
    if (rc == 0) rc = cd_request_budget_check(call->from->budget, call->msg, call->err, sizeof call->err);
    cd_request *req = NULL;
    if (rc == 0 && !(req = cd_request_new(call->from, call->msg, CD_M_infer, &infer_ops))) rc = CD_ENOMEM;
    if (rc != 0) {
        release_regions(st);
        cd_model_entry_unref(e);
        free(st);
        count_error(counters, rc);
        return rc;
    }
    req->srv = call->srv;
    req->state = st;
    req->pack_on_worker = true; // reads st and the model's output descriptors only
    req->items = st->batch;
    if (st->timeout_ms > 0) req->deadline_ns = req->t_received_ns + (uint64_t)st->timeout_ms * 1000000ull;
    rc = cd_workers_submit_batched(call->srv->workers, &e->queue, req);
    if (rc != 0) {
        snprintf(call->err, sizeof call->err, "model '%.64s' has %lld requests queued (max_queue): retry later",
                 e->name, (long long)e->conf.max_queue);
        cd_request_free(req); // releases st and the entry reference
        count_error(counters, rc);
        return rc;
    }
    cd_request_started(req);
    return CD_CALL_QUEUED;
}
