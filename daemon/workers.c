#include "daemon/workers.h"

#include "daemon/log.h"
#include "proto/errors.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cd_workers {
    uv_async_t async;          // wakes the loop when `done` is non-empty
    pthread_mutex_t lock;      // guards every field below
    pthread_cond_t cond;       // signalled when `queue` grows or on stop
    cd_request *queue_head;    // FIFO of requests waiting for a worker
    cd_request *queue_tail;
    cd_request *done_head;     // FIFO of finished requests for the loop
    cd_request *done_tail;
    size_t busy;               // queued + running + done-not-yet-delivered
    bool stopping;             // threads exit once the queue is empty
    int nthreads;              // threads started
    pthread_t *threads;
    cd_complete_fn complete;   // loop-side completion callback
    void *ud;
};

typedef struct {
    cd_workers *w;
    int index;
} worker_arg;

static void push(cd_request **head, cd_request **tail, cd_request *req) {
    req->next = NULL;
    if (*tail)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
}

static void *worker_main(void *p) {
    worker_arg arg = *(worker_arg *)p;
    free(p);
    cd_workers *w = arg.w;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->queue_head && !w->stopping)
            pthread_cond_wait(&w->cond, &w->lock);
        cd_request *req = w->queue_head;
        if (!req)
            break; // stopping and nothing left
        w->queue_head = req->next;
        if (!w->queue_head)
            w->queue_tail = NULL;
        pthread_mutex_unlock(&w->lock);

        if (atomic_load(&req->cancelled)) {
            req->status = CD_ECANCELLED;
            snprintf(req->err, sizeof req->err, "client went away");
        } else {
            req->status = req->work(req, arg.index);
        }

        pthread_mutex_lock(&w->lock);
        push(&w->done_head, &w->done_tail, req);
        pthread_mutex_unlock(&w->lock);
        uv_async_send(&w->async);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

// Delivers every finished request to the completion callback (loop thread).
static void deliver(cd_workers *w) {
    pthread_mutex_lock(&w->lock);
    cd_request *list = w->done_head;
    w->done_head = w->done_tail = NULL;
    pthread_mutex_unlock(&w->lock);
    while (list) {
        cd_request *next = list->next;
        pthread_mutex_lock(&w->lock);
        w->busy--;
        pthread_mutex_unlock(&w->lock);
        w->complete(list, w->ud);
        list = next;
    }
}

static void on_async(uv_async_t *a) {
    deliver(a->data);
}

int cd_workers_init(cd_workers **out, uv_loop_t *loop, int n,
                    cd_complete_fn complete, void *ud) {
    cd_workers *w = calloc(1, sizeof *w);
    if (!w)
        return CD_ENOMEM;
    w->threads = calloc((size_t)n, sizeof *w->threads);
    if (!w->threads) {
        free(w);
        return CD_ENOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->complete = complete;
    w->ud = ud;
    if (uv_async_init(loop, &w->async, on_async) != 0) {
        free(w->threads);
        free(w);
        return CD_EINTERNAL;
    }
    w->async.data = w;
    for (int i = 0; i < n; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (!arg)
            break;
        arg->w = w;
        arg->index = i;
        if (pthread_create(&w->threads[i], NULL, worker_main, arg) != 0) {
            free(arg);
            break;
        }
        w->nthreads++;
    }
    if (w->nthreads == 0) {
        CD_ERROR("cannot start any worker thread");
        cd_workers_stop(w);
        return CD_EINTERNAL;
    }
    if (w->nthreads < n)
        CD_WARN("started %d of %d worker threads", w->nthreads, n);
    *out = w;
    return 0;
}

void cd_workers_submit(cd_workers *w, cd_request *req) {
    pthread_mutex_lock(&w->lock);
    push(&w->queue_head, &w->queue_tail, req);
    w->busy++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

size_t cd_workers_busy(const cd_workers *w) {
    cd_workers *mw = (cd_workers *)w;
    pthread_mutex_lock(&mw->lock);
    size_t b = mw->busy;
    pthread_mutex_unlock(&mw->lock);
    return b;
}

int cd_workers_count(const cd_workers *w) {
    return w->nthreads;
}

static void on_async_closed(uv_handle_t *h) {
    cd_workers *w = h->data;
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w->threads);
    free(w);
}

void cd_workers_stop(cd_workers *w) {
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    deliver(w);
    uv_close((uv_handle_t *)&w->async, on_async_closed);
}
