#ifndef CD_PROTO_PARAMS_H
#define CD_PROTO_PARAMS_H

// Typed access to a request's params map. Getters return 0 when the key is
// present with the right type, 1 when the key is absent (the caller keeps its
// default), and CD_EPARAMS with a readable reason when it has the wrong type
// or is out of range.

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The value stored under key in map, or NULL.
const msgpack_object *cd_map_get(const msgpack_object *map, const char *key);

// Copies a str value into buf (NUL-terminated). Strings longer than buflen-1
// or containing NUL bytes are rejected.
int cd_param_str(const msgpack_object *map, const char *key, char *buf,
                 size_t buflen, char *err, size_t errlen);
int cd_param_int(const msgpack_object *map, const char *key, int64_t min,
                 int64_t max, int64_t *out, char *err, size_t errlen);
int cd_param_bool(const msgpack_object *map, const char *key, bool *out,
                  char *err, size_t errlen);

// True when the msgpack str equals the NUL-terminated s.
bool cd_obj_streq(const msgpack_object *o, const char *s);

#endif // CD_PROTO_PARAMS_H
