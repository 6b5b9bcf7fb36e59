// convd-run: loads an ONNX model in-process, runs it on .npy (or random)
// inputs, writes the outputs as .npy, optionally prints the plan and times
// the model. Used by the model tests and bench/.
//
//   convd-run MODEL.onnx [--input [NAME=]X.npy]... [--output-dir D | --output Y.npy]
//             [--batch B] [--max-batch M] [--threads T] [--bench N] [--warmup W] [--gap-us G]
//             [--seed S] [--info] [--json] [--device cpu|hip-emu|hip[:N]]
//             [--input-shape [NAME=]1x3xHxW[,...]]
//
// Exit status: 0 success, 1 any runtime error (message on stderr naming the
// error code), 2 bad usage.

#include "core/clock.h"
#include "core/errors.h"
#include "core/host.h"
#include "core/stats-util.h"
#include "runtime/runtime.h"
#include "tools/common/npy.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_INPUTS CD_MAX_TENSORS

static void usage(FILE *f) {
    fprintf(f, "usage: convd-run MODEL.onnx [options]\n"
               "  --input [NAME=]X.npy  input tensor (float32, shape [B, ...]); repeat per input.\n"
               "                        Inputs not given are filled with uniform random values in [-1, 1].\n"
               "  --input-shape [NAME=]1x3xHxW[,...]  the size to plan inputs with symbolic dims at\n"
               "                        (default: the --input files' shapes); inputs of other\n"
               "                        sizes get a plan of their own\n"
               "  --output Y.npy        write the (single) output here\n"
               "  --output-dir D        write every output as D/<name>.npy\n"
               "  --batch B             batch size (default: dim 0 of the given inputs, else 1)\n"
               "  --max-batch M         plan for batches up to M (default: B)\n"
               "  --threads T           intra-op threads (default: the CPUs of the affinity mask,\n"
               "                        at most the cgroup's CPU quota)\n"
               "  --bench N             time N runs after warm-up; print median/p90/p99 latency\n"
               "  --warmup W            warm-up runs before --bench (default 3)\n"
               "  --gap-us G            idle G microseconds before each timed run, as a daemon\n"
               "                        idles between one client's requests (default 0)\n"
               "  --seed S              seed of the random inputs (default 1)\n"
               "  --info                print the model summary and the planned layers\n"
               "  --json                machine-readable output on stdout\n"
               "  --device NAME         backend: cpu (default), hip-emu (HIP kernels on the CPU\n"
               "                        emulator, for tests), hip[:N] (AMD GPU; needs make GPU=hip)\n");
}

static int die(int code, const char *msg) {
    fprintf(stderr, "convd-run: error %s: %s\n", cd_err_name(code), msg);
    return 1;
}

static uint64_t g_rng = 1;
static float rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static void print_shape(FILE *f, int rank, const int64_t *shape, int json) {
    fputc('[', f);
    for (int i = 0; i < rank; i++) fprintf(f, "%s%lld", i ? (json ? ", " : ",") : "", (long long)shape[i]);
    fputc(']', f);
}

// File-name-safe version of a tensor name.
static void safe_name(const char *in, char *out, size_t n) {
    size_t j = 0;
    for (; *in && j + 1 < n; in++) {
        unsigned char ch = (unsigned char)*in;
        int bad = ch == '/' || ch == '\\' || ch < 0x20 || (ch == '.' && j == 0);
        out[j] = bad ? '_' : (char)ch;
        j++;
    }
    out[j] = '\0';
    if (!j) snprintf(out, n, "output");
}

// What the command line asks for.
typedef struct {
    const char *model_path, *out_path, *out_dir, *device;
    const char *input_shape;         // --input-shape: the first plan's sizes (symbolic dims)
    const char *in_spec[MAX_INPUTS]; // the --input values, in order
    int nin_spec;
    int batch, max_batch, threads, bench, warmup, info, json;
    int gap_us; // --gap-us: idle before each timed run
} run_opts;

