#ifndef CD_DAEMON_CALL_H
#define CD_DAEMON_CALL_H

// What a method handler gets (daemon/methods.c dispatches; the handlers are
// there and in models.c, infer.c, model-plan.c). Apart from methods.h so
// that the handlers' files need not include the dispatcher that calls them.

#include "daemon/request.h"
#include "proto/rpc.h"

#include <msgpack.h>

typedef struct cd_server cd_server;

typedef struct {
    cd_server *srv;               // the server
    cd_request_origin *from;      // the client: its regions, peer, budget, and
                                  //   where a queued request's answer goes
    cd_rpc_msg *msg;              // the request; a handler that queues work
                                  // takes it (cd_request_new zeroes it)
    const msgpack_object *params; // the params map, or NULL when none given
    msgpack_packer *pk;           // packs the result value of a sync answer
    char err[256];                // reason when the handler fails
} cd_call;

// Handler results besides 0 (result packed in pk) and negative CD_E* codes:
// work was handed to the workers (cd_request_started); answered later.
#define CD_CALL_QUEUED CD_REQUEST_QUEUED

#endif // CD_DAEMON_CALL_H
