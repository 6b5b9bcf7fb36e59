// convd-run: loads an ONNX model in-process, runs it on .npy (or random)
// inputs, writes the outputs as .npy, optionally prints the plan and times
// the model. Used by the model tests and bench/.
//
//   convd-run MODEL.onnx [--input [NAME=]X.npy]... [--output-dir D | --output Y.npy]
//             [--batch B] [--max-batch M] [--threads T] [--bench N] [--warmup W]
//             [--seed S] [--info] [--json] [--device cpu|hip-emu|hip[:N]]
//
// Exit status: 0 success, 1 any runtime error (message on stderr naming the
// error code), 2 bad usage.

#include "proto/errors.h"
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
    fprintf(f,
            "usage: convd-run MODEL.onnx [options]\n"
            "  --input [NAME=]X.npy  input tensor (float32, shape [B, ...]); repeat per input.\n"
            "                        Inputs not given are filled with uniform random values in [-1, 1].\n"
            "  --output Y.npy        write the (single) output here\n"
            "  --output-dir D        write every output as D/<name>.npy\n"
            "  --batch B             batch size (default: dim 0 of the given inputs, else 1)\n"
            "  --max-batch M         plan for batches up to M (default: B)\n"
            "  --threads T           intra-op threads (default: all cores)\n"
            "  --bench N             time N runs after warm-up; print median/p90 latency\n"
            "  --warmup W            warm-up runs before --bench (default 3)\n"
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

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
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

int main(int argc, char **argv) {
    cd_runtime_options ropts; // CONVD_* (runtime/runtime.h)
    cd_runtime_options_from_env(&ropts);
    cd_runtime_configure(&ropts);
    const char *model_path = NULL, *out_path = NULL, *out_dir = NULL, *device = NULL;
    const char *in_spec[MAX_INPUTS];
    int nin_spec = 0, batch = 0, max_batch = 0, threads = 0, bench = 0, warmup = 3, info = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL()                                                                  \
    do {                                                                            \
        if (!val) {                                                                 \
            fprintf(stderr, "convd-run: %s needs a value\n", a);                    \
            return 2;                                                               \
        }                                                                           \
        i++;                                                                        \
    } while (0)
#define INT_VAL(dst, lo, hi)                                                        \
    do {                                                                            \
        NEED_VAL();                                                                 \
        char *end;                                                                  \
        long v_ = strtol(val, &end, 10);                                            \
        if (*end || end == val || v_ < (lo) || v_ > (hi)) {                         \
            fprintf(stderr, "convd-run: %s: '%s' is not in %d..%d\n", a, val, (lo), (hi)); \
            return 2;                                                               \
        }                                                                           \
        dst = (int)v_;                                                              \
    } while (0)
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--input") == 0) {
            NEED_VAL();
            if (nin_spec == MAX_INPUTS) {
                fprintf(stderr, "convd-run: too many --input\n");
                return 2;
            }
            in_spec[nin_spec++] = val;
        } else if (strcmp(a, "--output") == 0) {
            NEED_VAL();
            out_path = val;
        } else if (strcmp(a, "--output-dir") == 0) {
            NEED_VAL();
            out_dir = val;
        } else if (strcmp(a, "--device") == 0) {
            NEED_VAL();
            device = val;
        } else if (strcmp(a, "--batch") == 0) {
            INT_VAL(batch, 1, 4096);
        } else if (strcmp(a, "--max-batch") == 0) {
            INT_VAL(max_batch, 1, 4096);
        } else if (strcmp(a, "--threads") == 0) {
            INT_VAL(threads, 0, 1024);
        } else if (strcmp(a, "--bench") == 0) {
            INT_VAL(bench, 1, 1000000);
        } else if (strcmp(a, "--warmup") == 0) {
            INT_VAL(warmup, 0, 1000000);
        } else if (strcmp(a, "--seed") == 0) {
            int s;
            INT_VAL(s, 0, 2147483647);
            g_rng = (uint64_t)s * 2654435761u + 1;
        } else if (strcmp(a, "--info") == 0) {
            info = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "convd-run: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else if (!model_path) {
            model_path = a;
        } else {
            fprintf(stderr, "convd-run: unexpected argument %s\n", a);
            return 2;
        }
    }
    if (!model_path) {
        usage(stderr);
        return 2;
    }
    if (out_path && out_dir) {
        fprintf(stderr, "convd-run: --output and --output-dir are exclusive\n");
        return 2;
    }

    char err[1024] = "";
    int rc;
    // Read the given inputs first: their dim 0 sets the batch.
    cd_npy npys[MAX_INPUTS];
    const char *npy_names[MAX_INPUTS];
    memset(npys, 0, sizeof npys);
    int status = 1;
    cd_model *m = NULL;
    cd_exec *ex = NULL;
    float *in_bufs[MAX_INPUTS] = {0}, *out_bufs[MAX_INPUTS] = {0};
    double *times = NULL;
    for (int i = 0; i < nin_spec; i++) {
        const char *eq = strchr(in_spec[i], '=');
        const char *path = eq ? eq + 1 : in_spec[i];
        npy_names[i] = NULL;
        if (eq) {
            char *nm = strndup(in_spec[i], (size_t)(eq - in_spec[i]));
            npy_names[i] = nm;
        }
        rc = cd_npy_read(path, &npys[i], err, sizeof err);
        if (rc) {
            die(rc, err);
            goto out;
        }
        if (npys[i].dtype != CD_DTYPE_F32) {
            snprintf(err, sizeof err, "%s: dtype %s, float32 needed", path, cd_npy_itemsize(npys[i].dtype) == 8 ? "f64/i64" : "other");
            die(CD_EDTYPE, err);
            goto out;
        }
        if (npys[i].rank < 1 || npys[i].shape[0] < 1) {
            snprintf(err, sizeof err, "%s: needs shape [batch, ...]", path);
            die(CD_ESHAPE, err);
            goto out;
        }
        if (!batch) batch = (int)npys[i].shape[0];
    }
    if (!batch) batch = 1;
    if (!max_batch) max_batch = batch;
    if (batch > max_batch) {
        fprintf(stderr, "convd-run: --batch %d above --max-batch %d\n", batch, max_batch);
        status = 2;
        goto out;
    }
    rc = cd_runtime_init(threads);
    if (rc) {
        die(rc, "runtime initialisation failed");
        goto out;
    }
    cd_model_opts opts = {.max_batch = max_batch, .threads = threads, .device = device};
    double t0 = now_ms();
    rc = cd_model_load(model_path, &opts, &m, err, sizeof err);
    double load_ms = now_ms() - t0;
    if (rc) {
        die(rc, err);
        goto out;
    }
    const int ni = cd_model_num_inputs(m), no = cd_model_num_outputs(m);
    // Match given inputs to model inputs (by name, or in order when unnamed).
    const void *ins[MAX_INPUTS];
    void *outs[MAX_INPUTS];
    int used[MAX_INPUTS] = {0};
    for (int i = 0; i < ni; i++) {
        const cd_io_desc *d = cd_model_input(m, i);
        int64_t item = 1;
        for (int k = 1; k < d->rank; k++) item *= d->shape[k];
        int src = -1;
        for (int j = 0; j < nin_spec && src < 0; j++)
            if (!used[j] && npy_names[j] && strcmp(npy_names[j], d->name) == 0) src = j;
        for (int j = 0; j < nin_spec && src < 0; j++)
            if (!used[j] && !npy_names[j]) src = j;
        if (src >= 0) {
            used[src] = 1;
            const cd_npy *n = &npys[src];
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
                snprintf(err, sizeof err, "input '%s': shape %s, the model needs %s", d->name, got, want);
                die(CD_ESHAPE, err);
                goto out;
            }
            ins[i] = n->data;
        } else {
            in_bufs[i] = malloc((size_t)(item * batch) * sizeof(float));
            if (!in_bufs[i]) {
                die(CD_ENOMEM, "out of memory");
                goto out;
            }
            for (int64_t e = 0; e < item * batch; e++) in_bufs[i][e] = rnd();
            ins[i] = in_bufs[i];
        }
    }
    for (int j = 0; j < nin_spec; j++)
        if (!used[j]) {
            snprintf(err, sizeof err, "--input %s matches no model input", in_spec[j]);
            die(CD_EPARAMS, err);
            goto out;
        }
    for (int i = 0; i < no; i++) {
        const cd_io_desc *d = cd_model_output(m, i);
        int64_t item = 1;
        for (int k = 1; k < d->rank; k++) item *= d->shape[k];
        out_bufs[i] = malloc((size_t)(item * batch) * sizeof(float) + 1);
        if (!out_bufs[i]) {
            die(CD_ENOMEM, "out of memory");
            goto out;
        }
        outs[i] = out_bufs[i];
    }
    if (out_path && no != 1) {
        snprintf(err, sizeof err, "--output needs a single-output model (this one has %d); use --output-dir", no);
        die(CD_EPARAMS, err);
        goto out;
    }
    rc = cd_exec_init(m, &ex);
    if (rc) {
        die(rc, "cannot create the execution state");
        goto out;
    }
    double t1 = now_ms();
    rc = cd_model_run(ex, batch, ins, outs, err, sizeof err);
    double first_ms = now_ms() - t1;
    if (rc) {
        die(rc, err);
        goto out;
    }
    double med = 0, p90 = 0, mn = 0, mean = 0;
    if (bench) {
        for (int w = 0; w < warmup; w++)
            if ((rc = cd_model_run(ex, batch, ins, outs, err, sizeof err))) {
                die(rc, err);
                goto out;
            }
        times = malloc((size_t)bench * sizeof *times);
        if (!times) {
            die(CD_ENOMEM, "out of memory");
            goto out;
        }
        for (int r = 0; r < bench; r++) {
            double s = now_ms();
            if ((rc = cd_model_run(ex, batch, ins, outs, err, sizeof err))) {
                die(rc, err);
                goto out;
            }
            times[r] = now_ms() - s;
            mean += times[r];
        }
        mean /= bench;
        qsort(times, (size_t)bench, sizeof *times, cmp_double);
        med = times[bench / 2];
        if (bench % 2 == 0) med = 0.5 * (times[bench / 2 - 1] + times[bench / 2]);
        p90 = times[(int)ceil(0.9 * bench) - 1];
        mn = times[0];
    }
    // Outputs.
    if (out_dir) mkdir(out_dir, 0777);
    char written[MAX_INPUTS][1024];
    for (int i = 0; i < no; i++) {
        written[i][0] = '\0';
        const cd_io_desc *d = cd_model_output(m, i);
        int64_t shape[CD_MAX_RANK];
        memcpy(shape, d->shape, sizeof shape);
        shape[0] = batch;
        if (out_path) {
            snprintf(written[i], sizeof written[i], "%s", out_path);
        } else if (out_dir) {
            char nm[256];
            safe_name(d->name, nm, sizeof nm);
            snprintf(written[i], sizeof written[i], "%s/%s.npy", out_dir, nm);
        } else {
            continue;
        }
        rc = cd_npy_write(written[i], CD_DTYPE_F32, d->rank, shape, outs[i], err, sizeof err);
        if (rc) {
            die(rc, err);
            goto out;
        }
    }
    cd_model_summary s;
    cd_model_get_summary(m, &s);
    if (json) {
        FILE *f = stdout;
        fprintf(f, "{\"model\": ");
        json_str(f, model_path);
        fprintf(f, ", \"batch\": %d, \"load_ms\": %.3f, \"first_run_ms\": %.3f", batch, load_ms, first_ms);
        fprintf(f, ", \"summary\": {\"params\": %lld, \"flops\": %lld, \"weight_bytes\": %lld, \"activation_bytes\": %lld, "
                   "\"zero_params\": %lld, \"nlayers\": %d, \"max_batch\": %d, \"device_bytes\": %lld}",
                (long long)s.params, (long long)s.flops, (long long)s.weight_bytes, (long long)s.activation_bytes,
                (long long)s.zero_params, s.nlayers, s.max_batch, (long long)s.device_bytes);
        cd_cpu_info ci;
        cd_runtime_cpu_info(&ci);
        fprintf(f, ", \"device\": \"%s\", \"layout\": \"%s\", \"cpu\": {\"kernels_isa\": \"%s\", "
                   "\"kernels_capped\": %s, \"dnnl_isa\": \"%s\", \"layout\": \"%s\", \"block\": %d}",
                cd_model_device(m), cd_model_layout(m), ci.kernels_isa, ci.kernels_capped ? "true" : "false",
                ci.dnnl_isa, ci.layout, ci.block);
        fprintf(f, ", \"outputs\": [");
        for (int i = 0; i < no; i++) {
            const cd_io_desc *d = cd_model_output(m, i);
            int64_t shape[CD_MAX_RANK];
            memcpy(shape, d->shape, sizeof shape);
            shape[0] = batch;
            fprintf(f, "%s{\"name\": ", i ? ", " : "");
            json_str(f, d->name);
            fprintf(f, ", \"shape\": ");
            print_shape(f, d->rank, shape, 1);
            fprintf(f, ", \"file\": ");
            if (written[i][0]) json_str(f, written[i]);
            else fprintf(f, "null");
            fprintf(f, "}");
        }
        fprintf(f, "]");
        if (info) {
            fprintf(f, ", \"layers\": [");
            for (int i = 0; i < cd_model_num_layers(m); i++) {
                cd_layer_info li;
                cd_model_layer(m, i, &li);
                fprintf(f, "%s{\"name\": ", i ? ", " : "");
                json_str(f, li.name);
                fprintf(f, ", \"op\": ");
                json_str(f, li.op);
                fprintf(f, ", \"kernel\": ");
                json_str(f, li.kernel);
                fprintf(f, ", \"layout\": ");
                json_str(f, li.layout);
                fprintf(f, ", \"reference\": %s", li.reference ? "true" : "false");
                fprintf(f, ", \"in_shape\": ");
                print_shape(f, li.in_rank, li.in_shape, 1);
                fprintf(f, ", \"out_shape\": ");
                print_shape(f, li.out_rank, li.out_shape, 1);
                fprintf(f, ", \"params\": %lld, \"flops\": %lld, \"density\": %.6f}", (long long)li.params,
                        (long long)li.flops, li.density);
            }
            fprintf(f, "]");
        }
        if (bench)
            fprintf(f, ", \"bench\": {\"runs\": %d, \"threads\": %d, \"median_ms\": %.4f, \"p90_ms\": %.4f, \"min_ms\": %.4f, "
                       "\"mean_ms\": %.4f}",
                    bench, threads, med, p90, mn, mean);
        fprintf(f, "}\n");
    } else {
        if (info) {
            printf("model %s: %d layers, %lld params (%lld zero), %.3f GFLOP at batch 1, weights %.2f MiB, "
                   "activation arena %.2f MiB at max batch %d",
                   model_path, s.nlayers, (long long)s.params, (long long)s.zero_params, s.flops / 1e9,
                   s.weight_bytes / 1048576.0, s.activation_bytes / 1048576.0, s.max_batch);
            if (s.device_bytes) printf(", device memory %.2f MiB", s.device_bytes / 1048576.0);
            cd_cpu_info ci;
            cd_runtime_cpu_info(&ci);
            printf("\ndevice %s, blocked layout %s; kernels %s%s, oneDNN %s\n", cd_model_device(m), cd_model_layout(m),
                   ci.kernels_isa, ci.kernels_capped ? " (capped by CONVD_MAX_ISA)" : "", ci.dnnl_isa);
            printf("%4s  %-28s %-22s %-22s %-18s %-18s %10s %12s\n", "#", "name", "op", "kernel", "in", "out", "params", "MFLOP");
            for (int i = 0; i < cd_model_num_layers(m); i++) {
                cd_layer_info li;
                cd_model_layer(m, i, &li);
                char ins_s[64], outs_s[64];
                FILE *a = fmemopen(ins_s, sizeof ins_s, "w"), *b = fmemopen(outs_s, sizeof outs_s, "w");
                print_shape(a, li.in_rank, li.in_shape, 0);
                print_shape(b, li.out_rank, li.out_shape, 0);
                fclose(a);
                fclose(b);
                printf("%4d  %-28.28s %-22.22s %-22.22s %-18s %-18s %10lld %12.3f%s\n", i, li.name, li.op, li.kernel, ins_s,
                       outs_s, (long long)li.params, li.flops / 1e6, li.reference ? "  !ref (slow)" : "");
            }
        }
        for (int i = 0; i < no; i++) {
            const cd_io_desc *d = cd_model_output(m, i);
            int64_t shape[CD_MAX_RANK];
            memcpy(shape, d->shape, sizeof shape);
            shape[0] = batch;
            printf("output %s ", d->name);
            print_shape(stdout, d->rank, shape, 0);
            printf(written[i][0] ? " -> %s\n" : "\n", written[i]);
        }
        if (bench)
            printf("bench: batch %d, %d runs: median %.3f ms, p90 %.3f ms, min %.3f ms, mean %.3f ms\n", batch, bench, med,
                   p90, mn, mean);
    }
    status = 0;
out:
    cd_exec_free(ex);
    cd_model_free(m);
    for (int i = 0; i < nin_spec; i++) {
        cd_npy_free(&npys[i]);
        free((char *)npy_names[i]);
    }
    for (int i = 0; i < MAX_INPUTS; i++) {
        free(in_bufs[i]);
        free(out_bufs[i]);
    }
    free(times);
    return status;
}