// Everything main allocates, freed in one place.
typedef struct {
    cd_npy npys[MAX_INPUTS];           // the given inputs, one per --input
    const char *npy_names[MAX_INPUTS]; // their NAME= parts (NULL when unnamed)
    cd_model *m;
    const cd_model *plan; // the plan at the inputs' sizes: m, or a variant of m (dynamic H/W)
    cd_exec *ex;
    float *in_bufs[MAX_INPUTS];     // random inputs for model inputs not given
    float *out_bufs[MAX_INPUTS];    // one per model output
    const void *ins[MAX_INPUTS];    // what each model input reads
    void *outs[MAX_INPUTS];         // where each model output goes
    double *times;                  // --bench run times
    char written[MAX_INPUTS][1024]; // file written per output ("" when none)
} run_state;

// --bench results (all 0 without --bench), and the first run and load times.
typedef struct {
    double load_ms, first_ms, med, p90, p99, mn, mean;
} run_times;

// Parses argv into o. Returns -1 to go on, else the exit status (0 for
// --help, 2 for bad usage).
static int parse_args(int argc, char **argv, run_opts *o) {
    o->warmup = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL()                                               \
    do {                                                         \
        if (!val) {                                              \
            fprintf(stderr, "convd-run: %s needs a value\n", a); \
            return 2;                                            \
        }                                                        \
        i++;                                                     \
    } while (0)
#define INT_VAL(dst, lo, hi)                                                               \
    do {                                                                                   \
        NEED_VAL();                                                                        \
        char *end;                                                                         \
        long v_ = strtol(val, &end, 10);                                                   \
        if (*end || end == val || v_ < (lo) || v_ > (hi)) {                                \
            fprintf(stderr, "convd-run: %s: '%s' is not in %d..%d\n", a, val, (lo), (hi)); \
            return 2;                                                                      \
        }                                                                                  \
        dst = (int)v_;                                                                     \
    } while (0)
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--input") == 0) {
            NEED_VAL();
            if (o->nin_spec == MAX_INPUTS) {
                fprintf(stderr, "convd-run: too many --input\n");
                return 2;
            }
            o->in_spec[o->nin_spec++] = val;
        } else if (strcmp(a, "--output") == 0) {
            NEED_VAL();
            o->out_path = val;
        } else if (strcmp(a, "--output-dir") == 0) {
            NEED_VAL();
            o->out_dir = val;
        } else if (strcmp(a, "--input-shape") == 0) {
            NEED_VAL();
            o->input_shape = val;
        } else if (strcmp(a, "--device") == 0) {
            NEED_VAL();
            o->device = val;
        } else if (strcmp(a, "--batch") == 0) {
            INT_VAL(o->batch, 1, 4096);
        } else if (strcmp(a, "--max-batch") == 0) {
            INT_VAL(o->max_batch, 1, 4096);
        } else if (strcmp(a, "--threads") == 0) {
            INT_VAL(o->threads, 0, 1024);
        } else if (strcmp(a, "--bench") == 0) {
            INT_VAL(o->bench, 1, 1000000);
        } else if (strcmp(a, "--warmup") == 0) {
            INT_VAL(o->warmup, 0, 1000000);
        } else if (strcmp(a, "--gap-us") == 0) {
            INT_VAL(o->gap_us, 0, 10000000);
        } else if (strcmp(a, "--seed") == 0) {
            int s;
            INT_VAL(s, 0, 2147483647);
            g_rng = (uint64_t)s * 2654435761u + 1;
        } else if (strcmp(a, "--info") == 0) {
            o->info = 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "convd-run: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else if (!o->model_path) {
            o->model_path = a;
        } else {
            fprintf(stderr, "convd-run: unexpected argument %s\n", a);
            return 2;
        }
#undef INT_VAL
#undef NEED_VAL
    }
    if (!o->model_path) {
        usage(stderr);
        return 2;
    }
    if (o->out_path && o->out_dir) {
        fprintf(stderr, "convd-run: --output and --output-dir are exclusive\n");
        return 2;
    }
    return -1;
}

