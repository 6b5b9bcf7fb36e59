#ifndef CD_DAEMON_CONN_INTERNAL_H
#define CD_DAEMON_CONN_INTERNAL_H

// What the two halves of a connection share: conn.c (accept, read, handle,
// the loop's writes, the states) and conn-respond.c (a request's way back
// from a worker). Their contracts are above their definitions in conn.c.
// Internal to daemon/.

#include "daemon/conn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

// What cd_conn_send did with the bytes it was given.
typedef enum {
    CONN_SENT,   // all written to the socket
    CONN_QUEUE,  // the unwritten tail is now the loop's to uv_write (counted in
                 // wowned), before anything else; a worker's tail also counts in
                 // whandoffs until the loop queues it
    CONN_HOLD,   // nothing written or counted: other bytes must go first
    CONN_CLOSED, // the connection takes no more bytes: dropped
    CONN_FAILED, // write(2) failed (peer gone): no more bytes; the loop drops it
} conn_send_result;

// Appends [1, msgid, nil, result] where `result` is one packed msgpack value.
void cd_conn_reply_ok(cd_conn *c, uint32_t msgid, const char *result, size_t len);
// Appends [1, msgid, {code, message}, nil] and counts the error in stats.
// message may be NULL (the table's default message).
void cd_conn_reply_error(cd_conn *c, uint32_t msgid, int status, const char *message);
// Drops the connection (see CD_CONN_DEAD).
void cd_conn_kill(cd_conn *c);
// Adds c to the hub's backlog and starts the idle handle.
void cd_conn_backlog_add(cd_conn *c);

bool cd_conn_can_handle(const cd_conn *c);
void cd_conn_update_reading(cd_conn *c);
conn_send_result cd_conn_send(cd_conn *c, const char *data, size_t len, bool worker, size_t *written);
// cd_conn_send of iov[0..niov) (len bytes together; iov is advanced in place).
conn_send_result cd_conn_sendv(cd_conn *c, struct iovec *iov, int niov, size_t len, bool worker, size_t *written);
int cd_conn_queue_write(cd_conn *c, char *data, size_t off, size_t len);
// Loop thread: cd_conn_queue_write of req->reply from byte off on (those
// bytes counted in wowned); takes req, which owns the memory the reply points
// into, and frees it once written (or dropped). Returns 0 or -1 (dropped).
int cd_conn_queue_reply(cd_conn *c, cd_request *req, size_t off);
void cd_conn_check(cd_conn *c);
void cd_conn_flush(cd_conn *c);
bool cd_conn_writable(const cd_conn *c);

#endif // CD_DAEMON_CONN_INTERNAL_H
