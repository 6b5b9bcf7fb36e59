#ifndef CD_CLIENT_INTERNAL_H
#define CD_CLIENT_INTERNAL_H

// Shared between the files of libconvd; not installed.

#include "client/convd.h"
#include "proto/rpc.h"

#include <msgpack.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/uio.h>

// Records status and a printf-style message as the calling thread's last
// error (convd_errmsg) and returns status.
int cd_client_fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// A request under construction: the packed bytes, as a list of segments so
// that big tensor payloads are sent straight from the caller's memory
// (sendmsg) instead of being copied. Small writes are copied into an owned
// buffer; writes of at least CD_CLIENT_ZEROCOPY_MIN bytes are referenced, so the
// memory they came from must outlive the send.
#define CD_CLIENT_ZEROCOPY_MIN (64u << 10)

typedef struct {
    char *buf;          // owned copies of small writes
    size_t len, cap;    // used / allocated bytes of buf
    struct cd_client_seg {
        int external;       // 1: ptr is caller memory; 0: off into buf
        const char *ptr;    // external segments
        size_t off;         // owned segments: start in buf
        size_t len;         // bytes
    } *segs;
    size_t nsegs, segcap;
    size_t total;       // bytes of the whole message
    int oom;            // a write failed to allocate
} cd_client_reqbuf;

void cd_client_reqbuf_init(cd_client_reqbuf *rb);
void cd_client_reqbuf_free(cd_client_reqbuf *rb);
// msgpack_packer write callback for a cd_client_reqbuf (data = the cd_client_reqbuf).
int cd_client_reqbuf_write(void *data, const char *buf, size_t len);

// Packs params for a call: the callback packs exactly one value (the params
// map), the only element of the params array. NULL sends an empty map.
typedef int (*cd_client_pack_fn)(msgpack_packer *pk, void *ud);

// Sends [0, msgid, method, [params]] and waits for the answer.
// Returns 0 with *resp filled (a success response; release with
// cd_rpc_msg_free), or a negative status with the thread's message set: the
// daemon's error code, CONVD_ETIMEOUT, CONVD_ECLOSED, CONVD_EPROTOCOL,
// CONVD_ENOMEM, CONVD_EPARAMS (method name too long).
int cd_client_call(convd_conn *c, const char *method, cd_client_pack_fn pack, void *ud,
                   int timeout_ms, cd_rpc_msg *resp);

// The connection's default timeout when timeout_ms is CONVD_TIMEOUT_DEFAULT.
int cd_client_timeout(const convd_conn *c, int timeout_ms);

// Small msgpack helpers over decoded objects.
const msgpack_object *cd_client_get(const msgpack_object *map, const char *key);
// Copies a str into buf (truncating, NUL-terminated); 0, or -1 when o is not
// a str.
int cd_client_strcpy(char *buf, size_t buflen, const msgpack_object *o);
// A malloc'd NUL-terminated copy of a str (NULL when not a str or on OOM;
// *oom set on allocation failure).
char *cd_client_strdup(const msgpack_object *o, int *oom);
// Integer value of an int (or integral float); def when absent/other.
int64_t cd_client_int(const msgpack_object *o, int64_t def);
double cd_client_num(const msgpack_object *o, double def);

// Parses one tensor description {name, dtype, shape} of the models method.
int cd_client_tensor_info_decode(const msgpack_object *o, convd_tensor_info *ti);

// Parses a model entry of the models/load methods into *mi (owned strings).
int cd_client_model_info_decode(const msgpack_object *o, convd_model_info *mi);

#endif // CD_CLIENT_INTERNAL_H
