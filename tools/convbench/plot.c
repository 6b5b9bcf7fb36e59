// convbench --plot: writes the data and a gnuplot script to a temporary
// directory and runs gnuplot. Top: the latency histogram (log-x, 8 bins per
// doubling, share of requests per bin, p50/p99/p99.9 marked). Bottom:
// latency over time (p50, p99, max per second, log-y) with the throughput
// on the right axis and the warm-up shaded.

#include "tools/convbench/bench.h"

#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define BINS_PER_DOUBLING 8

// Writes the histogram bins: center_ms width_ms percent.
static int write_hist(const char *path, const cd_hist *h) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    // Coarse bins on a log2 scale; a bucket goes to the bin of its midpoint.
    enum { NB = 64 * BINS_PER_DOUBLING };
    static uint64_t bins[NB];
    memset(bins, 0, sizeof bins);
    for (size_t i = 0; i < CD_HIST_BUCKETS; i++) {
        if (!h->counts[i]) continue;
        double mid = ((double)cd_hist_low(i) + (double)cd_hist_high(i)) / 2 + 0.5;
        int b = (int)floor(log2(mid) * BINS_PER_DOUBLING);
        if (b < 0) b = 0;
        if (b >= NB) b = NB - 1;
        bins[b] += h->counts[i];
    }
    for (int b = 0; b < NB; b++) {
        if (!bins[b]) continue;
        double lo = exp2((double)b / BINS_PER_DOUBLING), hi = exp2((double)(b + 1) / BINS_PER_DOUBLING);
        fprintf(f, "%.9g %.9g %.6f\n", sqrt(lo * hi) / 1e6, (hi - lo) / 1e6,
                100.0 * (double)bins[b] / (double)h->total);
    }
    return fclose(f);
}

// Writes the timeline, one line per interval at its midpoint:
// t_s p50 p99 max throughput (latencies '?' when nothing succeeded).
static int write_timeline(const char *path, const bench_result *r) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    double prev = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        const bench_row *w = &r->rows[i];
        double dt = w->t_s - prev;
        if (w->ok)
            fprintf(f, "%.3f %.9g %.9g %.9g %.3f\n", (prev + w->t_s) / 2, w->p50_ms, w->p99_ms, w->max_ms,
                    dt > 0 ? (double)w->ok / dt : 0.0);
        else
            fprintf(f, "%.3f ? ? ? 0\n", (prev + w->t_s) / 2);
        prev = w->t_s;
    }
    return fclose(f);
}

