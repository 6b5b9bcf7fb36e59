// convctl hello | health | models | stats: the daemon's status methods as
// aligned human text, or JSON with --json.

#include "tools/convctl/convctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Accepts only the common options. Returns 0 or the exit code.
static int no_args(ctl_ctx *ctx, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) return CTL_EXIT_USAGE;
        if (r == 0) return ctl_usage_error(argv[0], "unexpected argument '%s'", argv[i]);
    }
    return 0;
}

int ctl_cmd_hello(ctl_ctx *ctx, int argc, char **argv) {
    int rc = no_args(ctx, argc, argv);
    if (rc) return rc;
    if (ctx->json) return ctl_print_json_call(ctx, "hello", NULL, 0);
    if ((rc = ctl_connect(ctx))) return rc;
    convd_hello_info h;
    if ((rc = convd_hello(ctx->conn, &h))) return ctl_fail(rc);
    printf("server    %s\nversion   %s\nprotocol  %d\ndevice    %s\nfeatures  %s\n", h.server, h.version, h.protocol,
           h.device, h.features);
    return CTL_EXIT_OK;
}

// Calls method (no params) and unpacks its answer, which must be a map, into
// *up; *res holds the bytes up points into (free both with
// msgpack_unpacked_destroy and convd_free). 0, or the exit code of a failure
// already reported.
static int call_map(ctl_ctx *ctx, const char *method, msgpack_unpacked *up, void **res) {
    int rc = ctl_connect(ctx);
    if (rc) return rc;
    size_t len, off = 0;
    if ((rc = convd_call(ctx->conn, method, NULL, 0, res, &len, CONVD_TIMEOUT_DEFAULT))) return ctl_fail(rc);
    msgpack_unpacked_init(up);
    if (msgpack_unpack_next(up, *res, len, &off) != MSGPACK_UNPACK_SUCCESS || up->data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(up);
        convd_free(*res);
        return ctl_fail_msg("E_PROTOCOL: the %s answer is not a map", method);
    }
    return 0;
}

int ctl_cmd_health(ctl_ctx *ctx, int argc, char **argv) {
    int rc = no_args(ctx, argc, argv);
    if (rc) return rc;
    if (ctx->json) return ctl_print_json_call(ctx, "health", NULL, 0);
    // The raw answer, not convd_health(): its struct has no room for the
    // cpu map, and growing it would change libconvd's ABI.
    void *res;
    msgpack_unpacked up;
    if ((rc = call_map(ctx, "health", &up, &res))) return rc;
    const msgpack_object *h = &up.data, *cpu = ctl_map_get(h, "cpu");
    char d[64], st[32], model[256], kisa[32], disa[64], lay[32];
    double up_s = ctl_get_num(h, "uptime_s", NULL), nmod = ctl_get_num(h, "models", NULL);
    printf("status   %s\nuptime   %s\nmodels   %.0f\n", ctl_get_str(h, "status", st, sizeof st),
           up_s >= 0 ? ctl_fmt_duration(d, sizeof d, up_s) : "-", nmod < 0 ? 0 : nmod);
    if (cpu) {
        const msgpack_object *capped = ctl_map_get(cpu, "kernels_capped");
        bool is_capped = capped && capped->type == MSGPACK_OBJECT_BOOLEAN && capped->via.boolean;
        double block = ctl_get_num(cpu, "block", NULL);
        printf("cpu      %s\nkernels  %s%s\ndnnl     %s\nlayout   %s (block %.0f)\n",
               ctl_get_str(cpu, "model", model, sizeof model), ctl_get_str(cpu, "kernels_isa", kisa, sizeof kisa),
               is_capped ? " (capped by --max-isa)" : "", ctl_get_str(cpu, "dnnl_isa", disa, sizeof disa),
               ctl_get_str(cpu, "layout", lay, sizeof lay), block < 0 ? 1 : block);
    }
    msgpack_unpacked_destroy(&up);
    convd_free(res);
    return CTL_EXIT_OK;
}