// Reads the --input files (float32, shape [batch, ...]); the first one's
// dim 0 sets o->batch when --batch is not given. Returns 0, or 1 after
// printing the error.
static int read_inputs(run_opts *o, run_state *st, char *err, size_t errlen) {
    for (int i = 0; i < o->nin_spec; i++) {
        const char *eq = strchr(o->in_spec[i], '=');
        const char *path = eq ? eq + 1 : o->in_spec[i];
        st->npy_names[i] = NULL;
        if (eq) {
            char *nm = strndup(o->in_spec[i], (size_t)(eq - o->in_spec[i]));
            st->npy_names[i] = nm;
        }
        int rc = cd_npy_read(path, &st->npys[i], err, errlen);
        if (rc) return die(rc, err);
        if (st->npys[i].dtype != CD_DTYPE_F32) {
            snprintf(err, errlen, "%s: dtype %s, float32 needed", path,
                     cd_npy_itemsize(st->npys[i].dtype) == 8 ? "f64/i64" : "other");
            return die(CD_EDTYPE, err);
        }
        if (st->npys[i].rank < 1 || st->npys[i].shape[0] < 1) {
            snprintf(err, errlen, "%s: needs shape [batch, ...]", path);
            return die(CD_ESHAPE, err);
        }
        if (!o->batch) o->batch = (int)st->npys[i].shape[0];
    }
    return 0;
}

// Points every model input at its given tensor (by name, or in order when
// unnamed) or at random values, and allocates the outputs. Returns 0, or 1
// after printing the error.
static int bind_tensors(const run_opts *o, run_state *st, char *err, size_t errlen) {
    const cd_model *m = st->plan;
    const int batch = o->batch;
    const int ni = cd_model_num_inputs(m), no = cd_model_num_outputs(m);
    int used[MAX_INPUTS] = {0};
    for (int i = 0; i < ni; i++) {
        const cd_io_desc *d = cd_model_input(m, i);
        int64_t item = 1;
        for (int k = 1; k < d->rank; k++) item *= d->shape[k];
        int src = -1;
        for (int j = 0; j < o->nin_spec && src < 0; j++)
            if (!used[j] && st->npy_names[j] && strcmp(st->npy_names[j], d->name) == 0) src = j;
        for (int j = 0; j < o->nin_spec && src < 0; j++)
            if (!used[j] && !st->npy_names[j]) src = j;
        if (src >= 0) {
            used[src] = 1;
            const cd_npy *n = &st->npys[src];
            int ok = n->rank == d->rank && n->shape[0] == batch;
            for (int k = 1; ok && k < d->rank; k++) ok = n->shape[k] == d->shape[k];
            if (!ok) {
                char want[128], got[128];
                FILE *w = fmemopen(want, sizeof want, "w"), *g = fmemopen(got, sizeof got, "w");
                int64_t ws[CD_MAX_RANK];
                memcpy(ws, d->shape, sizeof ws);
                ws[0] = batch;
                print_shape(w, d->rank, ws, 0);
                print_shape(g, n->rank, n->shape, 0);
                fclose(w);
                fclose(g);
                snprintf(err, errlen, "input '%s': shape %s, the model needs %s", d->name, got, want);
                return die(CD_ESHAPE, err);
            }
            st->ins[i] = n->data;
        } else {
            st->in_bufs[i] = malloc((size_t)(item * batch) * sizeof(float));
            if (!st->in_bufs[i]) return die(CD_ENOMEM, "out of memory");
            for (int64_t e = 0; e < item * batch; e++) st->in_bufs[i][e] = rnd();
            st->ins[i] = st->in_bufs[i];
        }
    }
    for (int j = 0; j < o->nin_spec; j++)
        if (!used[j]) {
            snprintf(err, errlen, "--input %s matches no model input", o->in_spec[j]);
            return die(CD_EPARAMS, err);
        }
    for (int i = 0; i < no; i++) {
        const cd_io_desc *d = cd_model_output(m, i);
        int64_t item = 1;
        for (int k = 1; k < d->rank; k++) item *= d->shape[k];
        st->out_bufs[i] = malloc((size_t)(item * batch) * sizeof(float) + 1);
        if (!st->out_bufs[i]) return die(CD_ENOMEM, "out of memory");
        st->outs[i] = st->out_bufs[i];
    }
    if (o->out_path && no != 1) {
        snprintf(err, errlen, "--output needs a single-output model (this one has %d); use --output-dir", no);
        return die(CD_EPARAMS, err);
    }
    return 0;
}