// Quotes s for a gnuplot single-quoted string.
static void gp_str(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

// Writes the gnuplot script: the latency histogram over the timeline.
static void write_script(FILE *f, const char *out, const char *hist, const char *tl, const bench_cfg *cfg,
                         const bench_result *r) {
    double p50 = (double)cd_hist_percentile(&r->lat, 50) / 1e6;
    double p99 = (double)cd_hist_percentile(&r->lat, 99) / 1e6;
    double p999 = (double)cd_hist_percentile(&r->lat, 99.9) / 1e6;
    double tp = r->elapsed_s > 0 ? (double)r->ok / r->elapsed_s : 0;
    char title[400];
    if (cfg->rate > 0)
        snprintf(title, sizeof title,
                 "convbench: %s, open loop %.0f req/s (%s), batch %lld, "
                 "%d connections - %llu ok, %.1f req/s",
                 cfg->model, cfg->rate, cd_arrival_name(cfg->arrival), (long long)r->batch, r->connections,
                 (unsigned long long)r->ok, tp);
    else
        snprintf(title, sizeof title,
                 "convbench: %s, closed loop concurrency %d, batch %lld, "
                 "%d connections - %llu ok, %.1f req/s",
                 cfg->model, cfg->concurrency, (long long)r->batch, r->connections, (unsigned long long)r->ok, tp);

    fprintf(f, "set terminal pngcairo size 1200,1000 font 'sans,11'\nset output ");
    gp_str(f, out);
    fprintf(f, "\nset multiplot layout 2,1 title ");
    gp_str(f, title);
    fprintf(f,
            " font 'sans,13'\n"
            "set grid\nset key top right opaque box\n"
            "# Latency histogram\n"
            "set title 'Latency histogram of successful requests (after warm-up; %d bins per doubling)'\n"
            "set logscale x 10\nset format x '%%g'\n"
            "set xlabel 'latency (ms, log scale)'\nset ylabel 'share of requests (%%)'\n"
            "set yrange [0:*]\nset style fill solid 0.6 border -1\n",
            BINS_PER_DOUBLING);
    fprintf(f,
            "set arrow 1 from %.9g, graph 0 to %.9g, graph 1 nohead lc rgb '#1a9850' lw 2\n"
            "set arrow 2 from %.9g, graph 0 to %.9g, graph 1 nohead lc rgb '#fc8d59' lw 2\n"
            "set arrow 3 from %.9g, graph 0 to %.9g, graph 1 nohead lc rgb '#d73027' lw 2 dt 2\n",
            p50, p50, p99, p99, p999, p999);
    fprintf(f,
            "plot '%s' using 1:3:2 with boxes lc rgb '#4575b4' title 'requests', "
            "NaN with lines lc rgb '#1a9850' lw 2 title 'p50 %.3f ms', "
            "NaN with lines lc rgb '#fc8d59' lw 2 title 'p99 %.3f ms', "
            "NaN with lines lc rgb '#d73027' lw 2 dt 2 title 'p99.9 %.3f ms'\n",
            hist, p50, p99, p999);
    fprintf(f, "unset arrow\nunset logscale x\nset format x '%%g'\nset yrange [*:*]\n"
               "# Latency over time\n"
               "set title 'Latency and throughput per second (points at mid-second; shaded: warm-up)'\n"
               "set xlabel 'time since start (s)'\n"
               "set ylabel 'latency (ms, log scale)'\nset logscale y 10\nset format y '%%g'\n"
               "set y2label 'throughput (requests/s)'\nset y2tics\nset ytics nomirror\n"
               "set y2range [0:*]\nset xrange [0:*]\nset key outside below horizontal\nset bmargin 5\n");
    if (cfg->warmup_s > 0)
        fprintf(f,
                "set object 1 rect from 0, graph 0 to %.3f, graph 1 fc rgb '#dddddd' "
                "fillstyle solid 0.5 noborder behind\n",
                cfg->warmup_s);
    fprintf(f,
            "plot '%s' using 1:2 with linespoints pt 7 ps 0.5 lc rgb '#1a9850' title 'p50', "
            "'' using 1:3 with linespoints pt 7 ps 0.5 lc rgb '#fc8d59' title 'p99', "
            "'' using 1:4 with lines lc rgb '#d73027' title 'max', "
            "'' using 1:5 axes x1y2 with linespoints pt 5 ps 0.5 lw 2 lc rgb '#4575b4' dt 2 title 'throughput (right "
            "axis)'\n"
            "unset multiplot\n",
            tl);
}

// Runs gnuplot on script. Returns 0, -1 when it could not start, 1 when it failed.
static int run_gnuplot(const char *script) {
    pid_t pid;
    char *argv[] = {"gnuplot", (char *)script, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int se = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (se != 0) {
        fprintf(stderr,
                "convbench: --plot needs gnuplot (%s); install gnuplot-nox "
                "(scripts/setup does)\n",
                strerror(se));
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "convbench: --plot: gnuplot failed (script kept in %s)\n", script);
        return 1;
    }
    return 0;
}

int bench_plot(const char *out, const bench_cfg *cfg, const bench_result *r) {
    if (!r->lat.total) {
        fprintf(stderr, "convbench: --plot: no successful request to plot\n");
        return -1;
    }
    char dir[] = "/tmp/convbench-plot-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "convbench: --plot: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    char hist[64], tl[64], script[64];
    snprintf(hist, sizeof hist, "%s/hist.dat", dir);
    snprintf(tl, sizeof tl, "%s/timeline.dat", dir);
    snprintf(script, sizeof script, "%s/plot.gp", dir);
    int rc = -1;
    FILE *f = NULL;
    if (write_hist(hist, &r->lat) != 0 || write_timeline(tl, r) != 0 || !(f = fopen(script, "w"))) {
        fprintf(stderr, "convbench: --plot: cannot write to %s: %s\n", dir, strerror(errno));
        goto out;
    }
    write_script(f, out, hist, tl, cfg, r);
    if (fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "convbench: --plot: cannot write %s\n", script);
        goto out;
    }
    f = NULL;

    int g = run_gnuplot(script);
    if (g < 0) goto out;
    if (g > 0) return -1; // keep the directory for a look
    if (access(out, F_OK) != 0) {
        fprintf(stderr, "convbench: --plot: gnuplot wrote no %s\n", out);
        goto out;
    }
    rc = 0;
out:
    if (f) fclose(f);
    unlink(hist);
    unlink(tl);
    unlink(script);
    rmdir(dir);
    return rc;
}