// "name:f32[N, 3, 224, 224]" for each tensor, comma separated.
static void fmt_tensors(char *buf, size_t len, const convd_tensor_info *t, size_t n) {
    size_t pos = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && pos + 1 < len; i++) {
        char sh[160];
        ctl_fmt_shape(sh, sizeof sh, t[i].rank, t[i].shape);
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%s:%s%s", i ? " " : "", t[i].name ? t[i].name : "?",
                                convd_dtype_name(t[i].dtype), sh);
    }
}

// "[N, 3, 32, 32]" of a msgpack array of ints (-1: N) into buf.
static const char *fmt_obj_shape(char *buf, size_t len, const msgpack_object *a) {
    int64_t s[CONVD_MAX_RANK];
    int rank = 0;
    if (a->type == MSGPACK_OBJECT_ARRAY)
        for (uint32_t i = 0; i < a->via.array.size && rank < CONVD_MAX_RANK; i++) {
            const msgpack_object *d = &a->via.array.ptr[i];
            s[rank++] = d->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)d->via.u64 : -1;
        }
    return ctl_fmt_shape(buf, len, rank, s);
}

// Below the table: for each model with symbolic input dims, which dims, and
// the input sizes it has plans for now ("shapes" of the models answer).
static int print_planned_shapes(ctl_ctx *ctx) {
    void *res;
    msgpack_unpacked up;
    int rc = call_map(ctx, "models", &up, &res);
    if (rc) return rc;
    const msgpack_object *ms = ctl_map_get(&up.data, "models");
    for (uint32_t i = 0; ms && ms->type == MSGPACK_OBJECT_ARRAY && i < ms->via.array.size; i++) {
        const msgpack_object *m = &ms->via.array.ptr[i], *shapes = ctl_map_get(m, "shapes");
        const msgpack_object *ins = ctl_map_get(m, "inputs");
        if (!shapes || shapes->type != MSGPACK_OBJECT_ARRAY || !ins || ins->type != MSGPACK_OBJECT_ARRAY) continue;
        char name[256], iname[256], sh[160], b[32];
        printf("\n%s: input sizes", ctl_get_str(m, "name", name, sizeof name));
        for (uint32_t k = 0; k < ins->via.array.size; k++) {
            const msgpack_object *dyn = ctl_map_get(&ins->via.array.ptr[k], "dynamic");
            if (!dyn || dyn->type != MSGPACK_OBJECT_ARRAY) continue;
            printf(" (%s: dims", ctl_get_str(&ins->via.array.ptr[k], "name", iname, sizeof iname));
            for (uint32_t j = 0; j < dyn->via.array.size; j++)
                printf("%s%lld", j ? "," : " ", (long long)dyn->via.array.ptr[j].via.u64);
            printf(" symbolic)");
        }
        double max = ctl_get_num(m, "max_shapes", NULL), bytes = ctl_get_num(m, "shapes_bytes", NULL);
        printf(", %u of at most %.0f planned (%s beyond the first):\n", shapes->via.array.size, max,
               ctl_fmt_bytes(b, sizeof b, bytes < 0 ? 0 : bytes));
        for (uint32_t k = 0; k < shapes->via.array.size; k++) {
            const msgpack_object *plan = &shapes->via.array.ptr[k];
            printf("  ");
            for (uint32_t j = 0; plan->type == MSGPACK_OBJECT_ARRAY && j < plan->via.array.size; j++)
                printf("%s%s", j ? " " : "", fmt_obj_shape(sh, sizeof sh, &plan->via.array.ptr[j]));
            printf("%s\n", k == 0 ? "  (at load)" : "");
        }
    }
    msgpack_unpacked_destroy(&up);
    convd_free(res);
    return CTL_EXIT_OK;
}

