// convctl plan FILE | NAME: what the runtime makes of a (pruned) model.
//   FILE (an existing path): loads the model in this process (no daemon).
//   NAME (anything else): the `plan` method: the plan the daemon runs for its
//   loaded model NAME, every layer profiled in the daemon.
// Either way the result becomes one plan_view, printed by one renderer: per
// conv/FC layer the shape, density, structure found, compaction, kernel and
// layout, predicted and measured time and FLOPs skipped, then totals. Other
// layers (pools, reorders ...) are counted in the totals and listed with
// --all; a layer left on a reference kernel is always listed, marked !ref.

#include "tools/convctl/convctl.h"

#include "core/errors.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char ctl_plan_help[] = "MODEL is a file or a model name. A file (an existing path, or any\n"
                             "argument with a '/' or ending in .onnx) is loaded in this process\n"
                             "(offline, no daemon); anything else is the name of a model the daemon\n"
                             "has loaded, and the daemon answers with the plan it runs, every layer\n"
                             "profiled on its side (the header says which). Prints, per conv/FC\n"
                             "layer: shape, density, the structure found in the weights (zero filters /\n"
                             "input channels / kernel connections, best block and its fill, N:M), what\n"
                             "compaction did, the kernel chosen and its output layout, predicted ms\n"
                             "(cost model, batch 1) and measured ms (median of --runs runs at --batch),\n"
                             "and the FLOPs skipped. A layer left on a slow reference kernel is always\n"
                             "listed and marked !ref. The header shows the device, the ISAs and the\n"
                             "blocked layout.\n"
                             "  --batch B         batch to measure at (default 1; a daemon model: up to\n"
                             "                    its max_batch)\n"
                             "  --runs N          measured runs (default 10; offline 0 = do not measure;\n"
                             "                    a daemon model: 1..1000)\n"
                             "  --all             list every layer, not only conv/FC\n"
                             "  --json            one JSON object (every layer)\n"
                             "Offline (FILE) only:\n"
                             "  --threads T       intra-op threads (default: all cores)\n"
                             "  --tune            time both candidates per layer at load (cached on disk)\n"
                             "  --tune-cache DIR  cache folder (default $XDG_CACHE_HOME/convd)\n"
                             "  --plan MODE       auto (default), dense (no compaction, dense kernels),\n"
                             "                    compact (compaction, dense kernels), sparse\n"
                             "  --vs-dense        also measure the dense plan of the same file\n"
                             "A daemon model's profile takes about runs x one inference; without\n"
                             "--timeout convctl waits up to 10 minutes for it.";

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
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void json_shape(int rank, const int64_t *s) {
    putchar('[');
    for (int i = 0; i < rank; i++) printf("%s%lld", i ? "," : "", (long long)s[i]);
    putchar(']');
}

static void json_num(double v) {
    if (v < 0)
        printf("null");
    else
        printf("%.6g", v);
}

// A plan to print, from either source. Strings are static, the runtime's, or
// owned by `strs` (decoded from the daemon's answer).
typedef struct {
    bool daemon;       // from the daemon's `plan` (else a file planned here)
    const char *model; // file path, or the daemon's model name
    const char *path;  // the daemon's file of it (NULL offline)
    const char *device, *layout;
    const char *cpu_model, *kernels_isa, *dnnl_isa, *cpu_layout;
    bool kernels_capped;
    int block;
    int batch, runs, max_batch;      // max_batch: daemon only (-1 offline)
    int threads, tune;               // offline only
    const char *plan_mode;           // offline only
    double total_ms, dense_total_ms; // -1: not measured
    int64_t weight_bytes;            // -1: unknown (daemon)
    int slice_views, slice_copies;   // Slice/Split outputs in place / copied; -1: unknown (daemon)
    int n;
    cd_layer_info *layers;
    double *lms; // per layer measured ms, -1 unknown
    char **strs; // owned strings
    size_t nstrs, capstrs;
} plan_view;

static void view_free(plan_view *v) {
    for (size_t i = 0; i < v->nstrs; i++) free(v->strs[i]);
    free(v->strs);
    free(v->layers);
    free(v->lms);
}

// ---- offline: load the file in this process ----------------------------------

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

