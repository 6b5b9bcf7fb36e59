#ifndef CD_CORE_LOG_H
#define CD_CORE_LOG_H

// The one way the libraries (runtime/, backends/, kernels/, sparse/) report anything:
// cd_rt_log formats one message and hands it to the callback the host set
// (cd_rt_log_set; the daemon routes it to its log, daemon/log.c). With no
// callback set -- the tools, the tests -- the message goes to stderr as one
// line. No library code writes to stderr itself.

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

// Levels, numbered like the daemon's cd_log_level.
typedef enum {
    CD_RT_LOG_DEBUG = 0,
    CD_RT_LOG_INFO = 1,
    CD_RT_LOG_WARN = 2,
    CD_RT_LOG_ERROR = 3,
} cd_rt_log_level;

// Receives one message (no trailing newline) at a level. May be called from
// any thread, concurrently: it must be thread-safe.
typedef void (*cd_rt_log_fn)(int level, const char *msg, void *ud);

// Sets the callback (NULL: stderr, the default). Set it once at start-up,
// before any other thread may log.
void cd_rt_log_set(cd_rt_log_fn fn, void *ud);

// Formats a message (at most 1 KiB is kept) and delivers it.
void cd_rt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cd_rt_logv(int level, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif

#endif // CD_CORE_LOG_H
