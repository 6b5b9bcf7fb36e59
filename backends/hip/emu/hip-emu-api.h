#ifndef CD_BACKENDS_HIP_EMU_HIP_EMU_API_H
#define CD_BACKENDS_HIP_EMU_HIP_EMU_API_H

// The host side of the HIP emulator: the subset of hip_runtime_api.h that
// convd uses, implemented on the CPU (backends/hip/emu/hip-emu-runtime.cpp).
// C and C++ compatible, so host code written against HIP (launchers, the
// backend glue, tests) compiles unchanged against either this header or the
// real one; backends/hip/vendor-host.h picks which.
//
// The emulated device: one device (CD_HIP_EMU_DEVICES=N sets the count; 0
// makes hipGetDeviceCount fail with hipErrorNoDevice, like a machine without
// a GPU), warpSize 64 (CD_HIP_EMU_WAVE_SIZE=32 for 32), maxThreadsPerBlock
// 1024, 64 KiB shared memory per block, CD_HIP_EMU_MEM_MB of global memory
// (default 4096). hipMemcpy checks its kind against where the pointers come
// from (hipMalloc, hipHostMalloc or neither) and that a device range lies
// inside one allocation; hipMemset that it fills device memory only. Device memory is host
// memory; "device" pointers may be read by the host, but code must not rely on
// it. Every launch runs to completion before the launch returns, so streams
// and events are trivially ordered; errors a real device reports
// asynchronously are reported by the launch (hipGetLastError) and again by
// the next hipStreamSynchronize/hipDeviceSynchronize.
//
// The API functions are macros onto cd_emu_* symbols so that a process holding
// the emulator can also dlopen the real HIP plugin without symbol clashes.

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Values as in HIP 5.2, so logs read the same under both.
typedef enum hipError_t {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNotInitialized = 3,
    hipErrorInvalidConfiguration = 9,
    hipErrorInvalidMemcpyDirection = 21,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidResourceHandle = 400,
    hipErrorNotReady = 600,
    hipErrorLaunchOutOfResources = 701,
    hipErrorLaunchFailure = 719,
    hipErrorNotSupported = 801,
    hipErrorUnknown = 999,
} hipError_t;

// 0..4 in HIP's order.
typedef enum hipMemcpyKind {
    hipMemcpyHostToHost,
    hipMemcpyHostToDevice,
    hipMemcpyDeviceToHost,
    hipMemcpyDeviceToDevice,
    hipMemcpyDefault
} hipMemcpyKind;

// The fields of HIP's hipDeviceProp_t that convd reads, same names and types.
typedef struct hipDeviceProp_t {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    int major;
    int minor;
    int multiProcessorCount;
    size_t maxSharedMemoryPerMultiProcessor;
    int gcnArch;
    char gcnArchName[256];
} hipDeviceProp_t;

typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;

#define hipStreamDefault 0x00
#define hipStreamNonBlocking 0x01
#define hipHostMallocDefault 0x0

hipError_t cd_emu_hipGetDeviceCount(int *count);
hipError_t cd_emu_hipSetDevice(int device);
hipError_t cd_emu_hipGetDevice(int *device);
hipError_t cd_emu_hipGetDeviceProperties(hipDeviceProp_t *prop, int device);
hipError_t cd_emu_hipDeviceSynchronize(void);
hipError_t cd_emu_hipMemGetInfo(size_t *free_bytes, size_t *total_bytes);

hipError_t cd_emu_hipGetLastError(void);
hipError_t cd_emu_hipPeekAtLastError(void);
const char *cd_emu_hipGetErrorName(hipError_t e);
const char *cd_emu_hipGetErrorString(hipError_t e);

hipError_t cd_emu_hipMalloc(void **ptr, size_t size);
hipError_t cd_emu_hipFree(void *ptr);
hipError_t cd_emu_hipHostMalloc(void **ptr, size_t size, unsigned flags);
hipError_t cd_emu_hipHostFree(void *ptr);
hipError_t cd_emu_hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind kind);
hipError_t cd_emu_hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind, hipStream_t stream);
hipError_t cd_emu_hipMemset(void *dst, int value, size_t n);
hipError_t cd_emu_hipMemsetAsync(void *dst, int value, size_t n, hipStream_t stream);

