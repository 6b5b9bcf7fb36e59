#ifndef CD_BACKENDS_DEVICES_H
#define CD_BACKENDS_DEVICES_H

// The table of devices (backends/devices.c): a backend created by name, and
// the process-wide questions of the backends' libraries. The one unit that
// includes the backends it creates, so the device interface (backend.h)
// knows none of them.

#include "backends/backend-opts.h"
#include "backends/backend.h"

#include <stddef.h>

// Creates the backend named by device: "cpu" (or NULL), "hip-emu" (the HIP
// backend over the CPU emulator, backends/hip/backend-hip.h), "hip" or
// "hip:N" (the HIP backend of the GPU=hip plugin, backends/hip/plugin-loader.h).
// CD_EUNSUPPORTED with err set for any other name, CD_EDEVICE with err set
// when the device or the plugin is not usable here. opts: the backend's
// switches (backends/backend-opts.h; NULL: the defaults).
int cd_backend_create(const char *device, const cd_backend_opts *opts, cd_backend_t *out, char *err, size_t errlen);

// Checks, without creating a backend, that device can run here (for start-up
// checks: the daemon's --device). Returns 0 with a one-line description of the
// device in info, CD_EUNSUPPORTED (not a device name) or CD_EDEVICE (device or
// plugin unusable) with the reason in err. opts as for cd_backend_create.
int cd_backend_probe(const char *device, const cd_backend_opts *opts, char *info, size_t infolen, char *err,
                     size_t errlen);

// Sets the thread count of the backends' libraries that have one per process
// (oneDNN, under the CPU backend), initialising them on first use; n >= 1.
// 0 or a negative code.
int cd_backends_set_threads(int n);

// The caps of the host's backend, "cpu", without creating one: the host's
// instruction set and native blocked layout, for reports and the planner's
// cost-model key. Initialises oneDNN if needed.
cd_backend_caps cd_backends_host_caps(void);

#endif // CD_BACKENDS_DEVICES_H
