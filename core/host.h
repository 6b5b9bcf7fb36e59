#ifndef CD_CORE_HOST_H
#define CD_CORE_HOST_H

// Facts of the host and its files that several layers read (core/host.c).

#include <stddef.h>
#include <stdio.h>

// Copies the CPU's "model name" from /proc/cpuinfo into out (trimmed, one
// line). Returns 0, or -1 when there is none (out is then "").
int cd_host_cpu_model(char *out, size_t n);

// The build's flavour, appended to the CPU in the keys of the timing caches
// (runtime/planner.c, backends/cpu/winograd-cache.c): a sanitizer build runs
// 10-100x slower, and the rates it measured, read by a release build sharing
// the cache folder, planned ResNet-50 u90 under the AVX2 cap at 2 threads on
// oneDNN's dense convs instead of the sparse ones (53 against 21 ms).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CD_HOST_BUILD_FLAVOR " san"
#else
#define CD_HOST_BUILD_FLAVOR ""
#endif

// The canonical folder of the file `path`: realpath() of its directory part
// ("." when it has none) into out, which holds PATH_MAX bytes. Returns out,
// or NULL when the folder cannot be resolved.
char *cd_host_real_dir(const char *path, char *out);

// Writes s as a JSON string (quoted, '"' '\\' and control characters
// escaped); NULL writes "".
void cd_json_write_str(FILE *f, const char *s);

#endif // CD_CORE_HOST_H