// --bench: o->warmup runs, then o->bench timed ones. Returns 0, or 1 after
// printing the error.
static int run_bench(const run_opts *o, run_state *st, run_times *t, char *err, size_t errlen) {
    const int batch = o->batch, bench = o->bench;
    int rc;
    for (int w = 0; w < o->warmup; w++)
        if ((rc = cd_model_run(st->ex, batch, st->ins, st->outs, err, errlen))) return die(rc, err);
    st->times = malloc((size_t)bench * sizeof *st->times);
    if (!st->times) return die(CD_ENOMEM, "out of memory");
    double *times = st->times;
    for (int r = 0; r < bench; r++) {
        if (o->gap_us) nanosleep(&(struct timespec){o->gap_us / 1000000, o->gap_us % 1000000 * 1000L}, NULL);
        double s = cd_now_ms();
        if ((rc = cd_model_run(st->ex, batch, st->ins, st->outs, err, errlen))) return die(rc, err);
        times[r] = cd_now_ms() - s;
        t->mean += times[r];
    }
    t->mean /= bench;
    qsort(times, (size_t)bench, sizeof *times, cd_cmp_double);
    t->med = times[bench / 2];
    if (bench % 2 == 0) t->med = 0.5 * (times[bench / 2 - 1] + times[bench / 2]);
    t->p90 = times[(int)ceil(0.9 * bench) - 1];
    t->p99 = times[(int)ceil(0.99 * bench) - 1];
    t->mn = times[0];
    return 0;
}

// Writes the outputs as .npy (--output or --output-dir) and records the
// file names in st->written. Returns 0, or 1 after printing the error.
static int write_outputs(const run_opts *o, run_state *st, char *err, size_t errlen) {
    const cd_model *m = st->plan;
    if (o->out_dir) mkdir(o->out_dir, 0777);
    for (int i = 0; i < cd_model_num_outputs(m); i++) {
        st->written[i][0] = '\0';
        const cd_io_desc *d = cd_model_output(m, i);
        int64_t shape[CD_MAX_RANK];
        memcpy(shape, d->shape, sizeof shape);
        shape[0] = o->batch;
        if (o->out_path) {
            snprintf(st->written[i], sizeof st->written[i], "%s", o->out_path);
        } else if (o->out_dir) {
            char nm[256];
            safe_name(d->name, nm, sizeof nm);
            snprintf(st->written[i], sizeof st->written[i], "%s/%s.npy", o->out_dir, nm);
        } else {
            continue;
        }
        int rc = cd_npy_write(st->written[i], CD_DTYPE_F32, d->rank, shape, st->outs[i], err, errlen);
        if (rc) return die(rc, err);
    }
    return 0;
}

// --json --info: the planned layers as a JSON array member.
static void print_json_layers(FILE *f, const cd_model *m) {
    fprintf(f, ", \"layers\": [");
    for (int i = 0; i < cd_model_num_layers(m); i++) {
        cd_layer_info li;
        cd_model_layer(m, i, &li);
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        cd_json_write_str(f, li.name);
        fprintf(f, ", \"op\": ");
        cd_json_write_str(f, li.op);
        fprintf(f, ", \"kernel\": ");
        cd_json_write_str(f, li.kernel);
        fprintf(f, ", \"dtype\": ");
        cd_json_write_str(f, li.dtype);
        fprintf(f, ", \"out_dtype\": ");
        cd_json_write_str(f, li.out_dtype);
        fprintf(f, ", \"layout\": ");
        cd_json_write_str(f, li.layout);
        fprintf(f, ", \"reference\": %s", li.reference ? "true" : "false");
        fprintf(f, ", \"in_shape\": ");
        print_shape(f, li.in_rank, li.in_shape, 1);
        fprintf(f, ", \"out_shape\": ");
        print_shape(f, li.out_rank, li.out_shape, 1);
        fprintf(f, ", \"params\": %lld, \"flops\": %lld, \"density\": %.6f", (long long)li.params, (long long)li.flops,
                li.density);
        if (li.is_weighted)
            fprintf(f, ", \"int8_ms\": %.6g, \"int8_dense_ms\": %.6g, \"int8_f32_ms\": %.6g", li.int8_ms,
                    li.int8_dense_ms, li.int8_f32_ms);
        fprintf(f, "}");
    }
    fprintf(f, "]");
}

