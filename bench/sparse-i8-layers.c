// Int8 sparse conv (sparse/sparse-conv-i8.h) against the f32 sparse conv
// (sparse/sparse-conv.h) on ResNet-50's conv shapes, same weights' mask.
//
//   sparse-i8-layers [--batch N] [--rounds R] [--threads T] [--min-time S]
//                    [--filter SUBSTR] [--levels avx512vnni,avx512f,avx2]
//                    [--sparsity 0.9] [--format auto|csr|bsr4]  (int8's; f32 auto)
//                    [--residual]
//
// Per layer and pattern (90% unstructured "u", 90% in 4x1 output-channel
// blocks "b"), per ISA level (forced with the options' isa; the f32 kernels
// of the VNNI level are its AVX512F ones): R rounds, each timing f32 then
// int8 (interleaved: the machine is shared), each cell the median of a
// round's runs; printed: the median over rounds of f32 ms, int8 ms and
// their ratio f32/int8 (> 1: int8 faster), and int8's preparation alone
// (cd_sparse_conv_i8_prepare_ws: the u8 planes, timed in the same rounds). Int8 runs on u8 integers in and
// out (src_int = dst_int = 1), ReLU; formats AUTO for both. --residual: the
// layer of a QDQ residual block as the planner fuses it (Conv+QAdd: the
// conv's own output grid, then a u8 skip tensor added, ReLU, u8 out; the
// f32 conv adds a float skip).

#include "core/stats-util.h"
#include "kernels/op-desc.h"
#include "sparse/sparse-conv-i8.h"
#include "sparse/sparse-conv.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    int c, k, hw, r, stride;
} layer;

