// The HIP emulator's host API: devices, errors, memory, streams, events.
// See backends/hip/emu/hip-emu-api.h for the emulated device.

#include "backends/hip/emu/hip-emu-api.h"
#include "core/log.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

namespace {

const size_t kAlign = 256;                     // hipMalloc alignment, as on AMD
const uint64_t kMagic = 0x63646869706d656dull; // "cdhipmem"

// Precedes every hipMalloc block; kAlign bytes so the user block stays aligned.
struct alloc_header {
    uint64_t magic;
    size_t size;
};

struct stream_rec {
    uint64_t magic;
};
struct event_rec {
    uint64_t magic;
    double t_ms;
    int recorded;
};
const uint64_t kStreamMagic = 0x63647374726d6d6dull;
const uint64_t kEventMagic = 0x6364657665746d6dull;

thread_local hipError_t g_last = hipSuccess;    // hipGetLastError
thread_local hipError_t g_pending = hipSuccess; // next synchronize's result
thread_local int g_device = 0;
size_t g_allocated = 0; // bytes of live device allocations (atomic)

hipError_t fail(hipError_t e) {
    g_last = e;
    return e;
}

// Where memory comes from, for hipMemcpy's kind check.
enum mem_kind { MEM_HOST, MEM_PINNED, MEM_DEVICE };

const char *mem_kind_name(mem_kind k) {
    return k == MEM_DEVICE ? "device (hipMalloc)" : k == MEM_PINNED ? "pinned host (hipHostMalloc)" : "host";
}

// The live hipMalloc and hipHostMalloc blocks, sorted by start address
// (plain C: the emulator links into C programs without libstdc++).
struct region {
    uintptr_t start;
    size_t size;
    mem_kind kind;
};
region *g_regions; // g_nregions of g_capregions, sorted by start
size_t g_nregions, g_capregions;
pthread_mutex_t g_regions_lock = PTHREAD_MUTEX_INITIALIZER;

// Index of the first region starting after a (caller holds the lock).
size_t region_upper(uintptr_t a) {
    size_t lo = 0, hi = g_nregions;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g_regions[mid].start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// Records a block; returns 0, or -1 when out of memory.
int region_add(void *p, size_t size, mem_kind kind) {
    int rc = 0;
    pthread_mutex_lock(&g_regions_lock);
    if (g_nregions == g_capregions) {
        size_t cap = g_capregions ? 2 * g_capregions : 64;
        region *r = static_cast<region *>(realloc(g_regions, cap * sizeof *r));
        if (r) {
            g_regions = r;
            g_capregions = cap;
        } else {
            rc = -1;
        }
    }
    if (rc == 0) {
        size_t i = region_upper((uintptr_t)p);
        memmove(&g_regions[i + 1], &g_regions[i], (g_nregions - i) * sizeof *g_regions);
        g_regions[i] = region{(uintptr_t)p, size, kind};
        g_nregions++;
    }
    pthread_mutex_unlock(&g_regions_lock);
    return rc;
}

void region_remove(void *p) {
    pthread_mutex_lock(&g_regions_lock);
    size_t i = region_upper((uintptr_t)p);
    if (i > 0 && g_regions[i - 1].start == (uintptr_t)p) {
        memmove(&g_regions[i - 1], &g_regions[i], (g_nregions - i) * sizeof *g_regions);
        g_nregions--;
    }
    if (g_nregions == 0) { // the last block gone: nothing left for leak checkers
        free(g_regions);
        g_regions = NULL;
        g_capregions = 0;
    }
    pthread_mutex_unlock(&g_regions_lock);
}

// Classifies [p, p + n): the kind of the block holding p (MEM_HOST when none
// does); *inside is 0 when the range runs past the end of that block.
mem_kind region_find(const void *p, size_t n, int *inside) {
    uintptr_t a = (uintptr_t)p;
    mem_kind k = MEM_HOST;
    *inside = 1;
    pthread_mutex_lock(&g_regions_lock);
    size_t i = region_upper(a);
    if (i > 0 && a - g_regions[i - 1].start < g_regions[i - 1].size) {
        const region *r = &g_regions[i - 1];
        k = r->kind;
        *inside = n <= r->size - (a - r->start);
    }
    pthread_mutex_unlock(&g_regions_lock);
    return k;
}

const char *kind_name(hipMemcpyKind kind) {
    switch (kind) {
    case hipMemcpyHostToHost: return "hipMemcpyHostToHost";
    case hipMemcpyHostToDevice: return "hipMemcpyHostToDevice";
    case hipMemcpyDeviceToHost: return "hipMemcpyDeviceToHost";
    case hipMemcpyDeviceToDevice: return "hipMemcpyDeviceToDevice";
    case hipMemcpyDefault: return "hipMemcpyDefault";
    }
    return "?";
}

// Checks a copy's kind against where dst and src come from, and that a
// device range lies inside its allocation. Returns hipSuccess, or
// hipErrorInvalidMemcpyDirection / hipErrorInvalidValue after logging why:
// a real runtime may guess its way past a wrong kind on one platform and
// copy garbage on another; the emulator does not guess.
hipError_t memcpy_check(const char *api, void *dst, const void *src, size_t n, hipMemcpyKind kind) {
    int dst_in = 1, src_in = 1;
    mem_kind d = region_find(dst, n, &dst_in), s = region_find(src, n, &src_in);
    int want_dst_dev = kind == hipMemcpyHostToDevice || kind == hipMemcpyDeviceToDevice;
    int want_src_dev = kind == hipMemcpyDeviceToHost || kind == hipMemcpyDeviceToDevice;
    if (kind != hipMemcpyDefault && ((d == MEM_DEVICE) != want_dst_dev || (s == MEM_DEVICE) != want_src_dev)) {
        cd_rt_log(CD_RT_LOG_ERROR,
                  "hip-emu: %s(dst %p, src %p, %zu bytes, %s): dst is %s memory, src is %s "
                  "memory",
                  api, dst, src, n, kind_name(kind), mem_kind_name(d), mem_kind_name(s));
        return hipErrorInvalidMemcpyDirection;
    }
    if ((d != MEM_HOST && !dst_in) || (s != MEM_HOST && !src_in)) {
        cd_rt_log(CD_RT_LOG_ERROR,
                  "hip-emu: %s(dst %p, src %p, %zu bytes, %s): the %s range runs past the end "
                  "of its allocation",
                  api, dst, src, n, kind_name(kind), !dst_in ? "dst" : "src");
        return hipErrorInvalidValue;
    }
    return hipSuccess;
}

int env_int(const char *name, int dflt) {
    const char *s = getenv(name);
    return s && *s ? atoi(s) : dflt;
}

int device_count(void) {
    int n = env_int("CD_HIP_EMU_DEVICES", 1);
    return n < 0 ? 0 : n;
}

size_t total_mem(void) { return (size_t)env_int("CD_HIP_EMU_MEM_MB", 4096) << 20; }

double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

hipError_t take_pending(void) {
    hipError_t e = g_pending;
    g_pending = hipSuccess;
    return e;
}

} // namespace

extern "C" {

void cd_emu_set_error(hipError_t e) {
    g_last = e;
    g_pending = e;
}

hipError_t cd_emu_hipGetDeviceCount(int *count) {
    if (!count) return fail(hipErrorInvalidValue);
    *count = device_count();
    return *count ? hipSuccess : fail(hipErrorNoDevice);
}

hipError_t cd_emu_hipSetDevice(int device) {
    if (device < 0 || device >= device_count()) return fail(hipErrorInvalidDevice);
    g_device = device;
    return hipSuccess;
}

hipError_t cd_emu_hipGetDevice(int *device) {
    if (!device) return fail(hipErrorInvalidValue);
    if (device_count() == 0) return fail(hipErrorNoDevice);
    *device = g_device;
    return hipSuccess;
}

hipError_t cd_emu_hipGetDeviceProperties(hipDeviceProp_t *prop, int device) {
    if (!prop) return fail(hipErrorInvalidValue);
    if (device < 0 || device >= device_count()) return fail(hipErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "convd HIP emulator (CPU)");
    snprintf(prop->gcnArchName, sizeof prop->gcnArchName, "emu");
    prop->totalGlobalMem = total_mem();
    prop->sharedMemPerBlock = 64 << 10;
    prop->maxSharedMemoryPerMultiProcessor = 64 << 10;
    prop->regsPerBlock = 65536;
    prop->warpSize = cd_emu_wave_size();
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = prop->maxThreadsDim[2] = 1024;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65536;
    prop->clockRate = 1000000;
    prop->multiProcessorCount = 1;
    return hipSuccess;
}

hipError_t cd_emu_hipDeviceSynchronize(void) {
    hipError_t e = take_pending();
    return e == hipSuccess ? e : fail(e);
}

hipError_t cd_emu_hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    if (!free_bytes || !total_bytes) return fail(hipErrorInvalidValue);
    size_t used = __atomic_load_n(&g_allocated, __ATOMIC_RELAXED);
    *total_bytes = total_mem();
    *free_bytes = used < *total_bytes ? *total_bytes - used : 0;
    return hipSuccess;
}

hipError_t cd_emu_hipGetLastError(void) {
    hipError_t e = g_last;
    g_last = hipSuccess;
    return e;
}

hipError_t cd_emu_hipPeekAtLastError(void) { return g_last; }

const char *cd_emu_hipGetErrorName(hipError_t e) {
    switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorNotInitialized: return "hipErrorNotInitialized";
    case hipErrorInvalidConfiguration: return "hipErrorInvalidConfiguration";
    case hipErrorInvalidMemcpyDirection: return "hipErrorInvalidMemcpyDirection";
    case hipErrorNoDevice: return "hipErrorNoDevice";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    case hipErrorInvalidResourceHandle: return "hipErrorInvalidResourceHandle";
    case hipErrorNotReady: return "hipErrorNotReady";
    case hipErrorLaunchOutOfResources: return "hipErrorLaunchOutOfResources";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
    case hipErrorNotSupported: return "hipErrorNotSupported";
    case hipErrorUnknown: return "hipErrorUnknown";
    }
    return "hipErrorUnknown";
}

