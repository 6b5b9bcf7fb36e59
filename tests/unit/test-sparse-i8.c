// The int8 sparse conv (sparse/sparse-conv-i8.h) against the int8
// reference (kernels/cpu/ref-conv-i8.c): s32 accumulators bit-exact and
// outputs equal, at every ISA level this CPU runs (a named skip for a level
// it lacks), both formats, u8 and s8 inputs with zero points, float and
// integer storage on both sides (the residual too), any geometry, residual,
// border map and activations.

#include "core/errors.h"
#include "sparse/i8-spmm.h"
#include "sparse/sparse-conv-i8.h"
#include "tests/unit/test-sparse-util.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// One layer's tensors in int8 form.
typedef struct {
    cd_conv_desc d; // oh/ow filled, n = batch
    cd_conv_quant q;
    int8_t *w;
    float *w_scale, *bias, *res;
    void *x;     // src in q's storage
    int32_t *xq; // the integers of x, for the accumulator reference
    size_t wn, xn, yn;
} i8_layer;

// Random s8 weights pruned like the f32 tests (unstructured or in blocks of
// block_h filters), a nonzero never 0.
static void make_weights(i8_layer *L, double sparsity, int block_h) {
    const cd_conv_desc *d = &L->d;
    const int kpg = d->k / d->groups;
    const size_t cols = (size_t)(d->c / d->groups) * d->r * d->s;
    float *wf = malloc(sizeof(float) * L->wn);
    CHECK(wf != NULL);
    sp_fill_random(wf, L->wn);
    if (block_h > 0)
        sp_prune_blocks(wf, d->k, kpg, cols, block_h, sparsity);
    else
        sp_prune_unstructured(wf, L->wn, sparsity);
    for (size_t i = 0; i < L->wn; i++) {
        int v = cd_test_randi(-128, 126);
        L->w[i] = wf[i] == 0.0f ? 0 : (int8_t)(v >= 0 ? v + 1 : v);
    }
    free(wf);
}

// Random inputs (never all at the zero point) in the storage q asks for.
static void make_input(i8_layer *L) {
    const cd_conv_quant *q = &L->q;
    const int lo = (int)cd_quant_qmin(q->in_signed), hi = (int)cd_quant_qmax(q->in_signed);
    for (size_t i = 0; i < L->xn; i++) L->xq[i] = cd_test_randi(lo, hi);
    L->xq[cd_test_randi(0, (int)L->xn - 1)] = q->in_zp == hi ? lo : hi;
    for (size_t i = 0; i < L->xn; i++) {
        if (!q->src_int)
            ((float *)L->x)[i] = (float)(L->xq[i] - q->in_zp) * q->in_scale; // a FakeQuant's grid value
        else if (q->in_signed)
            ((int8_t *)L->x)[i] = (int8_t)L->xq[i];
        else
            ((uint8_t *)L->x)[i] = (uint8_t)L->xq[i];
    }
}

static void layer_make(i8_layer *L, const cd_conv_desc *d, int batch, const cd_conv_quant *q, double sparsity,
                       int block_h) {
    memset(L, 0, sizeof *L);
    L->d = *d;
    cd_conv_out_dims(&L->d);
    L->d.n = batch;
    L->q = *q;
    L->wn = (size_t)d->k * (d->c / d->groups) * d->r * d->s;
    L->xn = (size_t)batch * d->c * d->h * d->w;
    L->yn = (size_t)batch * d->k * L->d.oh * L->d.ow;
    L->w = malloc(L->wn);
    L->w_scale = malloc(sizeof(float) * d->k);
    L->bias = malloc(sizeof(float) * d->k);
    L->res = malloc(sizeof(float) * L->yn);
    L->x = malloc(sizeof(float) * L->xn);
    L->xq = malloc(sizeof(int32_t) * L->xn);
    CHECK(L->w && L->w_scale && L->bias && L->res && L->x && L->xq);
    make_weights(L, sparsity, block_h);
    for (int k = 0; k < d->k; k++) {
        L->w_scale[k] = cd_test_randf(0.001f, 0.02f);
        L->bias[k] = cd_test_randf(-2.0f, 2.0f);
    }
    for (size_t i = 0; i < L->yn; i++) L->res[i] = cd_test_randf(-3.0f, 3.0f);
    if (q->res_int) // integers in the first yn bytes, full range
        for (size_t i = 0; i < L->yn; i++) ((uint8_t *)L->res)[i] = (uint8_t)cd_test_randi(0, 255);
    L->q.w_scale = L->w_scale;
    make_input(L);
}