static const layer k_layers[] = {
    {"1x1 64>256 @56", 64, 256, 56, 1, 1},
    {"1x1 256>64 @56", 256, 64, 56, 1, 1},
    {"3x3 64 @56", 64, 64, 56, 3, 1},
    {"1x1 128>512 @28", 128, 512, 28, 1, 1},
    {"1x1 512>128 @28", 512, 128, 28, 1, 1},
    {"3x3 128 @28", 128, 128, 28, 3, 1},
    {"3x3 128 s2 @56", 128, 128, 56, 3, 2},
    {"1x1 256>1024 @14", 256, 1024, 14, 1, 1},
    {"1x1 1024>256 @14", 1024, 256, 14, 1, 1},
    {"3x3 256 @14", 256, 256, 14, 3, 1},
    {"3x3 256 s2 @28", 256, 256, 28, 3, 2},
    {"1x1 512>2048 @7", 512, 2048, 7, 1, 1},
    {"1x1 2048>512 @7", 2048, 512, 7, 1, 1},
    {"3x3 512 @7", 512, 512, 7, 3, 1},
    {"3x3 512 s2 @14", 512, 512, 14, 3, 2},
    {"1x1 256>512 s2 @56", 256, 512, 56, 1, 2},
    {"1x1 512>1024 s2 @28", 512, 1024, 28, 1, 2},
    {"1x1 1024>2048 s2 @14", 1024, 2048, 14, 1, 2},
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double g_min_time = 0.05;

typedef struct {
    int is_i8; // 2: int8's preparation alone
    const cd_sparse_conv *f;
    const cd_sparse_conv_i8 *q;
    const void *x, *res;
    void *y, *ws;
    int batch;
} run_arg;

static void run_once(const run_arg *a) {
    if (a->is_i8 == 2)
        cd_sparse_conv_i8_prepare_ws(a->q, a->x, a->batch, a->ws);
    else if (a->is_i8)
        cd_sparse_conv_i8_run_ws(a->q, a->x, a->res, a->y, a->batch, a->ws);
    else
        cd_sparse_conv_run_ws(a->f, a->x, a->res, a->y, a->batch, a->ws);
}

// Median ms of runs lasting g_min_time (at least 3), after one warm-up.
static double time_ms(const run_arg *a) {
    double t[400];
    run_once(a);
    int n = 0;
    const double start = now_s();
    while (n < 400 && (n < 3 || now_s() - start < g_min_time)) {
        const double t0 = now_s();
        run_once(a);
        t[n++] = (now_s() - t0) * 1e3;
    }
    qsort(t, n, sizeof t[0], cd_cmp_double);
    return t[n / 2];
}

static double median(double *v, int n) {
    qsort(v, n, sizeof v[0], cd_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static unsigned long g_rng = 12345;
static double rnd(void) {
    g_rng = g_rng * 6364136223846793005ul + 1442695040888963407ul;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

int main(int argc, char **argv) {
    int batch = 1, rounds = 5, threads = 1, residual = 0;
    double sparsity = 0.9;
    cd_sparse_format fmt = CD_SPARSE_FMT_AUTO;
    const char *filter = NULL, *levels = "avx512vnni,avx512f,avx2";
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--residual")) {
            residual = 1;
            i--;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "%s needs a value\n", argv[i]);
            return 2;
        } else if (!strcmp(argv[i], "--batch"))
            batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--min-time"))
            g_min_time = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--filter"))
            filter = argv[i + 1];
        else if (!strcmp(argv[i], "--levels"))
            levels = argv[i + 1];
        else if (!strcmp(argv[i], "--sparsity"))
            sparsity = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--format"))
            fmt = !strcmp(argv[i + 1], "csr")    ? CD_SPARSE_FMT_CSR
                  : !strcmp(argv[i + 1], "bsr4") ? CD_SPARSE_FMT_BSR4
                                                 : CD_SPARSE_FMT_AUTO;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64 || batch < 1) return 2;
    omp_set_num_threads(threads);
    static const struct {
        const char *name;
        cd_sparse_isa isa;
    } all[] = {{"avx512vnni", CD_SPARSE_ISA_AVX512VNNI},
               {"avx512f", CD_SPARSE_ISA_AVX512F},
               {"avx2", CD_SPARSE_ISA_AVX2},
               {"scalar", CD_SPARSE_ISA_SCALAR}};
    printf("# int8 vs f32 sparse conv%s, batch %d, %d thread(s), %d rounds, sparsity %.2f\n\n",
           residual ? " (residual block: Conv+QAdd)" : "", batch, threads, rounds, sparsity);
    printf("| layer | pattern | level | f32 ms | int8 ms | f32/int8 | int8 prep ms | int8 format |\n"
           "|---|---|---|---|---|---|---|---|\n");
    double sum_f[4][2] = {{0}}, sum_q[4][2] = {{0}}, log_r[4][2] = {{0}};
    int cells[4][2] = {{0}};
    for (size_t li = 0; li < sizeof k_layers / sizeof k_layers[0]; li++) {
        const layer *L = &k_layers[li];
        if (filter && !strstr(L->name, filter)) continue;
        cd_conv_desc d = cd_conv_square(L->c, L->hw, L->hw, L->k, L->r, L->stride, L->r / 2);
        d.act = (cd_activation){.kind = CD_ACT_RELU};
        d.has_residual = residual;
        const size_t taps = (size_t)L->c * L->r * L->r, wn = (size_t)L->k * taps;
        const size_t xn = (size_t)batch * L->c * L->hw * L->hw, yn = (size_t)batch * L->k * d.oh * d.ow;
        float *wf = malloc(sizeof(float) * wn), *bias = calloc(L->k, sizeof(float)),
              *wsc = malloc(sizeof(float) * L->k);
        int8_t *wq = malloc(wn);
        float *xf = malloc(sizeof(float) * xn), *yf = malloc(sizeof(float) * yn);
        uint8_t *xq = malloc(xn), *yq = malloc(yn), *rq = residual ? malloc(yn) : NULL;
        float *rf = residual ? malloc(sizeof(float) * yn) : NULL;
        if (!wf || !bias || !wsc || !wq || !xf || !yf || !xq || !yq || (residual && (!rq || !rf))) return 1;
        for (size_t i = 0; residual && i < yn; i++) {
            rq[i] = (uint8_t)(rnd() * 256);
            rf[i] = ((int)rq[i] - 7) * 0.0391f;
        }
        for (size_t i = 0; i < xn; i++) {
            xq[i] = (uint8_t)(rnd() * 256);
            xf[i] = ((int)xq[i] - 10) * 0.0473f;
        }
        // Scales as calibration gives them (no round ratios: with 0.05,
        // 0.01 and 0.1 one output in 100 was an exact rounding tie).
        for (int k = 0; k < L->k; k++) wsc[k] = 0.0081f + 0.0037f * (float)(k % 11) / 11.0f;
        for (int pat = 0; pat < 2; pat++) {
            for (size_t i = 0; i < wn; i++) {
                int v = (int)(rnd() * 255) - 127;
                wq[i] = (int8_t)(v ? v : 1);
            }
            if (pat == 0) {
                for (size_t i = 0; i < wn; i++)
                    if (rnd() < sparsity) wq[i] = 0;
            } else {
                for (int k0 = 0; k0 < L->k; k0 += 4)
                    for (size_t t = 0; t < taps; t++)
                        if (rnd() < sparsity)
                            for (int i = 0; i < 4; i++) wq[(size_t)(k0 + i) * taps + t] = 0;
            }
            for (size_t i = 0; i < wn; i++) wf[i] = wq[i] * wsc[i / taps];
            for (size_t lv = 0; lv < sizeof all / sizeof all[0]; lv++) {
                if (!strstr(levels, all[lv].name) || !cd_sparse_isa_supported(all[lv].isa)) continue;
                if (lv == 1 && strstr(levels, "avx512f") == NULL) continue;
                cd_sparse_conv_options opt = {.isa = all[lv].isa};
                cd_sparse_conv *f = NULL;
                cd_sparse_conv_i8 *q = NULL;
                cd_conv_quant cq = {
                    .in_scale = 0.0473f, .in_zp = 10, .src_int = 1, .w_scale = wsc, .out_scale = 0.917f, .dst_int = 1};
                if (residual) {
                    cq.mid_scale = 0.683f;
                    cq.mid_zp = 131;
                    cq.res_scale = 0.0391f;
                    cq.res_zp = 7;
                    cq.res_int = 1;
                }
                cd_sparse_conv_options qopt = {.isa = all[lv].isa, .format = fmt};
                if (cd_sparse_conv_create(&d, wf, bias, &opt, &f) ||
                    cd_sparse_conv_i8_create(&d, wq, bias, &cq, &qopt, &q))
                    return 1;
                const size_t fws_n = cd_sparse_conv_workspace_size(f, batch),
                             qws_n = cd_sparse_conv_i8_workspace_size(q, batch);
                void *fws = fws_n ? aligned_alloc(64, (fws_n + 63) & ~(size_t)63) : NULL;
                void *qws = aligned_alloc(64, (qws_n + 63) & ~(size_t)63);
                run_arg af = {0, f, NULL, xf, rf, yf, fws, batch}, aq = {1, NULL, q, xq, rq, yq, qws, batch},
                        ap = {2, NULL, q, xq, NULL, yq, qws, batch};
                double tf[64], tq[64], ratio[64], tp[64];
                for (int r = 0; r < rounds; r++) {
                    tf[r] = time_ms(&af);
                    tq[r] = time_ms(&aq);
                    tp[r] = time_ms(&ap);
                    ratio[r] = tf[r] / tq[r];
                }
                cd_sparse_conv_info info;
                cd_sparse_conv_i8_get_info(q, &info);
                const double mf = median(tf, rounds), mq = median(tq, rounds), mr = median(ratio, rounds),
                             mp = median(tp, rounds);
                sum_f[lv][pat] += mf;
                sum_q[lv][pat] += mq;
                log_r[lv][pat] += log(mr);
                cells[lv][pat]++;
                printf("| %s | %s90 | %s | %.3f | %.3f | %.2f | %.3f | %s |\n", L->name, pat ? "b" : "u", all[lv].name,
                       mf, mq, mr, mp, cd_sparse_format_name(info.format));
                fflush(stdout);
                free(fws);
                free(qws);
                cd_sparse_conv_free(f);
                cd_sparse_conv_i8_free(q);
            }
        }
        free(wf);
        free(bias);
        free(wsc);
        free(wq);
        free(xf);
        free(yf);
        free(xq);
        free(yq);
        free(rq);
        free(rf);
    }
    // The geometric mean of the per-layer ratios resists a cell that a
    // paused or loaded machine slowed; the sums do not.
    printf("\n| level | pattern | sum f32 ms | sum int8 ms | f32/int8 of sums | geomean f32/int8 |\n"
           "|---|---|---|---|---|---|\n");
    for (size_t lv = 0; lv < 4; lv++)
        for (int pat = 0; pat < 2; pat++)
            if (sum_q[lv][pat] > 0)
                printf("| %s | %s90 | %.3f | %.3f | %.2f | %.2f |\n", all[lv].name, pat ? "b" : "u", sum_f[lv][pat],
                       sum_q[lv][pat], sum_f[lv][pat] / sum_q[lv][pat], exp(log_r[lv][pat] / cells[lv][pat]));
    return 0;
}