// --json: one JSON object on stdout.
static void print_json(const run_opts *o, const run_state *st, const run_times *t) {
    const cd_model *m = st->plan;
    const int batch = o->batch, no = cd_model_num_outputs(m);
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    FILE *f = stdout;
    fprintf(f, "{\"model\": ");
    cd_json_write_str(f, o->model_path);
    fprintf(f, ", \"batch\": %d, \"load_ms\": %.3f, \"first_run_ms\": %.3f", batch, t->load_ms, t->first_ms);
    fprintf(f,
            ", \"summary\": {\"params\": %lld, \"flops\": %lld, \"weight_bytes\": %lld, \"activation_bytes\": %lld, "
            "\"zero_params\": %lld, \"nlayers\": %d, \"max_batch\": %d, \"device_bytes\": %lld, "
            "\"slice_views\": %d, \"slice_copies\": %d, \"residual_in_place\": %d, \"lane_activation_bytes\": %lld}",
            (long long)s.params, (long long)s.flops, (long long)s.weight_bytes, (long long)s.activation_bytes,
            (long long)s.zero_params, s.nlayers, s.max_batch, (long long)s.device_bytes, s.slice_views, s.slice_copies,
            s.residual_in_place, (long long)s.lane_activation_bytes);
    if (s.int8_pick)
        fprintf(f,
                ", \"int8_pick\": {\"kernels\": \"%s\", \"by\": \"%s\", \"dense_ms\": %.4f, \"sparse_ms\": %.4f, "
                "\"batch\": %d, \"dense_batch_ms\": %.4f, \"sparse_batch_ms\": %.4f}",
                s.int8_pick == 1 ? "dense" : "sparse", s.int8_pick_by, s.int8_pick_dense_ms, s.int8_pick_sparse_ms,
                s.int8_pick_batch, s.int8_pick_dense_batch_ms, s.int8_pick_sparse_batch_ms);
    cd_cpu_info ci;
    cd_runtime_cpu_info(&ci);
    fprintf(f,
            ", \"device\": \"%s\", \"layout\": \"%s\", \"cpu\": {\"kernels_isa\": \"%s\", "
            "\"kernels_capped\": %s, \"dnnl_isa\": \"%s\", \"layout\": \"%s\", \"block\": %d}",
            cd_model_device(m), cd_model_layout(m), ci.kernels_isa, ci.kernels_capped ? "true" : "false", ci.dnnl_isa,
            ci.layout, ci.block);
    fprintf(f, ", \"outputs\": [");
    for (int i = 0; i < no; i++) {
        const cd_io_desc *d = cd_model_output(m, i);
        int64_t shape[CD_MAX_RANK];
        memcpy(shape, d->shape, sizeof shape);
        shape[0] = batch;
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        cd_json_write_str(f, d->name);
        fprintf(f, ", \"shape\": ");
        print_shape(f, d->rank, shape, 1);
        fprintf(f, ", \"file\": ");
        if (st->written[i][0])
            cd_json_write_str(f, st->written[i]);
        else
            fprintf(f, "null");
        fprintf(f, "}");
    }
    fprintf(f, "]");
    if (o->info) print_json_layers(f, m);
    if (o->bench)
        fprintf(f,
                ", \"bench\": {\"runs\": %d, \"threads\": %d, \"median_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, "
                "\"min_ms\": %.4f, "
                "\"mean_ms\": %.4f}",
                o->bench, o->threads, t->med, t->p90, t->p99, t->mn, t->mean);
    fprintf(f, "}\n");
}

