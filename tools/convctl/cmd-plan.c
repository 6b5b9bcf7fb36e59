// convctl plan MODEL.onnx: what the runtime makes of a (pruned) model, offline.
// Loads the model in-process (no daemon), prints per conv/FC layer the shape,
// density, structure found, compaction, kernel chosen, predicted and measured
// time and FLOPs skipped, then totals. Other layers (pools, reorders ...) are
// counted in the totals and listed with --all.

#include "tools/convctl/convctl.h"

#include "proto/errors.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char ctl_plan_help[] =
    "Loads MODEL in-process (no daemon) and prints, per conv/FC layer: shape,\n"
    "density, the structure found in the weights (zero filters / input\n"
    "channels / kernel connections, best block and its fill, N:M), what\n"
    "compaction did, the kernel chosen, predicted ms (cost model, batch 1) and\n"
    "measured ms (median of --runs runs at --batch), and the FLOPs skipped.\n"
    "  --batch B         batch to measure at (default 1)\n"
    "  --threads T       intra-op threads (default: all cores)\n"
    "  --tune            time both candidates per layer at load (cached on disk)\n"
    "  --tune-cache DIR  cache folder (default $XDG_CACHE_HOME/convd)\n"
    "  --runs N          measured runs (default 10; 0 = do not measure)\n"
    "  --plan MODE       auto (default), dense (no compaction, dense kernels),\n"
    "                    compact (compaction, dense kernels), sparse\n"
    "  --vs-dense        also measure the dense plan of the same file\n"
    "  --all             list every layer, not only conv/FC\n"
    "  --json            one JSON object (every layer)";

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static void json_str(const char *s) {
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void json_shape(int rank, const int64_t *s) {
    putchar('[');
    for (int i = 0; i < rank; i++) printf("%s%lld", i ? "," : "", (long long)s[i]);
    putchar(']');
}

static void json_num(double v) {
    if (v < 0) printf("null");
    else printf("%.6g", v);
}

// Loads and measures; *total_ms gets the median whole-run time (-1 when not measured).
static int load_measure(const char *path, const cd_model_opts *o, int batch, int runs, cd_model **m, double **lms,
                        double *total_ms) {
    char err[1024];
    int rc = cd_model_load(path, o, m, err, sizeof err);
    if (rc) return ctl_fail_msg("%s: %s", cd_err_name(rc), err);
    int n = cd_model_num_layers(*m);
    *lms = calloc((size_t)n + 1, sizeof(double));
    if (!*lms) return ctl_fail_msg("E_NOMEM: out of memory");
    for (int i = 0; i < n; i++) (*lms)[i] = -1;
    *total_ms = -1;
    if (runs > 0 && (rc = cd_model_profile(*m, batch, runs, *lms, total_ms, err, sizeof err)))
        return ctl_fail_msg("%s: %s", cd_err_name(rc), err);
    return 0;
}

int ctl_cmd_plan(ctl_ctx *ctx, int argc, char **argv) {
    const char *path = NULL, *cache = NULL, *plan_s = "auto";
    int batch = 1, threads = 0, tune = 0, runs = 10, vs_dense = 0, all = 0;
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) return CTL_EXIT_USAGE;
        if (r > 0) continue;
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--batch") || !strcmp(a, "--threads") || !strcmp(a, "--runs")) {
            int *dst = a[2] == 'b' ? &batch : a[2] == 't' ? &threads : &runs;
            int lo = a[2] == 'b' ? 1 : 0, hi = a[2] == 'b' ? 4096 : 100000;
            if (!has_val || parse_int(argv[++i], lo, hi, dst))
                return ctl_usage_error(argv[0], "%s needs an integer in %d..%d", a, lo, hi);
        } else if (!strcmp(a, "--tune-cache") || !strcmp(a, "--plan")) {
            if (!has_val) return ctl_usage_error(argv[0], "%s needs a value", a);
            if (a[2] == 't') cache = argv[++i];
            else plan_s = argv[++i];
        } else if (!strcmp(a, "--tune")) {
            tune = 1;
        } else if (!strcmp(a, "--vs-dense")) {
            vs_dense = 1;
        } else if (!strcmp(a, "--all")) {
            all = 1;
        } else if (a[0] == '-' && a[1]) {
            return ctl_usage_error(argv[0], "unknown option '%s'", a);
        } else if (!path) {
            path = a;
        } else {
            return ctl_usage_error(argv[0], "unexpected argument '%s'", a);
        }
    }
    if (!path) return ctl_usage_error(argv[0], "MODEL.onnx is required");
    int plan = !strcmp(plan_s, "auto") ? 0 : !strcmp(plan_s, "dense") ? 1 : !strcmp(plan_s, "sparse") ? 2
             : !strcmp(plan_s, "compact") ? 3 : -1;
    if (plan < 0) return ctl_usage_error(argv[0], "--plan must be auto, dense, compact or sparse");
    int rc = cd_runtime_init(threads);
    if (rc) return ctl_fail_msg("%s: runtime initialisation failed", cd_err_name(rc));
    cd_model_opts o = {.max_batch = batch, .threads = threads, .tune = tune, .tune_cache = cache, .plan = plan};
    cd_model *m = NULL, *md = NULL;
    double *lms = NULL, *dms = NULL, total = -1, dense_total = -1;
    int ec = load_measure(path, &o, batch, runs, &m, &lms, &total);
    if (!ec && vs_dense) {
        cd_model_opts od = o;
        od.plan = 1;
        od.tune = 0;
        ec = load_measure(path, &od, batch, runs > 0 ? runs : 10, &md, &dms, &dense_total);
    }
    if (ec) goto out;
    int n = cd_model_num_layers(m);
    double pred = 0, meas_w = 0, meas_all = 0;
    int64_t fl_dense = 0, fl_skip = 0, fl_run = 0;
    int nweighted = 0, nsparse = 0, ncompact = 0;
    for (int i = 0; i < n; i++) {
        cd_layer_info l;
        cd_model_layer(m, i, &l);
        if (lms[i] >= 0) meas_all += lms[i];
        if (!l.is_weighted) continue;
        nweighted++;
        nsparse += l.sparse;
        ncompact += l.compaction[0] != '\0';
        if (l.pred_ms >= 0) pred += l.pred_ms;
        if (lms[i] >= 0) meas_w += lms[i];
        fl_dense += l.flops_dense;
        fl_skip += l.flops_skipped;
        fl_run += l.flops_dense - l.flops_skipped;
    }
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    if (ctx->json) {
        printf("{\"model\":");
        json_str(path);
        printf(",\"batch\":%d,\"threads\":%d,\"tune\":%s,\"plan\":", batch, threads, tune ? "true" : "false");
        json_str(plan_s);
        printf(",\"runs\":%d,\"layers\":[", runs);
        for (int i = 0; i < n; i++) {
            cd_layer_info l;
            cd_model_layer(m, i, &l);
            printf("%s{\"index\":%d,\"name\":", i ? "," : "", i);
            json_str(l.name);
            printf(",\"op\":");
            json_str(l.op);
            printf(",\"kernel\":");
            json_str(l.kernel);
            printf(",\"in_shape\":");
            json_shape(l.in_rank, l.in_shape);
            printf(",\"out_shape\":");
            json_shape(l.out_rank, l.out_shape);
            printf(",\"weighted\":%s,\"params\":%lld,\"flops\":%lld,\"density\":%.6g,\"measured_ms\":",
                   l.is_weighted ? "true" : "false", (long long)l.params, (long long)l.flops, l.density);
            json_num(lms[i]);
            if (l.is_weighted) {
                printf(",\"sparse\":%s,\"compaction\":", l.sparse ? "true" : "false");
                json_str(l.compaction);
                printf(",\"structure\":{\"text\":");
                json_str(l.structure);
                printf(",\"zero_filters\":%d,\"zero_in_channels\":%d,\"zero_connections\":%lld,\"connections\":%lld,"
                       "\"best_block\":",
                       l.zero_filters, l.zero_in_channels, (long long)l.zero_connections, (long long)l.connections);
                if (l.best_block_h) printf("{\"h\":%d,\"w\":%d,\"fill\":%.4f}", l.best_block_h, l.best_block_w, l.best_block_fill);
                else printf("null");
                printf(",\"nm_2_4\":%.4f,\"is_2_4\":%s,\"is_4_8\":%s}", l.nm_2_4, l.is_2_4 ? "true" : "false",
                       l.is_4_8 ? "true" : "false");
                printf(",\"pred_ms\":");
                json_num(l.pred_ms);
                printf(",\"pred_dense_ms\":");
                json_num(l.pred_dense_ms);
                printf(",\"pred_sparse_ms\":");
                json_num(l.pred_sparse_ms);
                printf(",\"tuned_sparse_ms\":");
                json_num(l.tuned_sparse_ms);
                printf(",\"pred_reorder_ms\":");
                json_num(l.pred_reorder_ms);
                printf(",\"tuned_ms\":");
                json_num(l.tuned_ms);
                printf(",\"tuned_dense_ms\":");
                json_num(l.tuned_dense_ms);
                printf(",\"tune_batch\":%d,\"flops_dense\":%lld,\"flops_skipped\":%lld", l.tune_batch,
                       (long long)l.flops_dense, (long long)l.flops_skipped);
            }
            printf("}");
        }
        printf("],\"total\":{\"layers\":%d,\"weighted_layers\":%d,\"sparse_layers\":%d,\"compacted_layers\":%d,"
               "\"pred_ms\":%.6g,\"measured_ms\":",
               n, nweighted, nsparse, ncompact, pred);
        json_num(total);
        printf(",\"measured_layers_ms\":");
        json_num(runs > 0 ? meas_all : -1);
        printf(",\"measured_weighted_ms\":");
        json_num(runs > 0 ? meas_w : -1);
        printf(",\"dense_plan_ms\":");
        json_num(dense_total);
        printf(",\"flops_dense\":%lld,\"flops_run\":%lld,\"flops_skipped\":%lld,\"weight_bytes\":%lld}}\n",
               (long long)fl_dense, (long long)fl_run, (long long)fl_skip, (long long)s.weight_bytes);
        goto out;
    }
    printf("plan %s: batch %d, %s%s, %d layers (%d conv/FC: %d sparse, %d compacted)\n\n", path, batch,
           plan_s, tune ? ", tuned" : "", n, nweighted, nsparse, ncompact);
    static const char *heads[] = {"#", "layer", "op", "in -> out", "density", "structure", "compaction", "kernel",
                                  "pred ms", "meas ms", "MFLOP", "skipped"};
    static const bool numeric[] = {true, false, false, false, true, false, false, false, true, true, true, true};
    ctl_table t;
    ctl_table_init(&t, 12, heads, numeric);
    for (int i = 0; i < n; i++) {
        cd_layer_info l;
        cd_model_layer(m, i, &l);
        if (!l.is_weighted && !all) continue;
        char idx[16], io[160], a[64], b[64], dens[16], st[160], pr[32], me[32], mf[32], sk[32];
        snprintf(idx, sizeof idx, "%d", i);
        snprintf(io, sizeof io, "%s -> %s", ctl_fmt_shape(a, sizeof a, l.in_rank, l.in_shape),
                 ctl_fmt_shape(b, sizeof b, l.out_rank, l.out_shape));
        if (l.is_weighted) {
            snprintf(dens, sizeof dens, "%.3f", l.density);
            int n2 = snprintf(st, sizeof st, "zf %d zc %d", l.zero_filters, l.zero_in_channels);
            if (l.best_block_h)
                n2 += snprintf(st + n2, sizeof st - n2, " blk %dx%d@%.2f", l.best_block_h, l.best_block_w, l.best_block_fill);
            if (l.is_2_4 || l.is_4_8) snprintf(st + n2, sizeof st - n2, " %s", l.is_2_4 ? "2:4" : "4:8");
            if (l.pred_ms >= 0) snprintf(pr, sizeof pr, "%.3f", l.pred_ms);
            else snprintf(pr, sizeof pr, "-");
            snprintf(sk, sizeof sk, "%.0f%%", l.flops_dense ? 100.0 * (double)l.flops_skipped / (double)l.flops_dense : 0.0);
            snprintf(mf, sizeof mf, "%.2f", (double)l.flops_dense / 1e6);
        } else {
            snprintf(dens, sizeof dens, "-");
            snprintf(st, sizeof st, "-");
            snprintf(pr, sizeof pr, "-");
            snprintf(sk, sizeof sk, "-");
            snprintf(mf, sizeof mf, "-");
        }
        if (lms[i] >= 0) snprintf(me, sizeof me, "%.3f", lms[i]);
        else snprintf(me, sizeof me, "-");
        const char *cells[12] = {idx, l.name, l.op, io, dens, st, l.is_weighted && l.compaction[0] ? l.compaction : "-",
                                 l.kernel, pr, me, mf, sk};
        ctl_table_add_row(&t, cells);
    }
    ctl_table_print(&t, 0);
    ctl_table_free(&t);
    printf("\ntotal: %.1f of %.1f MFLOP skipped (%.1f%%), predicted %.3f ms (conv/FC, batch 1)", (double)fl_skip / 1e6,
           (double)fl_dense / 1e6, fl_dense ? 100.0 * (double)fl_skip / (double)fl_dense : 0.0, pred);
    if (runs > 0)
        printf(", measured %.3f ms per run (median of %d, batch %d; layers sum %.3f, conv/FC %.3f)", total, runs, batch,
               meas_all, meas_w);
    if (dense_total >= 0)
        printf(", dense plan %.3f ms (%.2fx)", dense_total, total > 0 ? dense_total / total : 0.0);
    printf("\n");
out:
    cd_model_free(m);
    cd_model_free(md);
    free(lms);
    free(dms);
    return ec;
}
