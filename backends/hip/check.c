#include "backends/hip/check.h"

#include "core/log.h"

int cd_hip_status(hipError_t e) {
    switch (e) {
    case hipSuccess: return 0;
    case hipErrorOutOfMemory: return CD_ENOMEM;
    default: return CD_EDEVICE;
    }
}

int cd_hip_fail(const char *call, const char *file, int line, hipError_t e) {
    cd_rt_log(CD_RT_LOG_ERROR, "hip: %s failed at %s:%d: %s (%s)", call, file, line, hipGetErrorName(e),
              hipGetErrorString(e));
    return cd_hip_status(e);
}

int cd_hip_check_launch(const char *call, const char *file, int line) {
    hipError_t e = hipGetLastError();
    if (e == hipSuccess) return 0;
    cd_rt_log(CD_RT_LOG_ERROR, "hip: %s (its kernel launch) failed at %s:%d: %s (%s)", call, file, line,
              hipGetErrorName(e), hipGetErrorString(e));
    return cd_hip_status(e);
}
