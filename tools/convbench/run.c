// convbench's load engine: connections, inputs, the closed and the open
// loop, the per-second timeline and the progress line.
//
// Closed loop: `concurrency` workers spread over the connections, each with
// exactly one request in flight. A worker's next request is sent from the
// completion callback of its previous one (libconvd's reader thread), so no
// thread hop adds latency; latency = completion - send.
//
// Open loop: one issuer thread walks the arrival schedule (arrival.h) and
// sends request i at t0 + arrival_i on connection i % K, whatever happened
// to earlier requests. Latency = completion - SCHEDULED time: when the
// issuer runs late (the in-flight bound is reached, the socket is full) the
// wait counts, so a stalled server cannot hide its stall by slowing the
// load (no coordinated omission).
//
// Measured: requests sent at or after the end of the warm-up. The timeline
// (one row per second) covers everything, warm-up included.

#include "tools/convbench/batches.h"
#include "tools/convbench/bench.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NSETS 4 // distinct random input sets, used in turn

typedef struct bench bench;

// A closed-loop worker: one request in flight at a time.
typedef struct {
    bench *b;
    int conn;         // index into conns
    int64_t sched_ns; // when its current request was sent
    int measured;     // its current request counts in the result
} worker;

// An open-loop request in flight.
typedef struct {
    bench *b;
    int64_t sched_ns; // its scheduled send time
    int measured;     // counts in the result
} oreq;