int ctl_cmd_models(ctl_ctx *ctx, int argc, char **argv) {
    int rc = no_args(ctx, argc, argv);
    if (rc) return rc;
    if (ctx->json) return ctl_print_json_call(ctx, "models", NULL, 0);
    if ((rc = ctl_connect(ctx))) return rc;
    convd_model_list *l;
    if ((rc = convd_models(ctx->conn, &l))) return ctl_fail(rc);
    if (l->count == 0) {
        printf("no models loaded\n");
        convd_model_list_free(l);
        return CTL_EXIT_OK;
    }
    static const char *heads[] = {"NAME",   "INPUTS",  "OUTPUTS", "BATCH",  "PARAMS",
                                  "GFLOPS", "WEIGHTS", "DENSITY", "LAYERS", "PATH"};
    static const bool num[] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 0};
    ctl_table t;
    ctl_table_init(&t, 10, heads, num);
    for (size_t i = 0; i < l->count; i++) {
        const convd_model_info *m = &l->models[i];
        char in[512], out[512], batch[32], params[32], gf[32], wb[32], dens[32], layers[64];
        fmt_tensors(in, sizeof in, m->inputs, m->n_inputs);
        fmt_tensors(out, sizeof out, m->outputs, m->n_outputs);
        snprintf(batch, sizeof batch, "%lld", (long long)m->max_batch);
        if (m->max_batch < 0) snprintf(batch, sizeof batch, "-");
        if (m->params >= 0)
            ctl_fmt_count(params, sizeof params, (double)m->params);
        else
            snprintf(params, sizeof params, "-");
        if (m->flops >= 0)
            snprintf(gf, sizeof gf, "%.3f", (double)m->flops / 1e9);
        else
            snprintf(gf, sizeof gf, "-");
        if (m->weight_bytes >= 0)
            ctl_fmt_bytes(wb, sizeof wb, (double)m->weight_bytes);
        else
            snprintf(wb, sizeof wb, "-");
        if (m->density >= 0)
            snprintf(dens, sizeof dens, "%.1f%%", m->density * 100);
        else
            snprintf(dens, sizeof dens, "-");
        const int picked = m->int8_pick && strcmp(m->int8_pick, "none") != 0;
        if (m->layers >= 0 && m->int8_layers > 0)
            snprintf(layers, sizeof layers, "%lld (%lld int8%s%s)", (long long)m->layers, (long long)m->int8_layers,
                     picked ? ", " : "", picked ? m->int8_pick : "");
        else if (m->layers >= 0)
            snprintf(layers, sizeof layers, "%lld", (long long)m->layers);
        else
            snprintf(layers, sizeof layers, "-");
        ctl_table_add(&t, m->name ? m->name : "?", in, out, batch, params, gf, wb, dens, layers,
                      m->path ? m->path : "");
    }
    ctl_table_print(&t, 0);
    ctl_table_free(&t);
    convd_model_list_free(l);
    return print_planned_shapes(ctx);
}

// ---- stats: a generic renderer, so new counters show up without changes ----

static bool is_scalar(const msgpack_object *o) {
    return o->type != MSGPACK_OBJECT_MAP && o->type != MSGPACK_OBJECT_ARRAY;
}

static bool key_is(const msgpack_object *k, const char *s) {
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
           memcmp(k->via.str.ptr, s, k->via.str.size) == 0;
}

static bool key_ends(const msgpack_object *k, const char *suffix) {
    size_t n = strlen(suffix);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size >= n &&
           memcmp(k->via.str.ptr + k->via.str.size - n, suffix, n) == 0;
}

static double num(const msgpack_object *o) {
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
    default: return 0;
    }
}

static bool is_num(const msgpack_object *o) {
    return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER || o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ||
           o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64;
}

