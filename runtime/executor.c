// The process's one CPU executor (executor.h): a job queue, one thread that
// is the master of the only OpenMP team that runs models, and the choice
// between running a job wide and running several in lanes.

#include "runtime/executor.h"

#include "runtime/cpu-quota.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

// One caller's job; lives on the caller's stack until done is set.
typedef struct job {
    void (*fn)(void *arg);
    void *arg;
    int threads;       // wide team size asked for (0: all)
    bool done;         // set under g.mu when fn has returned
    pthread_cond_t cv; // signalled when done is set
    struct job *next;  // queue link
} job;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work;   // a job was queued, or a lane's sibling finished
    job *head, *tail;      // waiting jobs, oldest first
    int queued, running;   // jobs waiting / running
    bool caller_running;   // a one-thread job runs on its caller's thread (cd_executor_run)
    bool started;          // the thread exists (in this process)
    int threads;           // team size; 0 until first use or init
    bool lanes;            // lanes allowed
    cd_executor_stats st;  // counters (threads/lanes/queued/running filled on read)
    atomic_uint submitted; // bumped per job, read by the idle spin without the lock
    atomic_ullong spin_ns; // the idle executor polls this long before sleeping
    pthread_once_t atfork;
} g = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .lanes = true,
    .atfork = PTHREAD_ONCE_INIT,
};

static _Thread_local int t_current; // this thread runs executor jobs

int cd_executor_affinity_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

double cd_executor_cpu_quota(void) { return cd_cpu_quota(NULL); }

int cd_executor_quota_threads(double quota) {
    // Rounded down: threads beyond the quota run in bursts and wait out the
    // rest of each period (p99 of a request 4x its p50, measured).
    return !(quota > 0) ? 0 : quota < 1 ? 1 : (int)quota;
}

int cd_executor_default_threads(void) {
    const int n = cd_executor_affinity_cpus(), q = cd_executor_quota_threads(cd_cpu_quota(NULL));
    return q > 0 && q < n ? q : n;
}

int cd_executor_init(int n) {
    if (n <= 0) n = cd_executor_default_threads();
    pthread_mutex_lock(&g.mu);
    g.threads = n;
    pthread_mutex_unlock(&g.mu);
    return n;
}

int cd_executor_threads(void) {
    pthread_mutex_lock(&g.mu);
    int n = g.threads;
    pthread_mutex_unlock(&g.mu);
    return n > 0 ? n : cd_executor_default_threads();
}

void cd_executor_set_lanes(int on) {
    pthread_mutex_lock(&g.mu);
    g.lanes = on != 0;
    pthread_mutex_unlock(&g.mu);
}

void cd_executor_set_spin_ns(unsigned long long ns) { atomic_store(&g.spin_ns, ns); }

int cd_executor_is_current(void) { return t_current; }

void cd_executor_get_stats(cd_executor_stats *out) {
    pthread_mutex_lock(&g.mu);
    *out = g.st;
    out->threads = g.threads > 0 ? g.threads : cd_executor_default_threads();
    out->lanes = g.lanes;
    out->queued = g.queued;
    out->running = g.running;
    pthread_mutex_unlock(&g.mu);
}

// g.mu held. Takes the oldest job.
static job *pop(void) {
    job *j = g.head;
    g.head = j->next;
    if (!g.head) g.tail = NULL;
    g.queued--;
    g.running++;
    g.st.jobs++;
    return j;
}

// g.mu held. Hands j back to its caller.
static void finish(job *j) {
    g.running--;
    j->done = true;
    pthread_cond_signal(&j->cv);
}