const char *cd_emu_hipGetErrorString(hipError_t e) {
    switch (e) {
    case hipSuccess: return "no error";
    case hipErrorInvalidValue: return "invalid argument";
    case hipErrorOutOfMemory: return "out of memory";
    case hipErrorNotInitialized: return "initialization error";
    case hipErrorInvalidConfiguration: return "invalid configuration argument";
    case hipErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case hipErrorNoDevice: return "no ROCm-capable device is detected";
    case hipErrorInvalidDevice: return "invalid device ordinal";
    case hipErrorInvalidResourceHandle: return "invalid resource handle";
    case hipErrorNotReady: return "device not ready";
    case hipErrorLaunchOutOfResources: return "too many resources requested for launch";
    case hipErrorLaunchFailure: return "unspecified launch failure";
    case hipErrorNotSupported: return "operation not supported";
    case hipErrorUnknown: return "unknown error";
    }
    return "unknown error";
}

hipError_t cd_emu_hipMalloc(void **ptr, size_t size) {
    if (!ptr) return fail(hipErrorInvalidValue);
    *ptr = NULL;
    if (size == 0) return hipSuccess;
    size_t used = __atomic_add_fetch(&g_allocated, size, __ATOMIC_RELAXED);
    if (used > total_mem() || size > SIZE_MAX - 2 * kAlign) {
        __atomic_sub_fetch(&g_allocated, size, __ATOMIC_RELAXED);
        return fail(hipErrorOutOfMemory);
    }
    // Exactly `size` bytes after the header, so that AddressSanitizer (make
    // SAN=1) reports a kernel's out-of-bounds access at the first byte past.
    void *mem = NULL;
    if (posix_memalign(&mem, kAlign, kAlign + size) != 0) mem = NULL;
    unsigned char *base = static_cast<unsigned char *>(mem);
    if (!base) {
        __atomic_sub_fetch(&g_allocated, size, __ATOMIC_RELAXED);
        return fail(hipErrorOutOfMemory);
    }
    alloc_header *h = reinterpret_cast<alloc_header *>(base);
    h->magic = kMagic;
    h->size = size;
    // Device memory is not zeroed: a kernel reading what nobody wrote sees NaN.
    memset(base + kAlign, 0xff, size);
    *ptr = base + kAlign;
    if (region_add(*ptr, size, MEM_DEVICE) != 0) {
        free(base);
        *ptr = NULL;
        __atomic_sub_fetch(&g_allocated, size, __ATOMIC_RELAXED);
        return fail(hipErrorOutOfMemory);
    }
    return hipSuccess;
}

