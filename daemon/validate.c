// Request validation that needs no server (see validate.h).
#include "daemon/validate.h"

#include "core/errors.h"
#include "proto/params.h"
#include "proto/tensor.h"

#include <stdio.h>
#include <string.h>

int cd_params_map(const cd_rpc_msg *msg, const msgpack_object **out, char *err, size_t errlen) {
    const msgpack_object *p = &msg->params;
    *out = NULL;
    if (p->type == MSGPACK_OBJECT_NIL) return 0;
    if (p->type != MSGPACK_OBJECT_ARRAY) {
        snprintf(err, errlen, "params must be an array holding one map");
        return CD_EPARAMS;
    }
    if (p->via.array.size == 0) return 0;
    if (p->via.array.size > 1) {
        snprintf(err, errlen, "params must hold one map, got %u values", p->via.array.size);
        return CD_EPARAMS;
    }
    const msgpack_object *m = &p->via.array.ptr[0];
    if (m->type == MSGPACK_OBJECT_NIL) return 0;
    if (m->type != MSGPACK_OBJECT_MAP) {
        snprintf(err, errlen, "params must be [map]");
        return CD_EPARAMS;
    }
    *out = m;
    return 0;
}

// The params infer takes. Any other key, or one given twice, is E_PARAMS:
// a queued request keeps its whole message until it is answered (its input
// tensors point into it), so bytes that no field uses are not held for it.
int cd_infer_check_keys(const msgpack_object *params, char *err, size_t errlen) {
    static const char *const known[] = {"model", "inputs", "outputs", "timeout_ms", "into"};
    enum { NKNOWN = sizeof known / sizeof known[0] };
    bool seen[NKNOWN] = {false};
    for (uint32_t i = 0; i < params->via.map.size; i++) {
        const msgpack_object *k = &params->via.map.ptr[i].key;
        int j = 0;
        while (j < NKNOWN && !cd_obj_streq(k, known[j])) j++;
        if (j == NKNOWN) {
            const char *ks;
            size_t kn;
            char shown[80];
            if (!cd_obj_text(k, &ks, &kn))
                return cd_errf(CD_EPARAMS, err, errlen,
                               "infer params keys must be str (model, inputs, outputs, "
                               "timeout_ms, into)");
            return cd_errf(CD_EPARAMS, err, errlen,
                           "infer takes no param '%s' (model, inputs, outputs, timeout_ms, into)",
                           cd_sanitize(shown, sizeof shown, ks, kn));
        }
        if (seen[j]) return cd_errf(CD_EPARAMS, err, errlen, "infer param '%s' is given twice", known[j]);
        seen[j] = true;
    }
    return 0;
}

// Element count of the per-item part of d (dims 1..rank-1).
static int64_t item_numel(const cd_io_desc *d) {
    int64_t n = 1;
    for (int k = 1; k < d->rank; k++) n *= d->shape[k];
    return n;
}

// Bytes of the reply to an infer (an upper bound): the envelope, then per
// wanted output its name and tensor map.
uint64_t cd_infer_reply_bytes(const cd_infer_sig *sig, const cd_infer_args *a) {
    uint64_t n = 32;
    for (int i = 0; i < sig->nout; i++) {
        if (!a->want[i]) continue;
        const cd_io_desc *d = sig->out[i];
        // An output written into a region travels as {dtype, shape, region, offset}.
        cd_tensor t = {.dtype = CD_DTYPE_F32, .rank = d->rank, .nbytes = a->out_ref[i].name ? 0 : a->out_bytes[i]};
        if (a->out_ref[i].name) n += 32 + CD_MAX_REGION_NAME;
        n += 5 + strlen(d->name) + cd_tensor_packed_size(&t);
    }
    return n;
}