static void layer_free(i8_layer *L) {
    free(L->w);
    free(L->w_scale);
    free(L->bias);
    free(L->res);
    free(L->x);
    free(L->xq);
}

// Runs L on isa/format and compares accumulators and outputs with the
// reference. Returns 0, or the create error when the ISA is unavailable.
static int check_layer(const i8_layer *L, cd_sparse_isa isa, cd_sparse_format fmt, const char *what) {
    const cd_conv_desc *d = &L->d;
    const int batch = d->n;
    cd_sparse_conv_options opt = {.format = fmt, .isa = isa};
    cd_sparse_conv_i8 *h = NULL;
    int rc = cd_sparse_conv_i8_create(d, L->w, L->bias, &L->q, &opt, &h);
    if (rc == CD_EUNSUPPORTED) return rc;
    CHECK_EQ(rc, 0);
    cd_sparse_conv_info info;
    cd_sparse_conv_i8_get_info(h, &info);
    CHECK_EQ(info.isa, isa);
    if (fmt != CD_SPARSE_FMT_AUTO) CHECK_EQ(info.format, fmt);
    const size_t ws_n = cd_sparse_conv_i8_workspace_size(h, batch);
    void *ws = aligned_alloc(64, ws_n);
    int32_t *acc = malloc(sizeof(int32_t) * L->yn), *acc_ref = malloc(sizeof(int32_t) * L->yn);
    // The output between two guards of GUARD floats: no kernel writes past
    // the tensor (the fused epilogue's masked stores start before a run).
    enum { GUARD = 32 };
    float *out_all = malloc(sizeof(float) * (L->yn + 2 * GUARD)), *out_ref = malloc(sizeof(float) * L->yn);
    float *out = out_all + GUARD;
    CHECK(ws && acc && acc_ref && out_all && out_ref);

    cd_ref_conv2d_i8_acc(d, L->xq, L->q.in_zp, L->w, acc_ref);
    memset(acc, 0x5a, sizeof(int32_t) * L->yn);
    CHECK_EQ(cd_sparse_conv_i8_run_acc(h, L->x, acc, batch, ws), 0);
    for (size_t i = 0; i < L->yn; i++)
        if (acc[i] != acc_ref[i])
            CD_CHECK_FAIL_(
                "%s %s %s: acc[%zu] = %d, want %d (c%d k%d g%d %dx%d r%d s%d st%d/%d pad%d,%d,%d,%d dil%d/%d "
                "batch %d)",
                what, cd_sparse_isa_name(isa), cd_sparse_format_name(info.format), i, acc[i], acc_ref[i], d->c, d->k,
                d->groups, d->h, d->w, d->r, d->s, d->stride_h, d->stride_w, d->pad_t, d->pad_l, d->pad_b, d->pad_r,
                d->dil_h, d->dil_w, batch);

    const float *res = d->has_residual ? L->res : NULL;
    cd_ref_conv2d_i8(d, &L->q, L->x, L->w, L->bias, res, out_ref);
    memset(out_all, 0x7f, sizeof(float) * (L->yn + 2 * GUARD));
    // A float residual in a float output, half the time in that output itself
    // (the plan's residual in place: the epilogue reads it before writing).
    if (res && !L->q.res_int && !L->q.dst_int && cd_test_randi(0, 1)) {
        memcpy(out, res, sizeof(float) * L->yn);
        res = out;
    }
    // On the whole team or on one thread (no OpenMP region then).
    const int team = omp_get_max_threads();
    omp_set_num_threads(cd_test_randi(1, team));
    CHECK_EQ(cd_sparse_conv_i8_run_ws(h, L->x, res, out, batch, ws), 0);
    omp_set_num_threads(team);
    {
        const size_t yb = L->yn * (L->q.dst_int ? 1 : sizeof(float));
        const uint8_t *lo = (const uint8_t *)out_all, *hi = (const uint8_t *)out + yb;
        const uint8_t *end = (const uint8_t *)(out_all + L->yn + 2 * GUARD);
        for (size_t i = 0; i < sizeof(float) * GUARD; i++)
            if (lo[i] != 0x7f)
                CD_CHECK_FAIL_("%s %s: wrote %zu bytes before the output", what, cd_sparse_isa_name(isa),
                               sizeof(float) * GUARD - i);
        for (const uint8_t *p = hi; p < end; p++)
            if (*p != 0x7f)
                CD_CHECK_FAIL_("%s %s: wrote byte %zu past the output", what, cd_sparse_isa_name(isa),
                               (size_t)(p - hi));
    }
    if (L->q.dst_int) {
        const uint8_t *a = (const uint8_t *)out, *b = (const uint8_t *)out_ref;
        for (size_t i = 0; i < L->yn; i++)
            if (a[i] != b[i])
                CD_CHECK_FAIL_("%s %s: out[%zu] = %d, want %d", what, cd_sparse_isa_name(isa), i, a[i], b[i]);
    } else {
        for (size_t i = 0; i < L->yn; i++)
            if (!(out[i] == out_ref[i] || (isnan(out[i]) && isnan(out_ref[i]))))
                CD_CHECK_FAIL_("%s %s: out[%zu] = %.9g, want %.9g (acc %d)", what, cd_sparse_isa_name(isa), i, out[i],
                               out_ref[i], acc_ref[i]);
    }
    free(ws);
    free(acc);
    free(acc_ref);
    free(out_all);
    free(out_ref);
    cd_sparse_conv_i8_free(h);
    return 0;
}