hipError_t cd_emu_hipFree(void *ptr) {
    if (!ptr) return hipSuccess;
    unsigned char *base = static_cast<unsigned char *>(ptr) - kAlign;
    alloc_header *h = reinterpret_cast<alloc_header *>(base);
    if (h->magic != kMagic) return fail(hipErrorInvalidValue);
    h->magic = 0;
    region_remove(ptr);
    __atomic_sub_fetch(&g_allocated, h->size, __ATOMIC_RELAXED);
    free(base);
    return hipSuccess;
}

hipError_t cd_emu_hipHostMalloc(void **ptr, size_t size, unsigned flags) {
    (void)flags;
    if (!ptr) return fail(hipErrorInvalidValue);
    *ptr = NULL;
    if (size == 0) return hipSuccess;
    if (posix_memalign(ptr, kAlign, size) != 0) {
        *ptr = NULL;
        return fail(hipErrorOutOfMemory);
    }
    if (region_add(*ptr, size, MEM_PINNED) != 0) {
        free(*ptr);
        *ptr = NULL;
        return fail(hipErrorOutOfMemory);
    }
    return hipSuccess;
}

hipError_t cd_emu_hipHostFree(void *ptr) {
    if (ptr) region_remove(ptr);
    free(ptr);
    return hipSuccess;
}

