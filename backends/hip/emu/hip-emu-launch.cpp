// The HIP emulator's launch: grid -> blocks -> threads as fibers. See
// backends/hip/emu/hip-emu.h for the model and its limits.
//
// Each OS thread that runs blocks owns a fiber pool: one stack per GPU thread
// of the largest block seen (mmap'd once, a guard page below each stack),
// the block's dynamic shared memory, and the scheduler's saved context. A
// block runs in rounds: every live fiber is resumed once per round and runs
// until it reaches a barrier or exits; after a round either all fibers have
// exited (block done), all wait at the barrier (next round), or some exited
// while others wait (barrier divergence: the launch fails).
//
// The context switch is a dozen instructions of x86-64 assembly (callee-saved
// registers, MXCSR and the x87 control word); other architectures use
// ucontext. Under AddressSanitizer every switch is announced with
// __sanitizer_{start,finish}_switch_fiber.

#include "backends/hip/emu/hip-emu.h"
#include "core/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CD_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CD_EMU_ASAN 1
#endif
#endif
#ifdef CD_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// The assembly switch on x86-64; ucontext elsewhere, or when built with
// -DCD_HIP_EMU_UCONTEXT (to cross-check the two).
#if defined(__x86_64__) && !defined(CD_HIP_EMU_UCONTEXT)
#define CD_EMU_X86_SWITCH 1
#else
#include <ucontext.h>
#endif

namespace cd_emu {

thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {

const size_t kStackBytes = 128 << 10;      // per GPU thread (ASan frames are large)
const size_t kSharedBytes = 64 << 10;      // emulated sharedMemPerBlock
const unsigned kMaxThreads = 1024;         // emulated maxThreadsPerBlock
const unsigned kMaxGrid[3] = {2147483647u, 65536u, 65536u};

enum fiber_state { FIBER_READY, FIBER_WAITING, FIBER_DONE };

struct fiber {
    void *sp;           // saved stack pointer while suspended (x86-64)
#ifndef CD_EMU_X86_SWITCH
    ucontext_t uc;      // saved context (other architectures)
#endif
    char *stack_lo;     // lowest usable byte of its stack
    dim3 tid;           // threadIdx of the GPU thread it runs
    fiber_state state;
    void *asan_fake;    // ASan fake-stack handle across a switch
};

struct pool {
    char *stacks;           // nfibers * (guard page + kStackBytes)
    size_t stride;          // bytes per stack including its guard page
    unsigned nfibers;       // stacks allocated
    fiber *fibers;
    fiber *current;         // the fiber running now, NULL in the scheduler
    void *sched_sp;         // scheduler's saved stack pointer
#ifndef CD_EMU_X86_SWITCH
    ucontext_t sched_uc;
#endif
    const void *sched_stack_lo; // scheduler stack bounds (for ASan)
    size_t sched_stack_size;
    void *sched_fake;
    body_fn body;           // the running launch
    const void *ctx;
    unsigned char *shared;  // dynamic shared memory, kSharedBytes
};

thread_local pool g_pool;

#ifdef CD_EMU_X86_SWITCH
extern "C" void cd_emu_ctx_switch(void **save_sp, void *load_sp);
extern "C" void cd_emu_ctx_entry(void);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".hidden cd_emu_ctx_switch\n"
    ".globl cd_emu_ctx_switch\n"
    ".type cd_emu_ctx_switch,@function\n"
    "cd_emu_ctx_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size cd_emu_ctx_switch, .-cd_emu_ctx_switch\n"
    // A new fiber's first switch returns here with its entry function in
    // r12 and the argument in r13; the stack is 16-byte aligned.
    ".p2align 4\n"
    ".hidden cd_emu_ctx_entry\n"
    ".globl cd_emu_ctx_entry\n"
    ".type cd_emu_ctx_entry,@function\n"
    "cd_emu_ctx_entry:\n"
    "    movq %r13, %rdi\n"
    "    callq *%r12\n"
    "    ud2\n"
    ".size cd_emu_ctx_entry, .-cd_emu_ctx_entry\n");
#endif

// Switches from the scheduler into fiber f (until it waits or exits).
void resume(pool *p, fiber *f) {
    p->current = f;
    threadIdx = f->tid;
#ifdef CD_EMU_ASAN
    __sanitizer_start_switch_fiber(&p->sched_fake, f->stack_lo, kStackBytes);
#endif
#ifdef CD_EMU_X86_SWITCH
    cd_emu_ctx_switch(&p->sched_sp, f->sp);
#else
    swapcontext(&p->sched_uc, &f->uc);
#endif
#ifdef CD_EMU_ASAN
    __sanitizer_finish_switch_fiber(p->sched_fake, NULL, NULL);
#endif
    p->current = NULL;
}

// Switches from the running fiber back to the scheduler. A fiber that has
// exited is never resumed, so ASan may drop its fake stack.
void yield_to_scheduler(pool *p, fiber *f) {
#ifdef CD_EMU_ASAN
    __sanitizer_start_switch_fiber(f->state == FIBER_DONE ? NULL : &f->asan_fake,
                                   p->sched_stack_lo, p->sched_stack_size);
#endif
#ifdef CD_EMU_X86_SWITCH
    cd_emu_ctx_switch(&f->sp, p->sched_sp);
#else
    swapcontext(&f->uc, &p->sched_uc);
#endif
#ifdef CD_EMU_ASAN
    __sanitizer_finish_switch_fiber(f->asan_fake, NULL, NULL);
#endif
}

// First code a fiber runs: the kernel body for its GPU thread, then exit.
extern "C" void cd_emu_fiber_main(void *arg) {
    pool *p = static_cast<pool *>(arg);
#ifdef CD_EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &p->sched_stack_lo, &p->sched_stack_size);
#endif
    p->body(p->ctx);
    fiber *f = p->current;
    f->state = FIBER_DONE;
    yield_to_scheduler(p, f);
    abort(); // an exited fiber is never resumed
}

#ifndef CD_EMU_X86_SWITCH
void fiber_trampoline(void) { cd_emu_fiber_main(&g_pool); }
#endif

// Makes f start at cd_emu_fiber_main on its next resume.
void fiber_init(pool *p, fiber *f) {
    f->state = FIBER_READY;
    f->asan_fake = NULL;
#ifdef CD_EMU_X86_SWITCH
    uintptr_t top = (uintptr_t)(f->stack_lo + kStackBytes);
    top &= ~(uintptr_t)15;
    uint64_t *a = (uint64_t *)(top - 16); // stack pointer after the entry 'ret'
    uint32_t mxcsr;
    uint16_t fcw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fcw));
    a[-1] = (uint64_t)(uintptr_t)&cd_emu_ctx_entry; // return address
    a[-2] = 0;                                      // rbp
    a[-3] = 0;                                      // rbx
    a[-4] = (uint64_t)(uintptr_t)&cd_emu_fiber_main; // r12: entry
    a[-5] = (uint64_t)(uintptr_t)p;                  // r13: its argument
    a[-6] = 0;                                      // r14
    a[-7] = 0;                                      // r15
    a[-8] = (uint64_t)mxcsr | ((uint64_t)fcw << 32);
    f->sp = &a[-8];
