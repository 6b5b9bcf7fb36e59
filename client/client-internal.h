#ifndef CD_CLIENT_INTERNAL_H
#define CD_CLIENT_INTERNAL_H

// Shared between the files of libconvd; not installed.

#include "client/convd.h"
#include "proto/rpc.h"

#include <msgpack.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/uio.h>

// Records status and a printf-style message as the calling thread's last
// error (convd_errmsg) and returns status.
int cd_client_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// A request under construction: the packed bytes, as a list of segments so
// that big tensor payloads are sent straight from the caller's memory
// (sendmsg) instead of being copied. Small writes are copied into an owned
// buffer; writes of at least CD_CLIENT_ZEROCOPY_MIN bytes are referenced, so the
// memory they came from must outlive the send.
#define CD_CLIENT_ZEROCOPY_MIN (64u << 10)

typedef struct {
    char *buf;       // owned copies of small writes
    size_t len, cap; // used / allocated bytes of buf
    struct cd_client_seg {
        int external;    // 1: ptr is caller memory; 0: off into buf
        const char *ptr; // external segments
        size_t off;      // owned segments: start in buf
        size_t len;      // bytes
    } * segs;
    size_t nsegs, segcap;
    size_t total; // bytes of the whole message
    int oom;      // a write failed to allocate
    int send_fd;  // >= 0: a descriptor sent with the first bytes (SCM_RIGHTS)
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
int cd_client_call(convd_conn *c, const char *method, cd_client_pack_fn pack, void *ud, int timeout_ms,
                   cd_rpc_msg *resp);
// cd_client_call that sends descriptor fd with the request (SCM_RIGHTS, with
// its first bytes; fd < 0: none), as region_register needs.
int cd_client_call_fd(convd_conn *c, const char *method, cd_client_pack_fn pack, void *ud, int fd, int timeout_ms,
                      cd_rpc_msg *resp);

// Completion of an asynchronous call, called exactly once on the
// connection's reader thread with no lock held. status 0: resp is the
// response (a success or an error object), owned by the callee (release with
// cd_rpc_msg_free, or pass it to cd_client_response_status). status < 0: the
// call failed locally (CD_ETIMEOUT, CD_ECLOSED, ...), resp is NULL and msg
// says why (also set as the reader thread's convd_errmsg).
typedef void (*cd_client_async_fn)(void *ud, int status, cd_rpc_msg *resp, const char *msg);

// Sends [0, msgid, method, [params]] and returns without waiting: 0 when the
// request was sent (fn will be called exactly once, possibly before this
// returns), or a negative status with the thread's message set and fn never
// called: CD_EPARAMS, CD_ENOMEM, CD_ECLOSED, CD_EOVERLOADED (in-flight limit
// in fail mode, or reached from the reader thread), CD_ETIMEOUT (no slot or
// no socket space before the deadline). timeout_ms bounds the whole call,
// as for cd_client_call.
int cd_client_call_async(convd_conn *c, const char *method, cd_client_pack_fn pack, void *ud, int timeout_ms,
                         cd_client_async_fn fn, void *fn_ud);

// 0 when resp is a success; otherwise frees resp and returns the error
// object's status with its message as the thread's convd_errmsg.
int cd_client_response_status(cd_rpc_msg *resp);

// 1 when the calling thread is c's reader thread (inside a completion).
int cd_client_on_reader(const convd_conn *c);
// c's reader thread (where its async completions run).
pthread_t cd_client_reader_thread(const convd_conn *c);

// Parameters of one inference request, checked by cd_client_infer_check.
typedef struct {
    const char *model;
    size_t n_inputs;
    const char *const *names;
    const convd_tensor *inputs;
    size_t n_outputs;
    const char *const *output_names;
    int timeout_ms;                   // > 0: sent as the request's deadline
    const convd_region_ref *in_refs;  // NULL, or n_inputs places (region NULL: inline)
    const convd_region_ref *out_refs; // NULL, or n_outputs places ('into')
} cd_client_infer_params;

// Validates the arguments of an inference (nothing is sent) and fills *ip.
// Returns 0 or CD_EPARAMS with the thread's message set.
// in_refs: NULL, or n_inputs places (an input in a region may have data NULL).
int cd_client_infer_check(convd_conn *c, const char *model, size_t n_inputs, const char *const *names,
                          const convd_tensor *inputs, const convd_region_ref *in_refs, size_t n_outputs,
                          const char *const *output_names, int timeout_ms, cd_client_infer_params *ip);
// cd_client_pack_fn for a cd_client_infer_params.
int cd_client_pack_infer(msgpack_packer *pk, void *ud);
// Copies the outputs of a successful infer response into *out and frees m.
// Returns 0, CD_EPROTOCOL (no outputs map, malformed tensor), CD_ENOMEM.
int cd_client_infer_outputs(cd_rpc_msg *m, convd_outputs **out);

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