// hipMemcpy and hipMemcpyAsync (api names which, for the message).
static hipError_t memcpy_any(const char *api, void *dst, const void *src, size_t n, hipMemcpyKind kind) {
    if ((unsigned)kind > hipMemcpyDefault) return fail(hipErrorInvalidMemcpyDirection);
    if (n == 0) return hipSuccess;
    if (!dst || !src) return fail(hipErrorInvalidValue);
    hipError_t e = memcpy_check(api, dst, src, n, kind);
    if (e != hipSuccess) return fail(e);
    memmove(dst, src, n);
    return hipSuccess;
}

hipError_t cd_emu_hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind kind) {
    return memcpy_any("hipMemcpy", dst, src, n, kind);
}

hipError_t cd_emu_hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind, hipStream_t stream) {
    (void)stream;
    return memcpy_any("hipMemcpyAsync", dst, src, n, kind);
}

// hipMemset and hipMemsetAsync: dst must be a device range inside one
// hipMalloc block (a device fill of host memory is a bug the real runtime
// reports as hipErrorInvalidValue, or not at all).
static hipError_t memset_any(const char *api, void *dst, int value, size_t n) {
    if (n == 0) return hipSuccess;
    if (!dst) return fail(hipErrorInvalidValue);
    int inside = 1;
    mem_kind k = region_find(dst, n, &inside);
    if (k != MEM_DEVICE || !inside) {
        cd_rt_log(CD_RT_LOG_ERROR, "hip-emu: %s(dst %p, %zu bytes): %s", api, dst, n,
                  k != MEM_DEVICE
                      ? (k == MEM_PINNED ? "dst is pinned host (hipHostMalloc) memory" : "dst is host memory")
                      : "the range runs past the end of its allocation");
        return fail(hipErrorInvalidValue);
    }
    memset(dst, value, n);
    return hipSuccess;
}

