// libconvd inference: packs named input tensors (payloads sent straight from
// the caller's memory), decodes the output tensors (in place when aligned).

#include "client/client-internal.h"
#include "core/errors.h"
#include "core/limits.h"
#include "proto/region.h"
#include "proto/tensor.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static cd_tensor to_cd_tensor(const convd_tensor *t) {
    cd_tensor ct = {.dtype = (cd_dtype)t->dtype, .rank = t->rank, .data = t->data, .nbytes = t->nbytes};
    for (int i = 0; i < t->rank && i < CD_MAX_RANK; i++) ct.shape[i] = t->shape[i];
    return ct;
}

// Checks one input before anything is sent. Returns 0 or CD_EPARAMS.
static int check_input(const char *name, const convd_tensor *t, bool in_region) {
    if (!name || !*name || strlen(name) > CD_MAX_NAME)
        return cd_client_fail(CD_EPARAMS, "input names must be 1..%d bytes", CD_MAX_NAME);
    size_t item = convd_dtype_size(t->dtype);
    if (item == 0) return cd_client_fail(CD_EPARAMS, "input '%s': invalid dtype %d", name, (int)t->dtype);
    if (t->rank < 1 || t->rank > CONVD_MAX_RANK)
        return cd_client_fail(CD_EPARAMS, "input '%s': rank %d is not in 1..%d", name, t->rank, CONVD_MAX_RANK);
    size_t bytes = item;
    for (int i = 0; i < t->rank; i++) {
        if (t->shape[i] < 1)
            return cd_client_fail(CD_EPARAMS, "input '%s': dim %d is %lld", name, i, (long long)t->shape[i]);
        if (__builtin_mul_overflow(bytes, (size_t)t->shape[i], &bytes))
            return cd_client_fail(CD_EPARAMS, "input '%s': size overflows", name);
    }
    if (bytes != t->nbytes)
        return cd_client_fail(CD_EPARAMS, "input '%s': shape needs %zu bytes, nbytes is %zu", name, bytes, t->nbytes);
    if (bytes && !t->data && !in_region) return cd_client_fail(CD_EPARAMS, "input '%s': data is NULL", name);
    return 0;
}

int cd_client_pack_infer(msgpack_packer *pk, void *ud) {
    const cd_client_infer_params *ip = ud;
    int rc = 0;
    size_t n_into = 0;
    for (size_t i = 0; ip->out_refs && i < ip->n_outputs; i++) n_into += ip->out_refs[i].region != NULL;
    rc |= msgpack_pack_map(pk, 2 + (ip->n_outputs > 0) + (ip->timeout_ms > 0) + (n_into > 0));
    rc |= cd_pack_kv_str(pk, "model", ip->model);
    rc |= cd_pack_str(pk, "inputs");
    rc |= msgpack_pack_map(pk, ip->n_inputs);
    for (size_t i = 0; i < ip->n_inputs && rc == 0; i++) {
        cd_tensor t = to_cd_tensor(&ip->inputs[i]);
        rc |= cd_pack_str(pk, ip->names[i]);
        const convd_region_ref *r = ip->in_refs ? &ip->in_refs[i] : NULL;
        if (r && r->region)
            rc |= cd_tensor_ref_pack(pk, &t, r->region, strlen(r->region), r->offset);
        else
            rc |= cd_tensor_pack(pk, &t);
    }
    if (n_into > 0) {
        rc |= cd_pack_str(pk, "into");
        rc |= msgpack_pack_map(pk, n_into);
        for (size_t i = 0; i < ip->n_outputs; i++) {
            const convd_region_ref *r = &ip->out_refs[i];
            if (!r->region) continue;
            rc |= cd_pack_str(pk, ip->output_names[i]);
            rc |= msgpack_pack_map(pk, 3);
            rc |= cd_pack_kv_str(pk, "region", r->region);
            rc |= cd_pack_str(pk, "offset");
            rc |= msgpack_pack_uint64(pk, r->offset);
            rc |= cd_pack_str(pk, "size");
            rc |= msgpack_pack_uint64(pk, r->size);
        }
    }
    if (ip->n_outputs > 0) {
        rc |= cd_pack_str(pk, "outputs");
        rc |= msgpack_pack_array(pk, ip->n_outputs);
        for (size_t i = 0; i < ip->n_outputs; i++) rc |= cd_pack_str(pk, ip->output_names[i]);
    }
    if (ip->timeout_ms > 0) {
        rc |= cd_pack_str(pk, "timeout_ms");
        rc |= msgpack_pack_int(pk, ip->timeout_ms);
    }
    return rc ? cd_client_fail(CD_ENOMEM, "out of memory packing the request") : 0;
}

// What convd_outputs.priv_ points to: the answer, kept while an output's
// data points into it (the reader places a big answer so that its first big
// payload is 64-byte aligned: that one is handed out where it lies), and
// which outputs are copies of their own.
typedef struct {
    cd_rpc_msg msg; // the answer (empty when nothing points into it)
    bool *copied;   // per output: data is an aligned copy to free
} outputs_priv;

void convd_outputs_free(convd_outputs *o) {
    if (!o) return;
    outputs_priv *p = o->priv_;
    for (size_t i = 0; i < o->count; i++) {
        free((void *)o->names[i]);
        if (p && p->copied[i]) free((void *)o->tensors[i].data);
    }
    if (p) {
        cd_rpc_msg_free(&p->msg);
        free(p->copied);
        free(p);
    }
    free(o->names);
    free(o->tensors);
    free(o);
}

const convd_tensor *convd_outputs_get(const convd_outputs *o, const char *name) {
    if (!o || !name) return NULL;
    for (size_t i = 0; i < o->count; i++)
        if (strcmp(o->names[i], name) == 0) return &o->tensors[i];
    return NULL;
}

