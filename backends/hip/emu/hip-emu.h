#ifndef CD_BACKENDS_HIP_EMU_HIP_EMU_H
#define CD_BACKENDS_HIP_EMU_HIP_EMU_H

// The device side of the HIP emulator: compiles HIP kernel sources as plain
// C++ (g++ -x c++) and runs them on the CPU with HIP's execution model.
//
//   - A launch runs every block of the grid; blocks are spread over the
//     OpenMP threads of the calling thread (one block at a time per OS
//     thread), so atomics on global memory really race.
//   - Each GPU thread of a block is a fiber with its own stack; threads of a
//     block run one after another until they reach __syncthreads(), which
//     switches back to the block's scheduler. A barrier completes when every
//     thread of the block has reached it; a thread that exits while others
//     wait at a barrier is barrier divergence, reported as a launch failure
//     (hipErrorLaunchFailure) with a message (core/log.h).
//   - __shared__ variables are per OS thread (static thread_local), hence per
//     running block. Dynamic shared memory (CD_HIP_DYNAMIC_SHARED) is filled
//     with 0xff bytes (float NaN) at the start of every block, so a kernel that
//     reads shared memory it did not write sees NaN, not a lucky zero.
//   - Launch configuration is checked as a device would: block size above
//     maxThreadsPerBlock (1024), empty grids or blocks, grid dimensions above
//     maxGridSize, shared memory above 64 KiB -> hipErrorInvalidConfiguration
//     and the kernel does not run.
//   - Not emulated: warp lockstep execution (no __shfl*, no warp-synchronous
//     code), memory fences beyond a full barrier, texture memory.
//
// Kernels are launched only through CD_HIP_LAUNCH (backends/hip/vendor.h),
// which maps onto hipLaunchKernelGGL under hipcc and onto cd_emu::launch here.

#include "backends/hip/emu/hip-emu-api.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ static thread_local

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

namespace cd_emu {

// The built-in index variables of the GPU thread that is running on this OS
// thread; the block scheduler sets them before it resumes a fiber.
extern thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

// A kernel invocation with its arguments bound (the launch macro's lambda).
typedef void (*body_fn)(const void *ctx);

// Runs grid x block threads of body. Returns hipSuccess or the error that
// also becomes the last error (bad configuration, barrier divergence).
hipError_t launch(dim3 grid, dim3 block, size_t shared_bytes, hipStream_t stream,
                  body_fn body, const void *ctx);

// Suspends the calling GPU thread until every thread of its block arrives.
void barrier(void);

// The dynamic shared memory of the running block (launch's shared_bytes).
void *dynamic_shared(void);

template <class F> static void invoke(const void *ctx) { (*static_cast<const F *>(ctx))(); }

template <class F>
hipError_t launch_lambda(dim3 grid, dim3 block, size_t shared_bytes, hipStream_t stream,
                         const F &f) {
    return launch(grid, block, shared_bytes, stream, &invoke<F>, &f);
}

} // namespace cd_emu

using cd_emu::blockDim;
using cd_emu::blockIdx;
using cd_emu::gridDim;
using cd_emu::threadIdx;

static const int warpSize = 64;

static inline void __syncthreads(void) { cd_emu::barrier(); }
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// Atomics: each returns the old value, as on the device.
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline float atomicAdd(float *p, float v) {
    float old, sum;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        sum = old + v;
    } while (!__atomic_compare_exchange(p, &old, &sum, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}
static inline int atomicSub(int *p, int v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
static inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
static inline int atomicCAS(int *p, int cmp, int v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
static inline unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
static inline int atomicMax(int *p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {}
    return old;
}
static inline unsigned atomicMax(unsigned *p, unsigned v) {
    unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {}
    return old;
}
static inline int atomicMin(int *p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {}
    return old;
}

#endif // CD_BACKENDS_HIP_EMU_HIP_EMU_H
