#ifndef CD_DAEMON_LOG_H
#define CD_DAEMON_LOG_H

// Logging for convd: one line per event on stderr,
//   2026-11-22T01:02:03.456Z info  listening on /run/convd/convd.sock
// (UTC time with milliseconds, level padded to five columns, message).
// Each line is written with a single write(2), so lines from worker threads
// never interleave. Control characters in the message are escaped so one
// event is always one line, whatever a client sent.

#include <stdarg.h>

typedef enum {
    CD_LOG_DEBUG = 0,
    CD_LOG_INFO = 1,
    CD_LOG_WARN = 2,
    CD_LOG_ERROR = 3,
} cd_log_level;

// Sets the lowest level that is written (default CD_LOG_INFO).
void cd_log_set_level(cd_log_level level);
cd_log_level cd_log_get_level(void);

// Parses "debug"|"info"|"warn"|"error". Returns 0, or -1 when unknown.
int cd_log_level_parse(const char *name, cd_log_level *out);
const char *cd_log_level_name(cd_log_level level);

// Writes one event line when level is enabled.
void cd_log(cd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cd_logv(cd_log_level level, const char *fmt, va_list ap);

// Formats up to max bytes of buf as lowercase hex pairs separated by spaces
// into out (NUL-terminated, truncated to outlen). Used for the sample of
// offending bytes in protocol-error lines.
void cd_log_hex(char *out, unsigned long outlen, const void *buf, unsigned long len, unsigned long max);

#define CD_DEBUG(...) cd_log(CD_LOG_DEBUG, __VA_ARGS__)
#define CD_INFO(...) cd_log(CD_LOG_INFO, __VA_ARGS__)
#define CD_WARN(...) cd_log(CD_LOG_WARN, __VA_ARGS__)
#define CD_ERROR(...) cd_log(CD_LOG_ERROR, __VA_ARGS__)

#endif // CD_DAEMON_LOG_H
