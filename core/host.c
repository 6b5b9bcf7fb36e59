// Facts of the host and its files (core/host.h).

#include "core/host.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cd_host_cpu_model(char *out, size_t n) {
    if (n) out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[512];
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *p = strchr(line, ':');
        if (!p) break;
        for (p++; *p == ' ' || *p == '\t'; p++)
            ;
        p[strcspn(p, "\n")] = '\0';
        if (*p) {
            snprintf(out, n, "%s", p);
            rc = 0;
        }
        break;
    }
    fclose(f);
    return rc;
}

char *cd_host_real_dir(const char *path, char *out) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    return realpath(dir, out);
}

void cd_json_write_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}
