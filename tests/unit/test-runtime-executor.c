// The CPU executor (runtime/executor.h): every job of many concurrent callers
// runs exactly once and returns to its caller; wide jobs get the team size
// they ask for; a queue of at least `threads` jobs runs in lanes, really at
// once (with OpenMP; the TSan build has no team and runs them one by one);
// model runs from many threads through it equal a run alone; the count
// follows the affinity mask; a forked child gets an executor of its own.

#include "core/errors.h"
#include "onnx.pb-c.h"
#include "runtime/executor.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/onnx-builder.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// Spins until *flag is set; fails the test after a generous hang guard.
static void await_flag(atomic_int *flag, const char *what) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!atomic_load(flag)) {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 60) CD_CHECK_FAIL_("hang guard: %s never happened", what);
    }
}

// Spins until at least `queued` jobs wait in the executor's queue and at
// least `running` run; fails the test after a generous hang guard.
static void await_executor(int queued, int running, const char *what) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        cd_executor_stats st;
        cd_executor_get_stats(&st);
        if (st.queued >= queued && st.running >= running) return;
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 60) CD_CHECK_FAIL_("hang guard: %s", what);
    }
}

// ---- many callers ---------------------------------------------------------------------

enum { CALLERS = 8, JOBS_PER_CALLER = 150 };

typedef struct {
    atomic_int runs; // times fn ran
    int team;        // omp_get_max_threads() seen by the job
    double sum;      // a parallel reduction computed by the job
} count_job;

static void count_fn(void *arg) {
    count_job *j = arg;
    atomic_fetch_add(&j->runs, 1);
    j->team = omp_get_max_threads();
    double s = 0;
#pragma omp parallel for reduction(+ : s)
    for (int i = 1; i <= 1000; i++) s += i;
    j->sum = s;
}

static void *caller_main(void *arg) {
    count_job *jobs = arg;
    for (int i = 0; i < JOBS_PER_CALLER; i++) cd_executor_run(count_fn, &jobs[i], 0);
    return NULL;
}

CD_TEST(executor_concurrent_callers_each_job_runs_once) {
    cd_executor_init(cd_test_randi(1, 4));
    cd_executor_set_lanes(cd_test_randi(0, 1));
    static count_job jobs[CALLERS][JOBS_PER_CALLER];
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; i++) CHECK_EQ(pthread_create(&t[i], NULL, caller_main, jobs[i]), 0);
    for (int i = 0; i < CALLERS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < CALLERS; i++)
        for (int k = 0; k < JOBS_PER_CALLER; k++) {
            CHECK_EQ(atomic_load(&jobs[i][k].runs), 1);
            CHECK(jobs[i][k].sum == 500500.0);
        }
    cd_executor_stats st;
    cd_executor_get_stats(&st);
    CHECK_EQ(st.jobs, CALLERS * JOBS_PER_CALLER);
    CHECK_EQ(st.wide_jobs + st.lane_jobs + st.caller_jobs, st.jobs);
    CHECK_EQ(st.queued, 0);
    CHECK_EQ(st.running, 0);
    cd_executor_set_lanes(1);
}

CD_TEST(executor_wide_job_gets_the_team_it_asks_for) {
    cd_executor_init(3);
    count_job all = {0}, one = {0}, two = {0}, more = {0};
    cd_executor_run(count_fn, &all, 0);
    cd_executor_run(count_fn, &one, 1);
    cd_executor_run(count_fn, &two, 2);
    cd_executor_run(count_fn, &more, 64);
    CHECK_EQ(all.team, 3);
    CHECK_EQ(one.team, 1);
    CHECK_EQ(two.team, 2);
    CHECK_EQ(more.team, 3); // never more than the executor's threads
    CHECK_EQ(cd_executor_threads(), 3);
}

// ---- one-thread jobs on their caller's thread -----------------------------------------

typedef struct {
    pthread_t ran_on;
    int team;
} where_job;

static void where_fn(void *arg) {
    where_job *j = arg;
    j->ran_on = pthread_self();
    j->team = omp_get_max_threads();
}

CD_TEST(executor_one_thread_job_runs_on_its_idle_caller) {
    cd_executor_stats a, b;
    for (int n = 1; n <= 3; n++) {
        cd_executor_init(n);
        where_job one = {0}, all = {0};
        cd_executor_get_stats(&a);
        cd_executor_run(where_fn, &one, 1);
        cd_executor_run(where_fn, &all, 0);
        cd_executor_get_stats(&b);
        CHECK(pthread_equal(one.ran_on, pthread_self())); // one thread, executor idle: here
        CHECK_EQ(one.team, 1);
        CHECK_EQ(b.caller_jobs - a.caller_jobs, n == 1 ? 2u : 1u);
        CHECK(pthread_equal(all.ran_on, pthread_self()) == (n == 1)); // a team: the executor's thread
        CHECK_EQ(all.team, n);
    }
}

