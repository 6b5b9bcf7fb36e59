// convbench's outputs: the final report (text or JSON) and the per-second
// CSV.

#include "tools/convbench/bench.h"

#include "core/host.h"

#include <errno.h>
#include <string.h>

// Percentiles of the report, in order.
static const struct {
    const char *key;   // JSON key
    const char *label; // text label
    double q;          // percentile
} pcts[] = {
    {"p50", "p50", 50},
    {"p90", "p90", 90},
    {"p99", "p99", 99},
    {"p999", "p99.9", 99.9},
};

static double ms(uint64_t ns) { return (double)ns / 1e6; }

static double throughput(const bench_result *r) { return r->elapsed_s > 0 ? (double)r->ok / r->elapsed_s : 0.0; }

static const char *mode_name(const bench_cfg *cfg) {
    return cfg->rate > 0 ? "open" : cfg->shm ? "closed shared-memory" : "closed";
}

void bench_report_text(FILE *f, const bench_cfg *cfg, const bench_result *r) {
    fprintf(f, "convbench: model %s, %s loop, ", cfg->model, mode_name(cfg));
    if (cfg->rate > 0)
        fprintf(f, "%.1f req/s %s arrivals (at most %d in flight)", cfg->rate, cd_arrival_name(cfg->arrival),
                cfg->concurrency);
    else
        fprintf(f, "concurrency %d", cfg->concurrency);
    fprintf(f, ", %d connection%s, batch %lld\n", r->connections, r->connections == 1 ? "" : "s", (long long)r->batch);
    if (cfg->requests)
        fprintf(f, "  measured    %lld requests after %.1f s warm-up\n", cfg->requests, cfg->warmup_s);
    else
        fprintf(f, "  measured    %.1f s after %.1f s warm-up\n", cfg->duration_s, cfg->warmup_s);
    fprintf(f, "  requests    %llu sent, %llu ok, %llu errors in %.3f s\n", (unsigned long long)r->sent,
            (unsigned long long)r->ok, (unsigned long long)r->errors, r->elapsed_s);
    double tp = throughput(r);
    fprintf(f, "  throughput  %.1f req/s (%.1f samples/s)\n", tp, tp * (double)r->batch);
    if (r->lat.total) {
        fprintf(f, "  latency ms  min %.3f  mean %.3f", ms(r->lat.min), cd_hist_mean(&r->lat) / 1e6);
        for (size_t i = 0; i < sizeof pcts / sizeof *pcts; i++)
            fprintf(f, "  %s %.3f", pcts[i].label, ms(cd_hist_percentile(&r->lat, pcts[i].q)));
        fprintf(f, "  max %.3f\n", ms(r->lat.max));
    } else {
        fprintf(f, "  latency ms  (no successful request)\n");
    }
    if (cfg->rate > 0) fprintf(f, "  send lag    max %.3f ms behind schedule (included in latency)\n", r->max_lag_ms);
    if (r->errors) {
        fprintf(f, "  errors     ");
        for (int c = 1; c < BENCH_CODES; c++)
            if (r->by_code[c])
                fprintf(f, " %s %llu", c == BENCH_CODES - 1 ? "other" : convd_errname(-c),
                        (unsigned long long)r->by_code[c]);
        fprintf(f, "\n");
    }
    if (r->batches.valid) {
        uint64_t runs;
        double mean;
        bench_batches_totals(&r->batches, &runs, &mean);
        fprintf(f, "  daemon runs %llu, mean batch %.2f items:", (unsigned long long)runs, mean);
        for (size_t i = 0; i < BENCH_BATCH_SLOTS; i++)
            if (r->batches.runs[i])
                fprintf(f, "  %zu x %llu (%.0f%%)", i, (unsigned long long)r->batches.runs[i],
                        100.0 * (double)r->batches.runs[i] / (double)runs);
        fprintf(f, "\n");
    }
    if (r->stop_reason[0]) fprintf(f, "  ended early: %s\n", r->stop_reason);
}

// "batch_sizes": the daemon's runs by items over the measured part, or null.
static void json_batches(FILE *f, const bench_batches *b) {
    if (!b->valid) {
        fprintf(f, ", \"daemon_batches\": null");
        return;
    }
    uint64_t runs;
    double mean;
    bench_batches_totals(b, &runs, &mean);
    fprintf(f, ", \"daemon_batches\": {\"runs\": %llu, \"mean_items\": %.9g, \"by_size\": {", (unsigned long long)runs,
            mean);
    int first = 1;
    for (size_t i = 0; i < BENCH_BATCH_SLOTS; i++) {
        if (!b->runs[i]) continue;
        fprintf(f, "%s\"%zu\": %llu", first ? "" : ", ", i, (unsigned long long)b->runs[i]);
        first = 0;
    }
    fprintf(f, "}}");
}

