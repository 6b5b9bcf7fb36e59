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
//     switches back to the block's scheduler. The order in which they run
//     between two barriers is not fixed (cd_emu_order in hip-emu-api.h:
//     ascending, descending, a seeded random permutation per interval, or a
//     mix of the three per block, the default), so a kernel that reads what
//     another thread writes in the same interval gets a wrong result.
//   - A barrier completes when every thread of the block has reached it, at
//     the same __syncthreads() (file and line, recorded by the macro below).
//     Threads waiting at different barriers, or a thread that exits while
//     others wait, is barrier divergence: reported with both sites as a
//     launch failure (hipErrorLaunchFailure) with a message (core/log.h).
//   - __shared__ variables are per OS thread (static thread_local), hence per
//     running block, and all live in one TLS section (cd_emu_shared) that is
//     filled with 0xff bytes (float NaN, int -1) at the start of every block;
//     so is dynamic shared memory (CD_HIP_DYNAMIC_SHARED). A kernel that reads
//     shared memory it did not write sees NaN, never a previous block's data.
//     Not in a template kernel: g++ puts a template's static locals in their
//     own COMDAT sections whatever the section attribute says, so their
//     __shared__ is not poisoned (the project's kernels are no templates).
//   - warpSize is the emulated wavefront size (cd_emu_wave_size(): 64, or 32
//     with CD_HIP_EMU_WAVE_SIZE=32); like HIP's it is not a constant
//     expression. No __AMDGCN_WAVEFRONT_SIZE is defined: a kernel that needs
//     the wave size at compile time does not build under the emulator.
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
// Every __shared__ variable goes to one TLS section, so that the block
// scheduler can poison all of them at block start (hip-emu-launch.cpp).
#define __shared__ static thread_local __attribute__((section("cd_emu_shared")))

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
hipError_t launch(dim3 grid, dim3 block, size_t shared_bytes, hipStream_t stream, body_fn body, const void *ctx);

// Suspends the calling GPU thread until every thread of its block arrives
// at the same barrier, the one at file:line (__syncthreads' call site).
void barrier(const char *file, int line);

// The emulated wavefront size (the device's warpSize).
extern int g_wave_size;

// The dynamic shared memory of the running block (launch's shared_bytes).
void *dynamic_shared(void);

template <class F> static void invoke(const void *ctx) { (*static_cast<const F *>(ctx))(); }

template <class F>
hipError_t launch_lambda(dim3 grid, dim3 block, size_t shared_bytes, hipStream_t stream, const F &f) {
    return launch(grid, block, shared_bytes, stream, &invoke<F>, &f);
}

} // namespace cd_emu

using cd_emu::blockDim;
using cd_emu::blockIdx;
using cd_emu::gridDim;
using cd_emu::threadIdx;

// HIP's warpSize: a device-side variable, not a constant expression.
[[maybe_unused]] static const int &warpSize = cd_emu::g_wave_size;

#define __syncthreads() cd_emu::barrier(__FILE__, __LINE__)
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// Atomics: each returns the old value, as on the device.
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
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
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
static inline unsigned atomicMax(unsigned *p, unsigned v) {
    unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
static inline int atomicMin(int *p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}

#endif // CD_BACKENDS_HIP_EMU_HIP_EMU_H
