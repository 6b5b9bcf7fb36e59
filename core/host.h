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

// libgomp's wait between layers for convd's programs (the daemon,
// convd-run): unless the environment sets GOMP_SPINCOUNT or OMP_WAIT_POLICY,
// sets GOMP_SPINCOUNT=CD_GOMP_SPINCOUNT and re-executes the program once
// with argv (libgomp reads both when it is loaded, before main). A thread
// waiting at a barrier then polls ~40 us before it sleeps: a hot run pays no
// sleep and wake-up per layer, an idle process's threads sleep a moment
// after its last run (docs/OPERATIONS.md, "Compute threads", has the
// measurements). Returns only when no re-exec happened (it was not needed,
// or it failed: prog is named in a message on stderr then).
#define CD_GOMP_SPINCOUNT "1000"
void cd_host_omp_wait_policy(char **argv, const char *prog);

// Writes s as a JSON string (quoted, '"' '\\' and control characters
// escaped); NULL writes "".
void cd_json_write_str(FILE *f, const char *s);

#endif // CD_CORE_HOST_H
