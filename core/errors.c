#include "core/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *cd_strerror(int status) {
    switch (status) {
    case CD_OK: return "ok";
#define XX(name, num, msg) \
    case CD_E##name: return msg;
        CD_ERROR_MAP(XX)
#undef XX
    }
    return "unknown error";
}

const char *cd_err_name(int status) {
    switch (status) {
    case CD_OK: return "OK";
#define XX(name, num, msg) \
    case CD_E##name: return "E_" #name;
        CD_ERROR_MAP(XX)
#undef XX
    }
    return "E_UNKNOWN";
}

int cd_err_from_name(const char *name, size_t len) {
#define XX(n, num, msg) \
    if (len == sizeof("E_" #n) - 1 && memcmp(name, "E_" #n, len) == 0) return CD_E##n;
    CD_ERROR_MAP(XX)
#undef XX
    return CD_EINTERNAL;
}

int cd_errf(int code, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