// This machine's CPU model name (as the daemon reports it: /proc/cpuinfo).
static const char *cpu_model_name(void) {
    static char name[256];
    if (name[0]) return name;
    snprintf(name, sizeof name, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *p = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !p) continue;
        for (p++; *p == ' ' || *p == '\t'; p++) {
        }
        p[strcspn(p, "\n")] = '\0';
        if (*p) snprintf(name, sizeof name, "%s", p);
        break;
    }
    if (f) fclose(f);
    return name;
}

// Fills v from a model loaded here (v->lms already set; m must outlive v).
static int view_from_model(plan_view *v, const cd_model *m) {
    cd_cpu_info ci;
    cd_runtime_cpu_info(&ci);
    v->device = cd_model_device(m);
    v->layout = cd_model_layout(m);
    v->cpu_model = cpu_model_name();
    v->kernels_isa = ci.kernels_isa;
    v->kernels_capped = ci.kernels_capped != 0;
    v->dnnl_isa = ci.dnnl_isa;
    v->cpu_layout = ci.layout;
    v->block = ci.block;
    v->max_batch = -1;
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    v->weight_bytes = s.weight_bytes;
    v->slice_views = s.slice_views;
    v->slice_copies = s.slice_copies;
    v->n = cd_model_num_layers(m);
    v->layers = calloc((size_t)v->n + 1, sizeof *v->layers);
    if (!v->layers) return ctl_fail_msg("E_NOMEM: out of memory");
    for (int i = 0; i < v->n; i++) cd_model_layer(m, i, &v->layers[i]);
    return 0;
}

// ---- daemon: the `plan` method's answer -----------------------------------------

// A str of map at key as an owned NUL-terminated copy ("" when absent).
static const char *vstr(plan_view *v, const msgpack_object *map, const char *key) {
    const msgpack_object *o = ctl_map_get(map, key);
    if (!o || o->type != MSGPACK_OBJECT_STR) return "";
    if (v->nstrs == v->capstrs) {
        size_t cap = v->capstrs ? 2 * v->capstrs : 64;
        char **n = realloc(v->strs, cap * sizeof *n);
        if (!n) return "";
        v->strs = n;
        v->capstrs = cap;
    }
    char *c = strndup(o->via.str.ptr, o->via.str.size);
    if (!c) return "";
    v->strs[v->nstrs++] = c;
    return c;
}

static bool get_bool(const msgpack_object *map, const char *key) {
    const msgpack_object *o = ctl_map_get(map, key);
    return o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
}

static int get_shape(const msgpack_object *map, const char *key, int64_t *shape) {
    const msgpack_object *o = ctl_map_get(map, key);
    int rank = 0;
    for (uint32_t i = 0; o && o->type == MSGPACK_OBJECT_ARRAY && i < o->via.array.size && i < CD_MAX_RANK; i++) {
        const msgpack_object *d = &o->via.array.ptr[i];
        shape[rank++] = d->type == MSGPACK_OBJECT_POSITIVE_INTEGER   ? (int64_t)d->via.u64
                        : d->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? d->via.i64
                                                                     : -1;
    }
    return rank;
}