// Lanes: every thread of one team takes whole jobs, one thread each, until
// none is waiting and none of its siblings runs one (a sibling's job may
// still be followed by more work, which an idle lane then takes at once).
static void run_lanes(int threads) {
#pragma omp parallel num_threads(threads)
    {
        t_current = 1;
        omp_set_num_threads(1); // the kernels a lane runs split nothing
        pthread_mutex_lock(&g.mu);
        for (;;) {
            if (g.head) {
                job *j = pop();
                g.st.lane_jobs++;
                pthread_mutex_unlock(&g.mu);
                j->fn(j->arg);
                pthread_mutex_lock(&g.mu);
                finish(j);
                pthread_cond_broadcast(&g.work); // idle siblings: time to look again
            } else if (g.running > 0) {
                pthread_cond_wait(&g.work, &g.mu);
            } else {
                break;
            }
        }
        pthread_mutex_unlock(&g.mu);
    }
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// g.mu held, no job waiting. Polls for one for spin_ns (lock released),
// yielding the core between polls, then sleeps until one is queued.
static void wait_for_work(void) {
    unsigned long long spin = atomic_load(&g.spin_ns);
    if (spin) {
        unsigned seen = atomic_load(&g.submitted);
        pthread_mutex_unlock(&g.mu);
        uint64_t until = now_ns() + spin;
        while (atomic_load(&g.submitted) == seen && now_ns() < until) sched_yield();
        pthread_mutex_lock(&g.mu);
    }
    while (!g.head) pthread_cond_wait(&g.work, &g.mu);
}

static void *executor_main(void *unused) {
    (void)unused;
    t_current = 1;
    omp_set_dynamic(0); // teams of the size asked for, whatever OMP_DYNAMIC said (runtime/omp-env.c)
    pthread_mutex_lock(&g.mu);
    for (;;) {
        if (!g.head) wait_for_work();
        if (g.caller_running) { // one job at a time beside it would be a thread too many
            pthread_cond_wait(&g.work, &g.mu);
            continue;
        }
        int threads = g.threads;
        if (g.lanes && threads > 1 && g.queued >= threads) {
            g.st.lane_spans++;
            pthread_mutex_unlock(&g.mu);
            run_lanes(threads);
            pthread_mutex_lock(&g.mu);
            continue;
        }
        job *j = pop();
        g.st.wide_jobs++;
        pthread_mutex_unlock(&g.mu);
        omp_set_num_threads(j->threads > 0 && j->threads < threads ? j->threads : threads);
        j->fn(j->arg);
        pthread_mutex_lock(&g.mu);
        finish(j);
    }
    return NULL;
}

// A forked child has no executor thread: it starts its own on first use.
static void after_fork_child(void) {
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.work, NULL);
    g.head = g.tail = NULL;
    g.queued = g.running = 0;
    g.started = false;
    t_current = 0;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, after_fork_child); }

// g.mu held. Starts the thread if this process has none. Returns false when
// it cannot be started (the caller then runs its job itself).
static bool ensure_started(void) {
    if (g.started) return true;
    if (g.threads <= 0) g.threads = cd_executor_default_threads();
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0) return false;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    // The job runs on this thread's stack: the size of a main thread's.
    pthread_attr_setstacksize(&attr, 8u << 20);
    g.started = pthread_create(&t, &attr, executor_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    return g.started;
}

// g.mu held, the executor idle, j a job of one thread: runs it on the
// calling thread, which saves the two thread wake-ups of a hand-over (the
// executor's and the caller's), and is the same single compute thread; the
// executor waits meanwhile. Returns with g.mu held.
static void run_on_caller(job *j) {
    g.caller_running = true;
    g.running++;
    g.st.jobs++;
    g.st.caller_jobs++;
    pthread_mutex_unlock(&g.mu);
    t_current = 1;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    j->fn(j->arg);
    omp_set_num_threads(saved);
    t_current = 0;
    pthread_mutex_lock(&g.mu);
    g.running--;
    g.caller_running = false;
    if (g.head) pthread_cond_broadcast(&g.work); // queued meanwhile: the executor's turn
}

void cd_executor_run(void (*fn)(void *arg), void *arg, int threads) {
    if (t_current) { // a job asking again: it already holds the cores
        fn(arg);
        return;
    }
    pthread_once(&g.atfork, register_atfork);
    job j = {.fn = fn, .arg = arg, .threads = threads};
    pthread_cond_init(&j.cv, NULL);
    pthread_mutex_lock(&g.mu);
    if (!ensure_started()) {
        pthread_mutex_unlock(&g.mu);
        pthread_cond_destroy(&j.cv);
        fn(arg);
        return;
    }
    const int team = threads > 0 && threads < g.threads ? threads : g.threads;
    if (team == 1 && !g.head && g.running == 0) {
        run_on_caller(&j);
        pthread_mutex_unlock(&g.mu);
        pthread_cond_destroy(&j.cv);
        return;
    }
    if (g.tail)
        g.tail->next = &j;
    else
        g.head = &j;
    g.tail = &j;
    g.queued++;
    atomic_fetch_add(&g.submitted, 1);
    pthread_cond_signal(&g.work);
    while (!j.done) pthread_cond_wait(&j.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    pthread_cond_destroy(&j.cv);
}
