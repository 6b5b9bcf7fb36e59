// The HIP emulator's launch: grid -> blocks -> threads as fibers. See
// backends/hip/emu/hip-emu.h for the model and its limits.
//
// Each OS thread that runs blocks owns a fiber pool: one stack per GPU thread
// of the largest block seen (mmap'd once, a guard page below each stack),
// the block's dynamic shared memory, and the scheduler's saved context. A
// block runs in rounds (barrier intervals): every live fiber is resumed once
// per round, in the block's thread order, and runs until it reaches a barrier
// or exits; after a round either all fibers have exited (block done), all
// wait at the same barrier (next round), or some exited while others wait or
// they wait at different barriers (barrier divergence: the launch fails).
//
// Static __shared__ variables all live in the TLS section cd_emu_shared
// (hip-emu.h); the linker's __start_/__stop_ symbols give its place in the
// TLS image, dl_iterate_phdr the calling thread's copy of that image, so the
// block scheduler can poison the running thread's copy at every block start.
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
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
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

// Bounds of the static __shared__ section in the TLS image (absent, hence
// NULL, when no kernel of the program declares static shared memory).
extern "C" char __start_cd_emu_shared[] __attribute__((weak));
extern "C" char __stop_cd_emu_shared[] __attribute__((weak));

namespace cd_emu {

thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
int g_wave_size = 64;

namespace {

const size_t kStackBytes = 128 << 10; // per GPU thread (ASan frames are large)
const size_t kSharedBytes = 64 << 10; // emulated sharedMemPerBlock
const unsigned kMaxThreads = 1024;    // emulated maxThreadsPerBlock
const unsigned kMaxGrid[3] = {2147483647u, 65536u, 65536u};

const unsigned char kPoison = 0xff; // shared memory at block start: NaN, -1

enum fiber_state { FIBER_READY, FIBER_WAITING, FIBER_DONE };

// The thread order and its seed (cd_emu_set_order), the launches so far (the
// mixed order draws from the count), read from the environment once.
pthread_once_t g_config_once = PTHREAD_ONCE_INIT;
int g_order = CD_EMU_ORDER_MIXED;
unsigned long long g_seed = 0;
unsigned long long g_launches = 0;

const char *order_name(int order) {
    switch (order) {
    case CD_EMU_ORDER_ASCENDING: return "ascending";
    case CD_EMU_ORDER_DESCENDING: return "descending";
    case CD_EMU_ORDER_RANDOM: return "random";
    default: return "mixed";
    }
}

unsigned long long mix64(unsigned long long z) { // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void config_init(void) {
    const char *o = getenv("CD_HIP_EMU_ORDER");
    if (o && *o) {
        int found = -1;
        for (int i = CD_EMU_ORDER_MIXED; i <= CD_EMU_ORDER_RANDOM; i++)
            if (strcmp(o, order_name(i)) == 0) found = i;
        if (found < 0)
            cd_rt_log(CD_RT_LOG_ERROR,
                      "hip-emu: CD_HIP_EMU_ORDER=%s is not mixed, ascending, descending or "
                      "random; using mixed",
                      o);
        else
            g_order = found;
    }
    const char *s = getenv("CD_HIP_EMU_SEED");
    if (s && *s)
        g_seed = strtoull(s, NULL, 0);
    else
        g_seed = mix64((unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32));
    const char *w = getenv("CD_HIP_EMU_WAVE_SIZE");
    if (w && *w) {
        if (strcmp(w, "32") == 0 || strcmp(w, "64") == 0)
            g_wave_size = atoi(w);
        else
            cd_rt_log(CD_RT_LOG_ERROR, "hip-emu: CD_HIP_EMU_WAVE_SIZE=%s is not 32 or 64; using 64", w);
    }
}

void config_load(void) { pthread_once(&g_config_once, config_init); }

struct fiber {
    void *sp; // saved stack pointer while suspended (x86-64)
#ifndef CD_EMU_X86_SWITCH
    ucontext_t uc; // saved context (other architectures)
#endif
    char *stack_lo; // lowest usable byte of its stack
    dim3 tid;       // threadIdx of the GPU thread it runs
    fiber_state state;
    const char *bar_file; // the barrier it waits at (FIBER_WAITING): __FILE__
    int bar_line;         // and __LINE__ of the __syncthreads() call
    void *asan_fake;      // ASan fake-stack handle across a switch
};

struct pool {
    char *stacks;     // nfibers * (guard page + kStackBytes)
    size_t stride;    // bytes per stack including its guard page
    unsigned nfibers; // stacks allocated
    fiber *fibers;
    unsigned *order; // nfibers indices: the running round's thread order
    fiber *current;  // the fiber running now, NULL in the scheduler
    void *sched_sp;  // scheduler's saved stack pointer
#ifndef CD_EMU_X86_SWITCH
    ucontext_t sched_uc;
#endif
    const void *sched_stack_lo; // scheduler stack bounds (for ASan)
    size_t sched_stack_size;
    void *sched_fake;
    body_fn body; // the running launch
    const void *ctx;
    unsigned char *shared; // dynamic shared memory, kSharedBytes
    char *static_shared;   // this OS thread's copy of the cd_emu_shared
    size_t static_bytes;   // TLS section (static __shared__), and its size
};

thread_local pool g_pool;

#ifdef CD_EMU_X86_SWITCH
extern "C" void cd_emu_ctx_switch(void **save_sp, void *load_sp);
extern "C" void cd_emu_ctx_entry(void);
__asm__(".text\n"
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
    __sanitizer_start_switch_fiber(f->state == FIBER_DONE ? NULL : &f->asan_fake, p->sched_stack_lo,
                                   p->sched_stack_size);
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
    a[-1] = (uint64_t)(uintptr_t)&cd_emu_ctx_entry;  // return address
    a[-2] = 0;                                       // rbp
    a[-3] = 0;                                       // rbx
    a[-4] = (uint64_t)(uintptr_t)&cd_emu_fiber_main; // r12: entry
    a[-5] = (uint64_t)(uintptr_t)p;                  // r13: its argument
    a[-6] = 0;                                       // r14
    a[-7] = 0;                                       // r15
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
    free(p->order);
    free(p->shared);
    p->stacks = NULL;
    p->fibers = NULL;
    p->order = NULL;
    p->shared = NULL;
    p->nfibers = 0;
}

void pool_key_create(void) { (void)pthread_key_create(&g_pool_key, pool_release); }

// dl_iterate_phdr callback: finds the module whose TLS image holds the
// static shared section and the calling thread's address of that section.
struct tls_lookup {
    uintptr_t image; // __start_cd_emu_shared
    char *copy;      // out: the calling thread's copy, or NULL
};

int find_tls_copy(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    tls_lookup *q = static_cast<tls_lookup *>(arg);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_TLS) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (q->image < lo || q->image >= lo + ph->p_memsz) continue;
        if (info->dlpi_tls_data) q->copy = static_cast<char *>(info->dlpi_tls_data) + (q->image - lo);
        return 1;
    }
    return 0;
}

