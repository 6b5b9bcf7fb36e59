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
int cd_param_str(const msgpack_object *map, const char *key, char *buf, size_t buflen, char *err, size_t errlen);
int cd_param_int(const msgpack_object *map, const char *key, int64_t min, int64_t max, int64_t *out, char *err,
                 size_t errlen);
int cd_param_bool(const msgpack_object *map, const char *key, bool *out, char *err, size_t errlen);

// True when the msgpack text (see cd_obj_text) equals the NUL-terminated s.
bool cd_obj_streq(const msgpack_object *o, const char *s);

// ---- text on the wire ---------------------------------------------------------
//
// Wherever convd expects a str (method names, param keys and values, model,
// tensor and dtype names), a bin holding valid UTF-8 is taken as that str:
// some msgpack-RPC client libraries send every byte string as bin. A bin that
// is not valid UTF-8 is not text (binary data such as tensor payloads stays
// bin). A str is taken as sent (its bytes are not validated); names echoed in
// error messages are escaped (cd_sanitize), so replies stay valid UTF-8.

// True when s[0..n) is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool cd_utf8_valid(const char *s, size_t n);

// When o is a str, or a bin that is valid UTF-8, sets *s/*n to its bytes and
// returns true; otherwise false (o may be NULL).
bool cd_obj_text(const msgpack_object *o, const char **s, size_t *n);

// Copies n bytes of untrusted text into dst (NUL-terminated, at most dstlen-1
// bytes) with every byte outside printable ASCII, and the backslash, written
// as \xNN, so a name from the wire can go into a message or a log line (the
// result is ASCII, hence valid UTF-8). When it does not fit, the copy ends
// with "...". Returns dst.
char *cd_sanitize(char *dst, size_t dstlen, const char *src, size_t n);

#endif // CD_PROTO_PARAMS_H
