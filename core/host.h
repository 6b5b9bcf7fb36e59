#ifndef CD_CORE_HOST_H
#define CD_CORE_HOST_H

// Facts of the host and its files that several layers read (core/host.c).

#include <stddef.h>
#include <stdio.h>

// Copies the CPU's "model name" from /proc/cpuinfo into out (trimmed, one
// line). Returns 0, or -1 when there is none (out is then "").
int cd_host_cpu_model(char *out, size_t n);

// The canonical folder of the file `path`: realpath() of its directory part
// ("." when it has none) into out, which holds PATH_MAX bytes. Returns out,
// or NULL when the folder cannot be resolved.
char *cd_host_real_dir(const char *path, char *out);

// Writes s as a JSON string (quoted, '"' '\\' and control characters
// escaped); NULL writes "".
void cd_json_write_str(FILE *f, const char *s);

#endif // CD_CORE_HOST_H