// A random quantization: u8 or s8 input with a zero point, float or integer
// storage on both sides, output quantized or not.
static cd_conv_quant random_quant(void) {
    cd_conv_quant q = {.in_scale = cd_test_randf(0.01f, 0.1f), .in_signed = cd_test_randi(0, 1)};
    q.in_zp = q.in_signed ? cd_test_randi(-20, 20) : cd_test_randi(0, 255);
    q.src_int = cd_test_randi(0, 1);
    if (cd_test_randi(0, 3)) {
        q.out_scale = cd_test_randf(0.02f, 0.2f);
        q.out_signed = cd_test_randi(0, 1);
        q.out_zp = q.out_signed ? cd_test_randi(-10, 10) : cd_test_randi(0, 40);
        q.dst_int = cd_test_randi(0, 1);
    }
    if (cd_test_randi(0, 2) == 0) { // a residual block's rounding before the residual
        q.mid_scale = cd_test_randf(0.01f, 0.2f);
        q.mid_signed = cd_test_randi(0, 1);
        q.mid_zp = q.mid_signed ? cd_test_randi(-10, 10) : cd_test_randi(0, 60);
    }
    if (cd_test_randi(0, 2) == 0) { // the residual stored as integers (used where the conv has one)
        q.res_int = 1;
        q.res_scale = cd_test_randf(0.01f, 0.1f);
        q.res_signed = cd_test_randi(0, 1);
        q.res_zp = q.res_signed ? cd_test_randi(-20, 20) : cd_test_randi(0, 255);
    }
    return q;
}

// A random small geometry: any stride, pad, dilation, groups.
static cd_conv_desc random_desc(void) {
    for (;;) {
        const int groups = cd_test_randi(0, 3) ? 1 : cd_test_randi(2, 3);
        const int r = cd_test_randi(1, 4), s = cd_test_randi(0, 2) ? r : cd_test_randi(1, 4);
        cd_conv_desc d = cd_conv_square(groups * cd_test_randi(1, 20), cd_test_randi(1, 18), cd_test_randi(1, 18),
                                        groups * cd_test_randi(1, 19), 1, 1, 0);
        d.r = r;
        d.s = s;
        d.groups = groups;
        d.stride_h = cd_test_randi(1, 3);
        d.stride_w = cd_test_randi(0, 1) ? d.stride_h : cd_test_randi(1, 3);
        d.pad_t = cd_test_randi(0, 2);
        d.pad_l = cd_test_randi(0, 2);
        d.pad_b = cd_test_randi(0, 2);
        d.pad_r = cd_test_randi(0, 2);
        d.dil_h = cd_test_randi(0, 3) ? 1 : 2;
        d.dil_w = cd_test_randi(0, 3) ? 1 : 2;
        d.has_residual = cd_test_randi(0, 2) == 0;
        d.act = sp_random_act();
        cd_conv_out_dims(&d);
        if (d.oh >= 1 && d.ow >= 1) return d;
    }
}

