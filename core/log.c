// Library logging (core/log.h): one callback, stderr by default.
#include "core/log.h"

#include <stdio.h>

static cd_rt_log_fn g_fn;
static void *g_ud;

void cd_rt_log_set(cd_rt_log_fn fn, void *ud) {
    g_ud = ud;
    g_fn = fn;
}

void cd_rt_logv(int level, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (g_fn)
        g_fn(level, msg, g_ud);
    else
        fprintf(stderr, "%s\n", msg); // one call: lines of threads do not interleave
}

void cd_rt_log(int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cd_rt_logv(level, fmt, ap);
    va_end(ap);
}