struct bench {
    const bench_cfg *cfg;
    bench_result *res;
    convd_conn **conns;
    int nconn;
    size_t n_inputs;
    char **names;                 // n_inputs input names
    convd_tensor *sets;           // NSETS * n_inputs tensors of random data
    int64_t t0, warm_at, end_at;  // CLOCK_MONOTONIC ns; end_at INT64_MAX: --requests
    atomic_int stop;              // 1: send nothing more
    atomic_llong measured_issued; // measured requests sent (the --requests quota)
    atomic_ullong sent_all;       // every request sent, warm-up included
    atomic_llong outstanding;     // requests in flight
    atomic_int live_workers;      // closed loop: workers still sending
    atomic_ullong rr;             // round robin over input sets
    pthread_mutex_t mu;           // guards the fields below and res's counters
    pthread_cond_t cond;          // signalled when the run may be over
    cd_hist *iv;                  // latencies of the current second
    uint64_t iv_ok, iv_err;       // completions of the current second
    int64_t last_done;            // last measured completion (ns)
    int64_t max_lag;              // open loop: worst send lateness (ns)
    uint64_t send_failures;       // requests that could not be sent
    atomic_int failed_workers;    // closed loop: workers retired by a failed send
    atomic_int lost_all;          // open loop: every connection broke
    int last_send_status;         // status of the last send failure
    char last_send_msg[160];      // and its message
    // --shm: the outputs (names, bytes at the run's batch) each region holds.
    size_t n_outputs;
    char **out_names;
    size_t *out_bytes;
    bench_batches batches_warm; // the daemon's runs by batch size when the warm-up ended
    int batches_warm_read;
};

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t) {
    struct timespec ts = {(time_t)(t / 1000000000), (long)(t % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void wake(bench *b) {
    pthread_mutex_lock(&b->mu);
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->mu);
}

// Decides whether a request due at t may be sent; sets *measured.
// One request about to go out: in flight, sent, and sent within the
// measured window.
static void count_sent(bench *b, int measured) {
    atomic_fetch_add(&b->outstanding, 1);
    atomic_fetch_add(&b->sent_all, 1);
    if (measured) {
        pthread_mutex_lock(&b->mu);
        b->res->sent++;
        pthread_mutex_unlock(&b->mu);
    }
}

static int may_issue(bench *b, int64_t t, int *measured) {
    if (atomic_load(&b->stop)) return 0;
    if (t >= b->end_at) {
        atomic_store(&b->stop, 1);
        wake(b);
        return 0;
    }
    *measured = t >= b->warm_at;
    if (*measured && b->cfg->requests) {
        long long n = atomic_fetch_add(&b->measured_issued, 1);
        if (n >= b->cfg->requests) {
            atomic_store(&b->stop, 1);
            wake(b);
            return 0;
        }
    }
    return 1;
}

// Counts one completion (or a failed send: status < 0, scheduled at sched).
static void record(bench *b, int64_t sched, int measured, int status) {
    int64_t now = mono_ns();
    uint64_t lat = now > sched ? (uint64_t)(now - sched) : 0;
    bench_result *r = b->res;
    pthread_mutex_lock(&b->mu);
    if (status == 0) {
        cd_hist_record(b->iv, lat);
        b->iv_ok++;
    } else {
        b->iv_err++;
    }
    if (measured) {
        if (status == 0) {
            cd_hist_record(&r->lat, lat);
            r->ok++;
        } else {
            r->errors++;
            int code = -status;
            r->by_code[code > 0 && code < BENCH_CODES - 1 ? code : BENCH_CODES - 1]++;
        }
        if (now > b->last_done) b->last_done = now;
    }
    pthread_mutex_unlock(&b->mu);
}

static void send_failed(bench *b, int64_t sched, int measured, int rc) {
    pthread_mutex_lock(&b->mu);
    b->send_failures++;
    b->last_send_status = rc;
    snprintf(b->last_send_msg, sizeof b->last_send_msg, "%s", convd_errmsg(NULL));
    pthread_mutex_unlock(&b->mu);
    record(b, sched, measured, rc);
}

static void finish_one(bench *b) {
    if (atomic_fetch_sub(&b->outstanding, 1) == 1 && atomic_load(&b->stop)) wake(b);
}

static const convd_tensor *next_set(bench *b) { return &b->sets[(atomic_fetch_add(&b->rr, 1) % NSETS) * b->n_inputs]; }

// ---- closed loop ------------------------------------------------------------

static void closed_done(void *user, int status, convd_outputs *outs, const char *errmsg);

// Sends the worker's next request, or retires it (quota, time, send failure).
static void worker_issue(worker *w) {
    bench *b = w->b;
    int64_t now = mono_ns();
    int measured;
    if (!may_issue(b, now, &measured)) goto retire;
    w->sched_ns = now;
    w->measured = measured;
    count_sent(b, measured);
    int rc = convd_infer_async(b->conns[w->conn], b->cfg->model, b->n_inputs, (const char *const *)b->names,
                               next_set(b), 0, NULL, b->cfg->timeout_ms, closed_done, w);
    if (rc == 0) return;
    send_failed(b, now, measured, rc);
    finish_one(b);
    atomic_fetch_add(&b->failed_workers, 1);
retire:
    if (atomic_fetch_sub(&b->live_workers, 1) == 1) {
        atomic_store(&b->stop, 1);
        wake(b);
    }
}

static void closed_done(void *user, int status, convd_outputs *outs, const char *errmsg) {
    worker *w = user;
    bench *b = w->b;
    convd_outputs_free(outs);
    record(b, w->sched_ns, w->measured, status);
    worker_issue(w); // before finish_one: outstanding never dips to 0 mid-run
    finish_one(b);
}

// ---- closed loop through shared memory (--shm) ---------------------------------

// A --shm worker: its own connection and region. The region holds the NSETS
// input sets (written once, used in turn) and one place per output.
typedef struct {
    bench *b;
    int conn;
    pthread_t thread;
} shm_worker;

// Puts the input sets and the outputs' places in a new region registered on
// conn. Returns 0 or a status (message set).
static int shm_setup(bench *b, convd_conn *conn, convd_region **rp, convd_region_ref *in_refs,
                     convd_region_ref *out_refs) {
    size_t in_total = 0, out_total = 0;
    for (size_t i = 0; i < b->n_inputs; i++) in_total += (b->sets[i].nbytes + 63) & ~(size_t)63;
    for (size_t o = 0; o < b->n_outputs; o++) out_total += (b->out_bytes[o] + 63) & ~(size_t)63;
    int rc = convd_region_create(NSETS * in_total + out_total, rp);
    if (rc) return rc;
    char *base = convd_region_data(*rp);
    size_t off = 0;
    for (int s = 0; s < NSETS; s++)
        for (size_t i = 0; i < b->n_inputs; i++) {
            const convd_tensor *t = &b->sets[s * b->n_inputs + i];
            memcpy(base + off, t->data, t->nbytes);
            in_refs[s * b->n_inputs + i] = (convd_region_ref){"convbench", off, t->nbytes};
            off += (t->nbytes + 63) & ~(size_t)63;
        }
    for (size_t o = 0; o < b->n_outputs; o++) {
        out_refs[o] = (convd_region_ref){"convbench", off, b->out_bytes[o]};
        off += (b->out_bytes[o] + 63) & ~(size_t)63;
    }
    return convd_region_register(conn, *rp, "convbench", 0);
}

static void *shm_worker_main(void *arg) {
    shm_worker *w = arg;
    bench *b = w->b;
    convd_conn *conn = b->conns[w->conn];
    convd_region *r = NULL;
    convd_region_ref *in_refs = calloc(NSETS * b->n_inputs, sizeof *in_refs);
    convd_region_ref *out_refs = calloc(b->n_outputs ? b->n_outputs : 1, sizeof *out_refs);
    int rc = in_refs && out_refs ? shm_setup(b, conn, &r, in_refs, out_refs) : CONVD_ENOMEM;
    if (rc) {
        send_failed(b, mono_ns(), 0, rc);
        atomic_fetch_add(&b->failed_workers, 1);
    }
    int64_t now;
    int measured;
    while (rc == 0 && may_issue(b, now = mono_ns(), &measured)) {
        count_sent(b, measured);
        size_t s = atomic_fetch_add(&b->rr, 1) % NSETS;
        convd_outputs *outs = NULL;
        int st = convd_infer_regions(conn, b->cfg->model, b->n_inputs, (const char *const *)b->names,
                                     &b->sets[s * b->n_inputs], &in_refs[s * b->n_inputs], b->n_outputs,
                                     (const char *const *)b->out_names, out_refs, &outs, b->cfg->timeout_ms);
        convd_outputs_free(outs);
        record(b, now, measured, st);
        finish_one(b);
    }
    convd_region_free(r); // the daemon's mapping goes with the connection
    free(in_refs);
    free(out_refs);
    if (atomic_fetch_sub(&b->live_workers, 1) == 1) {
        atomic_store(&b->stop, 1);
        wake(b);
    }
    return NULL;
}

// ---- open loop --------------------------------------------------------------

static void open_done(void *user, int status, convd_outputs *outs, const char *errmsg) {
    oreq *q = user;
    bench *b = q->b;
    convd_outputs_free(outs);
    record(b, q->sched_ns, q->measured, status);
    free(q);
    finish_one(b);
}

static void *issuer_main(void *arg) {
    bench *b = arg;
    // Wake up on time: the default timer slack (50 us) is as long as the gap
    // between requests at 20k req/s.
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    cd_arrival arr;
    cd_arrival_init(&arr, b->cfg->arrival, b->cfg->rate, b->cfg->seed ^ 0x5eed);
    int closed_conns = 0;
    for (uint64_t i = 0;; i++) {
        int64_t sched = b->t0 + (int64_t)cd_arrival_next_ns(&arr);
        int measured;
        if (!may_issue(b, sched, &measured)) break;
        if (sched > mono_ns()) sleep_until(sched);
        if (atomic_load(&b->stop)) break;
        int64_t lag = mono_ns() - sched;
        oreq *q = malloc(sizeof *q);
        if (!q) {
            send_failed(b, sched, measured, CONVD_ENOMEM);
            continue;
        }
        *q = (oreq){b, sched, measured};
        atomic_fetch_add(&b->outstanding, 1);
        atomic_fetch_add(&b->sent_all, 1);
        pthread_mutex_lock(&b->mu);
        if (measured) b->res->sent++;
        if (lag > b->max_lag) b->max_lag = lag;
        pthread_mutex_unlock(&b->mu);
        int rc =
            convd_infer_async(b->conns[i % (uint64_t)b->nconn], b->cfg->model, b->n_inputs,
                              (const char *const *)b->names, next_set(b), 0, NULL, b->cfg->timeout_ms, open_done, q);
        if (rc != 0) {
            free(q);
            send_failed(b, sched, measured, rc);
            finish_one(b);
            // A broken connection stays broken: end when all are.
            if (rc == CONVD_ECLOSED && ++closed_conns >= 4 * b->nconn) {
                int alive = 0;
                for (int k = 0; k < b->nconn; k++) {
                    convd_health_info h;
                    if (convd_health(b->conns[k], &h) != CONVD_ECLOSED) alive++;
                }
                if (!alive) {
                    atomic_store(&b->lost_all, 1);
                    atomic_store(&b->stop, 1);
                    wake(b);
                    break;
                }
                closed_conns = 0;
            }
        }
    }
    return NULL;
}

// ---- setup ------------------------------------------------------------------

// Parses "AxBxC" into shape; returns the rank or -1.
static int parse_dims(const char *s, int64_t *shape) {
    int rank = 0;
    while (*s) {
        char *end;
        errno = 0;
        long long d = strtoll(s, &end, 10);
        if (errno || end == s || d < 1 || rank == CONVD_MAX_RANK) return -1;
        shape[rank++] = d;
        if (*end == 'x' || *end == 'X')
            s = end + 1;
        else if (*end == 0)
            s = end;
        else
            return -1;
        if (s[-1] == 'x' && *s == 0) return -1;
    }
    return rank ? rank : -1;
}

// Takes each input's shape from an explicit --input-shape. Returns 0 or -1.
static int shapes_from_spec(const char *spec, const convd_model_info *m, int *ranks,
                            int64_t (*shapes)[CONVD_MAX_RANK]) {
    for (size_t i = 0; i < m->n_inputs; i++) ranks[i] = 0;
    if (!strchr(spec, '=')) {
        if (m->n_inputs != 1) {
            fprintf(stderr, "convbench: model '%s' has %zu inputs: give NAME=SHAPE for each\n", m->name, m->n_inputs);
            return -1;
        }
        ranks[0] = parse_dims(spec, shapes[0]);
        if (ranks[0] < 0) {
            fprintf(stderr, "convbench: --input-shape '%s' is not AxBx.. (positive dims)\n", spec);
            return -1;
        }
        return 0;
    }
    char *copy = strdup(spec);
    int rc = 0;
    for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            fprintf(stderr, "convbench: --input-shape item '%s' is not NAME=AxB..\n", tok);
            rc = -1;
            break;
        }
        *eq = 0;
        size_t k = 0;
        while (k < m->n_inputs && strcmp(m->inputs[k].name ? m->inputs[k].name : "", tok)) k++;
        if (k == m->n_inputs) {
            fprintf(stderr, "convbench: model '%s' has no input '%s'\n", m->name, tok);
            rc = -1;
            break;
        }
        ranks[k] = parse_dims(eq + 1, shapes[k]);
        if (ranks[k] < 0) {
            fprintf(stderr, "convbench: shape '%s' of input '%s' is not AxBx..\n", eq + 1, tok);
            rc = -1;
            break;
        }
    }
    free(copy);
    for (size_t i = 0; rc == 0 && i < m->n_inputs; i++) {
        if (ranks[i] == 0) {
            fprintf(stderr, "convbench: --input-shape gives no shape for input '%s'\n", m->inputs[i].name);
            rc = -1;
        }
    }
    return rc;
}