hipError_t cd_emu_hipMemset(void *dst, int value, size_t n) { return memset_any("hipMemset", dst, value, n); }

hipError_t cd_emu_hipMemsetAsync(void *dst, int value, size_t n, hipStream_t stream) {
    (void)stream;
    return memset_any("hipMemsetAsync", dst, value, n);
}

hipError_t cd_emu_hipStreamCreate(hipStream_t *stream) {
    return cd_emu_hipStreamCreateWithFlags(stream, hipStreamDefault);
}

hipError_t cd_emu_hipStreamCreateWithFlags(hipStream_t *stream, unsigned flags) {
    (void)flags;
    if (!stream) return fail(hipErrorInvalidValue);
    stream_rec *s = static_cast<stream_rec *>(malloc(sizeof *s));
    if (!s) return fail(hipErrorOutOfMemory);
    s->magic = kStreamMagic;
    *stream = reinterpret_cast<hipStream_t>(s);
    return hipSuccess;
}

hipError_t cd_emu_hipStreamDestroy(hipStream_t stream) {
    stream_rec *s = reinterpret_cast<stream_rec *>(stream);
    if (!s || s->magic != kStreamMagic) return fail(hipErrorInvalidResourceHandle);
    s->magic = 0;
    free(s);
    return hipSuccess;
}

hipError_t cd_emu_hipStreamSynchronize(hipStream_t stream) {
    stream_rec *s = reinterpret_cast<stream_rec *>(stream);
    if (s && s->magic != kStreamMagic) return fail(hipErrorInvalidResourceHandle);
    hipError_t e = take_pending();
    return e == hipSuccess ? e : fail(e);
}

hipError_t cd_emu_hipStreamQuery(hipStream_t stream) {
    stream_rec *s = reinterpret_cast<stream_rec *>(stream);
    if (s && s->magic != kStreamMagic) return fail(hipErrorInvalidResourceHandle);
    return hipSuccess;
}

hipError_t cd_emu_hipEventCreate(hipEvent_t *event) {
    if (!event) return fail(hipErrorInvalidValue);
    event_rec *e = static_cast<event_rec *>(calloc(1, sizeof *e));
    if (!e) return fail(hipErrorOutOfMemory);
    e->magic = kEventMagic;
    *event = reinterpret_cast<hipEvent_t>(e);
    return hipSuccess;
}

hipError_t cd_emu_hipEventDestroy(hipEvent_t event) {
    event_rec *e = reinterpret_cast<event_rec *>(event);
    if (!e || e->magic != kEventMagic) return fail(hipErrorInvalidResourceHandle);
    e->magic = 0;
    free(e);
    return hipSuccess;
}

hipError_t cd_emu_hipEventRecord(hipEvent_t event, hipStream_t stream) {
    (void)stream;
    event_rec *e = reinterpret_cast<event_rec *>(event);
    if (!e || e->magic != kEventMagic) return fail(hipErrorInvalidResourceHandle);
    e->t_ms = now_ms();
    e->recorded = 1;
    return hipSuccess;
}

hipError_t cd_emu_hipEventSynchronize(hipEvent_t event) {
    event_rec *e = reinterpret_cast<event_rec *>(event);
    if (!e || e->magic != kEventMagic) return fail(hipErrorInvalidResourceHandle);
    return hipSuccess;
}

hipError_t cd_emu_hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop) {
    event_rec *a = reinterpret_cast<event_rec *>(start);
    event_rec *b = reinterpret_cast<event_rec *>(stop);
    if (!ms || !a || !b || a->magic != kEventMagic || b->magic != kEventMagic)
        return fail(hipErrorInvalidResourceHandle);
    if (!a->recorded || !b->recorded) return fail(hipErrorNotReady);
    *ms = (float)(b->t_ms - a->t_ms);
    return hipSuccess;
}

} // extern "C"
