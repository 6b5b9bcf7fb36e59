#include "backends/hip/device.h"

#include "backends/hip/check.h"

#include <pthread.h>

#define CD_HIP_MAX_DEVICES 64

// Filled once per device under g_lock; g_ready[d] is set (release) after
// g_geometry[d] is complete and never cleared.
static cd_hip_geometry g_geometry[CD_HIP_MAX_DEVICES];
static int g_ready[CD_HIP_MAX_DEVICES];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static int pow2_floor(int v) {
    int p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

static int geometry_query(int device, cd_hip_geometry *g) {
    hipDeviceProp_t prop;
    CD_HIP_CHECK(hipGetDeviceProperties(&prop, device));
    g->device = device;
    g->warp_size = prop.warpSize > 0 ? prop.warpSize : 64;
    g->max_threads = prop.maxThreadsPerBlock > 0 ? prop.maxThreadsPerBlock : 256;
    for (int i = 0; i < 3; i++) g->max_grid[i] = prop.maxGridSize[i] > 0 ? prop.maxGridSize[i] : 65535;
    g->shared_bytes = prop.sharedMemPerBlock;
    int four_waves = 4 * g->warp_size;
    g->block_1d = four_waves < g->max_threads ? four_waves : g->max_threads;
    g->block_reduce = pow2_floor(g->block_1d);
    int eight_waves = 8 * g->warp_size;
    int tile_threads = eight_waves < g->max_threads ? eight_waves : g->max_threads;
    int t = 1;
    while ((t * 2) * (t * 2) <= tile_threads && 2 * (size_t)(t * 2) * (t * 2) * sizeof(float) <= g->shared_bytes)
        t *= 2;
    g->gemm_tile = t;
    return 0;
}

int cd_hip_geometry_get(cd_hip_geometry *g) {
    int device = 0;
    CD_HIP_CHECK(hipGetDevice(&device));
    if (device < 0 || device >= CD_HIP_MAX_DEVICES) return geometry_query(device, g);
    if (!__atomic_load_n(&g_ready[device], __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&g_lock);
        int rc = 0;
        if (!g_ready[device]) {
            rc = geometry_query(device, &g_geometry[device]);
            if (rc == 0) __atomic_store_n(&g_ready[device], 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&g_lock);
        if (rc) return rc;
    }
    *g = g_geometry[device];
    return 0;
}

unsigned cd_hip_grid_1d(const cd_hip_geometry *g, size_t n, int block) {
    size_t blocks = (n + (size_t)block - 1) / (size_t)block;
    if (blocks < 1) blocks = 1;
    if (blocks > (size_t)g->max_grid[0]) blocks = (size_t)g->max_grid[0];
    return (unsigned)blocks;
}
