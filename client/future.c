// libconvd futures: convd_infer_submit and the poll/wait API, built on
// convd_infer_async (the completion stores the result in the future).

#include "client/client-internal.h"
#include "core/errors.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct convd_future {
    pthread_mutex_t mu;  // guards the fields below
    pthread_cond_t cond; // broadcast on completion
    atomic_int done;     // 1 once completed (read lock-free by _done)
    int detached;        // 1: freed by the application before completion;
                         // the completion frees it
    int status;          // the request's status
    convd_outputs *outs; // its outputs until taken by _result
    char errmsg[512];    // its error message
    pthread_t reader;    // the connection's reader thread (EBUSY check)
};

static void future_destroy(convd_future *f) {
    convd_outputs_free(f->outs);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cond);
    free(f);
}

// The completion (reader thread): store, or drop when nobody wants it.
static void future_complete(void *user, int status, convd_outputs *outs, const char *errmsg) {
    convd_future *f = user;
    pthread_mutex_lock(&f->mu);
    if (f->detached) {
        pthread_mutex_unlock(&f->mu);
        convd_outputs_free(outs);
        f->outs = NULL;
        future_destroy(f);
        return;
    }
    f->status = status;
    f->outs = outs;
    snprintf(f->errmsg, sizeof f->errmsg, "%s", errmsg ? errmsg : "");
    atomic_store(&f->done, 1);
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

int convd_infer_submit(convd_conn *c, const char *model, size_t n_inputs, const char *const *names,
                       const convd_tensor *inputs, size_t n_outputs, const char *const *output_names, int timeout_ms,
                       convd_future **out) {
    if (out) *out = NULL;
    if (!out) return cd_client_fail(CD_EPARAMS, "out is required");
    convd_future *f = calloc(1, sizeof *f);
    if (!f) return cd_client_fail(CD_ENOMEM, "out of memory");
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (c) f->reader = cd_client_reader_thread(c);
    int rc =
        convd_infer_async(c, model, n_inputs, names, inputs, n_outputs, output_names, timeout_ms, future_complete, f);
    if (rc != 0) {
        future_destroy(f);
        return rc;
    }
    *out = f;
    return 0;
}

int convd_future_done(const convd_future *f) { return f ? atomic_load(&((convd_future *)f)->done) : 0; }

int convd_future_wait(convd_future *f, int timeout_ms) {
    if (!f) return cd_client_fail(CD_EPARAMS, "future is NULL");
    if (atomic_load(&f->done)) return 0;
    if (timeout_ms == 0) return cd_client_fail(CD_ETIMEOUT, "the request has not completed yet");
    if (pthread_equal(pthread_self(), f->reader))
        return cd_client_fail(CD_EBUSY, "waiting for a request of this connection inside one "
                                        "of its completion callbacks would wait for itself");
    struct timespec ts;
    if (timeout_ms > 0) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&f->mu);
    while (!atomic_load(&f->done)) {
        int e = timeout_ms > 0 ? pthread_cond_timedwait(&f->cond, &f->mu, &ts) : pthread_cond_wait(&f->cond, &f->mu);
        if (e == ETIMEDOUT) break;
    }
    int done = atomic_load(&f->done);
    pthread_mutex_unlock(&f->mu);
    if (!done) return cd_client_fail(CD_ETIMEOUT, "the request has not completed within %d ms", timeout_ms);
    return 0;
}

int convd_future_result(convd_future *f, convd_outputs **out) {
    if (out) *out = NULL;
    if (!f) return cd_client_fail(CD_EPARAMS, "future is NULL");
    pthread_mutex_lock(&f->mu);
    if (!atomic_load(&f->done)) {
        pthread_mutex_unlock(&f->mu);
        return cd_client_fail(CD_EBUSY, "the request has not completed yet");
    }
    int status = f->status;
    if (out) {
        *out = f->outs;
        f->outs = NULL;
    }
    pthread_mutex_unlock(&f->mu);
    if (status != 0) return cd_client_fail(status, "%s", f->errmsg);
    return 0;
}

void convd_future_free(convd_future *f) {
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    if (!atomic_load(&f->done)) {
        f->detached = 1; // the completion frees it
        pthread_mutex_unlock(&f->mu);
        return;
    }
    pthread_mutex_unlock(&f->mu);
    future_destroy(f);
}
