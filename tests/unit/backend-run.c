// One op on one backend through the device interface (backend-run.h).

#include "tests/unit/backend-run.h"

#include "core/errors.h"
#include "kernels/cpu/ref.h"
#include "tests/unit/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cd_tdesc cd_test_tdesc(int rank, const int64_t *shape) {
    cd_tdesc t;
    memset(&t, 0, sizeof t);
    t.rank = rank;
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    t.layout = CD_LAYOUT_NCHW;
    return t;
}

size_t cd_test_numel(const cd_tdesc *t, int batch) {
    size_t n = t->is_const ? (size_t)t->shape[0] : (size_t)batch;
    for (int i = 1; i < t->rank; i++) n *= (size_t)t->shape[i];
    return n;
}

// Host data of tensor t (NCHW order) in the layout t asks for.
static void to_layout(const cd_tdesc *t, int batch, const float *nchw, float *out) {
    if (t->layout != CD_LAYOUT_NCHW)
        cd_ref_reorder(CD_LAYOUT_NCHW, t->layout, batch, (int)t->shape[1], (int)t->shape[2], (int)t->shape[3], nchw,
                       out);
    else
        memcpy(out, nchw, cd_test_numel(t, batch) * sizeof(float));
}

void cd_test_backend_run(cd_backend_t be, const cd_bop_desc *d, int batch, float *const *srcs, float *dst, char *kernel,
                         size_t klen) {
    cd_op_state *st = NULL;
    int rc = cd_backend_op_init(be, d, &st);
    if (rc) CD_CHECK_FAIL_("%s: op_init(%s) failed: %s", cd_backend_name(be), cd_bop_name(d->op), cd_strerror(rc));
    if (kernel) snprintf(kernel, klen, "%s", cd_backend_op_kernel(be, st));
    cd_backend_ctx *ctx = NULL;
    CHECK_EQ(cd_backend_ctx_create(be, &ctx), 0);
    cd_btensor bt[64], out;
    const cd_btensor *bp[64];
    void *bufs[64];
    for (int i = 0; i < d->nsrc; i++) {
        const cd_tdesc *t = &d->src[i];
        bt[i].layout = t->layout;
        bt[i].rank = t->rank;
        memcpy(bt[i].shape, t->shape, sizeof bt[i].shape);
        if (!t->is_const) bt[i].shape[0] = batch;
        size_t bytes = cd_tdesc_item_bytes(t) * (t->is_const ? 1 : (size_t)batch);
        float *host = malloc(bytes ? bytes : 4);
        to_layout(t, batch, srcs[i], host);
        CHECK_EQ(cd_backend_buffer_alloc(be, bytes, &bufs[i]), 0);
        CHECK_EQ(cd_backend_upload(be, bufs[i], host, bytes), 0);
        free(host);
        bt[i].data = bufs[i];
        bp[i] = &bt[i];
    }
    size_t obytes = cd_tdesc_item_bytes(&d->dst) * (size_t)batch;
    void *obuf;
    CHECK_EQ(cd_backend_buffer_alloc(be, obytes, &obuf), 0);
    out = (cd_btensor){obuf, d->dst.layout, d->dst.rank, {0}};
    memcpy(out.shape, d->dst.shape, sizeof out.shape);
    out.shape[0] = batch;
    rc = cd_backend_op_run(be, d->op, ctx, st, batch, bp, &out);
    if (rc)
        CD_CHECK_FAIL_("%s: run(%s, kernel %s) failed: %s", cd_backend_name(be), cd_bop_name(d->op),
                       cd_backend_op_kernel(be, st), cd_strerror(rc));
    CHECK_EQ(cd_backend_synchronize(be, ctx), 0);
    float *host = malloc(obytes ? obytes : 4);
    CHECK_EQ(cd_backend_download(be, host, obuf, obytes), 0);
    if (d->dst.layout != CD_LAYOUT_NCHW)
        cd_ref_reorder(d->dst.layout, CD_LAYOUT_NCHW, batch, (int)d->dst.shape[1], (int)d->dst.shape[2],
                       (int)d->dst.shape[3], host, dst);
    else
        memcpy(dst, host, cd_test_numel(&d->dst, batch) * sizeof(float));
    free(host);
    for (int i = 0; i < d->nsrc; i++) cd_backend_buffer_free(be, bufs[i]);
    cd_backend_buffer_free(be, obuf);
    cd_backend_ctx_free(be, ctx);
    cd_backend_op_state_free(be, st);
}
