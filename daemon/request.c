#include "daemon/request.h"

#include "core/errors.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

cd_request *cd_request_new(cd_request_origin *from, cd_rpc_msg *msg, cd_method_id method, const cd_request_ops *ops) {
    cd_request *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    req->ops = ops;
    req->from = from;
    req->conn = from ? from->conn : NULL;
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

int cd_request_budget_check(const cd_request_budget *b, const cd_rpc_msg *msg, char *err, size_t errlen) {
    size_t budget = (size_t)cd_settings_max_buffered(b->set);
    if (b->held + msg->nbytes <= budget) return 0;
    CD_STAT_INC(budget_refused);
    return cd_errf(CD_EOVERLOADED, err, errlen,
                   "the daemon holds %zu bytes of requests; this one's %zu would pass "
                   "max-buffered (%zu): retry later",
                   b->held, msg->nbytes, budget);
}

void cd_request_started(cd_request *req) {
    cd_request_origin *from = req->from;
    if (!from) return;
    req->charge = req->msg.nbytes;
    from->budget->held += req->charge;
    from->inflight++;
    req->conn_prev = NULL;
    req->conn_next = from->reqs;
    if (from->reqs) from->reqs->conn_prev = req;
    from->reqs = req;
}

void cd_request_finished(cd_request *req) {
    cd_request_origin *from = req->from;
    if (!from) return;
    if (req->conn_prev)
        req->conn_prev->conn_next = req->conn_next;
    else
        from->reqs = req->conn_next;
    if (req->conn_next) req->conn_next->conn_prev = req->conn_prev;
    req->conn_prev = req->conn_next = NULL;
    from->inflight--;
    from->budget->held -= req->charge;
    req->charge = 0;
}
