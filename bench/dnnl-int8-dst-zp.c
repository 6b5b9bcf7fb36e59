// oneDNN's int8 1x1 convs of ResNet-50 with a dst zero point against the
// same conv with the zero point added to the bias instead (what
// backends/cpu/dnnl-conv-int8.c does where no post-op comes before it):
// u8 src (zero point 0: a ReLU's output), s8 weights, per-channel output
// scales, bias, u8 dst, user scratchpad, layouts oneDNN's choice, the
// iterator's first kernel except the one the product declines
// (jit_1x1:avx512_core_amx, see impl_broken there).
// Both run in the same process, sampled in turn each round (the machine
// is shared and its speed drifts); medians of 9 rounds of 30 runs.
//
//   OMP_NUM_THREADS=1 dnnl-int8-dst-zp

#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                \
    do {                                                     \
        dnnl_status_t s_ = (x);                              \
        if (s_) {                                            \
            fprintf(stderr, "%s: status %d\n", #x, (int)s_); \
            exit(1);                                         \
        }                                                    \
    } while (0)

enum { ROUNDS = 9, RUNS = 30 };

typedef struct {
    dnnl_primitive_t p;
    dnnl_memory_t s, w, b, d, pad;
    const char *impl;
} conv;

static dnnl_engine_t eng;
static dnnl_stream_t str;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static conv make(int ic, int oc, int hw, int stride, int dst_zp) {
    conv c;
    const int ohw = (hw - 1) / stride + 1;
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    dnnl_dims_t sd = {1, ic, hw, hw}, wd = {oc, ic, 1, 1}, bd = {oc}, dd = {1, oc, ohw, ohw};
    CK(dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_u8, dnnl_format_tag_any));
    CK(dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_s8, dnnl_format_tag_any));
    CK(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x));
    CK(dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_u8, dnnl_format_tag_any));
    dnnl_convolution_desc_t cd;
    dnnl_dims_t st = {stride, stride}, pad = {0, 0};
    CK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wmd, &bmd, &dmd,
                                          st, pad, pad));
    dnnl_primitive_attr_t a;
    CK(dnnl_primitive_attr_create(&a));
    float *scales = malloc(sizeof(float) * (size_t)oc);
    for (int i = 0; i < oc; i++) scales[i] = 0.01f;
    CK(dnnl_primitive_attr_set_output_scales(a, oc, 1 << 1, scales));
    CK(dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user)); // as the product's ops
    // The src zero point 0: the input of these convs is a ReLU's output.
    int32_t zout = 120;
    if (dst_zp) CK(dnnl_primitive_attr_set_zero_points(a, DNNL_ARG_DST, 1, 0, &zout));
    dnnl_primitive_desc_iterator_t it;
    CK(dnnl_primitive_desc_iterator_create(&it, &cd, a, eng, NULL));
    dnnl_primitive_desc_t pd = NULL;
    do {
        pd = dnnl_primitive_desc_iterator_fetch(it);
        const char *impl = NULL;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if (impl && strncmp(impl, "jit_1x1:avx512_core_amx", 23) != 0) {
            c.impl = impl;
            break;
        }
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    if (!pd) {
        fprintf(stderr, "no kernel\n");
        exit(1);
    }
    CK(dnnl_primitive_create(&c.p, pd));
    CK(dnnl_memory_create(&c.s, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_create(&c.w, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_create(&c.b, &bmd, eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_create(&c.d, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_create(&c.pad, dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0), eng,
                          DNNL_MEMORY_ALLOCATE));
    // Defined contents (an uninitialized float bias may hold denormals or
    // NaNs, which slow the epilogue): bytes in 0..250, bias 0.5.
    dnnl_memory_t all[4] = {c.s, c.w, c.b, c.d};
    for (int m = 0; m < 4; m++) {
        void *h = NULL;
        CK(dnnl_memory_get_data_handle(all[m], &h));
        const dnnl_memory_desc_t *md;
        CK(dnnl_memory_get_memory_desc(all[m], &md));
        const size_t n = dnnl_memory_desc_get_size(md);
        if (all[m] == c.b)
            for (size_t i = 0; i < n / sizeof(float); i++) ((float *)h)[i] = 0.5f;
        else
            for (size_t i = 0; i < n; i++) ((unsigned char *)h)[i] = (unsigned char)(i * 7 % 251);
    }
    free(scales);
    dnnl_primitive_attr_destroy(a);
    return c;
}

static double run_ms(const conv *c) {
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, c->s},
                               {DNNL_ARG_WEIGHTS, c->w},
                               {DNNL_ARG_BIAS, c->b},
                               {DNNL_ARG_DST, c->d},
                               {DNNL_ARG_SCRATCHPAD, c->pad}};
    const double t0 = now_s();
    for (int i = 0; i < RUNS; i++) CK(dnnl_primitive_execute(c->p, str, 5, args));
    CK(dnnl_stream_wait(str));
    return (now_s() - t0) / RUNS * 1e3;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&str, eng, dnnl_stream_default_flags));
    static const int layers[][4] = {{64, 256, 56, 1},  {128, 512, 28, 1},  {256, 1024, 14, 1},  {512, 2048, 7, 1},
                                    {256, 512, 56, 2}, {512, 1024, 28, 2}, {1024, 2048, 14, 2}, {256, 64, 56, 1}};
    printf("| 1x1 conv | kernel (dst zero point) | ms | kernel (zero point in the bias) | ms | ratio |\n");
    printf("|---|---|---|---|---|---|\n");
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        const int *L = layers[l];
        conv a = make(L[0], L[1], L[2], L[3], 1), b = make(L[0], L[1], L[2], L[3], 0);
        double ta[ROUNDS], tb[ROUNDS];
        run_ms(&a); // warm-up: first touches of the buffers, the first AMX use
        run_ms(&b);
        for (int r = 0; r < ROUNDS; r++) {
            ta[r] = run_ms(&a);
            tb[r] = run_ms(&b);
        }
        qsort(ta, ROUNDS, sizeof ta[0], cmp_d);
        qsort(tb, ROUNDS, sizeof tb[0], cmp_d);
        printf("| %d>%d @%d s%d | %s | %.4f | %s | %.4f | %.2f |\n", L[0], L[1], L[2], L[3], a.impl, ta[ROUNDS / 2],
               b.impl, tb[ROUNDS / 2], ta[ROUNDS / 2] / tb[ROUNDS / 2]);
    }
    return 0;
}
