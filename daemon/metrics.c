#include "daemon/metrics.h"

#include "core/errors.h"
#include "daemon/features.h"
#include "daemon/log.h"
#include "daemon/models.h"
#include "daemon/registry.h"
#include "daemon/server-state.h"
#include "daemon/stats.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

// Bucket bounds (`le`) of the latency histograms, in seconds, and of the
// batch-size histogram. The fine log buckets (core/histogram.h) are summed
// into these; a value counts under the first bound >= its fine bucket's
// midpoint (<= 1.6 % off).
static const double lat_le[] = {25e-6, 50e-6,  100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
                                50e-3, 100e-3, 250e-3, 500e-3, 1.0,    2.5,  5.0,    10.0, 30.0};
static const double batch_le[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};

static void head(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void histogram(FILE *f, const char *name, const char *model, const cd_histogram *h, const double *le, size_t nle,
                      double scale) {
    static cd_histogram_snap s; // loop thread only
    cd_histogram_snapshot(h, &s);
    uint64_t total = 0;
    for (size_t i = 0; i < CD_HISTOGRAM_NBUCKETS; i++) total += s.buckets[i];
    for (size_t i = 0; i < nle; i++)
        fprintf(f, "%s_bucket{model=\"%s\",le=\"%g\"} %llu\n", name, model, le[i],
                (unsigned long long)cd_histogram_count_le(&s, (uint64_t)(le[i] / scale)));
    fprintf(f, "%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", name, model, (unsigned long long)total);
    fprintf(f, "%s_sum{model=\"%s\"} %.9g\n", name, model, (double)s.sum * scale);
    fprintf(f, "%s_count{model=\"%s\"} %llu\n", name, model, (unsigned long long)total);
}

// A label value in the exposition format: backslash, double quote and
// newline escaped.
static void label_value(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') fputc('\\', f);
        if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

// convd_cpu_info: an info gauge (always 1) whose labels are the CPU facts.
static void cpu_info(FILE *f) {
    cd_cpu_info ci;
    cd_runtime_cpu_info(&ci);
    head(f, "convd_cpu_info", "gauge",
         "The CPU, the instruction sets of convd's kernels and of oneDNN, and the blocked "
         "layout in use (value 1).");
    fputs("convd_cpu_info{cpu_model=\"", f);
    label_value(f, cd_cpu_model());
    fprintf(f,
            "\",kernels_isa=\"%s\",kernels_capped=\"%d\",dnnl_isa=\"%s\",layout=\"%s\","
            "block=\"%d\"} 1\n",
            ci.kernels_isa, ci.kernels_capped ? 1 : 0, ci.dnnl_isa, ci.layout, ci.block);
}

// One daemon-wide counter family of cd_stats_g: its name and help, and
// either one unlabelled counter (label NULL, one row with value NULL) or one
// row per value of its label.
typedef struct {
    const char *name;  // metric name, ending in _total
    const char *help;  // the # HELP text
    const char *label; // label key of the rows, NULL for one unlabelled row
    struct {
        const char *value;                    // label value (NULL: unlabelled)
        const atomic_uint_least64_t *counter; // the counter in cd_stats_g
    } rows[5];                                // ends at the first NULL counter
} counter_family;

#define ROW(value, field) \
    { value, &cd_stats_g.field }

static const counter_family counter_families[] = {
    {"convd_connections_total", "Connections accepted.", NULL, {ROW(NULL, conn_total)}},
    {"convd_connections_rejected_total",
     "Connections refused, by cause (limit: max-connections; emfile: out of descriptors).",
     "cause",
     {ROW("limit", conn_rejected_limit), ROW("emfile", conn_rejected_emfile)}},
    {"convd_connections_dropped_total",
     "Connections dropped by the daemon, by cause.",
     "cause",
     {ROW("write_error", conn_write_errors), ROW("slow_reader", conn_slow_reader),
      ROW("eof_mid_message", conn_eof_mid_message), ROW("idle_timeout", conn_idle_timeouts),
      ROW("read_timeout", conn_read_timeouts)}},
    {"convd_budget_refused_total",
     "Requests refused with E_OVERLOADED because max-buffered was reached.",
     NULL,
     {ROW(NULL, budget_refused)}},
    {"convd_notifications_total", "Notifications received (ignored).", NULL, {ROW(NULL, notifications)}},
    {"convd_access_refused_total",
     "Admin requests refused with E_PERMISSION (the peer is not an admin), by method.",
     "method",
     {ROW("load", refused_load), ROW("unload", refused_unload)}},
    {"convd_requests_cancelled_total",
     "Requests dropped before compute because their client had gone.",
     NULL,
     {ROW(NULL, req_cancelled)}},
    {"convd_responses_dropped_total",
     "Finished responses discarded because their client had gone.",
     NULL,
     {ROW(NULL, req_dropped)}},
    {"convd_worker_responses_total",
     "Responses of worker-run requests by who wrote them: the worker alone, "
     "the worker then the loop (socket full), the loop (other bytes pending).",
     "path",
     {ROW("direct", resp_direct), ROW("partial", resp_partial), ROW("queued", resp_queued)}},
    {"convd_bytes_in_total", "Bytes read from clients.", NULL, {ROW(NULL, bytes_in)}},
    {"convd_bytes_out_total", "Bytes written to clients.", NULL, {ROW(NULL, bytes_out)}},
};

#undef ROW

static void counter_family_write(FILE *f, const counter_family *c) {
    head(f, c->name, "counter", c->help);
    for (size_t i = 0; i < sizeof c->rows / sizeof c->rows[0] && c->rows[i].counter; i++) {
        unsigned long long v = atomic_load_explicit(c->rows[i].counter, memory_order_relaxed);
        if (c->label)
            fprintf(f, "%s{%s=\"%s\"} %llu\n", c->name, c->label, c->rows[i].value, v);
        else
            fprintf(f, "%s %llu\n", c->name, v);
    }
}

// The daemon-wide metrics: the gauges (uptime, CPU, connections, buffers,
// requests in flight, memory), then the counters of counter_families, then
// the requests by method and the error answers by code.
static void server_metrics(FILE *f, cd_server *srv) {
    head(f, "convd_uptime_seconds", "gauge", "Seconds since the daemon started.");
    fprintf(f, "convd_uptime_seconds %.3f\n", cd_server_uptime(srv));
    cpu_info(f);
    head(f, "convd_draining", "gauge", "1 once SIGTERM/SIGINT started the drain.");
    fprintf(f, "convd_draining %d\n", srv->draining ? 1 : 0);
    head(f, "convd_connections", "gauge", "Open client connections.");
    fprintf(f, "convd_connections %zu\n", srv->hub.nactive);
    head(f, "convd_buffered_bytes", "gauge",
         "Bytes of requests held: partly received messages and accepted, unanswered "
         "requests (budget: max-buffered).");
    fprintf(f, "convd_buffered_bytes %zu\n", srv->hub.budget.held);
    head(f, "convd_unsent_bytes", "gauge",
         "Bytes of answers queued for writing and not yet taken by the clients' sockets (slow-reader cap: "
         "max(2 x max-message, 64 MiB) per connection).");
    fprintf(f, "convd_unsent_bytes %zu\n", srv->hub.unsent);
    head(f, "convd_in_flight", "gauge", "Requests queued or running on the workers (and plan profiles).");
    fprintf(f, "convd_in_flight %zu\n", cd_server_in_flight(srv));
    head(f, "convd_resident_memory_bytes", "gauge", "Resident set size of the daemon.");
    fprintf(f, "convd_resident_memory_bytes %llu\n", (unsigned long long)cd_stats_rss_bytes());
    for (size_t i = 0; i < sizeof counter_families / sizeof counter_families[0]; i++)
        counter_family_write(f, &counter_families[i]);
    head(f, "convd_method_requests_total", "counter", "Requests received, by method.");
    for (int i = 0; i < CD_M_COUNT; i++)
        fprintf(f, "convd_method_requests_total{method=\"%s\"} %llu\n", cd_method_name((cd_method_id)i),
                (unsigned long long)CD_STAT_GET(by_method[i]));
    head(f, "convd_errors_total", "counter", "Error answers, by code (all methods).");
#define XX(name, num, msg) \
    fprintf(f, "convd_errors_total{code=\"E_" #name "\"} %llu\n", (unsigned long long)CD_STAT_GET(errors[num]));
    CD_ERROR_MAP(XX)
#undef XX
}

// The per-model metrics of the nm registered models: results, batches,
// queues and the batch-size and latency histograms.
static void model_metrics(FILE *f, cd_server *srv, size_t nm) {
    head(f, "convd_requests_total", "counter", "infer requests per model, by result code (OK or an E_ code).");
    for (size_t i = 0; i < nm; i++) {
        const cd_model_entry *e = cd_registry_at(srv->registry, i);
        const cd_model_counters *c = cd_registry_counters_at(srv->registry, i);
        fprintf(f, "convd_requests_total{model=\"%s\",code=\"OK\"} %llu\n", e->name, (unsigned long long)c->ok);
        for (int k = 1; k < CD_STATS_NERR; k++)
            if (c->by_code[k])
                fprintf(f, "convd_requests_total{model=\"%s\",code=\"%s\"} %llu\n", e->name, cd_err_name(-k),
                        (unsigned long long)c->by_code[k]);
    }
    head(f, "convd_batches_total", "counter", "Model runs (batches) per model.");
    for (size_t i = 0; i < nm; i++)
        fprintf(f, "convd_batches_total{model=\"%s\"} %llu\n", cd_registry_at(srv->registry, i)->name,
                (unsigned long long)cd_registry_counters_at(srv->registry, i)->batches);
    head(f, "convd_batch_items_total", "counter", "Items (batch rows) computed per model.");
    for (size_t i = 0; i < nm; i++)
        fprintf(f, "convd_batch_items_total{model=\"%s\"} %llu\n", cd_registry_at(srv->registry, i)->name,
                (unsigned long long)cd_registry_counters_at(srv->registry, i)->items);
    head(f, "convd_queue_length", "gauge", "Requests waiting in the model's queue.");
    for (size_t i = 0; i < nm; i++) {
        const cd_model_entry *e = cd_registry_at(srv->registry, i);
        fprintf(f, "convd_queue_length{model=\"%s\"} %zu\n", e->name, cd_workers_queue_len(srv->workers, &e->queue));
    }
    head(f, "convd_batch_size", "histogram", "Items per model run.");
    for (size_t i = 0; i < nm; i++)
        histogram(f, "convd_batch_size", cd_registry_at(srv->registry, i)->name,
                  &cd_registry_counters_at(srv->registry, i)->batch_size, batch_le,
                  sizeof batch_le / sizeof batch_le[0], 1.0);
    static const struct {
        const char *name, *help;
        size_t off;
    } lat[] = {
        {"convd_queue_wait_seconds", "Time from receipt until the request's run began.",
         offsetof(cd_model_counters, queue_ns)},
        {"convd_compute_seconds", "Duration of the model run the request was part of.",
         offsetof(cd_model_counters, compute_ns)},
        {"convd_request_seconds", "Time from receipt until the answer was queued for writing.",
         offsetof(cd_model_counters, total_ns)},
    };
    for (size_t k = 0; k < 3; k++) {
        head(f, lat[k].name, "histogram", lat[k].help);
        for (size_t i = 0; i < nm; i++) {
            const char *c = (const char *)cd_registry_counters_at(srv->registry, i);
            histogram(f, lat[k].name, cd_registry_at(srv->registry, i)->name, (const cd_histogram *)(c + lat[k].off),
                      lat_le, sizeof lat_le / sizeof lat_le[0], 1e-9);
        }
    }
}

int cd_metrics_render(cd_server *srv, char **out, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return CD_ENOMEM;

    server_metrics(f, srv);
    head(f, "convd_models_loaded", "gauge", "Models in the registry.");
    size_t nm = cd_registry_count(srv->registry);
    fprintf(f, "convd_models_loaded %zu\n", nm);

    // Per model. Names are [A-Za-z0-9._-]: no label escaping needed.
    if (nm) model_metrics(f, srv, nm);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return CD_ENOMEM;
    }
    *out = buf;
    *len = n;
    return 0;
}

// Creates path's temp file for writing without following a symlink or
// reusing anything already there (O_CREAT|O_EXCL|O_NOFOLLOW): whatever sits
// at FILE.tmp -- a leftover of a crash, or a symlink another user planted to
// make the daemon overwrite some file -- is unlinked (the link itself, never
// its target) and the create tried once more. Returns the fd or -1 (errno).
static int open_tmp(const char *tmp) {
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) return fd;
        if (unlink(tmp) != 0 && errno != ENOENT) return -1;
    }
    errno = EEXIST;
    return -1;
}

static bool write_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

int cd_metrics_write_file(cd_server *srv, const char *path) {
    static uint64_t last_log_ns;
    char *text;
    size_t len;
    int rc = cd_metrics_render(srv, &text, &len);
    if (rc != 0) return rc;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open_tmp(tmp);
    bool created = fd >= 0;
    bool ok = created && write_all(fd, text, len);
    int e = errno;
    if (created && close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
    }
    free(text);
    if (!ok) {
        if (created) // only a file we created; never what someone else put there
            unlink(tmp);
        uint64_t now = uv_hrtime();
        if (now - last_log_ns > 60000000000ull) {
            last_log_ns = now;
            CD_WARN("cannot write --metrics-file %s: %s", path, strerror(e));
        }
        return CD_EIO;
    }
    return 0;
}
