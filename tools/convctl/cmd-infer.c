// convctl infer: .npy files in, one inference through the daemon, .npy files
// (or a summary) out.

#include "tools/common/npy.h"
#include "tools/convctl/convctl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_FILES = 64 };

// One --input or --output argument: [NAME=]FILE.
typedef struct {
    const char *name; // NULL when not given
    const char *file;
} file_arg;

// Splits "name=file" (a name has no '/' and comes before the first '=').
static file_arg split_arg(const char *a) {
    file_arg f = {NULL, a};
    const char *eq = strchr(a, '=');
    if (eq && eq != a && memchr(a, '/', (size_t)(eq - a)) == NULL) {
        static char names[2 * MAX_FILES][256];
        static int used;
        size_t n = (size_t)(eq - a);
        if (n < sizeof names[0] && used < 2 * MAX_FILES) {
            memcpy(names[used], a, n);
            names[used][n] = 0;
            f.name = names[used++];
            f.file = eq + 1;
        }
    }
    return f;
}

// Value i of a tensor as a double (for the summary). LOAD reads element i
// as a T (unaligned: the bytes come straight from the answer).
#define LOAD(T)                                    \
    do {                                           \
        T v_;                                      \
        memcpy(&v_, p + sizeof(T) * i, sizeof(T)); \
        return (double)v_;                         \
    } while (0)

static double elem(const convd_tensor *t, size_t i) {
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case CONVD_DTYPE_F32: LOAD(float);
    case CONVD_DTYPE_F64: LOAD(double);
    case CONVD_DTYPE_I16: LOAD(int16_t);
    case CONVD_DTYPE_I32: LOAD(int32_t);
    case CONVD_DTYPE_I64: LOAD(int64_t);
    case CONVD_DTYPE_I8: return (int8_t)p[i];
    case CONVD_DTYPE_U8: return p[i];
    case CONVD_DTYPE_BOOL: return p[i] != 0;
    case CONVD_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
        return (h & 0x8000) ? -v : v;
    }
    case CONVD_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        uint32_t u = (uint32_t)h << 16;
        float v;
        memcpy(&v, &u, 4);
        return v;
    }
    default: return NAN;
    }
}

#undef LOAD

static void summarize(const convd_tensor *t, double *mn, double *mx, double *mean) {
    size_t n = convd_dtype_size(t->dtype) ? t->nbytes / convd_dtype_size(t->dtype) : 0;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++) {
        double v = elem(t, i);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
        sum += v;
    }
    *mn = n ? lo : NAN;
    *mx = n ? hi : NAN;
    *mean = n ? sum / (double)n : NAN;
}

// The loaded model called name, or NULL.
static const convd_model_info *find_model(const convd_model_list *l, const char *name) {
    for (size_t i = 0; l && i < l->count; i++)
        if (l->models[i].name && strcmp(l->models[i].name, name) == 0) return &l->models[i];
    return NULL;
}

// Gives each unnamed argument the next model tensor name not named
// explicitly. Returns 0 or the exit code after printing the error.
static int assign_names(file_arg *args, int n, const convd_tensor_info *ti, size_t nti, const char *what) {
    size_t next = 0;
    for (int i = 0; i < n; i++) {
        if (args[i].name) continue;
        for (; next < nti; next++) {
            bool taken = false;
            for (int j = 0; j < n; j++)
                if (args[j].name && ti[next].name && strcmp(args[j].name, ti[next].name) == 0) taken = true;
            if (!taken && ti[next].name) break;
        }
        if (next >= nti)
            return ctl_fail_msg("E_PARAMS: more unnamed --%s files than the model has %ss "
                                "(%zu)",
                                what, what, nti);
        args[i].name = ti[next++].name;
    }
    return 0;
}

// --json: {"outputs": {name: {dtype, shape, min, max, mean, file?}}}.
// Returns the exit status.
static int print_outputs_json(const convd_outputs *res, const file_arg *out, int nout) {
    ctl_mp m;
    ctl_mp_init(&m);
    msgpack_packer *pk = &m.pk;
    msgpack_pack_map(pk, 1);
    ctl_mp_str(pk, "outputs");
    msgpack_pack_map(pk, res->count);
    for (size_t i = 0; i < res->count; i++) {
        const convd_tensor *t = &res->tensors[i];
        const char *file = NULL;
        for (int j = 0; j < nout; j++)
            if (strcmp(out[j].name, res->names[i]) == 0) file = out[j].file;
        double mn, mx, mean;
        summarize(t, &mn, &mx, &mean);
        ctl_mp_str(pk, res->names[i]);
        msgpack_pack_map(pk, file ? 6 : 5);
        ctl_mp_kv_str(pk, "dtype", convd_dtype_name(t->dtype));
        ctl_mp_str(pk, "shape");
        msgpack_pack_array(pk, (size_t)t->rank);
        for (int d = 0; d < t->rank; d++) msgpack_pack_int64(pk, t->shape[d]);
        ctl_mp_kv_f64(pk, "min", mn);
        ctl_mp_kv_f64(pk, "max", mx);
        ctl_mp_kv_f64(pk, "mean", mean);
        if (file) ctl_mp_kv_str(pk, "file", file);
    }
    return ctl_mp_print(&m);
}

