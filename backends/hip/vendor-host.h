#ifndef CD_BACKENDS_HIP_VENDOR_HOST_H
#define CD_BACKENDS_HIP_VENDOR_HOST_H

// Host-side HIP API for C and C++ code that launches nothing itself (the
// launcher headers, the backend glue, tests, the device probe). The real
// hip_runtime_api.h when building the plugin (hipcc, or gcc with
// -D__HIP_PLATFORM_AMD__), otherwise the emulator's API, which has the same
// names, types and semantics (backends/hip/emu/hip-emu-api.h).

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__) || defined(__HIP__)
#include <hip/hip_runtime_api.h>
#else
#include "backends/hip/emu/hip-emu-api.h"
#endif

#endif // CD_BACKENDS_HIP_VENDOR_HOST_H
