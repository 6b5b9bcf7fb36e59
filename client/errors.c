// libconvd statuses, messages and dtypes: the public CONVD_* numbers are
// checked against the project's tables at compile time.

#include "client/client-internal.h"
#include "core/errors.h"
#include "proto/tensor.h"

#include <stdio.h>
#include <string.h>

#define XX(name, num, msg) _Static_assert((int)CONVD_E##name == (int)CD_E##name, "CONVD_E" #name " differs");
CD_ERROR_MAP(XX)
#undef XX
#define XX(name, num) _Static_assert((int)CONVD_E##name == (int)CD_E##name, "CONVD_E" #name " differs");
CONVD_ERROR_MAP(XX)
#undef XX
#define XX(e, name, size) _Static_assert((int)CONVD_DTYPE_##e == (int)CD_DTYPE_##e, "dtype " #e);
CD_DTYPE_MAP(XX)
#undef XX
_Static_assert(CONVD_MAX_RANK == CD_MAX_RANK, "max rank differs");

// The calling thread's last error message.
static _Thread_local char tl_errmsg[1024];

int cd_client_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_errmsg, sizeof tl_errmsg, fmt, ap);
    va_end(ap);
    return status;
}

const char *convd_errmsg(const convd_conn *conn) {
    (void)conn;
    return tl_errmsg;
}

const char *convd_errname(int status) { return cd_err_name(status); }
const char *convd_strerror(int status) { return cd_strerror(status); }

size_t convd_dtype_size(convd_dtype dt) { return cd_dtype_size((cd_dtype)dt); }
const char *convd_dtype_name(convd_dtype dt) { return cd_dtype_name((cd_dtype)dt); }
convd_dtype convd_dtype_from_name(const char *name) {
    return name ? (convd_dtype)cd_dtype_from_name(name, strlen(name)) : CONVD_DTYPE_INVALID;
}