// One table row per output: dtype, shape, min/max/mean and the file written.
static int print_outputs_table(const convd_outputs *res, const file_arg *out, int nout) {
    static const char *heads[] = {"OUTPUT", "DTYPE", "SHAPE", "MIN", "MAX", "MEAN", "FILE"};
    static const bool num[] = {0, 0, 0, 1, 1, 1, 0};
    ctl_table t;
    ctl_table_init(&t, 7, heads, num);
    for (size_t i = 0; i < res->count; i++) {
        const convd_tensor *o = &res->tensors[i];
        const char *file = "";
        for (int j = 0; j < nout; j++)
            if (strcmp(out[j].name, res->names[i]) == 0) file = out[j].file;
        double mn, mx, mean;
        summarize(o, &mn, &mx, &mean);
        char sh[160], a[32], b[32], c[32];
        ctl_fmt_shape(sh, sizeof sh, o->rank, o->shape);
        snprintf(a, sizeof a, "%.6g", mn);
        snprintf(b, sizeof b, "%.6g", mx);
        snprintf(c, sizeof c, "%.6g", mean);
        ctl_table_add(&t, res->names[i], convd_dtype_name(o->dtype), sh, a, b, c, file);
    }
    ctl_table_print(&t, 0);
    ctl_table_free(&t);
    return CTL_EXIT_OK;
}

int ctl_cmd_infer(ctl_ctx *ctx, int argc, char **argv) {
    const char *model = NULL;
    file_arg in[MAX_FILES], out[MAX_FILES];
    int nin = 0, nout = 0;
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) return CTL_EXIT_USAGE;
        if (r > 0) continue;
        const char *a = argv[i];
        bool is_in = strcmp(a, "--input") == 0 || strncmp(a, "--input=", 8) == 0;
        bool is_out = strcmp(a, "--output") == 0 || strncmp(a, "--output=", 9) == 0;
        if (is_in || is_out) {
            const char *eq = strchr(a, '=');
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !*v) return ctl_usage_error(argv[0], "%s needs [NAME=]FILE", is_in ? "--input" : "--output");
            if ((is_in ? nin : nout) >= MAX_FILES)
                return ctl_usage_error(argv[0], "at most %d files per option", MAX_FILES);
            if (is_in)
                in[nin++] = split_arg(v);
            else
                out[nout++] = split_arg(v);
        } else if (a[0] == '-' && a[1]) {
            return ctl_usage_error(argv[0], "unknown option '%s'", a);
        } else if (!model) {
            model = a;
        } else {
            return ctl_usage_error(argv[0], "unexpected argument '%s'", a);
        }
    }
    if (!model) return ctl_usage_error(argv[0], "MODEL is required");
    if (nin == 0) return ctl_usage_error(argv[0], "at least one --input is required");

    int rc = ctl_connect(ctx);
    if (rc) return rc;

    // Unnamed files need the model's tensor names, in order.
    bool unnamed = false;
    for (int i = 0; i < nin; i++) unnamed |= in[i].name == NULL;
    for (int i = 0; i < nout; i++) unnamed |= out[i].name == NULL;
    convd_model_list *models = NULL;
    int ret = CTL_EXIT_FAIL;
    cd_npy npy[MAX_FILES];
    int nread = 0;
    convd_outputs *res = NULL;
    if (unnamed) {
        if ((rc = convd_models(ctx->conn, &models))) return ctl_fail(rc);
        const convd_model_info *m = find_model(models, model);
        if (!m) {
            ret = ctl_fail_msg("E_NOT_FOUND: no such model '%s'", model);
            goto done;
        }
        if ((rc = assign_names(in, nin, m->inputs, m->n_inputs, "input"))) goto done;
        if ((rc = assign_names(out, nout, m->outputs, m->n_outputs, "output"))) goto done;
    }

    const char *names[MAX_FILES];
    convd_tensor tensors[MAX_FILES];
    for (int i = 0; i < nin; i++, nread++) {
        char err[256];
        rc = cd_npy_read(in[i].file, &npy[i], err, sizeof err);
        if (rc) {
            ret = ctl_fail_msg("%s: %s: %s", convd_errname(rc), in[i].file, err);
            goto done;
        }
        if (npy[i].rank == 0) {
            nread++;
            ret = ctl_fail_msg("E_SHAPE: %s: a 0-d array is not a tensor (reshape it to [1])", in[i].file);
            goto done;
        }
        names[i] = in[i].name;
        memset(&tensors[i], 0, sizeof tensors[i]);
        tensors[i].dtype = (convd_dtype)npy[i].dtype;
        tensors[i].rank = npy[i].rank;
        memcpy(tensors[i].shape, npy[i].shape, sizeof(int64_t) * (size_t)npy[i].rank);
        tensors[i].data = npy[i].data;
        tensors[i].nbytes = npy[i].nbytes;
    }
    // Ask for specific outputs only when every output file names one.
    const char *want[MAX_FILES];
    for (int i = 0; i < nout; i++) want[i] = out[i].name;
    rc = convd_infer(ctx->conn, model, (size_t)nin, names, tensors, (size_t)nout, want, &res, CONVD_TIMEOUT_DEFAULT);
    if (rc) {
        ret = ctl_fail(rc);
        goto done;
    }
    for (int i = 0; i < nout; i++) {
        const convd_tensor *t = convd_outputs_get(res, out[i].name);
        if (!t) {
            ret = ctl_fail_msg("E_PARAMS: the model returned no output '%s'", out[i].name);
            goto done;
        }
        char err[256];
        rc = cd_npy_write(out[i].file, (cd_dtype)t->dtype, t->rank, t->shape, t->data, err, sizeof err);
        if (rc) {
            ret = ctl_fail_msg("%s: %s: %s", convd_errname(rc), out[i].file, err);
            goto done;
        }
    }

    ret = ctx->json ? print_outputs_json(res, out, nout) : print_outputs_table(res, out, nout);
done:
    for (int i = 0; i < nread && i < nin; i++) cd_npy_free(&npy[i]);
    convd_outputs_free(res);
    convd_model_list_free(models);
    return ret;
}