// Fills v from the daemon's answer r (a map; strings copied into v).
static int view_from_answer(plan_view *v, const msgpack_object *r) {
    const msgpack_object *cpu = ctl_map_get(r, "cpu"), *ls = ctl_map_get(r, "layers");
    if (!ls || ls->type != MSGPACK_OBJECT_ARRAY) return ctl_fail_msg("E_PROTOCOL: the plan answer has no layers");
    v->daemon = true;
    v->model = vstr(v, r, "model");
    v->path = vstr(v, r, "path");
    v->device = vstr(v, r, "device");
    v->layout = vstr(v, r, "layout");
    v->cpu_model = vstr(v, cpu, "model");
    v->kernels_isa = vstr(v, cpu, "kernels_isa");
    v->kernels_capped = get_bool(cpu, "kernels_capped");
    v->dnnl_isa = vstr(v, cpu, "dnnl_isa");
    v->cpu_layout = vstr(v, cpu, "layout");
    v->block = (int)ctl_get_num(cpu, "block", NULL);
    v->batch = (int)ctl_get_num(r, "batch", NULL);
    v->runs = (int)ctl_get_num(r, "runs", NULL);
    v->max_batch = (int)ctl_get_num(r, "max_batch", NULL);
    v->total_ms = ctl_get_num(r, "measured_ms", NULL);
    v->dense_total_ms = -1;
    v->weight_bytes = -1;
    v->slice_views = v->slice_copies = -1;
    v->n = (int)ls->via.array.size;
    v->layers = calloc((size_t)v->n + 1, sizeof *v->layers);
    v->lms = calloc((size_t)v->n + 1, sizeof *v->lms);
    if (!v->layers || !v->lms) return ctl_fail_msg("E_NOMEM: out of memory");
    for (int i = 0; i < v->n; i++) {
        const msgpack_object *o = &ls->via.array.ptr[i], *st = ctl_map_get(o, "structure");
        const msgpack_object *bb = st ? ctl_map_get(st, "best_block") : NULL;
        cd_layer_info *l = &v->layers[i];
        l->name = vstr(v, o, "name");
        l->op = vstr(v, o, "op");
        l->kernel = vstr(v, o, "kernel");
        l->dtype = vstr(v, o, "dtype");
        if (!*l->dtype) l->dtype = "f32"; // a daemon from before int8
        l->layout = vstr(v, o, "layout");
        l->reference = get_bool(o, "reference");
        l->in_rank = get_shape(o, "in_shape", l->in_shape);
        l->out_rank = get_shape(o, "out_shape", l->out_shape);
        l->params = (int64_t)ctl_get_num(o, "params", NULL);
        l->flops = (int64_t)ctl_get_num(o, "flops", NULL);
        l->density = ctl_get_num(o, "density", NULL);
        v->lms[i] = ctl_get_num(o, "measured_ms", NULL);
        l->is_weighted = get_bool(o, "weighted");
        l->structure = l->compaction = "";
        l->pred_ms = l->pred_dense_ms = l->pred_sparse_ms = l->pred_reorder_ms = -1;
        l->tuned_ms = l->tuned_dense_ms = l->tuned_sparse_ms = -1;
        if (!l->is_weighted) continue;
        l->sparse = get_bool(o, "sparse");
        l->compaction = vstr(v, o, "compaction");
        l->structure = vstr(v, st, "text");
        l->an.zero_filters = (int)ctl_get_num(st, "zero_filters", NULL);
        l->an.zero_in_channels = (int)ctl_get_num(st, "zero_in_channels", NULL);
        l->an.zero_connections = (int64_t)ctl_get_num(st, "zero_connections", NULL);
        l->an.connections = (int64_t)ctl_get_num(st, "connections", NULL);
        if (bb && bb->type == MSGPACK_OBJECT_MAP) {
            l->an.best_block_h = (int)ctl_get_num(bb, "h", NULL);
            l->an.best_block_w = (int)ctl_get_num(bb, "w", NULL);
            l->an.best_block_fill = ctl_get_num(bb, "fill", NULL);
        }
        l->an.nm_2_4 = ctl_get_num(st, "nm_2_4", NULL);
        l->an.is_2_4 = get_bool(st, "is_2_4");
        l->an.is_4_8 = get_bool(st, "is_4_8");
        l->pred_ms = ctl_get_num(o, "pred_ms", NULL);
        l->pred_dense_ms = ctl_get_num(o, "pred_dense_ms", NULL);
        l->pred_sparse_ms = ctl_get_num(o, "pred_sparse_ms", NULL);
        l->tuned_sparse_ms = ctl_get_num(o, "tuned_sparse_ms", NULL);
        l->pred_reorder_ms = ctl_get_num(o, "pred_reorder_ms", NULL);
        l->tuned_ms = ctl_get_num(o, "tuned_ms", NULL);
        l->tuned_dense_ms = ctl_get_num(o, "tuned_dense_ms", NULL);
        l->tune_batch = (int)ctl_get_num(o, "tune_batch", NULL);
        l->flops_dense = (int64_t)ctl_get_num(o, "flops_dense", NULL);
        l->flops_skipped = (int64_t)ctl_get_num(o, "flops_skipped", NULL);
    }
    return 0;
}

