#ifndef CD_PROTO_RPC_H
#define CD_PROTO_RPC_H

// msgpack-RPC over a byte stream (the spec: request [0, msgid, method, params],
// response [1, msgid, error, result], notification [2, method, params]).
// convd's methods take a single map as the only element of params.
//
// The reader is streaming: feed it bytes as they arrive (messages may be split
// across reads, or several may share one read) and pull complete messages out.
// Every declared length (str, bin, array, map) and the nesting depth are
// checked against core/limits.h *before* anything is allocated for them, by a
// resumable pre-scan of the raw bytes; only a complete, in-limit message is
// handed to msgpack-c's unpacker.

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    CD_MSG_REQUEST = 0,
    CD_MSG_RESPONSE = 1,
    CD_MSG_NOTIFY = 2,
} cd_msg_kind;

// One decoded message. Objects point into memory owned by the message
// (zero-copy for str/bin: a tensor's data is a pointer into the received
// bytes), valid until cd_rpc_msg_free().
typedef struct {
    cd_msg_kind kind;
    uint32_t msgid;     // request/response only
    const char *method; // request/notify: not NUL-terminated (a str, or a
                        // bin: valid UTF-8 for a request; a notification's
                        // method is any str or bin, it is only ignored)
    size_t method_len;
    msgpack_object params;      // request/notify: the params array as sent
    msgpack_object error;       // response: nil on success
    msgpack_object result;      // response
    msgpack_unpacked unpacked_; // private: owns the object tree
    const char *bytes_;         // private: the message's first byte
    char *alloc_;               // private: owns the raw bytes (bytes_ is in it)
    size_t nbytes;              // size of the encoded message
} cd_rpc_msg;

typedef struct cd_rpc_reader cd_rpc_reader;

// Creates a reader that refuses any single message larger than max_message
// bytes. Returns 0, or CD_ENOMEM.
int cd_rpc_reader_init(cd_rpc_reader **out, size_t max_message);
void cd_rpc_reader_free(cd_rpc_reader *r);

// Appends bytes received from the stream. Returns 0, CD_ENOMEM, or
// CD_ETOO_LARGE when the bytes buffered for the current message would exceed
// max_message (nothing is buffered then).
int cd_rpc_reader_feed(cd_rpc_reader *r, const char *buf, size_t len);

// Reading in place, for the rest of a big message: when the reader holds
// part of one message whose headers declared more bytes than it holds, and
// it has room for them, returns how many are still to come (> 0) with *at
// where they go; a read of at most that many bytes into *at is then given
// to cd_rpc_reader_feed_in_place (which returns what cd_rpc_reader_feed
// would). Otherwise returns 0 (*at NULL): read into a buffer of your own and
// cd_rpc_reader_feed it. *at is valid until the next call on r.
size_t cd_rpc_reader_space(cd_rpc_reader *r, char **at);
int cd_rpc_reader_feed_in_place(cd_rpc_reader *r, size_t len);

// Bytes buffered but not yet returned as messages.
size_t cd_rpc_reader_buffered(const cd_rpc_reader *r);

// Bytes the reader holds, or has committed to hold, for what it has not
// returned yet: the buffered bytes, or more when the message being received
// has declared (in a str/bin/ext header already read) a size beyond them.
// A memory budget charges this: a message's size is known from its headers
// long before its payload arrives.
size_t cd_rpc_reader_committed(const cd_rpc_reader *r);

// True when the reader holds part of one message and nothing else: the
// message at the front is incomplete (so every buffered byte belongs to it).
// Valid after cd_rpc_reader_feed, or after cd_rpc_reader_next returned 0.
bool cd_rpc_reader_partial(const cd_rpc_reader *r);

// Gives up the incomplete message being received (cd_rpc_reader_partial must
// be true): its buffered bytes are freed now and the rest of it is dropped as
// it arrives, keeping only its headers, which are still checked against the
// limits. Once it has passed whole, cd_rpc_reader_next returns CD_RPC_SKIPPED
// for it, and the messages after it are read as usual: the stream stays in
// sync, so the caller can refuse the message (E_OVERLOADED) and keep the
// connection.
void cd_rpc_reader_skip(cd_rpc_reader *r);

// cd_rpc_reader_next's result for a message given up with cd_rpc_reader_skip.
#define CD_RPC_SKIPPED 2

// Takes the next complete message.
//   1: *msg is filled; release it with cd_rpc_msg_free().
//   0: need more bytes.
//   CD_RPC_SKIPPED: a skipped message has passed; nothing to free. msg->kind
//      is what its first element said (CD_MSG_REQUEST when it was not 0..2)
//      and *msgid_out its msgid when it was a request whose msgid could be
//      read (else UINT32_MAX).
//  <0: CD_EPROTOCOL (not msgpack, or not a msgpack-RPC message) or
//      CD_ETOO_LARGE (a declared size or depth is over a limit). err gets a
//      readable reason. The stream cannot be resynchronised after an error:
//      the caller answers and closes the connection.
// When a request is well-formed msgpack but has a bad envelope (e.g. msgid
// not an integer), the msgid is still reported in *msgid_out when known
// (else UINT32_MAX) so the error can be addressed to it.
int cd_rpc_reader_next(cd_rpc_reader *r, cd_rpc_msg *msg, uint32_t *msgid_out, char *err, size_t errlen);

void cd_rpc_msg_free(cd_rpc_msg *msg);

// The single params map of a request, or NULL when params is not [map] (an
// empty params array or [nil] also yields NULL: methods without params accept
// that).
const msgpack_object *cd_rpc_params_map(const cd_rpc_msg *msg);

// ---- packing (all return 0 or CD_ENOMEM) -----------------------------------

// [0, msgid, method, [ ...caller packs exactly one params value... ]]
int cd_rpc_pack_request_begin(msgpack_packer *pk, uint32_t msgid, const char *method);
// [1, msgid, nil, ...caller packs the result value...]
int cd_rpc_pack_response_ok_begin(msgpack_packer *pk, uint32_t msgid);
// [1, msgid, {code: "E_...", message: "..."}, nil]
int cd_rpc_pack_response_error(msgpack_packer *pk, uint32_t msgid, int status, const char *message);
// [2, method, [ ...caller packs exactly one params value... ]]
int cd_rpc_pack_notify_begin(msgpack_packer *pk, const char *method);

// Packs a NUL-terminated string / a key-value string pair.
int cd_pack_str(msgpack_packer *pk, const char *s);
int cd_pack_kv_str(msgpack_packer *pk, const char *key, const char *val);

// Parses an error object {code, message} of a response. Returns the status
// (negative) and copies the message into msg (may be NULL).
int cd_rpc_error_decode(const msgpack_object *err, char *msg, size_t msglen);

#endif // CD_PROTO_RPC_H