// --info without --json: the summary and one line per planned layer.
static void print_text_info(const run_opts *o, const cd_model *m) {
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    printf("model %s: %d layers, %lld params (%lld zero), %.3f GFLOP at batch 1, weights %.2f MiB, "
           "activation arena %.2f MiB at max batch %d",
           o->model_path, s.nlayers, (long long)s.params, (long long)s.zero_params, s.flops / 1e9,
           s.weight_bytes / 1048576.0, s.activation_bytes / 1048576.0, s.max_batch);
    if (s.device_bytes) printf(", device memory %.2f MiB", s.device_bytes / 1048576.0);
    if (s.lane_activation_bytes) printf(", %.2f MiB per extra lane", s.lane_activation_bytes / 1048576.0);
    cd_cpu_info ci;
    cd_runtime_cpu_info(&ci);
    printf("\ndevice %s, blocked layout %s; kernels %s%s, oneDNN %s\n", cd_model_device(m), cd_model_layout(m),
           ci.kernels_isa, ci.kernels_capped ? " (capped by CONVD_MAX_ISA)" : "", ci.dnnl_isa);
    if (s.int8_layers) printf("%d conv layers on the int8 kernels\n", s.int8_layers);
    if (s.int8_pick) {
        printf("int8 convs over sparse weights on the %s int8 kernels (by %s: dense %.3f ms, sparse %.3f ms",
               s.int8_pick == 1 ? "dense" : "sparse", s.int8_pick_by, s.int8_pick_dense_ms, s.int8_pick_sparse_ms);
        if (s.int8_pick_batch > 1)
            printf("; at batch %d dense %.3f ms, sparse %.3f ms", s.int8_pick_batch, s.int8_pick_dense_batch_ms,
                   s.int8_pick_sparse_batch_ms);
        printf(")\n");
    }
    if (s.slice_views || s.slice_copies)
        printf("slices: %d views (no copy), %d copies (Slice layers)\n", s.slice_views, s.slice_copies);
    printf("%4s  %-28s %-22s %-22s %-5s %-18s %-18s %10s %12s\n", "#", "name", "op", "kernel", "type", "in", "out",
           "params", "MFLOP");
    for (int i = 0; i < cd_model_num_layers(m); i++) {
        cd_layer_info li;
        cd_model_layer(m, i, &li);
        char ins_s[64], outs_s[64];
        FILE *a = fmemopen(ins_s, sizeof ins_s, "w"), *b = fmemopen(outs_s, sizeof outs_s, "w");
        print_shape(a, li.in_rank, li.in_shape, 0);
        print_shape(b, li.out_rank, li.out_shape, 0);
        fclose(a);
        fclose(b);
        printf("%4d  %-28.28s %-22.22s %-22.22s %-5s %-18s %-18s %10lld %12.3f%s\n", i, li.name, li.op, li.kernel,
               li.dtype, ins_s, outs_s, (long long)li.params, li.flops / 1e6, li.reference ? "  !ref (slow)" : "");
    }
}

// Without --json: the plan (--info), the outputs and the timing (--bench).
static void print_text(const run_opts *o, const run_state *st, const run_times *t) {
    const cd_model *m = st->plan;
    if (o->info) print_text_info(o, m);
    for (int i = 0; i < cd_model_num_outputs(m); i++) {
        const cd_io_desc *d = cd_model_output(m, i);
        int64_t shape[CD_MAX_RANK];
        memcpy(shape, d->shape, sizeof shape);
        shape[0] = o->batch;
        printf("output %s ", d->name);
        print_shape(stdout, d->rank, shape, 0);
        printf(st->written[i][0] ? " -> %s\n" : "\n", st->written[i]);
    }
    if (o->bench)
        printf("bench: batch %d, %d runs: median %.3f ms, p90 %.3f ms, p99 %.3f ms, min %.3f ms, mean %.3f ms\n",
               o->batch, o->bench, t->med, t->p90, t->p99, t->mn, t->mean);
}

// The --input files' shapes as an input-shape spec ("name=1x3x8x8,..."),
// the first plan's sizes when --input-shape is not given.
static void shape_spec_of_inputs(const run_opts *o, const run_state *st, char *spec, size_t n) {
    size_t used = 0;
    for (int i = 0; i < o->nin_spec && used + 1 < n; i++) {
        const cd_npy *y = &st->npys[i];
        int w = snprintf(spec + used, n - used, "%s%s%s", i ? "," : "", st->npy_names[i] ? st->npy_names[i] : "",
                         st->npy_names[i] ? "=" : "");
        for (int k = 0; w >= 0 && k < y->rank && used + (size_t)w < n; k++)
            w += snprintf(spec + used + w, n - used - (size_t)w, "%s%lld", k ? "x" : "", (long long)y->shape[k]);
        if (w < 0 || used + (size_t)w >= n) {
            spec[0] = '\0'; // too long to say: the model's own sizes
            return;
        }
        used += (size_t)w;
    }
}

