// Does oneDNN's fused 1x1 + depthwise 3x3 convolution (the `dw` post-op)
// beat the two convolutions run one after the other, on MobileNetV2's
// inverted-residual blocks? Each block's expand 1x1 conv (ReLU6) and its
// depthwise 3x3 (stride 1 or 2, pad 1, ReLU6), nChw16c, f32, batch 1.
//
//   dnnl-dw-fusion [--threads T] [--rounds R] [--min-ms M]
//
// Per block: R rounds, each timing both methods back to back (k runs,
// k calibrated to last >= M ms); the median over rounds is printed, and the
// sums over the blocks. oneDNN's verbose name of each primitive shows which
// implementation ran (ONEDNN_VERBOSE=1 prints them all).

#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                        \
    do {                                                                                \
        dnnl_status_t s_ = (x);                                                         \
        if (s_ != dnnl_success) {                                                       \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, (int)s_); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

typedef struct {
    int c, hw, e, stride;
} block;

// MobileNetV2 at 224x224: input channels, map size, expanded channels, dw stride.
static const block k_blocks[] = {{16, 112, 96, 2}, {24, 56, 144, 1}, {24, 56, 144, 2}, {32, 28, 192, 1},
                                 {32, 28, 192, 1}, {32, 28, 192, 2}, {64, 14, 384, 1}, {64, 14, 384, 1},
                                 {64, 14, 384, 1}, {64, 14, 384, 1}, {96, 14, 576, 1}, {96, 14, 576, 1},
                                 {96, 14, 576, 2}, {160, 7, 960, 1}, {160, 7, 960, 1}, {160, 7, 960, 1}};

static dnnl_engine_t g_eng;
static dnnl_stream_t g_strm;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static dnnl_memory_t mem(const dnnl_memory_desc_t *md) {
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, g_eng, DNNL_MEMORY_ALLOCATE));
    void *p;
    CHECK(dnnl_memory_get_data_handle(m, &p));
    size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
    for (size_t i = 0; i < n; i++) ((float *)p)[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return m;
}

static void md4(dnnl_memory_desc_t *md, int a, int b, int c, int d, dnnl_format_tag_t tag) {
    dnnl_dims_t dims = {a, b, c, d};
    CHECK(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag));
}

static void md5(dnnl_memory_desc_t *md, int a, int b, int c, int d, int e, dnnl_format_tag_t tag) {
    dnnl_dims_t dims = {a, b, c, d, e};
    CHECK(dnnl_memory_desc_init_by_tag(md, 5, dims, dnnl_f32, tag));
}

static void relu6(dnnl_post_ops_t po) { CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, 6.0f)); }

typedef struct {
    dnnl_primitive_t p;
    int nargs;
    dnnl_exec_arg_t args[8];
    char impl[64];
} prim;

static void make(prim *out, const_dnnl_op_desc_t od, dnnl_primitive_attr_t attr) {
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, od, attr, g_eng, NULL));
    const char *impl = NULL;
    CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    snprintf(out->impl, sizeof out->impl, "%s", impl);
    CHECK(dnnl_primitive_create(&out->p, pd));
    dnnl_primitive_desc_destroy(pd);
}

static void run(const prim *p, int n) {
    for (int i = 0; i < n; i++) CHECK(dnnl_primitive_execute(p->p, g_strm, p->nargs, p->args));
    CHECK(dnnl_stream_wait(g_strm));
}

