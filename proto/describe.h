#ifndef CD_PROTO_DESCRIBE_H
#define CD_PROTO_DESCRIBE_H

// Private to proto/: helpers that turn bad input into readable reasons.

#include "proto/errors.h"

#include <msgpack.h>
#include <stddef.h>

// Short type name of a decoded object for error messages: "nil", "bool",
// "int", "float", "str", "bin", "array", "map", "ext".
const char *cd_obj_type_name(const msgpack_object *o);

// Copies n bytes of untrusted text into dst (NUL-terminated, at most dstlen-1
// bytes) with every byte outside printable ASCII, and the backslash, written
// as \xNN, so a name from the wire can go into a message or a log line. When
// it does not fit, the copy ends with "...". Returns dst.
char *cd_sanitize(char *dst, size_t dstlen, const char *src, size_t n);

#endif // CD_PROTO_DESCRIBE_H