// st->plan: the loaded model's plan for the --input files' sizes (its own,
// or a variant of a model with symbolic dims). Inputs are matched as
// bind_tensors does. Returns 0 or the error of cd_model_variant_get.
static int choose_plan(const run_opts *o, run_state *st, char *err, size_t errlen) {
    st->plan = st->m;
    if (!cd_model_is_dynamic(st->m)) return 0;
    int ni = cd_model_num_inputs(st->m), used[MAX_INPUTS] = {0};
    int64_t shapes[MAX_INPUTS][CD_MAX_RANK];
    const int64_t *ptr[MAX_INPUTS];
    for (int i = 0; i < ni; i++) {
        const cd_io_desc *d = cd_model_input(st->m, i);
        memcpy(shapes[i], d->shape, sizeof shapes[i]);
        ptr[i] = shapes[i];
        int src = -1;
        for (int j = 0; j < o->nin_spec && src < 0; j++)
            if (!used[j] && st->npy_names[j] && strcmp(st->npy_names[j], d->name) == 0) src = j;
        for (int j = 0; j < o->nin_spec && src < 0; j++)
            if (!used[j] && !st->npy_names[j]) src = j;
        if (src < 0) continue;
        used[src] = 1;
        if (st->npys[src].rank == d->rank) memcpy(shapes[i], st->npys[src].shape, sizeof(int64_t) * (size_t)d->rank);
    }
    return cd_model_variant_get(st->m, ptr, &st->plan, err, errlen);
}

// Loads the model, runs it once (and --bench times), writes and prints the
// results. Returns the exit status.
static int run(run_opts *o, run_state *st) {
    char err[CD_LOAD_ERR_MAX] = "";
    // Read the given inputs first: their dim 0 sets the batch.
    if (read_inputs(o, st, err, sizeof err)) return 1;
    if (!o->batch) o->batch = 1;
    if (!o->max_batch) o->max_batch = o->batch;
    if (o->batch > o->max_batch) {
        fprintf(stderr, "convd-run: --batch %d above --max-batch %d\n", o->batch, o->max_batch);
        return 2;
    }
    int rc = cd_runtime_init(o->threads);
    if (rc) return die(rc, "runtime initialisation failed");
    char spec[1024] = "";
    if (!o->input_shape) shape_spec_of_inputs(o, st, spec, sizeof spec);
    cd_model_opts opts = {.max_batch = o->max_batch,
                          .threads = o->threads,
                          .device = o->device,
                          .input_shape = o->input_shape ? o->input_shape : spec};
    run_times t = {0};
    double t0 = cd_now_ms();
    rc = cd_model_load(o->model_path, &opts, &st->m, err, sizeof err);
    t.load_ms = cd_now_ms() - t0;
    if (rc) return die(rc, err);
    rc = choose_plan(o, st, err, sizeof err);
    if (rc) return die(rc, err);
    if (bind_tensors(o, st, err, sizeof err)) return 1;
    rc = cd_exec_init(st->plan, &st->ex);
    if (rc) return die(rc, "cannot create the execution state");
    double t1 = cd_now_ms();
    rc = cd_model_run(st->ex, o->batch, st->ins, st->outs, err, sizeof err);
    t.first_ms = cd_now_ms() - t1;
    if (rc) return die(rc, err);
    if (o->bench && run_bench(o, st, &t, err, sizeof err)) return 1;
    if (write_outputs(o, st, err, sizeof err)) return 1;
    if (o->json)
        print_json(o, st, &t);
    else
        print_text(o, st, &t);
    return 0;
}

int main(int argc, char **argv) {
    cd_runtime_omp_setup(argv, "convd-run"); // the daemon's wait between layers
    static run_opts o;
    static run_state st;
    cd_runtime_options ropts; // CONVD_* (runtime/runtime.h)
    cd_runtime_options_from_env(&ropts);
    cd_runtime_configure(&ropts);
    int status = parse_args(argc, argv, &o);
    if (status >= 0) return status;
    status = run(&o, &st);
    cd_exec_free(st.ex);
    if (st.m) cd_model_variant_put(st.m, st.plan);
    cd_model_free(st.m);
    for (int i = 0; i < o.nin_spec; i++) {
        cd_npy_free(&st.npys[i]);
        free((char *)st.npy_names[i]);
    }
    for (int i = 0; i < MAX_INPUTS; i++) {
        free(st.in_bufs[i]);
        free(st.out_bufs[i]);
    }
    free(st.times);
    return status;
}