// Asks the daemon for the plan of its model `name` and fills v. ans keeps the
// answer's bytes (free with convd_free).
static int view_from_daemon(ctl_ctx *ctx, plan_view *v, const char *name, int batch, int runs) {
    int rc = ctl_connect(ctx);
    if (rc) return rc;
    ctl_mp m;
    ctl_mp_init(&m);
    msgpack_pack_map(&m.pk, 3);
    ctl_mp_kv_str(&m.pk, "model", name);
    ctl_mp_kv_i64(&m.pk, "batch", batch);
    ctl_mp_kv_i64(&m.pk, "runs", runs);
    void *res = NULL;
    size_t len = 0;
    // The profile takes about runs x one inference: the default call timeout
    // (30 s) is not meant for it.
    rc =
        convd_call(ctx->conn, "plan", m.sb.data, m.sb.size, &res, &len, ctx->timeout_ms > 0 ? ctx->timeout_ms : 600000);
    ctl_mp_free(&m);
    if (rc) return ctl_fail(rc);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    if (msgpack_unpack_next(&up, res, len, &off) != MSGPACK_UNPACK_SUCCESS || up.data.type != MSGPACK_OBJECT_MAP)
        rc = ctl_fail_msg("E_PROTOCOL: the plan answer is not a map");
    else
        rc = view_from_answer(v, &up.data);
    msgpack_unpacked_destroy(&up);
    convd_free(res);
    return rc;
}

// ---- output ---------------------------------------------------------------------

typedef struct {
    double pred, meas_w, meas_all;
    int64_t fl_dense, fl_skip, fl_run;
    int nweighted, nsparse, ncompact, nref;
} plan_totals;

static plan_totals totals(const plan_view *v) {
    plan_totals t = {0};
    for (int i = 0; i < v->n; i++) {
        const cd_layer_info *l = &v->layers[i];
        if (v->lms[i] >= 0) t.meas_all += v->lms[i];
        t.nref += l->reference != 0;
        if (!l->is_weighted) continue;
        t.nweighted++;
        t.nsparse += l->sparse;
        t.ncompact += l->compaction[0] != '\0';
        if (l->pred_ms >= 0) t.pred += l->pred_ms;
        if (v->lms[i] >= 0) t.meas_w += v->lms[i];
        t.fl_dense += l->flops_dense;
        t.fl_skip += l->flops_skipped;
        t.fl_run += l->flops_dense - l->flops_skipped;
    }
    return t;
}

