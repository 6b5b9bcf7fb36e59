#ifndef CD_PROTO_DESCRIBE_H
#define CD_PROTO_DESCRIBE_H

// Private to proto/: helpers that turn bad input into readable reasons.

#include "core/errors.h"
#include "proto/params.h" // cd_sanitize

#include <msgpack.h>
#include <stddef.h>

// Short type name of a decoded object for error messages: "nil", "bool",
// "int", "float", "str", "bin", "array", "map", "ext".
const char *cd_obj_type_name(const msgpack_object *o);

#endif // CD_PROTO_DESCRIBE_H
