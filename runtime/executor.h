#ifndef CD_RUNTIME_EXECUTOR_H
#define CD_RUNTIME_EXECUTOR_H

// The process's one CPU executor: every model run on host memory (the cpu
// backend) computes here, whichever thread asked for it (daemon workers,
// convd-run, convctl). It owns one thread, the only one that ever starts an
// OpenMP team for a run, so the process has one team of `threads` compute
// threads however many callers there are: never more compute threads than
// cores, and a hot request reuses a team whose threads spin between layers
// (libgomp's spin-then-sleep; convd sets GOMP_SPINCOUNT, OPERATIONS.md)
// instead of sleeping and waking at every layer.
//
// How it spends the cores, chosen per pick by the load:
//  - wide: one job at a time on all `threads` (a lone request gets every
//    core; its kernels split each layer across the team);
//  - lanes: when at least `threads` jobs are waiting, one OpenMP region of
//    `threads` threads in which each thread takes whole jobs, one thread
//    each, until none is waiting or running (no barrier per layer; every
//    core computes a request of its own). Measured faster for throughput
//    (docs/PERFORMANCE.md, "All cores").
//
//  - on the caller: a job of one thread (the executor has one, or the job
//    asks for one) that finds the executor idle runs on its caller's thread,
//    the executor waiting meanwhile: still one compute thread, without the
//    two thread wake-ups of handing it over and back.
//
// Callers block until their job is done. Thread-safe; the thread starts on
// first use (and again in a forked child that uses it).

typedef struct {
    int threads;                    // compute threads (cd_executor_init)
    int lanes;                      // 1: lanes allowed (cd_executor_set_lanes)
    unsigned long long jobs;        // jobs run since start
    unsigned long long wide_jobs;   // of them, run wide
    unsigned long long lane_jobs;   // of them, run in a lane
    unsigned long long caller_jobs; // of them, run on the caller's thread (one thread, executor idle)
    unsigned long long lane_spans;  // lane regions opened
    int queued;                     // jobs waiting now
    int running;                    // jobs running now
} cd_executor_stats;

// Sets the number of compute threads: n > 0, or 0 for
// cd_executor_default_threads(). Takes effect for the next job. Returns the
// count now in force.
int cd_executor_init(int n);
// The count cd_executor_init put in force (the default before it).
int cd_executor_threads(void);
// The CPUs this process may run on (sched_getaffinity; at least 1).
int cd_executor_affinity_cpus(void);
// The default thread count: the CPUs of the affinity mask (honours taskset
// and cpusets), at most the cgroup's CPU quota rounded down (at least 1;
// runtime/cpu-quota.h).
int cd_executor_default_threads(void);
// The cgroup's CPU quota in CPUs, 0 for none (read now: a limit may change).
double cd_executor_cpu_quota(void);
// The threads a quota allows: rounded down, at least 1; 0 for no quota.
int cd_executor_quota_threads(double quota);
// on = 0 keeps every job wide (for measuring; the default is 1).
void cd_executor_set_lanes(int on);
// An idle executor polls for a new job this long after its last one before
// it sleeps (yielding the core between polls): saves a wake-up per request
// at low load, costs CPU only while idle and only for that long. 0 (the
// default): sleep at once. The daemon's --worker-spin-us sets it too.
void cd_executor_set_spin_ns(unsigned long long ns);

// Runs fn(arg) on the executor and returns when it has returned. threads:
// the team size for a wide run (0 or more than cd_executor_threads: all of
// them); a lane runs it on one thread. fn must not call cd_executor_run.
void cd_executor_run(void (*fn)(void *arg), void *arg, int threads);

// 1 on the executor's thread and its team's threads while they run a job
// (a job that needs the executor again calls fn directly).
int cd_executor_is_current(void);

void cd_executor_get_stats(cd_executor_stats *out);

#endif // CD_RUNTIME_EXECUTOR_H