// Finds the model and builds NSETS random input sets. Returns an exit code.
static int setup_inputs(bench *b) {
    const bench_cfg *cfg = b->cfg;
    convd_model_list *l;
    int rc = convd_models(b->conns[0], &l);
    if (rc != 0) {
        fprintf(stderr, "convbench: models: %s: %s\n", convd_errname(rc), convd_errmsg(NULL));
        return BENCH_EXIT_FAIL;
    }
    const convd_model_info *m = NULL;
    for (size_t i = 0; i < l->count; i++)
        if (l->models[i].name && strcmp(l->models[i].name, cfg->model) == 0) m = &l->models[i];
    if (!m) {
        char names[512] = "";
        size_t off = 0;
        for (size_t i = 0; i < l->count && off < sizeof names - 1; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "",
                                    l->models[i].name ? l->models[i].name : "?");
        fprintf(stderr, "convbench: unknown model '%s' (%s%s)\n", cfg->model,
                l->count ? "loaded: " : "no model is loaded", names);
        convd_model_list_free(l);
        return BENCH_EXIT_FAIL;
    }
    if (m->n_inputs == 0) {
        fprintf(stderr, "convbench: model '%s' reports no inputs\n", cfg->model);
        convd_model_list_free(l);
        return BENCH_EXIT_FAIL;
    }
    int ranks[64];
    int64_t shapes[64][CONVD_MAX_RANK];
    if (m->n_inputs > 64) {
        fprintf(stderr, "convbench: model '%s' has too many inputs\n", cfg->model);
        convd_model_list_free(l);
        return BENCH_EXIT_FAIL;
    }
    rc = 0;
    if (strcmp(cfg->input_shape, "auto") == 0) {
        for (size_t i = 0; i < m->n_inputs && rc == 0; i++) {
            const convd_tensor_info *ti = &m->inputs[i];
            ranks[i] = ti->rank;
            for (int d = 0; d < ti->rank; d++) {
                int64_t v = ti->shape[d];
                if (v < 1 && d == 0) v = cfg->batch;
                if (v < 1) {
                    fprintf(stderr,
                            "convbench: input '%s' has an open dim %d: give "
                            "--input-shape\n",
                            ti->name, d);
                    rc = -1;
                }
                shapes[i][d] = v;
            }
            if (ti->rank == 0) {
                fprintf(stderr, "convbench: input '%s' has no shape: give --input-shape\n", ti->name);
                rc = -1;
            }
        }
    } else {
        rc = shapes_from_spec(cfg->input_shape, m, ranks, shapes);
    }
    for (size_t i = 0; i < m->n_inputs && rc == 0; i++) {
        if (m->inputs[i].dtype != CONVD_DTYPE_F32 && m->inputs[i].dtype != CONVD_DTYPE_INVALID) {
            fprintf(stderr, "convbench: input '%s' is %s: convbench sends f32 only\n", m->inputs[i].name,
                    convd_dtype_name(m->inputs[i].dtype));
            rc = -1;
        }
    }
    if (rc != 0) {
        convd_model_list_free(l);
        return BENCH_EXIT_FAIL;
    }
    b->n_inputs = m->n_inputs;
    b->names = calloc(m->n_inputs, sizeof *b->names);
    b->sets = calloc(NSETS * m->n_inputs, sizeof *b->sets);
    uint64_t rng = cfg->seed;
    for (size_t i = 0; i < m->n_inputs; i++) b->names[i] = strdup(m->inputs[i].name);
    b->res->batch = shapes[0][0];
    for (int s = 0; s < NSETS; s++) {
        for (size_t i = 0; i < m->n_inputs; i++) {
            convd_tensor *t = &b->sets[s * m->n_inputs + i];
            size_t n = 1;
            t->dtype = CONVD_DTYPE_F32;
            t->rank = ranks[i];
            for (int d = 0; d < ranks[i]; d++) {
                t->shape[d] = shapes[i][d];
                n *= (size_t)shapes[i][d];
            }
            float *x = malloc(n * sizeof *x);
            if (!x) {
                fprintf(stderr, "convbench: out of memory for the inputs\n");
                convd_model_list_free(l);
                return BENCH_EXIT_FAIL;
            }
            for (size_t k = 0; k < n; k++) x[k] = (float)(2.0 * cd_bench_rand01(&rng) - 1.0);
            t->data = x;
            t->nbytes = n * sizeof *x;
        }
    }
    b->n_outputs = m->n_outputs;
    b->out_names = calloc(m->n_outputs ? m->n_outputs : 1, sizeof *b->out_names);
    b->out_bytes = calloc(m->n_outputs ? m->n_outputs : 1, sizeof *b->out_bytes);
    for (size_t i = 0; i < m->n_outputs; i++) {
        const convd_tensor_info *ti = &m->outputs[i];
        size_t n = convd_dtype_size(ti->dtype) ? convd_dtype_size(ti->dtype) : 4;
        for (int d = 0; d < ti->rank; d++) n *= (size_t)(ti->shape[d] < 1 ? b->res->batch : ti->shape[d]);
        b->out_names[i] = strdup(ti->name);
        b->out_bytes[i] = n;
    }
    convd_model_list_free(l);
    return BENCH_EXIT_OK;
}