// Random layers at one ISA level: sparsities 0, 50, 90, 100% unstructured
// and in 4x1 blocks, CSR, BSR4 and the automatic choice, batch 1..3.
static void random_layers_at(cd_sparse_isa isa) {
    static const double sparsities[] = {0.0, 0.5, 0.9, 1.0};
    for (int it = 0; it < 60; it++) {
        const cd_conv_desc d = random_desc();
        const cd_conv_quant q = random_quant();
        const int batch = cd_test_randi(1, 3);
        const double sp = sparsities[it % 4];
        const int block = cd_test_randi(0, 1) ? 4 : 0;
        i8_layer L;
        layer_make(&L, &d, batch, &q, sp, block);
        const cd_sparse_format fmt = (cd_sparse_format)(it / 4 % 3); // AUTO, CSR, BSR4
        char what[64];
        snprintf(what, sizeof what, "case %d sparsity %.1f block %d", it, sp, block);
        CHECK_EQ(check_layer(&L, isa, fmt, what), 0);
        layer_free(&L);
    }
}

static void skip_unless(cd_sparse_isa isa, const char *need) {
    if (!cd_i8_isa(isa)) CD_SKIP("%s: this CPU (or CONVD_MAX_ISA) has no %s", cd_sparse_isa_name(isa), need);
}

CD_TEST(sparse_i8_random_layers_avx512vnni) {
    skip_unless(CD_SPARSE_ISA_AVX512VNNI, "needs AVX-512 VNNI");
    random_layers_at(CD_SPARSE_ISA_AVX512VNNI);
}

CD_TEST(sparse_i8_random_layers_avx512f) {
    skip_unless(CD_SPARSE_ISA_AVX512F, "needs AVX-512 F/VL/BW/DQ");
    random_layers_at(CD_SPARSE_ISA_AVX512F);
}

CD_TEST(sparse_i8_random_layers_avx2) {
    skip_unless(CD_SPARSE_ISA_AVX2, "needs AVX2 + FMA");
    random_layers_at(CD_SPARSE_ISA_AVX2);
}

CD_TEST(sparse_i8_random_layers_scalar) { random_layers_at(CD_SPARSE_ISA_SCALAR); }

// The plain epilogue inside the kernel (sparse/i8-spmm.h cd_i8_out: u8/s8
// out, no residual, no mid grid, ReLU or none), which most layers of a QDQ
// model take at the AVX-512 levels, beside the residual block's epilogue
// (mid grid, u8/s8 residual, ReLU) that stays outside it: 1x1 layers whose
// tiles are one run (up to 40x40: several full tiles and a partial last
// one) and any geometry (several runs per tile, junk columns and rows),
// every sparsity, batch 1..3 (a tile across images). The levels below
// AVX-512 run the same cases unfused.
static void fused_epilogue_layers_at(cd_sparse_isa isa) {
    static const double sparsities[] = {0.0, 0.5, 0.9, 1.0};
    for (int it = 0; it < 48; it++) {
        cd_conv_desc d = random_desc();
        if (it % 2 == 0) {
            d = cd_conv_square(cd_test_randi(1, 40), cd_test_randi(1, 40), cd_test_randi(1, 40), cd_test_randi(1, 40),
                               1, 1, 0);
            cd_conv_out_dims(&d);
        }
        const int resblock = it % 3 == 2;
        cd_conv_quant q = random_quant();
        q.out_scale = cd_test_randf(0.02f, 0.2f);
        q.out_signed = cd_test_randi(0, 1);
        q.out_zp = q.out_signed ? cd_test_randi(-10, 10) : cd_test_randi(0, 40);
        q.dst_int = 1;
        q.mid_scale = 0.0f;
        d.has_residual = resblock;
        d.act = (cd_activation){.kind = resblock || cd_test_randi(0, 1) ? CD_ACT_RELU : CD_ACT_NONE};
        if (resblock) {
            q.mid_scale = cd_test_randf(0.01f, 0.2f);
            q.mid_signed = cd_test_randi(0, 1);
            q.mid_zp = q.mid_signed ? cd_test_randi(-10, 10) : cd_test_randi(0, 60);
            q.res_int = 1;
            q.res_scale = cd_test_randf(0.01f, 0.1f);
            q.res_signed = cd_test_randi(0, 1);
            q.res_zp = q.res_signed ? cd_test_randi(-20, 20) : cd_test_randi(0, 255);
        }
        i8_layer L;
        layer_make(&L, &d, cd_test_randi(1, 3), &q, sparsities[it % 4], cd_test_randi(0, 1) ? 4 : 0);
        char what[64];
        snprintf(what, sizeof what, "%s case %d", resblock ? "resblock" : "plain", it);
        CHECK_EQ(check_layer(&L, isa, (cd_sparse_format)(it / 4 % 3), what), 0);
        layer_free(&L);
    }
}