hipError_t cd_emu_hipStreamCreate(hipStream_t *stream);
hipError_t cd_emu_hipStreamCreateWithFlags(hipStream_t *stream, unsigned flags);
hipError_t cd_emu_hipStreamDestroy(hipStream_t stream);
hipError_t cd_emu_hipStreamSynchronize(hipStream_t stream);
hipError_t cd_emu_hipStreamQuery(hipStream_t stream);

hipError_t cd_emu_hipEventCreate(hipEvent_t *event);
hipError_t cd_emu_hipEventDestroy(hipEvent_t event);
hipError_t cd_emu_hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t cd_emu_hipEventSynchronize(hipEvent_t event);
hipError_t cd_emu_hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop);

// Records an error raised while a kernel ran (launch configuration, barrier
// divergence): it becomes the last error and the next synchronize's result.
void cd_emu_set_error(hipError_t e);

// ---- Emulator-only knobs (no HIP equivalent; tests use them) ----------------

// The order in which the threads of a block run between two barriers. A
// kernel whose result depends on it has a race (a real GPU runs the waves of
// a block in no fixed order).
typedef enum cd_emu_order {
    CD_EMU_ORDER_MIXED = 0,      // each block takes one of the three below,
                                 // picked from the seed, the launch's number in
                                 // the process and the block's index (default)
    CD_EMU_ORDER_ASCENDING = 1,  // thread 0 first (the emulator's old order)
    CD_EMU_ORDER_DESCENDING = 2, // the last thread first
    CD_EMU_ORDER_RANDOM = 3,     // a fresh seeded permutation every interval
} cd_emu_order;

// Sets the thread order and its seed for the launches that follow (process
// wide; also restarts the launch count the mixed order draws from). The
// defaults come from CD_HIP_EMU_ORDER (mixed | ascending | descending |
// random) and CD_HIP_EMU_SEED (a number; otherwise a fresh one per process).
void cd_emu_set_order(cd_emu_order order, unsigned long long seed);

// The current order; stores its seed in *seed when seed is not NULL.
cd_emu_order cd_emu_get_order(unsigned long long *seed);

// The emulated wavefront size: CD_HIP_EMU_WAVE_SIZE=32 (gfx10+) or 64 (gfx9,
// the default), read once per process. hipDeviceProp_t.warpSize and the
// kernels' warpSize report it.
int cd_emu_wave_size(void);

#ifdef __cplusplus
}
#endif

#define hipGetDeviceCount cd_emu_hipGetDeviceCount
#define hipSetDevice cd_emu_hipSetDevice
#define hipGetDevice cd_emu_hipGetDevice
#define hipGetDeviceProperties cd_emu_hipGetDeviceProperties
#define hipDeviceSynchronize cd_emu_hipDeviceSynchronize
#define hipMemGetInfo cd_emu_hipMemGetInfo
#define hipGetLastError cd_emu_hipGetLastError
#define hipPeekAtLastError cd_emu_hipPeekAtLastError
#define hipGetErrorName cd_emu_hipGetErrorName
#define hipGetErrorString cd_emu_hipGetErrorString
// hipMalloc and hipHostMalloc take any T** (as HIP's C++ overloads do).
#define hipMalloc(ptr, size) cd_emu_hipMalloc((void **)(ptr), (size))
#define hipHostMalloc(ptr, size, flags) cd_emu_hipHostMalloc((void **)(ptr), (size), (flags))
#define hipFree cd_emu_hipFree
#define hipHostFree cd_emu_hipHostFree
#define hipMemcpy cd_emu_hipMemcpy
#define hipMemcpyAsync cd_emu_hipMemcpyAsync
#define hipMemset cd_emu_hipMemset
#define hipMemsetAsync cd_emu_hipMemsetAsync
#define hipStreamCreate cd_emu_hipStreamCreate
#define hipStreamCreateWithFlags cd_emu_hipStreamCreateWithFlags
#define hipStreamDestroy cd_emu_hipStreamDestroy
#define hipStreamSynchronize cd_emu_hipStreamSynchronize
#define hipStreamQuery cd_emu_hipStreamQuery
#define hipEventCreate cd_emu_hipEventCreate
#define hipEventDestroy cd_emu_hipEventDestroy
#define hipEventRecord cd_emu_hipEventRecord
#define hipEventSynchronize cd_emu_hipEventSynchronize
#define hipEventElapsedTime cd_emu_hipEventElapsedTime

#endif // CD_BACKENDS_HIP_EMU_HIP_EMU_API_H