static void print_json(const plan_view *v) {
    plan_totals t = totals(v);
    printf("{\"source\":\"%s\",\"model\":", v->daemon ? "daemon" : "file");
    json_str(v->model);
    if (v->daemon) {
        printf(",\"path\":");
        json_str(v->path);
        printf(",\"max_batch\":%d", v->max_batch);
    } else {
        printf(",\"threads\":%d,\"tune\":%s,\"plan\":", v->threads, v->tune ? "true" : "false");
        json_str(v->plan_mode);
    }
    printf(",\"device\":");
    json_str(v->device);
    printf(",\"layout\":");
    json_str(v->layout);
    printf(",\"cpu\":{\"model\":");
    json_str(v->cpu_model);
    printf(",\"kernels_isa\":");
    json_str(v->kernels_isa);
    printf(",\"kernels_capped\":%s,\"dnnl_isa\":", v->kernels_capped ? "true" : "false");
    json_str(v->dnnl_isa);
    printf(",\"layout\":");
    json_str(v->cpu_layout);
    printf(",\"block\":%d}", v->block);
    printf(",\"batch\":%d,\"runs\":%d,\"layers\":[", v->batch, v->runs);
    for (int i = 0; i < v->n; i++) {
        const cd_layer_info *l = &v->layers[i];
        printf("%s{\"index\":%d,\"name\":", i ? "," : "", i);
        json_str(l->name);
        printf(",\"op\":");
        json_str(l->op);
        printf(",\"kernel\":");
        json_str(l->kernel);
        printf(",\"dtype\":");
        json_str(l->dtype);
        printf(",\"layout\":");
        json_str(l->layout);
        printf(",\"reference\":%s,\"in_shape\":", l->reference ? "true" : "false");
        json_shape(l->in_rank, l->in_shape);
        printf(",\"out_shape\":");
        json_shape(l->out_rank, l->out_shape);
        printf(",\"weighted\":%s,\"params\":%lld,\"flops\":%lld,\"density\":%.6g,\"measured_ms\":",
               l->is_weighted ? "true" : "false", (long long)l->params, (long long)l->flops, l->density);
        json_num(v->lms[i]);
        if (l->is_weighted) {
            printf(",\"sparse\":%s,\"compaction\":", l->sparse ? "true" : "false");
            json_str(l->compaction);
            printf(",\"structure\":{\"text\":");
            json_str(l->structure);
            printf(",\"zero_filters\":%d,\"zero_in_channels\":%d,\"zero_connections\":%lld,\"connections\":%lld,"
                   "\"best_block\":",
                   l->an.zero_filters, l->an.zero_in_channels, (long long)l->an.zero_connections,
                   (long long)l->an.connections);
            if (l->an.best_block_h)
                printf("{\"h\":%d,\"w\":%d,\"fill\":%.4f}", l->an.best_block_h, l->an.best_block_w,
                       l->an.best_block_fill);
            else
                printf("null");
            printf(",\"nm_2_4\":%.4f,\"is_2_4\":%s,\"is_4_8\":%s}", l->an.nm_2_4, l->an.is_2_4 ? "true" : "false",
                   l->an.is_4_8 ? "true" : "false");
            printf(",\"pred_ms\":");
            json_num(l->pred_ms);
            printf(",\"pred_dense_ms\":");
            json_num(l->pred_dense_ms);
            printf(",\"pred_sparse_ms\":");
            json_num(l->pred_sparse_ms);
            printf(",\"tuned_sparse_ms\":");
            json_num(l->tuned_sparse_ms);
            printf(",\"pred_reorder_ms\":");
            json_num(l->pred_reorder_ms);
            printf(",\"tuned_ms\":");
            json_num(l->tuned_ms);
            printf(",\"tuned_dense_ms\":");
            json_num(l->tuned_dense_ms);
            printf(",\"tune_batch\":%d,\"flops_dense\":%lld,\"flops_skipped\":%lld", l->tune_batch,
                   (long long)l->flops_dense, (long long)l->flops_skipped);
        }
        printf("}");
    }
    printf("],\"total\":{\"layers\":%d,\"weighted_layers\":%d,\"sparse_layers\":%d,\"compacted_layers\":%d,"
           "\"reference_layers\":%d,\"pred_ms\":%.6g,\"measured_ms\":",
           v->n, t.nweighted, t.nsparse, t.ncompact, t.nref, t.pred);
    json_num(v->total_ms);
    printf(",\"measured_layers_ms\":");
    json_num(v->runs > 0 ? t.meas_all : -1);
    printf(",\"measured_weighted_ms\":");
    json_num(v->runs > 0 ? t.meas_w : -1);
    printf(",\"dense_plan_ms\":");
    json_num(v->dense_total_ms);
    printf(",\"flops_dense\":%lld,\"flops_run\":%lld,\"flops_skipped\":%lld,\"weight_bytes\":", (long long)t.fl_dense,
           (long long)t.fl_run, (long long)t.fl_skip);
    if (v->weight_bytes >= 0)
        printf("%lld", (long long)v->weight_bytes);
    else
        printf("null");
    if (v->slice_views >= 0)
        printf(",\"slice_views\":%d,\"slice_copies\":%d}}\n", v->slice_views, v->slice_copies);
    else
        printf(",\"slice_views\":null,\"slice_copies\":null}}\n");
}