// The outputs asked for ('outputs': names; absent or nil: all) into
// a->want. Returns 0 or CD_EPARAMS with the reason in err.
static int want_outputs(const msgpack_object *params, const cd_infer_sig *sig, cd_infer_args *a, char *err,
                        size_t errlen) {
    const msgpack_object *outs = cd_map_get(params, "outputs");
    if (!outs || outs->type == MSGPACK_OBJECT_NIL) {
        for (int i = 0; i < sig->nout; i++) a->want[i] = true;
    } else if (outs->type != MSGPACK_OBJECT_ARRAY || outs->via.array.size == 0) {
        snprintf(err, errlen, "'outputs' must be a non-empty array of output names");
        return CD_EPARAMS;
    } else {
        for (uint32_t j = 0; j < outs->via.array.size; j++) {
            const msgpack_object *o = &outs->via.array.ptr[j];
            int idx = -1;
            for (int i = 0; i < sig->nout; i++)
                if (cd_obj_streq(o, sig->out[i]->name)) idx = i;
            if (idx < 0) {
                snprintf(err, errlen, "model '%.64s' has no output named in 'outputs'[%u]", sig->model, j);
                return CD_EPARAMS;
            }
            a->want[idx] = true;
        }
    }
    return 0;
}

// The outputs to write into regions ('into': {output name: {region, offset,
// size}}) into a->out_ref; each is also wanted. Returns 0 or CD_EPARAMS.
static int into_outputs(const msgpack_object *params, const cd_infer_sig *sig, cd_infer_args *a, char *err,
                        size_t errlen) {
    const msgpack_object *into = cd_map_get(params, "into");
    if (!into || into->type == MSGPACK_OBJECT_NIL) return 0;
    if (into->type != MSGPACK_OBJECT_MAP)
        return cd_errf(CD_EPARAMS, err, errlen, "'into' must be a map {output name: {region, offset, size}}");
    for (uint32_t j = 0; j < into->via.map.size; j++) {
        const msgpack_object *k = &into->via.map.ptr[j].key;
        int idx = -1;
        for (int i = 0; i < sig->nout; i++)
            if (cd_obj_streq(k, sig->out[i]->name)) idx = i;
        if (idx < 0)
            return cd_errf(CD_EPARAMS, err, errlen, "model '%.64s' has no output named in 'into' (entry %u)",
                           sig->model, j);
        if (a->out_ref[idx].name)
            return cd_errf(CD_EPARAMS, err, errlen, "'into' names output '%s' twice", sig->out[idx]->name);
        char why[200];
        int rc = cd_region_ref_decode(&into->via.map.ptr[j].val, &a->out_ref[idx], why, sizeof why);
        if (rc != 0) return cd_errf(rc, err, errlen, "'into' output '%s': %s", sig->out[idx]->name, why);
        a->want[idx] = true;
    }
    return 0;
}