static double time_prims(const prim *ps, int np, double min_ms) {
    int k = 1;
    for (;;) {
        double t0 = now_ms();
        for (int i = 0; i < k; i++)
            for (int j = 0; j < np; j++) run(&ps[j], 1);
        double t = now_ms() - t0;
        if (t >= min_ms) return t / k;
        k *= 2;
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int threads = omp_get_max_threads(), rounds = 7;
    double min_ms = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--min-ms")) min_ms = atof(argv[i + 1]);
    }
    omp_set_num_threads(threads);
    CHECK(dnnl_engine_create(&g_eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&g_strm, g_eng, dnnl_stream_default_flags));
    printf("| block | separate ms | fused ms | separate / fused | implementations (1x1; dw; fused) |\n");
    printf("|---|---|---|---|---|\n");
    double sum_sep = 0, sum_fused = 0;
    for (size_t b = 0; b < sizeof k_blocks / sizeof k_blocks[0]; b++) {
        const block *B = &k_blocks[b];
        const int oh = (B->hw + 2 - 3) / B->stride + 1;
        dnnl_memory_desc_t src, w1, b1, mid, wd, bd, dst, any;
        md4(&src, 1, B->c, B->hw, B->hw, dnnl_nChw16c);
        md4(&w1, B->e, B->c, 1, 1, dnnl_format_tag_any);
        dnnl_dims_t be = {B->e};
        CHECK(dnnl_memory_desc_init_by_tag(&b1, 1, be, dnnl_f32, dnnl_x));
        bd = b1;
        md4(&mid, 1, B->e, B->hw, B->hw, dnnl_nChw16c);
        md5(&wd, B->e, 1, 1, 3, 3, dnnl_Goihw16g);
        md4(&dst, 1, B->e, oh, oh, dnnl_nChw16c);
        (void)any;
        dnnl_dims_t s1 = {1, 1}, p0 = {0, 0}, sd = {B->stride, B->stride}, p1 = {1, 1};
        // Separate: 1x1 (ReLU6) then dw (ReLU6).
        dnnl_convolution_desc_t cd1, cdd;
        CHECK(dnnl_convolution_forward_desc_init(&cd1, dnnl_forward_inference, dnnl_convolution_direct, &src, &w1, &b1,
                                                 &mid, s1, p0, p0));
        CHECK(dnnl_convolution_forward_desc_init(&cdd, dnnl_forward_inference, dnnl_convolution_direct, &mid, &wd, &bd,
                                                 &dst, sd, p1, p1));
        dnnl_primitive_attr_t a1, ad, af;
        dnnl_post_ops_t po1, pod, pof;
        CHECK(dnnl_primitive_attr_create(&a1));
        CHECK(dnnl_post_ops_create(&po1));
        relu6(po1);
        CHECK(dnnl_primitive_attr_set_post_ops(a1, po1));
        CHECK(dnnl_primitive_attr_create(&ad));
        CHECK(dnnl_post_ops_create(&pod));
        relu6(pod);
        CHECK(dnnl_primitive_attr_set_post_ops(ad, pod));
        prim sep[2], fused;
        make(&sep[0], &cd1, a1);
        make(&sep[1], &cdd, ad);
        // Weights in the layout the 1x1 primitive wants (queried), shared by both methods.
        dnnl_primitive_desc_t pd1;
        CHECK(dnnl_primitive_desc_create(&pd1, &cd1, a1, g_eng, NULL));
        dnnl_memory_desc_t w1q = *dnnl_primitive_desc_query_md(pd1, dnnl_query_weights_md, 0);
        dnnl_memory_t m_src = mem(&src), m_w1 = mem(&w1q), m_b1 = mem(&b1), m_mid = mem(&mid), m_wd = mem(&wd),
                      m_bd = mem(&bd), m_dst = mem(&dst);
        sep[0].nargs = 4;
        sep[0].args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m_src};
        sep[0].args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, m_w1};
        sep[0].args[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m_b1};
        sep[0].args[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, m_mid};
        sep[1].nargs = 4;
        sep[1].args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m_mid};
        sep[1].args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, m_wd};
        sep[1].args[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m_bd};
        sep[1].args[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, m_dst};
        // Fused: 1x1 with post-ops ReLU6, dw k3 s1|s2 p1, ReLU6.
        CHECK(dnnl_primitive_attr_create(&af));
        CHECK(dnnl_post_ops_create(&pof));
        relu6(pof);
        if (B->stride == 1)
            CHECK(dnnl_post_ops_append_dw_k3s1p1(pof, dnnl_f32, dnnl_f32, dnnl_f32, 0, 0, NULL));
        else
            CHECK(dnnl_post_ops_append_dw_k3s2p1(pof, dnnl_f32, dnnl_f32, dnnl_f32, 0, 0, NULL));
        relu6(pof);
        CHECK(dnnl_primitive_attr_set_post_ops(af, pof));
        dnnl_primitive_desc_t pdf;
        dnnl_status_t st = dnnl_primitive_desc_create(&pdf, &cd1, af, g_eng, NULL);
        double sep_ms[64], fused_ms[64];
        int have_fused = st == dnnl_success;
        if (have_fused) {
            dnnl_primitive_desc_destroy(pdf);
            make(&fused, &cd1, af);
            fused.nargs = 7;
            fused.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m_src};
            fused.args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, m_w1};
            fused.args[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m_b1};
            fused.args[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, m_dst};
            fused.args[4] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, m_wd};
            fused.args[5] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, m_bd};
            fused.args[6] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, NULL};
            fused.nargs = 6;
        }
        for (int r = 0; r < rounds && r < 64; r++) {
            sep_ms[r] = time_prims(sep, 2, min_ms);
            fused_ms[r] = have_fused ? time_prims(&fused, 1, min_ms) : 0;
        }
        qsort(sep_ms, (size_t)rounds, sizeof(double), cmp);
        qsort(fused_ms, (size_t)rounds, sizeof(double), cmp);
        double s = sep_ms[rounds / 2], f = fused_ms[rounds / 2];
        sum_sep += s;
        sum_fused += have_fused ? f : s;
        printf("| %d>%d @%d s%d | %.4f | %s%.4f | %.2fx | %s; %s; %s |\n", B->c, B->e, B->hw, B->stride, s,
               have_fused ? "" : "n/a ", f, have_fused ? s / f : 0.0, sep[0].impl, sep[1].impl,
               have_fused ? fused.impl : "(refused)");
        fflush(stdout);
    }
    printf("\nthreads %d: separate %.3f ms, fused %.3f ms (%.2fx)\n", threads, sum_sep, sum_fused, sum_sep / sum_fused);
    return 0;
}
