#ifndef CD_BACKENDS_HIP_BACKEND_HIP_H
#define CD_BACKENDS_HIP_BACKEND_HIP_H

// The HIP backend of backends/backend.h (backends/hip/backend-hip.c), built
// twice from one source:
//   - "hip-emu": in the default build, over the CPU emulator of the HIP
//     execution model (libcdhipemu.a); the table of devices
//     (backends/backend.c) creates it for the device string "hip-emu";
//   - "hip": inside the GPU=hip plugin (libconvd-hip.so) over the real HIP
//     runtime and rocSPARSE; the table of devices reaches it through the
//     plugin loader (backends/hip/plugin-loader.h) and the plugin's
//     cd_hip_plugin_backend_create (backends/hip/plugin.h).
// This header needs no HIP header: backends/backend.c includes it.

#include "backends/backend.h"

#include <stddef.h>

// Creates the backend on HIP device `device`. Returns 0, CD_EDEVICE with a
// reason in err (no such device), or CD_ENOMEM.
int cd_backend_hip_init(int device, cd_backend_t *out, char *err, size_t errlen);

// Device memory of one rocSPARSE handle, which rocSPARSE does not report:
// rocSPARSE 5.3's handle allocates a 1 MiB scratch buffer plus a few small
// constants. An estimate, accounted in device_bytes once per handle.
#define CD_HIP_SPARSE_HANDLE_BYTES (((size_t)1 << 20) + 4096)

// Event counters of one HIP backend, for tests and diagnostics.
typedef struct {
    // Times upload_async / download_async had to wait for a context's whole
    // stream because its pinned staging was full (0 per request once warm).
    size_t staging_drains;
    // rocSPARSE handles created: one per context that ran a sparse layer
    // (+1 per backend on the real device, for setting up plans at load);
    // counted, and accounted, under the emulator too (docs/GPU.md).
    size_t sparse_handles;
    // Times the backend's lock (device-memory bookkeeping) was taken; a
    // warm context's runs, sparse or dense, take it none.
    size_t backend_locks;
} cd_hip_counters;

// Copies the counters of be, which must be a HIP backend ("hip-emu" in the
// default build; the plugin's "hip" is reached through its own copy).
void cd_backend_hip_counters(cd_backend_t be, cd_hip_counters *out);

#endif // CD_BACKENDS_HIP_BACKEND_HIP_H