int cd_infer_validate(const msgpack_object *params, const cd_infer_sig *sig, cd_infer_args *a, char *err,
                      size_t errlen) {
    const msgpack_object *inputs = cd_map_get(params, "inputs");
    if (!inputs || inputs->type != MSGPACK_OBJECT_MAP) {
        snprintf(err, errlen, "'inputs' must be a map {name: tensor}");
        return CD_EPARAMS;
    }
    bool seen[CD_MAX_TENSORS] = {false};
    a->batch = -1;
    for (uint32_t j = 0; j < inputs->via.map.size; j++) {
        const msgpack_object *k = &inputs->via.map.ptr[j].key;
        const char *ks;
        size_t kn;
        if (!cd_obj_text(k, &ks, &kn)) {
            snprintf(err, errlen, "input names must be str");
            return CD_EPARAMS;
        }
        int idx = -1;
        for (int i = 0; i < sig->nin; i++)
            if (cd_obj_streq(k, sig->in[i]->name)) idx = i;
        if (idx < 0) {
            char shown[80];
            snprintf(err, errlen, "model '%.64s' has no input '%s'", sig->model,
                     cd_sanitize(shown, sizeof shown, ks, kn));
            return CD_EPARAMS;
        }
        if (seen[idx]) {
            snprintf(err, errlen, "input '%s' given twice", sig->in[idx]->name);
            return CD_EPARAMS;
        }
        seen[idx] = true;
        const cd_io_desc *d = sig->in[idx];
        cd_tensor t;
        char why[200];
        const msgpack_object *v = &inputs->via.map.ptr[j].val;
        int rc = cd_tensor_is_ref(v) ? cd_tensor_ref_decode(v, &t, &a->in_ref[idx], why, sizeof why)
                                     : cd_tensor_decode(v, &t, why, sizeof why);
        if (rc != 0) {
            snprintf(err, errlen, "input '%s': %s", d->name, why);
            return rc;
        }
        if (t.dtype != d->dtype) {
            snprintf(err, errlen, "input '%s' must be %s, got %s", d->name, cd_dtype_name(d->dtype),
                     cd_dtype_name(t.dtype));
            return CD_EDTYPE;
        }
        if (t.rank != d->rank) {
            snprintf(err, errlen, "input '%s' must have rank %d, got %d", d->name, d->rank, t.rank);
            return CD_ESHAPE;
        }
        a->shape[idx][0] = 1;
        for (int k2 = 1; k2 < d->rank; k2++) {
            a->shape[idx][k2] = t.shape[k2];
            if (t.shape[k2] != d->shape[k2] && (d->dynamic & (1u << k2))) {
                a->other_size = true; // a symbolic dim: planned for this size on first use
                continue;
            }
            if (t.shape[k2] != d->shape[k2]) {
                snprintf(err, errlen, "input '%s' dim %d must be %lld, got %lld", d->name, k2, (long long)d->shape[k2],
                         (long long)t.shape[k2]);
                return CD_ESHAPE;
            }
        }
        char what[CD_MAX_NAME * 2 + 16];
        snprintf(what, sizeof what, "input '%s' of '%.64s'", d->name, sig->model);
        int brc = cd_batch_check(t.shape[0], sig->max_batch, what, err, errlen); // the one per-request check
        if (brc != 0) return brc;
        if (a->batch >= 0 && t.shape[0] != a->batch) {
            snprintf(err, errlen, "inputs disagree on the batch size (%d vs %lld)", a->batch, (long long)t.shape[0]);
            return CD_ESHAPE;
        }
        a->batch = (int)t.shape[0];
        a->in[idx] = t.data;
        a->in_bytes[idx] = t.nbytes;
    }
    for (int i = 0; i < sig->nin; i++) {
        if (!seen[i]) {
            snprintf(err, errlen, "missing input '%s'", sig->in[i]->name);
            return CD_EPARAMS;
        }
    }
    int rc = want_outputs(params, sig, a, err, errlen);
    if (rc == 0) rc = into_outputs(params, sig, a, err, errlen);
    if (rc != 0) return rc;
    if (!a->other_size && (rc = cd_infer_check_outputs(sig, a, err, errlen)) != 0) return rc;
    int64_t timeout = 0;
    rc = cd_param_int(params, "timeout_ms", 0, INT32_MAX, &timeout, err, errlen);
    if (rc < 0) return rc;
    a->timeout_ms = rc == 0 ? timeout : 0;
    return 0;
}

int cd_infer_check_outputs(const cd_infer_sig *sig, cd_infer_args *a, char *err, size_t errlen) {
    for (int i = 0; i < sig->nout; i++) {
        const cd_io_desc *d = sig->out[i];
        a->out_bytes[i] = (size_t)a->batch * (size_t)item_numel(d) * cd_dtype_size(d->dtype);
    }
    // Refused before it runs: a reply over max-reply, or an output that
    // cannot be one msgpack bin (4 GiB), would otherwise be computed for
    // nothing (or, before these checks, cut to 32 bits when packed).
    for (int i = 0; i < sig->nout; i++) {
        cd_tensor t = {.dtype = CD_DTYPE_F32, .nbytes = a->out_bytes[i]};
        char why[160];
        if (a->want[i] && !a->out_ref[i].name && cd_tensor_pack_check(&t, why, sizeof why) != 0)
            return cd_errf(CD_ETOO_LARGE, err, errlen, "output '%s' at batch %d: %s", sig->out[i]->name, a->batch, why);
    }
    char why[160];
    if (cd_reply_size_check(cd_infer_reply_bytes(sig, a), sig->max_reply, why, sizeof why) != 0)
        return cd_errf(CD_ETOO_LARGE, err, errlen,
                       "infer of '%.64s' at batch %d: %s "
                       "(max-reply); ask for fewer outputs or a smaller batch",
                       sig->model, a->batch, why);
    return 0;
}
