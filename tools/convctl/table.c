// convctl's human output: aligned tables and number formats.

#include "tools/convctl/convctl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_table_init(ctl_table *t, int ncols, const char **heads, const bool *numeric) {
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    t->heads = heads;
    t->numeric = numeric;
}

void ctl_table_add_row(ctl_table *t, const char *const *cells) {
    if (t->rows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, cap * (size_t)t->ncols * sizeof *c);
        if (!c) {
            fprintf(stderr, "convctl: out of memory\n");
            exit(CTL_EXIT_FAIL);
        }
        t->cells = c;
        t->cap = cap;
    }
    for (int i = 0; i < t->ncols; i++) {
        char *d = strdup(cells[i] ? cells[i] : "");
        if (!d) {
            fprintf(stderr, "convctl: out of memory\n");
            exit(CTL_EXIT_FAIL);
        }
        t->cells[t->rows * (size_t)t->ncols + (size_t)i] = d;
    }
    t->rows++;
}

void ctl_table_add(ctl_table *t, ...) {
    const char *cells[32];
    va_list ap;
    va_start(ap, t);
    for (int i = 0; i < t->ncols && i < 32; i++) cells[i] = va_arg(ap, const char *);
    va_end(ap);
    ctl_table_add_row(t, cells);
}

void ctl_table_print(const ctl_table *t, int indent) {
    size_t w[32] = {0};
    int nc = t->ncols < 32 ? t->ncols : 32;
    for (int c = 0; c < nc; c++) {
        w[c] = strlen(t->heads[c]);
        for (size_t r = 0; r < t->rows; r++) {
            size_t l = strlen(t->cells[r * (size_t)t->ncols + (size_t)c]);
            if (l > w[c]) w[c] = l;
        }
    }
    for (size_t r = 0; r <= t->rows; r++) {
        printf("%*s", indent, "");
        for (int c = 0; c < nc; c++) {
            const char *s = r == 0 ? t->heads[c] : t->cells[(r - 1) * (size_t)t->ncols + (size_t)c];
            bool last = c == nc - 1;
            if (t->numeric && t->numeric[c])
                printf("%*s", (int)w[c], s);
            else if (last)
                printf("%s", s);
            else
                printf("%-*s", (int)w[c], s);
            if (!last) printf("  ");
        }
        printf("\n");
    }
}

void ctl_table_free(ctl_table *t) {
    for (size_t i = 0; i < t->rows * (size_t)t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

const char *ctl_fmt_bytes(char *buf, size_t len, double b) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f B", b);
    else
        snprintf(buf, len, "%.*f %s", b < 10 ? 2 : b < 100 ? 1 : 0, b, units[u]);
    return buf;
}

const char *ctl_fmt_count(char *buf, size_t len, double n) {
    static const char *units[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (n >= 1000 && u < 4) {
        n /= 1000;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f", n);
    else
        snprintf(buf, len, "%.*f%s", n < 10 ? 2 : n < 100 ? 1 : 0, n, units[u]);
    return buf;
}

const char *ctl_fmt_duration(char *buf, size_t len, double s) {
    long t = (long)s;
    if (t < 60)
        snprintf(buf, len, "%.1fs", s);
    else if (t < 3600)
        snprintf(buf, len, "%ldm %02lds", t / 60, t % 60);
    else if (t < 86400)
        snprintf(buf, len, "%ldh %02ldm %02lds", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ldd %02ldh %02ldm", t / 86400, t / 3600 % 24, t / 60 % 60);
    return buf;
}

const char *ctl_fmt_shape(char *buf, size_t len, int rank, const int64_t *shape) {
    size_t pos = 0;
    pos += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && pos < len; i++) {
        if (shape[i] < 0)
            pos += (size_t)snprintf(buf + pos, len - pos, "%sN", i ? ", " : "");
        else
            pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", i ? ", " : "", (long long)shape[i]);
    }
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}
