#ifndef CD_TESTS_UNIT_WORKER_GATE_H
#define CD_TESTS_UNIT_WORKER_GATE_H

#include "tests/unit/check.h"

#include <pthread.h>
#include <time.h>

// A one-way gate between a test and the workers of cd_workers: a worker
// announces each run it starts (gate_pass) and, when told to hold, waits
// until the test opens the gate. The test waits for "run started" instead of sleeping and hoping the
// worker got there (which fails on a loaded machine). The deadlines below only
// guard against a hang.
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int started; // runs (or submits) begun
    int open;    // set by gate_open
} g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

#define GATE_HANG_GUARD_S 60

static inline void gate_reset(void) {
    pthread_mutex_lock(&g_gate.lock);
    g_gate.started = 0;
    g_gate.open = 0;
    pthread_mutex_unlock(&g_gate.lock);
}

// Worker side: counts a started run, then waits while the gate is shut.
static inline void gate_pass(int hold) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += GATE_HANG_GUARD_S;
    pthread_mutex_lock(&g_gate.lock);
    g_gate.started++;
    pthread_cond_broadcast(&g_gate.cond);
    while (hold && !g_gate.open)
        if (pthread_cond_timedwait(&g_gate.cond, &g_gate.lock, &until) != 0) break;
    pthread_mutex_unlock(&g_gate.lock);
}

// Test side: waits until at least n runs have started; fails on the guard.
static inline void gate_wait_started(int n) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += GATE_HANG_GUARD_S;
    pthread_mutex_lock(&g_gate.lock);
    int rc = 0;
    while (g_gate.started < n && rc == 0) rc = pthread_cond_timedwait(&g_gate.cond, &g_gate.lock, &until);
    const int started = g_gate.started;
    pthread_mutex_unlock(&g_gate.lock);
    CHECK(started >= n);
}

// Runs begun so far.
static inline int gate_started(void) {
    pthread_mutex_lock(&g_gate.lock);
    const int n = g_gate.started;
    pthread_mutex_unlock(&g_gate.lock);
    return n;
}

static inline void gate_open(void) {
    pthread_mutex_lock(&g_gate.lock);
    g_gate.open = 1;
    pthread_cond_broadcast(&g_gate.cond);
    pthread_mutex_unlock(&g_gate.lock);
}

#endif // CD_TESTS_UNIT_WORKER_GATE_H
