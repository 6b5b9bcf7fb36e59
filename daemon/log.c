#include "daemon/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int log_level = CD_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void cd_log_set_level(cd_log_level level) { atomic_store(&log_level, (int)level); }

cd_log_level cd_log_get_level(void) { return (cd_log_level)atomic_load(&log_level); }

int cd_log_level_parse(const char *name, cd_log_level *out) {
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (cd_log_level)i;
            return 0;
        }
    }
    return -1;
}

const char *cd_log_level_name(cd_log_level level) {
    if ((int)level < 0 || (int)level > 3) return "?";
    return level_names[level];
}

void cd_logv(cd_log_level level, const char *fmt, va_list ap) {
    if ((int)level < atomic_load(&log_level)) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);

    char line[1024];
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, cd_log_level_name(level));
    char msg[768];
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    if (m < 0) m = 0;
    if ((size_t)m >= sizeof msg) m = (int)sizeof msg - 1;
    // Escape control bytes so that one event stays one line.
    size_t pos = (size_t)n;
    for (int i = 0; i < m && pos + 5 < sizeof line; i++) {
        unsigned char ch = (unsigned char)msg[i];
        if (ch < 0x20 || ch == 0x7f) {
            pos += (size_t)snprintf(line + pos, sizeof line - pos, "\\x%02x", ch);
        } else {
            line[pos++] = (char)ch;
        }
    }
    line[pos++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, pos);
    (void)w;
}

void cd_log(cd_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cd_logv(level, fmt, ap);
    va_end(ap);
}

void cd_log_hex(char *out, unsigned long outlen, const void *buf, unsigned long len, unsigned long max) {
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = buf;
    unsigned long pos = 0;
    if (outlen == 0) return;
    for (unsigned long i = 0; i < len && i < max; i++) {
        if (pos + 4 > outlen) break;
        if (i > 0) out[pos++] = ' ';
        out[pos++] = digits[p[i] >> 4];
        out[pos++] = digits[p[i] & 15];
    }
    out[pos] = '\0';
}