// Copies the {name: tensor} map of a response into *out.
// Decodes the outputs map of answer m into *out: an aligned payload is used
// where it lies (*out then keeps m: *kept), any other is copied.
static int outputs_decode(const msgpack_object *map, convd_outputs **out, bool *kept) {
    *kept = false;
    convd_outputs *o = calloc(1, sizeof *o);
    if (!o) return cd_client_fail(CD_ENOMEM, "out of memory");
    uint32_t n = map->via.map.size;
    outputs_priv *priv = calloc(1, sizeof *priv);
    o->priv_ = priv;
    o->names = calloc(n ? n : 1, sizeof *o->names);
    o->tensors = calloc(n ? n : 1, sizeof *o->tensors);
    if (priv) priv->copied = calloc(n ? n : 1, sizeof *priv->copied);
    if (!o->names || !o->tensors || !priv || !priv->copied) {
        convd_outputs_free(o);
        return cd_client_fail(CD_ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR) {
            convd_outputs_free(o);
            return cd_client_fail(CD_EPROTOCOL, "an output name is not a string");
        }
        cd_tensor t;
        char err[200];
        cd_region_ref ref;
        const msgpack_object *v = &map->via.map.ptr[i].val;
        bool in_region = cd_tensor_is_ref(v); // written into a region: no bytes here
        int rc =
            in_region ? cd_tensor_ref_decode(v, &t, &ref, err, sizeof err) : cd_tensor_decode(v, &t, err, sizeof err);
        if (rc != 0) {
            convd_outputs_free(o);
            return cd_client_fail(CD_EPROTOCOL, "output '%.*s' is malformed: %s", (int)k->via.str.size, k->via.str.ptr,
                                  err);
        }
        int oom = 0;
        char *name = cd_client_strdup(k, &oom);
        bool in_place = !in_region && (uintptr_t)t.data % 64 == 0;
        bool copy = !in_region && !in_place;
        void *data = copy ? aligned_alloc(64, (t.nbytes + 63) & ~(size_t)63) : in_place ? (void *)t.data : NULL;
        if (!name || (copy && !data)) {
            free(name);
            if (copy) free(data);
            convd_outputs_free(o);
            return cd_client_fail(CD_ENOMEM, "out of memory copying the outputs");
        }
        if (copy) memcpy(data, t.data, t.nbytes);
        priv->copied[o->count] = copy;
        *kept |= in_place;
        convd_tensor *ct = &o->tensors[o->count];
        ct->dtype = (convd_dtype)t.dtype;
        ct->rank = t.rank;
        for (int d = 0; d < t.rank; d++) ct->shape[d] = t.shape[d];
        ct->data = data;
        ct->nbytes = t.nbytes;
        o->names[o->count] = name;
        o->count++;
    }
    *out = o;
    return 0;
}

int cd_client_infer_check(convd_conn *c, const char *model, size_t n_inputs, const char *const *names,
                          const convd_tensor *inputs, const convd_region_ref *in_refs, size_t n_outputs,
                          const char *const *output_names, int timeout_ms, cd_client_infer_params *ip) {
    if (!c || !model) return cd_client_fail(CD_EPARAMS, "conn and model are required");
    if (n_inputs > CD_MAX_TENSORS || n_outputs > CD_MAX_TENSORS)
        return cd_client_fail(CD_EPARAMS, "at most %d inputs and outputs", CD_MAX_TENSORS);
    if (n_inputs && (!names || !inputs)) return cd_client_fail(CD_EPARAMS, "names and inputs are required");
    if (n_outputs && !output_names) return cd_client_fail(CD_EPARAMS, "output_names is NULL but n_outputs is not 0");
    for (size_t i = 0; i < n_inputs; i++) {
        int rc = check_input(names[i], &inputs[i], in_refs && in_refs[i].region);
        if (rc) return rc;
    }
    for (size_t i = 0; i < n_outputs; i++)
        if (!output_names[i] || !*output_names[i]) return cd_client_fail(CD_EPARAMS, "output names must not be empty");
    int eff = cd_client_timeout(c, timeout_ms);
    *ip = (cd_client_infer_params){model,        n_inputs,          names,   inputs, n_outputs,
                                   output_names, eff > 0 ? eff : 0, in_refs, NULL};
    return 0;
}

int cd_client_infer_outputs(cd_rpc_msg *m, convd_outputs **out) {
    const msgpack_object *outs = cd_client_get(&m->result, "outputs");
    if (!outs || outs->type != MSGPACK_OBJECT_MAP) {
        cd_rpc_msg_free(m);
        return cd_client_fail(CD_EPROTOCOL, "the result of 'infer' has no outputs map");
    }
    bool kept;
    int rc = outputs_decode(outs, out, &kept);
    if (rc == 0 && kept) {
        ((outputs_priv *)(*out)->priv_)->msg = *m; // the outputs' bytes
        memset(m, 0, sizeof *m);
    }
    cd_rpc_msg_free(m);
    return rc;
}

int convd_infer(convd_conn *c, const char *model, size_t n_inputs, const char *const *names, const convd_tensor *inputs,
                size_t n_outputs, const char *const *output_names, convd_outputs **out, int timeout_ms) {
    if (out) *out = NULL;
    if (!c || !model || !out) return cd_client_fail(CD_EPARAMS, "conn, model and out are required");
    cd_client_infer_params ip;
    int rc = cd_client_infer_check(c, model, n_inputs, names, inputs, NULL, n_outputs, output_names, timeout_ms, &ip);
    if (rc) return rc;
    cd_rpc_msg m;
    rc = cd_client_call(c, "infer", cd_client_pack_infer, &ip, timeout_ms, &m);
    if (rc != 0) return rc;
    return cd_client_infer_outputs(&m, out);
}
