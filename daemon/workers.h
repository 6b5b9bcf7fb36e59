#ifndef CD_DAEMON_WORKERS_H
#define CD_DAEMON_WORKERS_H

// The worker pool: N threads take requests from one FIFO queue, run their
// `work` function, and post them back to the event loop through uv_async_send.
// The loop then calls the completion callback for each, in completion order.
// Only the loop thread calls these functions.

#include "daemon/request.h"

#include <stddef.h>
#include <uv.h>

typedef struct cd_workers cd_workers;

// Called on the loop thread for every finished (or cancelled) request.
typedef void (*cd_complete_fn)(cd_request *req, void *ud);

// Starts n threads. Returns 0, CD_ENOMEM or CD_EINTERNAL.
int cd_workers_init(cd_workers **out, uv_loop_t *loop, int n,
                    cd_complete_fn complete, void *ud);
// Queues req. Never blocks and never fails.
void cd_workers_submit(cd_workers *w, cd_request *req);
// Requests queued or running.
size_t cd_workers_busy(const cd_workers *w);
// Number of worker threads.
int cd_workers_count(const cd_workers *w);
// Finishes the queue, joins the threads, delivers the last completions and
// closes the async handle; w is freed in its close callback.
void cd_workers_stop(cd_workers *w);

#endif // CD_DAEMON_WORKERS_H