#else
    (void)p; // the trampoline finds the pool through g_pool
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack_lo;
    f->uc.uc_stack.ss_size = kStackBytes;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, fiber_trampoline, 0);
#endif
}

// Releases a pool's memory when its OS thread exits (a daemon worker, or an
// OpenMP team thread of one): registered per thread through a pthread key,
// whose destructor runs before the thread's TLS goes away.
pthread_key_t g_pool_key;
pthread_once_t g_pool_key_once = PTHREAD_ONCE_INIT;

void pool_release(void *arg) {
    pool *p = static_cast<pool *>(arg);
    if (p->stacks) munmap(p->stacks, p->stride * p->nfibers);
    free(p->fibers);
    free(p->shared);
    p->stacks = NULL;
    p->fibers = NULL;
    p->shared = NULL;
    p->nfibers = 0;
}

void pool_key_create(void) { (void)pthread_key_create(&g_pool_key, pool_release); }

// Grows this OS thread's pool to n fibers. Returns 0, or -1 when out of memory.
int pool_reserve(pool *p, unsigned n) {
    if (!p->shared) {
        p->shared = static_cast<unsigned char *>(aligned_alloc(256, kSharedBytes));
        if (!p->shared) return -1;
        pthread_once(&g_pool_key_once, pool_key_create);
        (void)pthread_setspecific(g_pool_key, p); // first use on this thread
    }
    if (p->nfibers >= n) return 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t stride = kStackBytes + page;
    char *stacks = static_cast<char *>(mmap(NULL, stride * n, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (stacks == MAP_FAILED) return -1;
    fiber *fibers = static_cast<fiber *>(calloc(n, sizeof(fiber)));
    if (!fibers) {
        munmap(stacks, stride * n);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        mprotect(stacks + i * stride, page, PROT_NONE); // overflow guard
        fibers[i].stack_lo = stacks + i * stride + page;
    }
    if (p->stacks) munmap(p->stacks, p->stride * p->nfibers);
    free(p->fibers);
    p->stacks = stacks;
    p->stride = stride;
    p->fibers = fibers;
    p->nfibers = n;
    return 0;
}

// Runs one block on this OS thread. Returns hipSuccess, or
// hipErrorLaunchFailure after barrier divergence (logged, core/log.h).
hipError_t run_block(pool *p, dim3 grid, dim3 block, dim3 bid, size_t shared_bytes) {
    gridDim = grid;
    blockDim = block;
    blockIdx = bid;
    if (shared_bytes) memset(p->shared, 0xff, shared_bytes);
    unsigned n = 0;
    for (unsigned z = 0; z < block.z; z++)
        for (unsigned y = 0; y < block.y; y++)
            for (unsigned x = 0; x < block.x; x++) {
                p->fibers[n].tid = dim3(x, y, z);
                fiber_init(p, &p->fibers[n]);
                n++;
            }
    for (unsigned round = 0;; round++) {
        unsigned done = 0, waiting = 0;
        for (unsigned i = 0; i < n; i++) {
            fiber *f = &p->fibers[i];
            if (f->state == FIBER_DONE) {
                done++;
                continue;
            }
            resume(p, f);
            if (f->state == FIBER_DONE) done++;
            else waiting++;
        }
        if (waiting == 0) return hipSuccess;
        if (done > 0) {
            cd_rt_log(CD_RT_LOG_ERROR,
                      "hip-emu: __syncthreads divergence in block (%u,%u,%u): %u of %u "
                      "threads exited while the others wait at barrier #%u",
                      bid.x, bid.y, bid.z, done, n, round + 1);
#ifdef CD_EMU_ASAN
            // The waiting fibers are abandoned mid-frame: clear the redzones
            // their frames left before the stacks are used again.
            for (unsigned i = 0; i < n; i++)
                __asan_unpoison_memory_region(p->fibers[i].stack_lo, kStackBytes);
#endif
            return hipErrorLaunchFailure;
        }
        for (unsigned i = 0; i < n; i++) p->fibers[i].state = FIBER_READY;
    }
}

} // namespace

void barrier(void) {
    pool *p = &g_pool;
    fiber *f = p->current;
    if (!f) return; // host code calling a device barrier: nothing to wait for
    f->state = FIBER_WAITING;
    yield_to_scheduler(p, f);
}

void *dynamic_shared(void) { return g_pool.shared; }

hipError_t launch(dim3 grid, dim3 block, size_t shared_bytes, hipStream_t stream,
                  body_fn body, const void *ctx) {
    (void)stream;
    unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
    if (nthreads == 0 || nthreads > kMaxThreads || grid.x == 0 || grid.y == 0 ||
        grid.z == 0 || grid.x > kMaxGrid[0] || grid.y > kMaxGrid[1] || grid.z > kMaxGrid[2] ||
        shared_bytes > kSharedBytes) {
        cd_rt_log(CD_RT_LOG_ERROR,
                  "hip-emu: invalid launch configuration: grid (%u,%u,%u) block (%u,%u,%u) "
                  "shared %zu bytes",
                  grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
        cd_emu_set_error(hipErrorInvalidConfiguration);
        return hipErrorInvalidConfiguration;
    }
    if (g_pool.current) { // dynamic parallelism is not supported
        cd_emu_set_error(hipErrorNotSupported);
        return hipErrorNotSupported;
    }
    unsigned long long nblocks = (unsigned long long)grid.x * grid.y * grid.z;
    int failed = 0; // a hipError_t, set by any block
#ifdef _OPENMP
    int threads = nblocks > 1 ? omp_get_max_threads() : 1;
    if ((unsigned long long)threads > nblocks) threads = (int)nblocks;
#pragma omp parallel num_threads(threads) if (threads > 1)
#endif
    {
        pool *p = &g_pool;
        int ok = pool_reserve(p, (unsigned)nthreads) == 0;
        if (!ok) __atomic_store_n(&failed, (int)hipErrorOutOfMemory, __ATOMIC_RELAXED);
        p->body = body;
        p->ctx = ctx;
        // Every thread of the team reaches the worksharing loop, even one
        // whose pool could not grow (it then takes no block).
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (unsigned long long b = 0; b < nblocks; b++) {
            if (!ok || __atomic_load_n(&failed, __ATOMIC_RELAXED)) continue;
            dim3 bid((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                     (unsigned)(b / ((unsigned long long)grid.x * grid.y)));
            hipError_t e = run_block(p, grid, block, bid, shared_bytes);
            if (e != hipSuccess) __atomic_store_n(&failed, (int)e, __ATOMIC_RELAXED);
        }
        p->body = NULL;
        p->ctx = NULL;
    }
    if (failed) {
        cd_emu_set_error((hipError_t)failed);
        return (hipError_t)failed;
    }
    return hipSuccess;
}

} // namespace cd_emu