// With one thread, a job queued while another runs on its caller waits for it:
// never two compute threads.
static atomic_int g_caller_in, g_second_ran;

static void caller_hold_fn(void *arg) {
    (void)arg;
    atomic_store(&g_caller_in, 1);
    await_executor(1, 0, "the second job never queued behind this one");
    for (int i = 0; i < 2000; i++) { // the executor must not start it meanwhile
        CHECK(!atomic_load(&g_second_ran));
        sched_yield();
    }
}

static void second_fn(void *arg) {
    (void)arg;
    atomic_store(&g_second_ran, 1);
}

static void *run_caller_hold(void *arg) {
    cd_executor_run(caller_hold_fn, arg, 0);
    return NULL;
}

CD_TEST(executor_waits_for_a_job_on_its_caller) {
    cd_executor_init(1);
    atomic_store(&g_caller_in, 0), atomic_store(&g_second_ran, 0);
    pthread_t a;
    CHECK_EQ(pthread_create(&a, NULL, run_caller_hold, NULL), 0);
    await_flag(&g_caller_in, "the first job's start");
    cd_executor_run(second_fn, NULL, 0); // queued: the executor is busy (on the caller)
    pthread_join(a, NULL);
    CHECK(atomic_load(&g_second_ran));
    cd_executor_stats st;
    cd_executor_get_stats(&st);
    CHECK_EQ(st.running, 0);
    CHECK_EQ(st.queued, 0);
}

// ---- lanes ----------------------------------------------------------------------------

static atomic_int g_b_started, g_c_started, g_a_done;

// The first job holds the executor until two more jobs wait behind it, so
// the next pick sees a full queue.
static void hold_fn(void *arg) {
    (void)arg;
    await_executor(2, 0, "the two jobs never queued");
    atomic_store(&g_a_done, 1);
}

static void lane_b(void *arg) {
    (void)arg;
    CHECK_EQ(omp_get_max_threads(), 1); // a lane splits nothing
    atomic_store(&g_b_started, 1);
#ifdef _OPENMP
    await_flag(&g_c_started, "job C running beside job B");
#endif
}

static void lane_c(void *arg) {
    (void)arg;
    CHECK_EQ(omp_get_max_threads(), 1);
    atomic_store(&g_c_started, 1);
#ifdef _OPENMP
    await_flag(&g_b_started, "job B running beside job C");
#endif
}

static void *run_b(void *arg) {
    cd_executor_run(lane_b, arg, 0);
    return NULL;
}
static void *run_c(void *arg) {
    cd_executor_run(lane_c, arg, 0);
    return NULL;
}
static void *run_hold(void *arg) {
    cd_executor_run(hold_fn, arg, 0);
    return NULL;
}