// Formats a scalar value; key decides the unit (…bytes…, …_s).
static const char *fmt_value(char *buf, size_t len, const msgpack_object *k, const msgpack_object *v) {
    if (is_num(v) && (key_ends(k, "_bytes") || key_is(k, "bytes_in") || key_is(k, "bytes_out"))) {
        char h[32];
        ctl_fmt_bytes(h, sizeof h, num(v));
        if (num(v) >= 1024)
            snprintf(buf, len, "%s (%.0f)", h, num(v));
        else
            snprintf(buf, len, "%s", h);
        return buf;
    }
    if (is_num(v) && key_ends(k, "_s")) return ctl_fmt_duration(buf, len, num(v));
    switch (v->type) {
    case MSGPACK_OBJECT_NIL: snprintf(buf, len, "-"); break;
    case MSGPACK_OBJECT_BOOLEAN: snprintf(buf, len, v->via.boolean ? "yes" : "no"); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: snprintf(buf, len, "%llu", (unsigned long long)v->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: snprintf(buf, len, "%lld", (long long)v->via.i64); break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: snprintf(buf, len, "%.4g", v->via.f64); break;
    case MSGPACK_OBJECT_STR:
        if (v->via.str.size == 0)
            snprintf(buf, len, "-");
        else
            snprintf(buf, len, "%.*s", (int)v->via.str.size, v->via.str.ptr);
        break;
    case MSGPACK_OBJECT_ARRAY: {
        size_t pos = 0;
        buf[0] = 0;
        for (uint32_t i = 0; i < v->via.array.size && pos + 1 < len; i++) {
            char e[128];
            fmt_value(e, sizeof e, k, &v->via.array.ptr[i]);
            pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", i ? ", " : "", e);
        }
        break;
    }
    default: snprintf(buf, len, "(%u bytes)", v->via.bin.size); break;
    }
    return buf;
}

// True when every value of map is a map whose values are all scalars (a
// table: one row per key).
static bool is_table(const msgpack_object *map) {
    if (map->via.map.size == 0) return false;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *v = &map->via.map.ptr[i].val;
        if (v->type != MSGPACK_OBJECT_MAP) return false;
        for (uint32_t j = 0; j < v->via.map.size; j++)
            if (!is_scalar(&v->via.map.ptr[j].val)) return false;
    }
    return true;
}

static void render_map(const msgpack_object *map, int indent, bool hide_zero);

static void render_table(const msgpack_object *map, int indent) {
    // Columns: the union of the row keys, in first-seen order.
    const msgpack_object *cols[31];
    int nc = 0;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *row = &map->via.map.ptr[i].val;
        for (uint32_t j = 0; j < row->via.map.size && nc < 31; j++) {
            const msgpack_object *k = &row->via.map.ptr[j].key;
            bool seen = false;
            for (int c = 0; c < nc; c++)
                if (msgpack_object_equal(*cols[c], *k)) seen = true;
            if (!seen) cols[nc++] = k;
        }
    }
    const char *heads[32];
    bool numeric[32];
    char headbuf[32][64];
    heads[0] = "NAME";
    numeric[0] = false;
    for (int c = 0; c < nc; c++) {
        const msgpack_object *k = cols[c];
        if (k->type == MSGPACK_OBJECT_STR)
            snprintf(headbuf[c], sizeof headbuf[c], "%.*s", (int)k->via.str.size, k->via.str.ptr);
        else
            snprintf(headbuf[c], sizeof headbuf[c], "?");
        for (char *p = headbuf[c]; *p; p++)
            if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 32);
        heads[c + 1] = headbuf[c];
        numeric[c + 1] = true;
    }
    ctl_table t;
    ctl_table_init(&t, nc + 1, heads, numeric);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        const msgpack_object *row = &map->via.map.ptr[i].val;
        char cells[32][128];
        const char *ptr[32];
        char name[128];
        fmt_value(name, sizeof name, k, k);
        ptr[0] = name;
        for (int c = 0; c < nc; c++) {
            snprintf(cells[c], sizeof cells[c], "-");
            for (uint32_t j = 0; j < row->via.map.size; j++)
                if (msgpack_object_equal(row->via.map.ptr[j].key, *cols[c]))
                    fmt_value(cells[c], sizeof cells[c], cols[c], &row->via.map.ptr[j].val);
            ptr[c + 1] = cells[c];
        }
        ctl_table_add_row(&t, ptr);
    }
    ctl_table_print(&t, indent);
    ctl_table_free(&t);
}

// ---- the per-model table (stats and top) --------------------------------------