CD_TEST(sparse_i8_fused_epilogue_layers_avx512vnni) {
    skip_unless(CD_SPARSE_ISA_AVX512VNNI, "needs AVX-512 VNNI");
    fused_epilogue_layers_at(CD_SPARSE_ISA_AVX512VNNI);
}

CD_TEST(sparse_i8_fused_epilogue_layers_avx512f) {
    skip_unless(CD_SPARSE_ISA_AVX512F, "needs AVX-512 F/VL/BW/DQ");
    fused_epilogue_layers_at(CD_SPARSE_ISA_AVX512F);
}

CD_TEST(sparse_i8_fused_epilogue_layers_avx2) {
    skip_unless(CD_SPARSE_ISA_AVX2, "needs AVX2 + FMA");
    fused_epilogue_layers_at(CD_SPARSE_ISA_AVX2);
}

CD_TEST(sparse_i8_fused_epilogue_layers_scalar) { fused_epilogue_layers_at(CD_SPARSE_ISA_SCALAR); }

// Stride-2 columns (the planes of sparse/i8-phase2-simd.h): row strides
// 1..3, pads 0..3, odd and even sizes, rows wider than a vector (up to
// 150), dilation, groups, every sparsity, u8, s8 and float inputs.
static void stride2_layers_at(cd_sparse_isa isa) {
    static const double sparsities[] = {0.0, 0.5, 0.9, 1.0};
    for (int it = 0; it < 40; it++) {
        cd_conv_desc d;
        do {
            d = random_desc();
            d.stride_w = 2;
            d.pad_l = cd_test_randi(0, 3);
            d.pad_r = cd_test_randi(0, 3);
            if (it % 4 == 3) { // wide rows, few of them
                d.w = cd_test_randi(60, 150);
                d.h = cd_test_randi(1, 5);
            }
            cd_conv_out_dims(&d);
        } while (d.oh < 1 || d.ow < 1);
        const cd_conv_quant q = random_quant();
        i8_layer L;
        layer_make(&L, &d, cd_test_randi(1, 3), &q, sparsities[it % 4], cd_test_randi(0, 1) ? 4 : 0);
        char what[64];
        snprintf(what, sizeof what, "stride-2 case %d", it);
        CHECK_EQ(check_layer(&L, isa, (cd_sparse_format)(it / 4 % 3), what), 0);
        layer_free(&L);
    }
}

CD_TEST(sparse_i8_stride2_layers_avx512vnni) {
    skip_unless(CD_SPARSE_ISA_AVX512VNNI, "needs AVX-512 VNNI");
    stride2_layers_at(CD_SPARSE_ISA_AVX512VNNI);
}

CD_TEST(sparse_i8_stride2_layers_avx512f) {
    skip_unless(CD_SPARSE_ISA_AVX512F, "needs AVX-512 F/VL/BW/DQ");
    stride2_layers_at(CD_SPARSE_ISA_AVX512F);
}

CD_TEST(sparse_i8_stride2_layers_avx2) {
    skip_unless(CD_SPARSE_ISA_AVX2, "needs AVX2 + FMA");
    stride2_layers_at(CD_SPARSE_ISA_AVX2);
}

CD_TEST(sparse_i8_stride2_layers_scalar) { stride2_layers_at(CD_SPARSE_ISA_SCALAR); }