// Sets p->static_shared to this OS thread's static __shared__ variables.
void static_shared_locate(pool *p) {
    p->static_shared = NULL;
    p->static_bytes = 0;
    uintptr_t lo = (uintptr_t)__start_cd_emu_shared, hi = (uintptr_t)__stop_cd_emu_shared;
    if (!lo || hi <= lo) return;
    tls_lookup q = {lo, NULL};
    dl_iterate_phdr(find_tls_copy, &q);
    if (!q.copy) {
        cd_rt_log(CD_RT_LOG_ERROR, "hip-emu: static __shared__ memory not found in this "
                                   "thread's TLS: it is not poisoned at block start");
        return;
    }
    p->static_shared = q.copy;
    p->static_bytes = hi - lo;
}

// Grows this OS thread's pool to n fibers. Returns 0, or -1 when out of memory.
int pool_reserve(pool *p, unsigned n) {
    if (!p->shared) {
        p->shared = static_cast<unsigned char *>(aligned_alloc(256, kSharedBytes));
        if (!p->shared) return -1;
        pthread_once(&g_pool_key_once, pool_key_create);
        (void)pthread_setspecific(g_pool_key, p); // first use on this thread
        static_shared_locate(p);
    }
    if (p->nfibers >= n) return 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t stride = kStackBytes + page;
    char *stacks = static_cast<char *>(
        mmap(NULL, stride * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (stacks == MAP_FAILED) return -1;
    fiber *fibers = static_cast<fiber *>(calloc(n, sizeof(fiber)));
    unsigned *order = static_cast<unsigned *>(calloc(n, sizeof(unsigned)));
    if (!fibers || !order) {
        free(fibers);
        free(order);
        munmap(stacks, stride * n);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        mprotect(stacks + i * stride, page, PROT_NONE); // overflow guard
        fibers[i].stack_lo = stacks + i * stride + page;
    }
    if (p->stacks) munmap(p->stacks, p->stride * p->nfibers);
    free(p->fibers);
    free(p->order);
    p->stacks = stacks;
    p->stride = stride;
    p->fibers = fibers;
    p->order = order;
    p->nfibers = n;
    return 0;
}

// Fills p->order with the block's thread order for one round: kind is an
// explicit cd_emu_order; rng (RANDOM only) is advanced.
void order_fill(pool *p, unsigned n, int kind, unsigned long long *rng) {
    unsigned *o = p->order;
    for (unsigned i = 0; i < n; i++) o[i] = kind == CD_EMU_ORDER_DESCENDING ? n - 1 - i : i;
    if (kind != CD_EMU_ORDER_RANDOM) return;
    for (unsigned i = n - 1; i > 0; i--) { // Fisher-Yates
        unsigned j = (unsigned)(mix64(*rng += 0x9e3779b97f4a7c15ull) % (i + 1));
        unsigned t = o[i];
        o[i] = o[j];
        o[j] = t;
    }
}

int same_site(const fiber *a, const fiber *b) {
    return a->bar_line == b->bar_line && (a->bar_file == b->bar_file || strcmp(a->bar_file, b->bar_file) == 0);
}

// The parameters of one launch that every block needs.
struct launch_info {
    dim3 grid, block;
    size_t shared_bytes;
    unsigned long long number; // the launch's number in the process
    int order;                 // cd_emu_order
    unsigned long long seed;
};

// Runs one block on this OS thread. Returns hipSuccess, or
// hipErrorLaunchFailure after barrier divergence (logged, core/log.h).
hipError_t run_block(pool *p, const launch_info *li, dim3 bid) {
    gridDim = li->grid;
    blockDim = li->block;
    blockIdx = bid;
    const dim3 block = li->block;
    if (li->shared_bytes) memset(p->shared, kPoison, li->shared_bytes);
    if (p->static_bytes) memset(p->static_shared, kPoison, p->static_bytes);
    unsigned n = 0;
    for (unsigned z = 0; z < block.z; z++)
        for (unsigned y = 0; y < block.y; y++)
            for (unsigned x = 0; x < block.x; x++) {
                p->fibers[n].tid = dim3(x, y, z);
                fiber_init(p, &p->fibers[n]);
                n++;
            }
    // The block's order: a function of (seed, launch, block) only, so that a
    // seed reproduces a run whichever OS thread takes the block.
    unsigned long long linear =
        bid.x + (unsigned long long)li->grid.x * (bid.y + (unsigned long long)li->grid.y * bid.z);
    unsigned long long rng = mix64(li->seed ^ mix64(li->number + 1) ^ mix64(~linear));
    int kind = li->order;
    if (kind == CD_EMU_ORDER_MIXED) kind = CD_EMU_ORDER_ASCENDING + (int)(mix64(rng) % 3);
    for (unsigned round = 0;; round++) {
        order_fill(p, n, kind, &rng);
        unsigned done = 0, waiting = 0;
        fiber *exited = NULL, *waiter = NULL, *other = NULL;
        for (unsigned k = 0; k < n; k++) {
            fiber *f = &p->fibers[p->order[k]];
            if (f->state != FIBER_DONE) resume(p, f);
            if (f->state == FIBER_DONE) {
                done++;
                if (!exited) exited = f;
                continue;
            }
            waiting++;
            if (!waiter)
                waiter = f;
            else if (!other && !same_site(waiter, f))
                other = f;
        }
        if (waiting == 0) return hipSuccess;
        if (done == 0 && !other) {
            for (unsigned i = 0; i < n; i++) p->fibers[i].state = FIBER_READY;
            continue;
        }
        const fiber *a = other ? other : exited;
        char what[512];
        if (other)
            snprintf(what, sizeof what, "thread (%u,%u,%u) waits at %s:%d", a->tid.x, a->tid.y, a->tid.z, a->bar_file,
                     a->bar_line);
        else
            snprintf(what, sizeof what, "%u of %u threads exited (thread (%u,%u,%u) first)", done, n, a->tid.x,
                     a->tid.y, a->tid.z);
        cd_rt_log(CD_RT_LOG_ERROR,
                  "hip-emu: __syncthreads divergence in block (%u,%u,%u), barrier interval #%u: "
                  "thread (%u,%u,%u) waits at %s:%d while %s (thread order %s, "
                  "CD_HIP_EMU_SEED=%llu)",
                  bid.x, bid.y, bid.z, round + 1, waiter->tid.x, waiter->tid.y, waiter->tid.z, waiter->bar_file,
                  waiter->bar_line, what, order_name(kind), li->seed);
#ifdef CD_EMU_ASAN
        // The waiting fibers are abandoned mid-frame: clear the redzones
        // their frames left before the stacks are used again.
        for (unsigned i = 0; i < n; i++) __asan_unpoison_memory_region(p->fibers[i].stack_lo, kStackBytes);
#endif
        return hipErrorLaunchFailure;
    }
}

} // namespace

void barrier(const char *file, int line) {
    pool *p = &g_pool;
    fiber *f = p->current;
    if (!f) return; // host code calling a device barrier: nothing to wait for
    f->state = FIBER_WAITING;
    f->bar_file = file;
    f->bar_line = line;
    yield_to_scheduler(p, f);
}

void *dynamic_shared(void) { return g_pool.shared; }

hipError_t launch(dim3 grid, dim3 block, size_t shared_bytes, hipStream_t stream, body_fn body, const void *ctx) {
    (void)stream;
    unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
    if (nthreads == 0 || nthreads > kMaxThreads || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > kMaxGrid[0] ||
        grid.y > kMaxGrid[1] || grid.z > kMaxGrid[2] || shared_bytes > kSharedBytes) {
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
    config_load();
    launch_info li;
    li.grid = grid;
    li.block = block;
    li.shared_bytes = shared_bytes;
    li.number = __atomic_fetch_add(&g_launches, 1, __ATOMIC_RELAXED);
    li.order = __atomic_load_n(&g_order, __ATOMIC_RELAXED);
    li.seed = __atomic_load_n(&g_seed, __ATOMIC_RELAXED);
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
            hipError_t e = run_block(p, &li, bid);
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

extern "C" {

void cd_emu_set_order(cd_emu_order order, unsigned long long seed) {
    cd_emu::config_load();
    __atomic_store_n(&cd_emu::g_order, (int)order, __ATOMIC_RELAXED);
    __atomic_store_n(&cd_emu::g_seed, seed, __ATOMIC_RELAXED);
    __atomic_store_n(&cd_emu::g_launches, 0ull, __ATOMIC_RELAXED);
}

cd_emu_order cd_emu_get_order(unsigned long long *seed) {
    cd_emu::config_load();
    if (seed) *seed = __atomic_load_n(&cd_emu::g_seed, __ATOMIC_RELAXED);
    return (cd_emu_order)__atomic_load_n(&cd_emu::g_order, __ATOMIC_RELAXED);
}

int cd_emu_wave_size(void) {
    cd_emu::config_load();
    return cd_emu::g_wave_size;
}

} // extern "C"
