#ifndef CD_CORE_ERRORS_H
#define CD_CORE_ERRORS_H

#include <stddef.h>

// The one table of convd error codes. Daemon, client, runtime and tools all use
// it. Functions return 0 on success or a negative CD_E* value. The numbers and
// the wire names ("E_SHAPE") are stable: never renumber, only append.
// Documented in docs/PROTOCOL.md.
//
//   XX(NAME, number, default message)
#define CD_ERROR_MAP(XX)                                       \
    XX(PROTOCOL, 1, "malformed msgpack-RPC message")           \
    XX(METHOD, 2, "unknown method")                            \
    XX(PARAMS, 3, "invalid parameters")                        \
    XX(NOT_FOUND, 4, "no such model")                          \
    XX(SHAPE, 5, "tensor shape does not match")                \
    XX(DTYPE, 6, "unsupported or mismatched dtype")            \
    XX(OVERLOADED, 7, "server overloaded, retry later")        \
    XX(TIMEOUT, 8, "deadline expired")                         \
    XX(INTERNAL, 9, "internal error")                          \
    XX(TOO_LARGE, 10, "message or value exceeds a limit")      \
    XX(MODEL, 11, "model file is invalid")                     \
    XX(UNSUPPORTED, 12, "operator or attribute not supported") \
    XX(EXISTS, 13, "already exists")                           \
    XX(SHUTDOWN, 14, "server is shutting down")                \
    XX(NOMEM, 15, "out of memory")                             \
    XX(IO, 16, "input/output error")                           \
    XX(DEVICE, 17, "device error")                             \
    XX(CANCELLED, 18, "request cancelled")                     \
    XX(CONNECT, 19, "cannot connect to the daemon")            \
    XX(CLOSED, 20, "connection closed")                        \
    XX(BUSY, 21, "resource busy")                              \
    XX(ACCESS, 22, "access denied")                            \
    XX(PERMISSION, 23, "not permitted for this peer")          \
    XX(REGION, 24, "shared-memory region refused")

typedef enum {
    CD_OK = 0,
#define XX(name, num, msg) CD_E##name = -(num),
    CD_ERROR_MAP(XX)
#undef XX
} cd_status;

// Human-readable default message for a status ("ok" for 0, "unknown error"
// for values outside the table).
const char *cd_strerror(int status);

// Stable wire name of a status: "E_SHAPE" for CD_ESHAPE, "OK" for 0,
// "E_UNKNOWN" outside the table.
const char *cd_err_name(int status);

// Inverse of cd_err_name: the status for a wire name, or CD_EINTERNAL when the
// name is unknown (a newer server may send codes this build does not know).
int cd_err_from_name(const char *name, size_t len);

// Formats a reason into err (when err is not NULL and errlen > 0) and returns
// code, so that a failing check reads `return cd_errf(CD_ESHAPE, err, ...)`.
// The one such helper for every layer (proto, runtime, tools).
int cd_errf(int code, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif // CD_CORE_ERRORS_H