// ---- the timeline -----------------------------------------------------------

// Closes the current second: a timeline row and, when asked, the progress
// line. *spare is a cleared histogram that becomes the current one; the old
// one, cleared, is handed back in *spare.
// A last interval shorter than a quarter second is folded into the row
// before it (its counts; the percentiles stay the full second's).
static void tick(bench *b, cd_hist **spare, uint64_t *sent_prev, int show, int tty, int last) {
    int64_t now = mono_ns();
    pthread_mutex_lock(&b->mu);
    cd_hist *iv = b->iv;
    b->iv = *spare;
    uint64_t ok = b->iv_ok, err = b->iv_err;
    b->iv_ok = b->iv_err = 0;
    pthread_mutex_unlock(&b->mu);
    uint64_t sent = atomic_load(&b->sent_all);
    bench_result *r = b->res;
    double t_s = (double)(now - b->t0) / 1e9;
    int folded = last && r->nrows > 0 && t_s - r->rows[r->nrows - 1].t_s < 0.25;
    if (folded) {
        bench_row *row = &r->rows[r->nrows - 1];
        row->t_s = t_s;
        row->sent += sent - *sent_prev;
        row->ok += ok;
        row->errors += err;
        if (iv->total && (double)iv->max / 1e6 > row->max_ms) row->max_ms = (double)iv->max / 1e6;
    }
    bench_row *rows = folded ? NULL : realloc(r->rows, (r->nrows + 1) * sizeof *rows);
    if (rows) {
        r->rows = rows;
        bench_row *row = &rows[r->nrows++];
        double prev_t = r->nrows > 1 ? rows[r->nrows - 2].t_s : 0.0;
        row->t_s = t_s;
        // Warm-up when most of the interval lies before the warm-up's end.
        row->warmup = (prev_t + row->t_s) / 2 < (double)(b->warm_at - b->t0) / 1e9;
        row->sent = sent - *sent_prev;
        row->ok = ok;
        row->errors = err;
        row->p50_ms = (double)cd_hist_percentile(iv, 50) / 1e6;
        row->p90_ms = (double)cd_hist_percentile(iv, 90) / 1e6;
        row->p99_ms = (double)cd_hist_percentile(iv, 99) / 1e6;
        row->max_ms = iv->total ? (double)iv->max / 1e6 : 0.0;
        if (show) {
            double dt = row->t_s - prev_t;
            uint64_t all_ok = 0, all_err = 0;
            for (size_t i = 0; i < r->nrows; i++) {
                all_ok += rows[i].ok;
                all_err += rows[i].errors;
            }
            fprintf(stderr,
                    "%s[%6.1fs]%s sent %llu  ok %llu  errors %llu  %.1f req/s  "
                    "p50 %.3f ms  p99 %.3f ms%s",
                    tty ? "\r\033[K" : "", row->t_s, row->warmup ? " warmup" : "", (unsigned long long)sent,
                    (unsigned long long)all_ok, (unsigned long long)all_err, dt > 0 ? (double)ok / dt : 0.0,
                    row->p50_ms, row->p99_ms, tty ? "" : "\n");
            fflush(stderr);
        }
    }
    *sent_prev = sent;
    cd_hist_init(iv);
    *spare = iv;
}

