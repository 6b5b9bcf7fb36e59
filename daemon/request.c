#include "daemon/request.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

cd_request *cd_request_new(cd_conn *conn, cd_rpc_msg *msg, cd_method_id method, const cd_request_ops *ops) {
    cd_request *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    req->ops = ops;
    req->conn = conn;
    req->msgid = msg->msgid;
    req->method = method;
    req->msg = *msg;
    cd_reply_init(&req->reply);
    memset(msg, 0, sizeof *msg);
    atomic_init(&req->cancelled, false);
    req->t_received_ns = uv_hrtime();
    return req;
}

void cd_request_free(cd_request *req) {
    if (!req) return;
    if (req->ops && req->ops->release) req->ops->release(req);
    cd_rpc_msg_free(&req->msg);
    cd_reply_destroy(&req->reply);
    free(req);
}