CD_TEST(executor_concurrent_full_queue_runs_in_lanes) {
    cd_executor_init(2);
    pthread_t a, b, c;
    CHECK_EQ(pthread_create(&a, NULL, run_hold, NULL), 0);
    // B and C are queued only once A runs (so A is picked alone, wide).
    await_executor(0, 1, "job A never started");
    CHECK_EQ(pthread_create(&b, NULL, run_b, NULL), 0);
    CHECK_EQ(pthread_create(&c, NULL, run_c, NULL), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    CHECK(atomic_load(&g_a_done));
    cd_executor_stats st;
    cd_executor_get_stats(&st);
    CHECK_EQ(st.jobs, 3);
    CHECK_EQ(st.wide_jobs, 1);
    CHECK_EQ(st.lane_jobs, 2);
    CHECK_EQ(st.lane_spans, 1);
}

CD_TEST(executor_lanes_off_keeps_every_job_wide) {
    cd_executor_init(2);
    cd_executor_set_lanes(0);
    static count_job jobs[4][JOBS_PER_CALLER];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK_EQ(pthread_create(&t[i], NULL, caller_main, jobs[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    cd_executor_stats st;
    cd_executor_get_stats(&st);
    CHECK_EQ(st.lane_jobs, 0);
    CHECK_EQ(st.wide_jobs, 4 * JOBS_PER_CALLER);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < JOBS_PER_CALLER; k++) CHECK_EQ(jobs[i][k].team, 2);
    cd_executor_set_lanes(1);
}

// ---- model runs from many threads ----------------------------------------------------

enum { RUNNERS = 4, RUNS = 12 };

typedef struct {
    cd_model *m;
    int64_t ni, no;
    const float *x;   // RUNS inputs
    const float *ref; // RUNS outputs of runs alone
    int failed;       // a run differed or failed
} runner_arg;

static void *runner_main(void *p) {
    runner_arg *a = p;
    cd_exec *ex;
    if (cd_exec_init(a->m, &ex)) {
        a->failed = 1;
        return NULL;
    }
    float *y = malloc((size_t)a->no * sizeof(float));
    char err[256];
    for (int r = 0; r < RUNS && y; r++) {
        const void *in[1] = {a->x + (size_t)r * a->ni};
        void *out[1] = {y};
        if (cd_model_run(ex, 1, in, out, err, sizeof err)) {
            a->failed = 1;
            break;
        }
        const float *ref = a->ref + (size_t)r * a->no;
        for (int64_t i = 0; i < a->no; i++) {
            double d = fabs((double)y[i] - ref[i]), s = fabs((double)ref[i]);
            if (!(d <= 1e-4 * (s > 1 ? s : 1))) a->failed = 1;
        }
    }
    free(y);
    cd_exec_free(ex);
    return NULL;
}

CD_TEST(executor_concurrent_model_runs_equal_runs_alone) {
    CHECK_EQ(cd_runtime_init(2), 0);
    char path[64], err[512];
    int c, h;
    mb_write_small_cnn(path, sizeof path, 2, &c, &h);
    cd_model_opts opts = {.max_batch = 1};
    cd_model *m;
    int rc = cd_model_load(path, &opts, &m, err, sizeof err);
    if (rc) CD_CHECK_FAIL_("load: %s", err);
    unlink(path);
    const cd_io_desc *od = cd_model_output(m, 0);
    int64_t ni = (int64_t)c * h * h, no = 1;
    for (int i = 1; i < od->rank; i++) no *= od->shape[i];
    float *x = malloc((size_t)(ni * RUNS) * sizeof(float)), *ref = malloc((size_t)(no * RUNS) * sizeof(float));
    for (int64_t i = 0; i < ni * RUNS; i++) x[i] = cd_test_randf(-1, 1);
    // The reference: each input run alone (wide, nothing beside it).
    cd_exec *ex;
    CHECK_EQ(cd_exec_init(m, &ex), 0);
    for (int r = 0; r < RUNS; r++) {
        const void *in[1] = {x + (size_t)r * ni};
        void *out[1] = {ref + (size_t)r * no};
        CHECK_EQ(cd_model_run(ex, 1, in, out, err, sizeof err), 0);
    }
    cd_exec_free(ex);
    runner_arg args[RUNNERS];
    pthread_t t[RUNNERS];
    for (int i = 0; i < RUNNERS; i++) {
        args[i] = (runner_arg){.m = m, .ni = ni, .no = no, .x = x, .ref = ref};
        CHECK_EQ(pthread_create(&t[i], NULL, runner_main, &args[i]), 0);
    }
    for (int i = 0; i < RUNNERS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < RUNNERS; i++) CHECK_EQ(args[i].failed, 0);
    cd_executor_stats st;
    cd_executor_get_stats(&st);
    CHECK_EQ(st.jobs, 1 + RUNS * (RUNNERS + 1)); // the load's planning, then every run
    free(x);
    free(ref);
    cd_model_free(m);
}

// ---- threads and processes -----------------------------------------------------------

CD_TEST(executor_threads_follow_the_affinity_mask) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CHECK_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    CHECK_EQ(cd_executor_affinity_cpus(), CPU_COUNT(&set));
    // All of them, unless a cgroup's CPU quota allows fewer (cpu-quota.h).
    const double quota = cd_executor_cpu_quota();
    const int want = quota > 0 && (int)quota < CPU_COUNT(&set) ? (quota < 1 ? 1 : (int)quota) : CPU_COUNT(&set);
    CHECK_EQ(cd_executor_init(0), want);
    // One CPU of them only (as `taskset -c N` would): the default follows.
    int first = 0;
    while (!CPU_ISSET(first, &set)) first++;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    CHECK_EQ(cd_executor_affinity_cpus(), 1);
    CHECK_EQ(cd_executor_init(0), 1);
    count_job j = {0};
    cd_executor_run(count_fn, &j, 0);
    CHECK_EQ(j.team, 1);
}

CD_TEST(executor_forked_child_starts_its_own) {
#ifdef __SANITIZE_THREAD__
    CD_SKIP("ThreadSanitizer cannot start threads in the child of a multi-threaded fork");
#endif
    cd_executor_init(2);
    count_job j = {0};
    cd_executor_run(count_fn, &j, 0); // the parent's thread exists now
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        count_job k = {0};
        cd_executor_run(count_fn, &k, 0);
        _exit(atomic_load(&k.runs) == 1 && k.sum == 500500.0 ? 0 : 1);
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

static void nested_fn(void *arg) {
    count_job *j = arg;
    CHECK(cd_executor_is_current());
    cd_executor_run(count_fn, j, 0); // runs at once, on this thread
}

CD_TEST(executor_job_that_runs_again_does_not_deadlock) {
    count_job j = {0};
    CHECK(!cd_executor_is_current());
    cd_executor_run(nested_fn, &j, 0);
    CHECK_EQ(atomic_load(&j.runs), 1);
}
