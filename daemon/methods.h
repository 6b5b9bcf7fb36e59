#ifndef CD_DAEMON_METHODS_H
#define CD_DAEMON_METHODS_H

// The RPC methods (contract in docs/PROTOCOL.md, "## Methods"). One table
// maps names to handlers; the dispatcher checks the params envelope, counts
// the request, and either answers at once (cheap methods, on the loop) or
// hands a cd_request to the worker pool (anything that computes).

#include "proto/rpc.h"

#include <msgpack.h>
#include <stdint.h>

typedef struct cd_conn cd_conn;
typedef struct cd_server cd_server;

// What a handler gets.
typedef struct {
    cd_server *srv;               // the server
    cd_conn *conn;                // where the answer goes
    cd_rpc_msg *msg;              // the request; a handler that queues work
                                  // takes it (cd_request_new zeroes it)
    const msgpack_object *params; // the params map, or NULL when none given
    msgpack_packer *pk;           // packs the result value of a sync answer
    char err[256];                // reason when the handler fails
} cd_call;

// Handler results besides 0 (result packed in pk) and negative CD_E* codes.
#define CD_CALL_QUEUED 1 // work was handed to the workers; answered later

// Handles one decoded request message; takes ownership of *msg.
void cd_methods_dispatch(cd_conn *c, cd_rpc_msg *msg);

#endif // CD_DAEMON_METHODS_H