const msgpack_object *ctl_map_get(const msgpack_object *map, const char *key) {
    if (!map || map->type != MSGPACK_OBJECT_MAP) return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++)
        if (key_is(&map->via.map.ptr[i].key, key)) return &map->via.map.ptr[i].val;
    return NULL;
}

double ctl_get_num(const msgpack_object *map, const char *k1, const char *k2) {
    const msgpack_object *v = ctl_map_get(map, k1);
    if (v && k2) v = ctl_map_get(v, k2);
    return v && is_num(v) ? num(v) : -1;
}

const char *ctl_get_str(const msgpack_object *map, const char *key, char *buf, size_t len) {
    const msgpack_object *v = ctl_map_get(map, key);
    if (v && v->type == MSGPACK_OBJECT_STR && v->via.str.size)
        snprintf(buf, len, "%.*s", (int)v->via.str.size, v->via.str.ptr);
    else
        snprintf(buf, len, "-");
    return buf;
}

// Microseconds as "850us", "12.3ms", "1.25s"; "-" when unknown.
static const char *fmt_us(char *buf, size_t len, double us) {
    if (us < 0)
        snprintf(buf, len, "-");
    else if (us < 1000)
        snprintf(buf, len, "%.0fus", us);
    else if (us < 1e6)
        snprintf(buf, len, "%.*fms", us < 1e4 ? 2 : 1, us / 1000);
    else
        snprintf(buf, len, "%.2fs", us / 1e6);
    return buf;
}

void ctl_render_models_table(const msgpack_object *models, const msgpack_object *prev, double dt, int indent) {
    static const char *heads[] = {"MODEL", "REQ/S", "REQUESTS", "ERRORS", "BATCHES",   "AVG_BATCH",   "QUEUED",
                                  "P50",   "P90",   "P99",      "P999",   "QWAIT_P99", "COMPUTE_P50", "TOP_ERROR"};
    static const bool numeric[] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    ctl_table t;
    ctl_table_init(&t, 14, heads, numeric);
    for (uint32_t i = 0; models && models->type == MSGPACK_OBJECT_MAP && i < models->via.map.size; i++) {
        const msgpack_object *k = &models->via.map.ptr[i].key;
        const msgpack_object *m = &models->via.map.ptr[i].val;
        char name[128], rate[32], req[32], err[32], bat[32], avg[32], q[32];
        char p50[32], p90[32], p99[32], p999[32], qw[32], comp[32], top[96];
        fmt_value(name, sizeof name, k, k);
        double r = ctl_get_num(m, "requests", NULL);
        snprintf(rate, sizeof rate, "-");
        const msgpack_object *pm = NULL;
        if (prev && k->type == MSGPACK_OBJECT_STR) {
            char key[300];
            snprintf(key, sizeof key, "%.*s", (int)k->via.str.size, k->via.str.ptr);
            pm = ctl_map_get(prev, key);
        }
        if (pm && dt > 0) {
            double r0 = ctl_get_num(pm, "requests", NULL);
            if (r >= r0 && r0 >= 0) snprintf(rate, sizeof rate, "%.1f", (r - r0) / dt);
        }
        snprintf(req, sizeof req, "%.0f", r < 0 ? 0 : r);
        snprintf(err, sizeof err, "%.0f", ctl_get_num(m, "errors", NULL) < 0 ? 0 : ctl_get_num(m, "errors", NULL));
        double b = ctl_get_num(m, "batches", NULL), items = ctl_get_num(m, "items", NULL);
        snprintf(bat, sizeof bat, "%.0f", b < 0 ? 0 : b);
        if (b > 0 && items >= 0)
            snprintf(avg, sizeof avg, "%.2f", items / b);
        else
            snprintf(avg, sizeof avg, "-");
        double qd = ctl_get_num(m, "queued", NULL);
        if (qd >= 0)
            snprintf(q, sizeof q, "%.0f", qd);
        else
            snprintf(q, sizeof q, "-");
        fmt_us(p50, sizeof p50, ctl_get_num(m, "total_us", "p50"));
        fmt_us(p90, sizeof p90, ctl_get_num(m, "total_us", "p90"));
        fmt_us(p99, sizeof p99, ctl_get_num(m, "total_us", "p99"));
        fmt_us(p999, sizeof p999, ctl_get_num(m, "total_us", "p999"));
        fmt_us(qw, sizeof qw, ctl_get_num(m, "queue_wait_us", "p99"));
        fmt_us(comp, sizeof comp, ctl_get_num(m, "compute_us", "p50"));
        // The most frequent error code.
        snprintf(top, sizeof top, "-");
        const msgpack_object *codes = ctl_map_get(m, "errors_by_code");
        double best = 0;
        for (uint32_t j = 0; codes && codes->type == MSGPACK_OBJECT_MAP && j < codes->via.map.size; j++) {
            const msgpack_object *ck = &codes->via.map.ptr[j].key;
            double n = num(&codes->via.map.ptr[j].val);
            if (n > best && ck->type == MSGPACK_OBJECT_STR) {
                best = n;
                snprintf(top, sizeof top, "%.*s %.0f", (int)ck->via.str.size, ck->via.str.ptr, n);
            }
        }
        ctl_table_add(&t, name, rate, req, err, bat, avg, q, p50, p90, p99, p999, qw, comp, top);
    }
    if (t.rows == 0)
        printf("%*sno models loaded\n", indent, "");
    else
        ctl_table_print(&t, indent);
    ctl_table_free(&t);
}