// Stride-1 columns (the planes of sparse/i8-s1-rows-simd.h): kernels
// 3x3, 5x5, 1xk and kx1, asymmetric pads 0..2, row strides 1..2, odd and
// even sizes, rows narrower than 16 and wider than 64, dilation, groups,
// batch 1..3, every sparsity, u8, s8 and float inputs.
static void stride1_layers_at(cd_sparse_isa isa) {
    static const double sparsities[] = {0.0, 0.5, 0.9, 1.0};
    for (int it = 0; it < 48; it++) {
        cd_conv_desc d;
        do {
            d = random_desc();
            const int shape = it % 4; // kxk (3 or 5), 1xk, kx1, wide rows
            const int k = cd_test_randi(0, 1) ? 3 : 5;
            d.r = shape == 1 ? 1 : k;
            d.s = shape == 2 ? 1 : k;
            d.stride_w = 1;
            d.stride_h = cd_test_randi(0, 3) ? 1 : 2;
            if (shape == 3) { // wide rows, few of them
                d.w = cd_test_randi(60, 150);
                d.h = cd_test_randi(1, 6);
            }
            cd_conv_out_dims(&d);
        } while (d.oh < 1 || d.ow < 1);
        const cd_conv_quant q = random_quant();
        i8_layer L;
        layer_make(&L, &d, cd_test_randi(1, 3), &q, sparsities[it / 4 % 4], cd_test_randi(0, 1) ? 4 : 0);
        char what[64];
        snprintf(what, sizeof what, "stride-1 case %d", it);
        CHECK_EQ(check_layer(&L, isa, (cd_sparse_format)(it / 16 % 3), what), 0);
        layer_free(&L);
    }
}

CD_TEST(sparse_i8_stride1_layers_avx512vnni) {
    skip_unless(CD_SPARSE_ISA_AVX512VNNI, "needs AVX-512 VNNI");
    stride1_layers_at(CD_SPARSE_ISA_AVX512VNNI);
}

CD_TEST(sparse_i8_stride1_layers_avx512f) {
    skip_unless(CD_SPARSE_ISA_AVX512F, "needs AVX-512 F/VL/BW/DQ");
    stride1_layers_at(CD_SPARSE_ISA_AVX512F);
}

CD_TEST(sparse_i8_stride1_layers_avx2) {
    skip_unless(CD_SPARSE_ISA_AVX2, "needs AVX2 + FMA");
    stride1_layers_at(CD_SPARSE_ISA_AVX2);
}

CD_TEST(sparse_i8_stride1_layers_scalar) { stride1_layers_at(CD_SPARSE_ISA_SCALAR); }

// ResNet-50-like shapes (1x1 direct, 3x3, the strided 1x1 and 3x3) with
// batches that fold into one pass (7x7, 14x14) and ones that do not
// (56x56: one image per pass), at every level.
CD_TEST(sparse_i8_resnet_shapes_batch_fold) {
    static const struct {
        int c, hw, k, r, stride, pad, batch;
    } shapes[] = {
        {64, 56, 16, 1, 1, 0, 2}, {32, 14, 40, 3, 1, 1, 5}, {48, 7, 24, 1, 1, 0, 17}, {24, 28, 16, 1, 2, 0, 3},
        {16, 29, 20, 3, 2, 1, 2}, {12, 64, 8, 3, 1, 1, 2},  {6, 75, 8, 3, 2, 1, 1}, // stride-2 rows of 38: the vector even-byte loops and their tails
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        cd_conv_desc d = cd_conv_square(shapes[i].c, shapes[i].hw, shapes[i].hw, shapes[i].k, shapes[i].r,
                                        shapes[i].stride, shapes[i].pad);
        d.act = (cd_activation){.kind = CD_ACT_RELU};
        d.has_residual = i % 2;
        cd_conv_quant q = {.in_scale = 0.05f,
                           .in_zp = 3 + (int)i,
                           .src_int = (int)i % 2,
                           .out_scale = 0.1f,
                           .out_zp = 0,
                           .dst_int = i % 3 == 0};
        for (int block = 0; block <= 4; block += 4) {
            i8_layer L;
            layer_make(&L, &d, shapes[i].batch, &q, 0.9, block);
            for (int isa = CD_SPARSE_ISA_SCALAR; isa <= CD_SPARSE_ISA_AVX512VNNI; isa++) {
                if (!cd_i8_isa((cd_sparse_isa)isa)) continue;
                char what[64];
                snprintf(what, sizeof what, "shape %zu block %d", i, block);
                CHECK_EQ(check_layer(&L, (cd_sparse_isa)isa, block ? CD_SPARSE_FMT_BSR4 : CD_SPARSE_FMT_CSR, what), 0);
            }
            layer_free(&L);
        }
    }
}

