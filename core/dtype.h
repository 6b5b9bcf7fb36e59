#ifndef CD_CORE_DTYPE_H
#define CD_CORE_DTYPE_H

// Element types: the wire names the tensor codec (proto/tensor.h) uses and
// the runtime's input/output descriptions (runtime/runtime.h) share.

#include <stddef.h>

//   XX(ENUM, wire name, itemsize)
#define CD_DTYPE_MAP(XX) \
    XX(F32, "f32", 4)    \
    XX(F16, "f16", 2)    \
    XX(BF16, "bf16", 2)  \
    XX(F64, "f64", 8)    \
    XX(I8, "i8", 1)      \
    XX(U8, "u8", 1)      \
    XX(I16, "i16", 2)    \
    XX(I32, "i32", 4)    \
    XX(I64, "i64", 8)    \
    XX(BOOL, "bool", 1)

typedef enum {
    CD_DTYPE_INVALID = 0,
#define XX(e, name, size) CD_DTYPE_##e,
    CD_DTYPE_MAP(XX)
#undef XX
} cd_dtype;

// Size in bytes of one element (0 for CD_DTYPE_INVALID).
size_t cd_dtype_size(cd_dtype dt);
// Wire name ("f32"), or "invalid".
const char *cd_dtype_name(cd_dtype dt);
// Parses a wire name; CD_DTYPE_INVALID when unknown.
cd_dtype cd_dtype_from_name(const char *name, size_t len);

#endif // CD_CORE_DTYPE_H