static void render_map(const msgpack_object *map, int indent, bool hide_zero) {
    // Scalars first, aligned; then the nested sections.
    size_t kw = 0;
    int shown = 0;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        const msgpack_object *v = &map->via.map.ptr[i].val;
        if (!is_scalar(v) && v->type != MSGPACK_OBJECT_ARRAY) continue;
        if (hide_zero && is_num(v) && num(v) == 0) continue;
        size_t l = k->type == MSGPACK_OBJECT_STR ? k->via.str.size : 8;
        if (l > kw) kw = l;
    }
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        const msgpack_object *v = &map->via.map.ptr[i].val;
        if (!is_scalar(v) && v->type != MSGPACK_OBJECT_ARRAY) continue;
        if (hide_zero && is_num(v) && num(v) == 0) continue;
        char kb[128], vb[1024];
        fmt_value(kb, sizeof kb, k, k);
        printf("%*s%-*s  %s\n", indent, "", (int)kw, kb, fmt_value(vb, sizeof vb, k, v));
        shown++;
    }
    if (hide_zero && shown == 0 && map->via.map.size > 0) printf("%*snone\n", indent, "");
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        const msgpack_object *v = &map->via.map.ptr[i].val;
        if (v->type != MSGPACK_OBJECT_MAP) continue;
        char kb[128];
        fmt_value(kb, sizeof kb, k, k);
        printf("%s%*s%s:\n", indent == 0 ? "\n" : "", indent, "", kb);
        if (indent == 0 && key_is(k, "models") && v->via.map.size > 0) {
            // Per model: a table of the key figures (latency is total_us:
            // receipt to answer), then each model's counters in full.
            ctl_render_models_table(v, NULL, 0, indent + 2);
            printf("\n");
            render_map(v, indent + 2, false);
        } else if (v->via.map.size == 0)
            printf("%*snone\n", indent + 2, "");
        else if (is_table(v))
            render_table(v, indent + 2);
        else
            render_map(v, indent + 2, key_is(k, "errors") || key_is(k, "by_method"));
    }
}

int ctl_cmd_stats(ctl_ctx *ctx, int argc, char **argv) {
    int rc = no_args(ctx, argc, argv);
    if (rc) return rc;
    if (ctx->json) return ctl_print_json_call(ctx, "stats", NULL, 0);
    void *res;
    msgpack_unpacked up;
    if ((rc = call_map(ctx, "stats", &up, &res))) return rc;
    render_map(&up.data, 0, false);
    msgpack_unpacked_destroy(&up);
    convd_free(res);
    return CTL_EXIT_OK;
}