static void print_human(const plan_view *v, bool all) {
    plan_totals t = totals(v);
    if (v->daemon)
        printf("plan %s: the daemon's model (%s), profiled in the daemon: batch %d (max %d), %d runs, "
               "%d layers (%d conv/FC: %d sparse, %d compacted)\n",
               v->model, v->path, v->batch, v->max_batch, v->runs, v->n, t.nweighted, t.nsparse, t.ncompact);
    else
        printf("plan %s: a file, planned in this process (offline): batch %d, %s%s, %d layers (%d conv/FC: "
               "%d sparse, %d compacted)\n",
               v->model, v->batch, v->plan_mode, v->tune ? ", tuned" : "", v->n, t.nweighted, t.nsparse, t.ncompact);
    printf("device %s, layout %s; cpu %s: kernels %s%s, dnnl %s\n\n", v->device, v->layout, v->cpu_model,
           v->kernels_isa,
           v->kernels_capped ? (v->daemon ? " (capped by --max-isa)" : " (capped by CONVD_MAX_ISA)") : "", v->dnnl_isa);
    if (v->slice_views > 0 || v->slice_copies > 0)
        printf("slices: %d views (no copy), %d copies (Slice layers)\n\n", v->slice_views, v->slice_copies);
    static const char *heads[] = {"#",      "layer", "op",     "in -> out", "density", "structure", "compaction",
                                  "kernel", "type",  "layout", "pred ms",   "meas ms", "MFLOP",     "skipped"};
    static const bool numeric[] = {true,  false, false, false, true, false, false,
                                   false, false, false, true,  true, true,  true};
    ctl_table tb;
    ctl_table_init(&tb, 14, heads, numeric);
    for (int i = 0; i < v->n; i++) {
        const cd_layer_info *l = &v->layers[i];
        if (!l->is_weighted && !all && !l->reference) continue;
        char idx[16], io[160], a[64], b[64], dens[16], st[160], pr[32], me[32], mf[32], sk[32], kern[160];
        snprintf(idx, sizeof idx, "%d", i);
        snprintf(io, sizeof io, "%s -> %s", ctl_fmt_shape(a, sizeof a, l->in_rank, l->in_shape),
                 ctl_fmt_shape(b, sizeof b, l->out_rank, l->out_shape));
        if (l->is_weighted) {
            snprintf(dens, sizeof dens, "%.3f", l->density);
            int n2 = snprintf(st, sizeof st, "zf %d zc %d", l->an.zero_filters, l->an.zero_in_channels);
            if (l->an.best_block_h)
                n2 += snprintf(st + n2, sizeof st - n2, " blk %dx%d@%.2f", l->an.best_block_h, l->an.best_block_w,
                               l->an.best_block_fill);
            if (l->an.is_2_4 || l->an.is_4_8) snprintf(st + n2, sizeof st - n2, " %s", l->an.is_2_4 ? "2:4" : "4:8");
            if (l->pred_ms >= 0)
                snprintf(pr, sizeof pr, "%.3f", l->pred_ms);
            else
                snprintf(pr, sizeof pr, "-");
            snprintf(sk, sizeof sk, "%.0f%%",
                     l->flops_dense ? 100.0 * (double)l->flops_skipped / (double)l->flops_dense : 0.0);
            snprintf(mf, sizeof mf, "%.2f", (double)l->flops_dense / 1e6);
        } else {
            snprintf(dens, sizeof dens, "-");
            snprintf(st, sizeof st, "-");
            snprintf(pr, sizeof pr, "-");
            snprintf(sk, sizeof sk, "-");
            snprintf(mf, sizeof mf, "-");
        }
        if (v->lms[i] >= 0)
            snprintf(me, sizeof me, "%.3f", v->lms[i]);
        else
            snprintf(me, sizeof me, "-");
        snprintf(kern, sizeof kern, "%s%s", l->kernel, l->reference ? " !ref" : "");
        const char *cells[14] = {
            idx,  l->name,  l->op,     io, dens, st, l->is_weighted && l->compaction[0] ? l->compaction : "-",
            kern, l->dtype, l->layout, pr, me,   mf, sk};
        ctl_table_add_row(&tb, cells);
    }
    ctl_table_print(&tb, 0);
    ctl_table_free(&tb);
    printf("\ntotal: %.1f of %.1f MFLOP skipped (%.1f%%), predicted %.3f ms (conv/FC, batch 1)",
           (double)t.fl_skip / 1e6, (double)t.fl_dense / 1e6,
           t.fl_dense ? 100.0 * (double)t.fl_skip / (double)t.fl_dense : 0.0, t.pred);
    if (v->runs > 0)
        printf(", measured %.3f ms per run (median of %d, batch %d; layers sum %.3f, conv/FC %.3f)", v->total_ms,
               v->runs, v->batch, t.meas_all, t.meas_w);
    if (v->dense_total_ms >= 0)
        printf(", dense plan %.3f ms (%.2fx)", v->dense_total_ms,
               v->total_ms > 0 ? v->dense_total_ms / v->total_ms : 0.0);
    printf("\n");
    if (t.nref > 0) printf("%d layer%s on a reference kernel (slow), marked !ref\n", t.nref, t.nref == 1 ? "" : "s");
}

