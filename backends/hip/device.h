#ifndef CD_BACKENDS_HIP_DEVICE_H
#define CD_BACKENDS_HIP_DEVICE_H

// Launch geometry derived from the current device's properties. Every HIP
// launcher takes its block sizes from here, never from constants, so the
// same kernels fit wave64 (gfx9) and wave32 (gfx10+) devices and the emulator.

#include "backends/hip/vendor-host.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int device;          // HIP device ordinal these figures are for
    int warp_size;       // hipDeviceProp_t.warpSize (64 on gfx9, 32 on gfx10+)
    int max_threads;     // maxThreadsPerBlock
    int max_grid[3];     // maxGridSize
    size_t shared_bytes; // sharedMemPerBlock
    int block_1d;        // elementwise kernels: min(max_threads, 4 warps)
    int block_reduce;    // reductions (softmax, global pool): block_1d rounded
                         // down to a power of two
    int gemm_tile;       // SGEMM tile edge T: T x T threads per block, 2 T x T
                         // float tiles in shared memory; the largest power of
                         // two with T*T <= min(max_threads, 8 warps) that fits
} cd_hip_geometry;

// Fills g for the calling thread's current device (properties are read once
// per device and cached). Returns 0, or CD_EDEVICE (logged) when the device
// cannot be queried.
int cd_hip_geometry_get(cd_hip_geometry *g);

// Blocks for a 1-D grid-stride launch over n items with `block` threads per
// block, capped at the device's grid limit (at least 1).
unsigned cd_hip_grid_1d(const cd_hip_geometry *g, size_t n, int block);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_DEVICE_H