void bench_report_json(FILE *f, const bench_cfg *cfg, const bench_result *r) {
    fprintf(f, "{\"model\": ");
    cd_json_write_str(f, cfg->model);
    fprintf(f, ", \"mode\": \"%s\", \"concurrency\": %d, \"connections\": %d, ", mode_name(cfg), cfg->concurrency,
            r->connections);
    if (cfg->rate > 0)
        fprintf(f, "\"rate\": %.6g, \"arrival\": \"%s\", \"max_lag_ms\": %.6g, ", cfg->rate,
                cd_arrival_name(cfg->arrival), r->max_lag_ms);
    else
        fprintf(f, "\"rate\": null, \"arrival\": null, ");
    fprintf(f, "\"batch\": %lld, \"warmup_s\": %.6g, ", (long long)r->batch, cfg->warmup_s);
    if (cfg->requests)
        fprintf(f, "\"duration_s\": null, \"requests_target\": %lld, ", cfg->requests);
    else
        fprintf(f, "\"duration_s\": %.6g, \"requests_target\": null, ", cfg->duration_s);
    fprintf(f,
            "\"elapsed_s\": %.6f, \"requests\": {\"sent\": %llu, \"ok\": %llu, "
            "\"errors\": %llu}, ",
            r->elapsed_s, (unsigned long long)r->sent, (unsigned long long)r->ok, (unsigned long long)r->errors);
    double tp = throughput(r);
    fprintf(f, "\"throughput_rps\": %.6f, \"samples_per_s\": %.6f, ", tp, tp * (double)r->batch);
    fprintf(f, "\"latency_ms\": {");
    if (r->lat.total) {
        fprintf(f, "\"count\": %llu, \"min\": %.6f, \"mean\": %.6f", (unsigned long long)r->lat.total, ms(r->lat.min),
                cd_hist_mean(&r->lat) / 1e6);
        for (size_t i = 0; i < sizeof pcts / sizeof *pcts; i++)
            fprintf(f, ", \"%s\": %.6f", pcts[i].key, ms(cd_hist_percentile(&r->lat, pcts[i].q)));
        fprintf(f, ", \"max\": %.6f", ms(r->lat.max));
    } else {
        fprintf(f, "\"count\": 0");
    }
    fprintf(f, "}, \"errors\": {");
    int first = 1;
    for (int c = 1; c < BENCH_CODES; c++) {
        if (!r->by_code[c]) continue;
        fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", c == BENCH_CODES - 1 ? "other" : convd_errname(-c),
                (unsigned long long)r->by_code[c]);
        first = 0;
    }
    fprintf(f, "}, \"ended_early\": ");
    if (r->stop_reason[0])
        cd_json_write_str(f, r->stop_reason);
    else
        fprintf(f, "null");
    json_batches(f, &r->batches);
    fprintf(f, ", \"timeline\": [");
    for (size_t i = 0; i < r->nrows; i++) {
        const bench_row *w = &r->rows[i];
        fprintf(f,
                "%s{\"t_s\": %.3f, \"warmup\": %s, \"sent\": %llu, \"ok\": %llu, "
                "\"errors\": %llu, \"p50_ms\": %.6f, \"p99_ms\": %.6f, \"max_ms\": %.6f}",
                i ? ", " : "", w->t_s, w->warmup ? "true" : "false", (unsigned long long)w->sent,
                (unsigned long long)w->ok, (unsigned long long)w->errors, w->p50_ms, w->p99_ms, w->max_ms);
    }
    fprintf(f, "]}\n");
}

int bench_write_csv(const char *path, const bench_result *r) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "convbench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "second,phase,sent,ok,errors,throughput_rps,p50_ms,p90_ms,p99_ms,max_ms\n");
    double prev = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        const bench_row *w = &r->rows[i];
        double dt = w->t_s - prev;
        fprintf(f, "%.3f,%s,%llu,%llu,%llu,%.3f,%.6f,%.6f,%.6f,%.6f\n", w->t_s, w->warmup ? "warmup" : "measure",
                (unsigned long long)w->sent, (unsigned long long)w->ok, (unsigned long long)w->errors,
                dt > 0 ? (double)w->ok / dt : 0.0, w->p50_ms, w->p90_ms, w->p99_ms, w->max_ms);
        prev = w->t_s;
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "convbench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