// ---- the run ----------------------------------------------------------------

static void bench_free(bench *b) {
    if (b->sets) {
        for (size_t i = 0; i < NSETS * b->n_inputs; i++) free((void *)b->sets[i].data);
        free(b->sets);
    }
    if (b->names) {
        for (size_t i = 0; i < b->n_inputs; i++) free(b->names[i]);
        free(b->names);
    }
    for (size_t i = 0; b->out_names && i < b->n_outputs; i++) free(b->out_names[i]);
    free(b->out_names);
    free(b->out_bytes);
    free(b->conns);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cond);
}

void bench_result_free(bench_result *res) {
    free(res->rows);
    res->rows = NULL;
    res->nrows = 0;
}

// The main thread's loop: one tick (progress line, per-second figures) per
// second until every request has completed, or the drain after the end
// times out (then b->res->stop_reason says so).
static void run_ticks(bench *b, cd_hist **spare, int show, int tty) {
    uint64_t sent_prev = 0;
    int64_t next_tick = b->t0 + 1000000000;
    int64_t drain_deadline = INT64_MAX;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        while (!(atomic_load(&b->stop) && atomic_load(&b->outstanding) == 0) && mono_ns() < next_tick &&
               mono_ns() < b->end_at) {
            int64_t until = next_tick < b->end_at ? next_tick : b->end_at;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t wait = until - mono_ns();
            if (wait > 50000000) wait = 50000000; // re-check the end every 50 ms
            if (wait < 0) wait = 0;
            ts.tv_nsec += (long)wait;
            ts.tv_sec += ts.tv_nsec / 1000000000;
            ts.tv_nsec %= 1000000000;
            pthread_cond_timedwait(&b->cond, &b->mu, &ts);
        }
        pthread_mutex_unlock(&b->mu);
        int64_t now = mono_ns();
        if (now >= b->end_at && !atomic_load(&b->stop)) atomic_store(&b->stop, 1);
        int over = atomic_load(&b->stop) && atomic_load(&b->outstanding) == 0;
        if (!b->batches_warm_read && now >= b->warm_at) { // no batch sizes from an older daemon: fine
            bench_batches_read(b->conns[0], b->cfg->model, &b->batches_warm);
            b->batches_warm_read = 1;
        }
        if (now >= next_tick || over) {
            tick(b, spare, &sent_prev, show, tty, over);
            next_tick += 1000000000;
        }
        if (over) break;
        if (atomic_load(&b->stop) && drain_deadline == INT64_MAX)
            drain_deadline = now + (int64_t)b->cfg->timeout_ms * 1000000 + 2000000000;
        if (now >= drain_deadline) {
            snprintf(b->res->stop_reason, sizeof b->res->stop_reason,
                     "%lld requests still unanswered %d ms after the end", (long long)atomic_load(&b->outstanding),
                     b->cfg->timeout_ms + 2000);
            break;
        }
    }
}

