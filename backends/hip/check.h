#ifndef CD_BACKENDS_HIP_CHECK_H
#define CD_BACKENDS_HIP_CHECK_H

// The boundary between HIP status codes and convd's: every HIP call in
// backends/hip/ and backends/hip/sparse/ goes through CD_HIP_CHECK, which on failure
// logs the call, file:line and the status name, and makes the enclosing
// function return the matching CD_E* code (hipErrorOutOfMemory -> CD_ENOMEM,
// anything else -> CD_EDEVICE). Nothing aborts.

#include "backends/hip/vendor-host.h"
#include "core/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

// Logs "hip: <call> failed at <file>:<line>: <name> (<description>)" on
// the log (core/log.h) and returns the CD_E* code for e.
int cd_hip_fail(const char *call, const char *file, int line, hipError_t e);

// The CD_E* code for a HIP status (0 for hipSuccess), without logging.
int cd_hip_status(hipError_t e);

// For calls into libraries that launch kernels without checking the launch
// (rocSPARSE 5.3): takes this thread's last HIP error (hipGetLastError) and,
// when there is one, logs "hip: <call> (its kernel launch) failed at
// <file>:<line>: <name>" and returns its CD_E* code; else 0. Our own
// launchers check every launch, so an error found here is the library's.
int cd_hip_check_launch(const char *call, const char *file, int line);

#ifdef __cplusplus
}
#endif

#define CD_HIP_CHECK(call)                                                                     \
    do {                                                                                       \
        hipError_t cd_hip_e_ = (call);                                                         \
        if (cd_hip_e_ != hipSuccess) return cd_hip_fail(#call, __FILE__, __LINE__, cd_hip_e_); \
    } while (0)

// For teardown paths, which have no caller to report to: the same check and
// log, without the return.
#define CD_HIP_CHECK_LOG(call)                                                                \
    do {                                                                                      \
        hipError_t cd_hip_e_ = (call);                                                        \
        if (cd_hip_e_ != hipSuccess) (void)cd_hip_fail(#call, __FILE__, __LINE__, cd_hip_e_); \
    } while (0)

#endif // CD_BACKENDS_HIP_CHECK_H