// A compacted conv's border map (cd_conv_desc.border: one float image
// added to every image before the activation) in the epilogue's residual
// place: random geometries, batches that fold several images into one pass,
// sparsities 0-100%, every format and level, the map read once at create.
CD_TEST(sparse_i8_border_map_shared_by_the_batch) {
    static const double sparsities[] = {0.0, 0.5, 0.9, 1.0};
    for (int it = 0; it < 24; it++) {
        cd_conv_desc d = random_desc();
        d.has_residual = 0;
        cd_conv_quant q = random_quant();
        q.mid_scale = 0.0f; // a border conv has no QDQ residual block
        const int batch = cd_test_randi(1, 5);
        i8_layer L;
        layer_make(&L, &d, batch, &q, sparsities[it % 4], cd_test_randi(0, 1) ? 4 : 0);
        const size_t map_n = L.yn / (size_t)batch;
        float *map = malloc(sizeof(float) * map_n), *copy = malloc(sizeof(float) * map_n);
        CHECK(map && copy);
        for (size_t i = 0; i < map_n; i++) map[i] = cd_test_randf(-3.0f, 3.0f);
        memcpy(copy, map, sizeof(float) * map_n);
        L.d.border = map;
        for (int isa = CD_SPARSE_ISA_SCALAR; isa <= CD_SPARSE_ISA_AVX512VNNI; isa++) {
            if (!cd_i8_isa((cd_sparse_isa)isa)) continue;
            char what[64];
            snprintf(what, sizeof what, "border case %d batch %d", it, batch);
            CHECK_EQ(check_layer(&L, (cd_sparse_isa)isa, (cd_sparse_format)(it / 4 % 3), what), 0);
        }
        CHECK(memcmp(map, copy, sizeof(float) * map_n) == 0); // read, never written
        free(map);
        free(copy);
        layer_free(&L);
    }
}

// The extremes everywhere (x = 255 or -128 against w = -128 or 127, long
// rows: 512 x 3 x 3 taps) neither saturate nor overflow: the 16-bit
// emulation's pairs reach 2 * 255 * 128 and VNNI's quads 4 * 255 * 128.
CD_TEST(sparse_i8_worst_case_inputs_do_not_saturate) {
    cd_conv_desc d = cd_conv_square(512, 6, 6, 8, 3, 1, 1);
    for (int sign = 0; sign <= 1; sign++)
        for (int wv = 0; wv < 4; wv++) { // the long extremes, and the short quads' (|w| <= 64) ones
            cd_conv_quant q = {.in_scale = 0.01f, .in_signed = sign, .in_zp = 0, .src_int = 1};
            i8_layer L;
            layer_make(&L, &d, 2, &q, 0.0, 0);
            static const int8_t extremes[4] = {-128, 127, -64, 64};
            for (size_t i = 0; i < L.wn; i++) L.w[i] = extremes[wv];
            for (size_t i = 0; i < L.xn; i++) {
                L.xq[i] = sign ? -128 : 255;
                if (sign)
                    ((int8_t *)L.x)[i] = -128;
                else
                    ((uint8_t *)L.x)[i] = 255;
            }
            for (int isa = CD_SPARSE_ISA_SCALAR; isa <= CD_SPARSE_ISA_AVX512VNNI; isa++)
                for (int fmt = CD_SPARSE_FMT_CSR; fmt <= CD_SPARSE_FMT_BSR4; fmt++) {
                    if (!cd_i8_isa((cd_sparse_isa)isa)) continue;
                    CHECK_EQ(check_layer(&L, (cd_sparse_isa)isa, (cd_sparse_format)fmt, "worst case"), 0);
                }
            layer_free(&L);
        }
}

