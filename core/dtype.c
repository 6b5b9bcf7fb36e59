// Element types (see core/dtype.h).

#include "core/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_table[] = {[CD_DTYPE_INVALID] = {"invalid", 0},
#define XX(e, name, size) [CD_DTYPE_##e] = {name, size},
                   CD_DTYPE_MAP(XX)
#undef XX
};

#define NDTYPES (sizeof dtype_table / sizeof dtype_table[0])

size_t cd_dtype_size(cd_dtype dt) { return (unsigned)dt < NDTYPES ? dtype_table[dt].size : 0; }

const char *cd_dtype_name(cd_dtype dt) {
    return (unsigned)dt < NDTYPES && dt != CD_DTYPE_INVALID ? dtype_table[dt].name : "invalid";
}

cd_dtype cd_dtype_from_name(const char *name, size_t len) {
    for (size_t i = 1; i < NDTYPES; i++)
        if (strlen(dtype_table[i].name) == len && memcmp(dtype_table[i].name, name, len) == 0) return (cd_dtype)i;
    return CD_DTYPE_INVALID;
}