// True when arg names a file, planned offline: an existing path, or one that
// only a path can be (a '/' or the .onnx suffix: model names are
// [A-Za-z0-9._-], and the daemon drops .onnx from the files it loads), so a
// missing file is E_IO rather than a question to the daemon. Anything else
// is a model name, asked of the daemon.
static bool is_file(const char *arg) {
    struct stat st;
    size_t n = strlen(arg);
    return stat(arg, &st) == 0 || strchr(arg, '/') || (n > 5 && strcmp(arg + n - 5, ".onnx") == 0);
}

int ctl_cmd_plan(ctl_ctx *ctx, int argc, char **argv) {
    const char *path = NULL, *cache = NULL, *plan_s = "auto", *offline_opt = NULL;
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
            if (a[2] == 't') offline_opt = a;
        } else if (!strcmp(a, "--tune-cache") || !strcmp(a, "--plan")) {
            if (!has_val) return ctl_usage_error(argv[0], "%s needs a value", a);
            if (a[2] == 't')
                cache = argv[++i];
            else
                plan_s = argv[++i];
            offline_opt = a;
        } else if (!strcmp(a, "--tune")) {
            tune = 1;
            offline_opt = a;
        } else if (!strcmp(a, "--vs-dense")) {
            vs_dense = 1;
            offline_opt = a;
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
    if (!path) return ctl_usage_error(argv[0], "MODEL (a file, or a model loaded in the daemon) is required");
    plan_view v = {.model = path,
                   .batch = batch,
                   .runs = runs,
                   .threads = threads,
                   .tune = tune,
                   .plan_mode = plan_s,
                   .total_ms = -1,
                   .dense_total_ms = -1};
    int ec;
    cd_model *m = NULL, *md = NULL;
    double *dms = NULL;
    if (!is_file(path)) {
        if (offline_opt)
            return ctl_usage_error(argv[0],
                                   "%s is for a model file; '%s' is not a file, so it names a model "
                                   "in the daemon",
                                   offline_opt, path);
        ec = view_from_daemon(ctx, &v, path, batch, runs);
    } else {
        int plan = !strcmp(plan_s, "auto")      ? 0
                   : !strcmp(plan_s, "dense")   ? 1
                   : !strcmp(plan_s, "sparse")  ? 2
                   : !strcmp(plan_s, "compact") ? 3
                                                : -1;
        if (plan < 0) return ctl_usage_error(argv[0], "--plan must be auto, dense, compact or sparse");
        cd_runtime_options ropts; // CONVD_* (runtime/runtime.h)
        cd_runtime_options_from_env(&ropts);
        cd_runtime_configure(&ropts);
        int rc = cd_runtime_init(threads);
        if (rc) return ctl_fail_msg("%s: runtime initialisation failed", cd_err_name(rc));
        cd_model_opts o = {.max_batch = batch, .threads = threads, .tune = tune, .tune_cache = cache, .plan = plan};
        ec = load_measure(path, &o, batch, runs, &m, &v.lms, &v.total_ms);
        if (!ec && vs_dense) {
            cd_model_opts od = o;
            od.plan = 1;
            od.tune = 0;
            ec = load_measure(path, &od, batch, runs > 0 ? runs : 10, &md, &dms, &v.dense_total_ms);
        }
        if (!ec) ec = view_from_model(&v, m);
    }
    if (!ec) {
        if (ctx->json)
            print_json(&v);
        else
            print_human(&v, all);
    }
    view_free(&v);
    cd_model_free(m);
    cd_model_free(md);
    free(dms);
    return ec;
}