// Bad parameters are refused with the exact code.
CD_TEST(sparse_i8_bad_params) {
    cd_conv_desc d = cd_conv_square(8, 5, 5, 8, 3, 1, 1);
    int8_t w[8 * 8 * 9] = {1};
    float ws[8] = {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
    cd_conv_quant q = {.in_scale = 0.1f, .w_scale = ws};
    cd_sparse_conv_i8 *h = NULL;
    cd_conv_quant bad = q;
    bad.w_scale = NULL;
    CHECK_EQ(cd_sparse_conv_i8_create(&d, w, NULL, &bad, NULL, &h), CD_EPARAMS);
    bad = q;
    bad.dst_int = 1; // needs out_scale
    CHECK_EQ(cd_sparse_conv_i8_create(&d, w, NULL, &bad, NULL, &h), CD_EPARAMS);
    bad = q;
    bad.in_zp = 300;
    CHECK_EQ(cd_sparse_conv_i8_create(&d, w, NULL, &bad, NULL, &h), CD_EPARAMS);
    cd_sparse_conv_options opt = {.format = CD_SPARSE_FMT_BSR8};
    CHECK_EQ(cd_sparse_conv_i8_create(&d, w, NULL, &q, &opt, &h), CD_EUNSUPPORTED);
    cd_conv_desc bd = d;
    bd.groups = 3;
    CHECK_EQ(cd_sparse_conv_i8_create(&bd, w, NULL, &q, NULL, &h), CD_EPARAMS);
    CHECK(h == NULL);
    float map[8 * 25] = {0};
    bd = d;
    bd.border = map;
    bd.has_residual = 1; // a border map takes the residual's place: not both
    CHECK_EQ(cd_sparse_conv_i8_create(&bd, w, NULL, &q, NULL, &h), CD_EUNSUPPORTED);
    bd.has_residual = 0;
    bad = q;
    bad.mid_scale = 0.1f; // nor behind a QDQ residual block's rounding
    CHECK_EQ(cd_sparse_conv_i8_create(&bd, w, NULL, &bad, NULL, &h), CD_EUNSUPPORTED);
    CHECK(h == NULL);
    d.has_residual = 1;
    CHECK_EQ(cd_sparse_conv_i8_create(&d, w, NULL, &q, NULL, &h), 0);
    void *buf = aligned_alloc(64, cd_sparse_conv_i8_workspace_size(h, 1));
    float x[8 * 25] = {0}, y[8 * 25];
    CHECK_EQ(cd_sparse_conv_i8_run_ws(h, x, NULL, y, 1, buf), CD_EPARAMS); // residual required
    CHECK_EQ(cd_sparse_conv_i8_run_ws(h, x, x, y, 0, buf), CD_EPARAMS);
    CHECK_EQ(cd_sparse_conv_i8_run_ws(h, x, x, y, 1, NULL), CD_EPARAMS);
    CHECK_EQ(cd_sparse_conv_i8_workspace_size(h, 0), 0);
    free(buf);
    cd_sparse_conv_i8_free(h);
    cd_sparse_conv_i8_free(NULL);
}

// In a fresh child (the cap is read once): CONVD_MAX_ISA=value makes the
// best level `want`, and an int8 layer created with AUTO reports it.
static void cap_child(const char *value, cd_sparse_isa want) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cd_isa_cap cap = CD_ISA_CAP_NONE;
        if (cd_isa_cap_parse(value, &cap) != 0) _exit(6);
        cd_sparse_isa_set_cap(cap);
        if (cd_sparse_isa_best() != want) _exit(2);
        cd_conv_desc d = cd_conv_square(4, 4, 4, 4, 1, 1, 0);
        int8_t w[16] = {1, 2, 3, 4};
        float ws[4] = {1, 1, 1, 1};
        cd_conv_quant q = {.in_scale = 1.0f, .w_scale = ws};
        cd_sparse_conv_i8 *h = NULL;
        if (cd_sparse_conv_i8_create(&d, w, NULL, &q, NULL, &h) != 0) _exit(3);
        cd_sparse_conv_info info;
        cd_sparse_conv_i8_get_info(h, &info);
        if (info.isa != want) _exit(4);
        // Above the cap a forced level is unavailable.
        cd_sparse_conv_options opt = {.isa = CD_SPARSE_ISA_AVX512VNNI};
        cd_sparse_conv_i8 *h2 = NULL;
        const int rc = cd_sparse_conv_i8_create(&d, w, NULL, &q, &opt, &h2);
        if ((rc == 0) != (want == CD_SPARSE_ISA_AVX512VNNI)) _exit(5);
        cd_sparse_conv_i8_free(h2);
        cd_sparse_conv_i8_free(h);
        _exit(0);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        CD_CHECK_FAIL_("CONVD_MAX_ISA=%s: child status %d", value, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

// avx512 caps at AVX-512 without VNNI; avx512vnni keeps VNNI.
CD_TEST(sparse_i8_isa_cap_avx512_is_below_vnni) {
    // CPUID directly: asking ours would parse the cap here, before the children.
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
        CD_SKIP("needs AVX-512 VNNI to tell the two levels apart");
    cap_child("avx512", CD_SPARSE_ISA_AVX512F);
    cap_child("avx512_core", CD_SPARSE_ISA_AVX512F);
    cap_child("avx512vnni", CD_SPARSE_ISA_AVX512VNNI);
    cap_child("AVX512_VNNI", CD_SPARSE_ISA_AVX512VNNI);
    cap_child("avx2", CD_SPARSE_ISA_AVX2);
}
