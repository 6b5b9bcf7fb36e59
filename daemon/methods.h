#ifndef CD_DAEMON_METHODS_H
#define CD_DAEMON_METHODS_H

// The RPC methods (contract in docs/PROTOCOL.md, "## Methods"). One table
// maps names to handlers; the dispatcher checks the params envelope, counts
// the request, and either answers at once (cheap methods, on the loop) or
// hands a cd_request to the worker pool (anything that computes).

#include "daemon/call.h"
#include "daemon/request.h"
#include "proto/rpc.h"

#include <msgpack.h>
#include <stddef.h>

// The dispatcher the server hands its connections (a cd_request_dispatch_fn;
// ud is the cd_server): handles one decoded request message from `from`,
// taking ownership of *msg; returns 0 with the result value packed in
// `result`, a negative CD_E* code with err, or CD_REQUEST_QUEUED.
int cd_methods_dispatch(void *ud, cd_request_origin *from, cd_rpc_msg *msg, msgpack_sbuffer *result, char *err,
                        size_t errlen);

#endif // CD_DAEMON_METHODS_H