int bench_run(const bench_cfg *cfg, bench_result *res) {
    memset(res, 0, sizeof *res);
    cd_hist_init(&res->lat);
    bench b;
    memset(&b, 0, sizeof b);
    b.cfg = cfg;
    b.res = res;
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cond, NULL);
    int closed = cfg->rate == 0;

    // Connections.
    b.nconn = cfg->connections;
    b.conns = calloc((size_t)b.nconn, sizeof *b.conns);
    convd_opts o; // the default timeout serves the control calls (models)
    convd_opts_init(&o);
    int per_conn = (cfg->concurrency + b.nconn - 1) / b.nconn;
    int rc = BENCH_EXIT_OK;
    for (int i = 0; i < b.nconn; i++) {
        if (convd_connect(cfg->socket, &o, &b.conns[i]) != 0) {
            fprintf(stderr, "convbench: %s\n", convd_errmsg(NULL));
            rc = i == 0 ? BENCH_EXIT_CONNECT : BENCH_EXIT_FAIL;
            b.nconn = i;
            goto out;
        }
        convd_set_inflight_limit(b.conns[i], per_conn, 0);
    }
    res->connections = b.nconn;
    rc = setup_inputs(&b);
    if (rc != BENCH_EXIT_OK) goto out;

    // Two histograms take turns as the current second's.
    cd_hist *h1 = malloc(sizeof *h1), *h2 = malloc(sizeof *h2);
    cd_hist_init(h1);
    cd_hist_init(h2);
    b.iv = h1;
    cd_hist *spare = h2;

    b.t0 = mono_ns();
    b.warm_at = b.t0 + (int64_t)(cfg->warmup_s * 1e9);
    b.end_at = cfg->requests ? INT64_MAX : b.warm_at + (int64_t)(cfg->duration_s * 1e9);
    b.last_done = b.warm_at;
    int show = cfg->progress == 1 || (cfg->progress == -1 && isatty(2));
    int tty = isatty(2);

    if (cfg->warmup_s <= 0) { // before the first request, so every run of the measured part counts
        bench_batches_read(b.conns[0], cfg->model, &b.batches_warm);
        b.batches_warm_read = 1;
    }
    worker *workers = NULL;
    pthread_t issuer;
    int issuer_started = 0;
    shm_worker *shm = NULL;
    if (cfg->shm) {
        shm = calloc((size_t)cfg->concurrency, sizeof *shm);
        atomic_store(&b.live_workers, cfg->concurrency);
        for (int i = 0; i < cfg->concurrency; i++) {
            shm[i] = (shm_worker){.b = &b, .conn = i % b.nconn};
            if (pthread_create(&shm[i].thread, NULL, shm_worker_main, &shm[i]) != 0) {
                fprintf(stderr, "convbench: cannot start a worker thread\n");
                exit(BENCH_EXIT_FAIL);
            }
        }
    } else if (closed) {
        workers = calloc((size_t)cfg->concurrency, sizeof *workers);
        atomic_store(&b.live_workers, cfg->concurrency);
        for (int i = 0; i < cfg->concurrency; i++) {
            workers[i] = (worker){.b = &b, .conn = i % b.nconn};
            worker_issue(&workers[i]);
        }
    } else {
        if (pthread_create(&issuer, NULL, issuer_main, &b) != 0) {
            fprintf(stderr, "convbench: cannot start the issuer thread\n");
            rc = BENCH_EXIT_FAIL;
            goto out_hist;
        }
        issuer_started = 1;
    }

    // The main thread: one tick per second until everything has completed.
    run_ticks(&b, &spare, show, tty);
    if (show && tty) fprintf(stderr, "\n");
    if (issuer_started) pthread_join(issuer, NULL);
    for (int i = 0; shm && i < cfg->concurrency; i++) pthread_join(shm[i].thread, NULL);
    free(shm);
    bench_batches end;
    if (b.batches_warm_read && bench_batches_read(b.conns[0], cfg->model, &end) == 0)
        bench_batches_diff(&b.batches_warm, &end, &res->batches);
    // Closing completes whatever is still in flight (E_CLOSED).
    for (int i = 0; i < b.nconn; i++) convd_close(b.conns[i]);
    b.nconn = 0;
    res->elapsed_s = (double)(b.last_done - b.warm_at) / 1e9;
    if (res->elapsed_s < 0) res->elapsed_s = 0;
    res->max_lag_ms = (double)b.max_lag / 1e6;
    if (!res->stop_reason[0] && closed && atomic_load(&b.failed_workers) == cfg->concurrency)
        snprintf(res->stop_reason, sizeof res->stop_reason, "every worker stopped after a failed send (last: %s: %s)",
                 convd_errname(b.last_send_status), b.last_send_msg);
    if (!res->stop_reason[0] && atomic_load(&b.lost_all))
        snprintf(res->stop_reason, sizeof res->stop_reason, "lost every connection (%s)", b.last_send_msg);
    if (res->stop_reason[0]) {
        fprintf(stderr, "convbench: the run ended early: %s\n", res->stop_reason);
        rc = BENCH_EXIT_FAIL;
    }
    free(workers);
out_hist:
    free(h1);
    free(h2);
out:
    for (int i = 0; i < b.nconn; i++) convd_close(b.conns[i]);
    bench_free(&b);
    return rc;
}
