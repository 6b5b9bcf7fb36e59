#ifndef CD_BACKENDS_HIP_PLUGIN_LOADER_H
#define CD_BACKENDS_HIP_PLUGIN_LOADER_H

// The runtime's side of the GPU=hip plugin (backends/hip/plugin-loader.c):
// the devices "hip" and "hip:N". Linked into every binary that links the
// runtime; needs no HIP header and no ROCm library.

#include "backends/backend.h"

#include <stddef.h>

// Parses the ordinal of "hip" / "hip:N" into *ordinal: 1 when the name is one
// of those, 0 otherwise.
int cd_hip_device_parse(const char *device, int *ordinal);
// Loads and probes the plugin for device N, then creates its backend.
// Returns 0 or CD_EDEVICE with err set. path: the plugin's file (NULL or "":
// next to the executable); the plugin is loaded once, by the first call.
int cd_backend_hip_plugin_create(int device, const char *path, cd_backend_t *out, char *err, size_t errlen);
// Loads the plugin and probes device N: 0 with a one-line description in
// info, or CD_EDEVICE with err set. path as above.
int cd_backend_hip_plugin_probe(int device, const char *path, char *info, size_t infolen, char *err, size_t errlen);

#endif // CD_BACKENDS_HIP_PLUGIN_LOADER_H
