// libconvd asynchronous inference: convd_infer_async (a completion callback
// on the reader thread) on top of the connection's async calls.

#include "client/client-internal.h"
#include "core/errors.h"

#include <stdlib.h>

// What the completion needs to reach the application.
typedef struct {
    convd_infer_cb cb;
    void *user;
} infer_async_ctx;

// Turns the raw completion (a response or a local failure) into the
// application's (status, outputs, errmsg) and calls it; frees ctx.
static void infer_async_done(void *ud, int status, cd_rpc_msg *resp, const char *msg) {
    infer_async_ctx *ctx = ud;
    convd_outputs *outs = NULL;
    if (status == 0) {
        status = cd_client_response_status(resp);
        if (status == 0) status = cd_client_infer_outputs(resp, &outs);
        msg = convd_errmsg(NULL); // set by the decoders on failure
    }
    ctx->cb(ctx->user, status, outs, status ? msg : "");
    free(ctx);
}

int convd_infer_async(convd_conn *c, const char *model, size_t n_inputs, const char *const *names,
                      const convd_tensor *inputs, size_t n_outputs, const char *const *output_names, int timeout_ms,
                      convd_infer_cb cb, void *user) {
    if (!c || !model || !cb) return cd_client_fail(CD_EPARAMS, "conn, model and cb are required");
    cd_client_infer_params ip;
    int rc = cd_client_infer_check(c, model, n_inputs, names, inputs, NULL, n_outputs, output_names, timeout_ms, &ip);
    if (rc) return rc;
    infer_async_ctx *ctx = malloc(sizeof *ctx);
    if (!ctx) return cd_client_fail(CD_ENOMEM, "out of memory");
    ctx->cb = cb;
    ctx->user = user;
    rc = cd_client_call_async(c, "infer", cd_client_pack_infer, &ip, timeout_ms, infer_async_done, ctx);
    if (rc != 0) free(ctx);
    return rc;
}
