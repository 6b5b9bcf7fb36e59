// Our Winograd 3x3 conv (backends/cpu/winograd.h) against cd_ref_conv2d:
// random shapes (channels not multiples of the block, maps of 1, 2, odd, 7,
// 14, 56), pads, bias, every activation, residual (also in place), batch
// 1-3, inputs spread over 1e-3..1e3; relative L2 within 1e-4 for each tile at
// each ISA level. The ISA bodies are also held to the scalar body (the
// transforms as written), and the choice in dnnl-conv.c to its setting.

#include "backends/cpu/winograd-impl.h"
#include "tests/unit/test-kernels-util.h"

#define WINO_TOL 1e-4

// sqrt(sum (a - b)^2 / sum b^2) over n floats (0 when both are zero).
static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// The inputs of a case: uniform over [-1, 1), magnitudes spread
// log-uniformly over 1e-3..1e3 with random signs, or N(0, 1).
typedef enum { IN_UNIFORM, IN_WIDE, IN_NORMAL } in_kind;

static float *input_buf(size_t n, in_kind kind) {
    if (kind == IN_UNIFORM) return tk_rand_buf(n, -1, 1);
    float *p = tk_alloc(n);
    for (size_t i = 0; i < n; i++) {
        if (kind == IN_WIDE) {
            const float mag = powf(10.0f, cd_test_randf(-3.0f, 3.0f));
            p[i] = cd_test_randi(0, 1) ? mag : -mag;
        } else { // Box-Muller
            const double u1 = 1.0 - cd_test_randf(0.0f, 1.0f), u2 = cd_test_randf(0.0f, 1.0f);
            p[i] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        }
    }
    return p;
}

// 64-byte aligned scratch of bytes.
static void *scratch_alloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) abort();
    return p;
}

static int rand_map(void) {
    static const int sizes[] = {1, 2, 3, 5, 7, 9, 14, 13};
    return cd_test_randi(0, 3) ? sizes[cd_test_randi(0, 7)] : cd_test_randi(1, 20);
}

// A random qualifying conv; act any kind (with parameters).
static cd_conv_desc rand_wino_conv(int cmax) {
    cd_conv_desc d = cd_conv_square(cd_test_randi(1, cmax), rand_map(), 1, cd_test_randi(1, cmax), 3, 1, 1);
    d.w = cd_test_randi(0, 1) ? d.h : rand_map();
    d.pad_t = cd_test_randi(0, 2), d.pad_b = cd_test_randi(0, 2);
    d.pad_l = cd_test_randi(0, 2), d.pad_r = cd_test_randi(0, 2);
    if (d.h + d.pad_t + d.pad_b < 3) d.pad_t = d.pad_b = 1;
    if (d.w + d.pad_l + d.pad_r < 3) d.pad_l = d.pad_r = 1;
    d.act = tk_rand_act();
    d.has_residual = cd_test_randi(0, 1);
    cd_conv_out_dims(&d);
    return d;
}

// Runs d (batch items) on Winograd m at isa in layout l and returns its
// relative L2 error against the reference; checks the padding channels and,
// for SIMD bodies of a case `held` to the bound, the agreement with the
// scalar body (the transforms as written). A case only measured (a tile not
// offered after its activation) is not: there the two bodies' rounding can
// differ by more than the bound (F6 after a Clip: 3.7e-4 between them, the
// AVX2 body 3.4e-5 from the reference, CD_TEST_SEED=1795834324 of
// winograd_random_avx2 on an AMD Zen 5).
static double wino_err(cd_conv_desc d, int batch, int m, cd_sparse_isa isa, cd_layout l, in_kind kind, int held) {
    d.n = batch;
    const size_t wn = (size_t)d.k * d.c * 9, sn = (size_t)batch * d.c * d.h * d.w;
    const size_t dn = (size_t)batch * d.k * d.oh * d.ow;
    const float sc = 1.0f / sqrtf((float)d.c * 9);
    float *w = tk_rand_buf(wn, -sc, sc), *bias = cd_test_randi(0, 3) ? tk_rand_buf(d.k, -0.5f, 0.5f) : NULL;
    float *src = input_buf(sn, kind), *res = d.has_residual ? input_buf(dn, kind) : NULL;
    float *ref = tk_alloc(dn);
    cd_ref_conv2d(&d, src, w, bias, res, ref);

    cd_wino *wg = NULL, *sg = NULL;
    int rc = cd_wino_create(&d, l, m, isa, w, bias, &wg);
    if (rc) CD_CHECK_FAIL_("create F%d %s: %d", m, cd_sparse_isa_name(isa), rc);
    CHECK_EQ(cd_wino_create(&d, l, m, CD_SPARSE_ISA_SCALAR, w, bias, &sg), 0);
    float *ls = tk_to_layout(l, batch, d.c, d.h, d.w, src);
    const size_t ldn = cd_layout_numel(l, batch, d.k, d.oh, d.ow);
    float *lres = res ? tk_to_layout(l, batch, d.k, d.oh, d.ow, res) : NULL;
    float *ld = tk_alloc(ldn), *lsd = tk_alloc(ldn);
    const int in_place = res && cd_test_randi(0, 1);
    if (in_place) memcpy(ld, lres, ldn * sizeof(float)); // the residual in dst, as the plan may give it
    size_t sb = cd_wino_scratch_bytes(wg, batch);
    void *scratch = scratch_alloc(sb);
    cd_wino_run(wg, batch, ls, in_place ? ld : lres, ld, scratch);
    tk_check_padding_zero(l, batch, d.k, d.oh, d.ow, ld);
    float *out = tk_from_layout(l, batch, d.k, d.oh, d.ow, ld);
    const double err = rel_l2(out, ref, dn);
    if (held && isa != CD_SPARSE_ISA_SCALAR) { // the same transforms as the matrices say
        void *s2 = scratch_alloc(cd_wino_scratch_bytes(sg, batch));
        cd_wino_run(sg, batch, ls, lres, lsd, s2);
        float *sout = tk_from_layout(l, batch, d.k, d.oh, d.ow, lsd);
        const double e2 = rel_l2(out, sout, dn);
        if (e2 > WINO_TOL)
            CD_CHECK_FAIL_("F%d %s vs scalar: rel L2 %g (against the reference %g, act %d)", m, cd_sparse_isa_name(isa),
                           e2, err, d.act.kind);
        free(sout);
        free(s2);
    }
    free(out), free(scratch), free(ld), free(lsd), free(lres), free(ls);
    cd_wino_free(wg), cd_wino_free(sg);
    free(ref), free(res), free(src), free(bias), free(w);
    return err;
}

// wino_err held to the bound.
static double wino_case(cd_conv_desc d, int batch, int m, cd_sparse_isa isa, cd_layout l, in_kind kind) {
    const double err = wino_err(d, batch, m, isa, l, kind, 1);
    if (err > WINO_TOL)
        CD_CHECK_FAIL_("F%d %s %s c%d k%d %dx%d pad %d,%d,%d,%d b%d act %d res %d: rel L2 %g", m,
                       cd_sparse_isa_name(isa), cd_layout_name(l), d.c, d.k, d.h, d.w, d.pad_t, d.pad_l, d.pad_b,
                       d.pad_r, batch, d.act.kind, d.has_residual, err);
    return err;
}

static void need_isa(cd_sparse_isa isa) {
    if (!cd_sparse_isa_supported(isa)) CD_SKIP("this CPU (or CONVD_MAX_ISA) lacks %s", cd_sparse_isa_name(isa));
}

// Random shapes at one ISA: every tile, each layout the ISA runs.
static void random_cases(cd_sparse_isa isa, int cases) {
    need_isa(isa);
    for (int i = 0; i < cases; i++) {
        cd_conv_desc d = rand_wino_conv(40);
        cd_layout l = isa == CD_SPARSE_ISA_AVX512F ? CD_LAYOUT_NCHW16C : tk_rand_blocked();
        const int batch = cd_test_randi(1, 3), kind = (in_kind)cd_test_randi(0, 2);
        for (int m = 2; m <= 6; m += 2) // a tile not offered after this activation is only measured
            cd_wino_tile_offered(m, &d) ? wino_case(d, batch, m, isa, l, kind) : wino_err(d, batch, m, isa, l, kind, 0);
    }
}

CD_TEST(winograd_random_scalar) { random_cases(CD_SPARSE_ISA_SCALAR, 6); }
CD_TEST(winograd_random_avx2) { random_cases(CD_SPARSE_ISA_AVX2, 12); }
CD_TEST(winograd_random_avx512f) { random_cases(CD_SPARSE_ISA_AVX512F, 12); }

// Every activation kind once, with residual, on every tile.
CD_TEST(winograd_every_activation) {
    const cd_sparse_isa isa = cd_sparse_isa_f32(cd_sparse_isa_best());
    const cd_layout l = isa == CD_SPARSE_ISA_AVX512F ? CD_LAYOUT_NCHW16C : CD_LAYOUT_NCHW8C;
    for (int kind = CD_ACT_NONE; kind <= CD_ACT_LEAKYRELU; kind++) {
        cd_conv_desc d = cd_conv_square(cd_test_randi(3, 20), 9, 11, cd_test_randi(3, 20), 3, 1, 1);
        d.act = tk_act((cd_act)kind);
        d.has_residual = 1;
        wino_case(d, 1, 2, isa, l, IN_UNIFORM);
        wino_case(d, 2, 4, isa, l, IN_UNIFORM);
        if (cd_wino_tile_offered(6, &d)) wino_case(d, 3, 6, isa, l, IN_UNIFORM);
    }
}

// Forced f6 after an activation that clips or squashes: oneDNN's direct
// conv (F6's error there, measured over 1e-3..1e3 inputs: up to 1.1e-4,
// CD_TEST_SEED=112 of winograd_random_avx512f, c31 k37 5x5 Clip).
CD_TEST(winograd_f6_forced_not_after_a_squashing_activation) {
    if (cd_dnnl_init()) CD_SKIP("no oneDNN engine");
    const cd_layout l = cd_dnnl_blocked_layout();
    if (cd_layout_block(l) < 8) CD_SKIP("no blocked layout on this CPU");
    static const cd_act squash[] = {CD_ACT_CLIP, CD_ACT_SIGMOID, CD_ACT_HARDSIGMOID, CD_ACT_TANH};
    for (int i = 0; i < 4; i++) {
        cd_conv_desc d = cd_conv_square(cd_test_randi(8, 40), 12, 12, cd_test_randi(8, 40), 3, 1, 1);
        d.act = tk_act(squash[i]);
        CHECK(!cd_wino_tile_offered(6, &d) && cd_wino_tile_offered(4, &d) && cd_wino_tile_offered(2, &d));
        float *w = tk_rbuf((size_t)d.k * d.c * 9);
        cd_dnnl_op *op = NULL;
        CHECK_EQ(cd_dnnl_conv_create_sw(&d, l, l, 1, w, NULL, &(cd_backend_opts){.winograd = 5}, &op), 0);
        if (strstr(cd_dnnl_op_impl(op, 1), "wino")) CD_CHECK_FAIL_("act %d: %s", d.act.kind, cd_dnnl_op_impl(op, 1));
        cd_dnnl_op_free(op);
        free(w);
    }
    cd_conv_desc r = cd_conv_square(16, 8, 8, 16, 3, 1, 1);
    for (int a = CD_ACT_NONE; a <= CD_ACT_LEAKYRELU; a++) {
        r.act = tk_act((cd_act)a);
        CHECK_EQ(cd_wino_tile_offered(6, &r), a == CD_ACT_NONE || a == CD_ACT_RELU || a == CD_ACT_LEAKYRELU);
    }
}

// A fresh XDG_CACHE_HOME (dir, a mkdtemp template) for the choice's cache
// file; returns the old value (or NULL) for restore_cache_home.
static char *use_cache_home(char *dir) {
    CHECK(mkdtemp(dir) != NULL);
    const char *old = getenv("XDG_CACHE_HOME");
    char *saved = old ? strdup(old) : NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    return saved;
}

// Puts XDG_CACHE_HOME back and removes dir.
static void restore_cache_home(char *saved, const char *dir) {
    if (saved)
        setenv("XDG_CACHE_HOME", saved, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(saved);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
}

// F6 is not offered (winograd-choose.c: its error after a clipping
// activation, and no clear gain over F4): auto and on never keep it, timed afresh or
// from a cache record that says it is the fastest by far.
CD_TEST(winograd_f6_never_offered) {
    if (cd_dnnl_init()) CD_SKIP("no oneDNN engine");
    const cd_layout l = cd_dnnl_blocked_layout();
    if (cd_layout_block(l) < 8) CD_SKIP("no blocked layout on this CPU");
    cd_sparse_isa isa = cd_sparse_isa_f32(cd_sparse_isa_best());
    if (isa < CD_SPARSE_ISA_AVX2) CD_SKIP("no AVX2: Winograd is offered only forced");
    if (isa == CD_SPARSE_ISA_AVX512F && cd_layout_block(l) % 16) isa = CD_SPARSE_ISA_AVX2;
    char dir[] = "/tmp/cd-wino-f6-XXXXXX";
    char *saved = use_cache_home(dir);
    cd_conv_desc d = cd_conv_square(cd_test_randi(16, 48), cd_test_randi(20, 30), 1, cd_test_randi(16, 48), 3, 1, 1);
    d.w = cd_test_randi(20, 30);
    d.act = tk_act(cd_test_randi(0, 1) ? CD_ACT_RELU : CD_ACT_NONE);
    d.has_residual = cd_test_randi(0, 1);
    cd_conv_out_dims(&d);
    float *w = tk_rbuf((size_t)d.k * d.c * 9);
    for (int cached = 0; cached <= 1; cached++) {
        if (cached) { // direct, F2, F4, F6, oneDNN's Winograd
            char key[512];
            const uint64_t ns[5] = {1000000, 900000, 800000, 1, UINT64_MAX};
            cd_wino_cache_key(&d, l, isa, cd_dnnl_get_threads(), key, sizeof key); // the team the offer runs on
            cd_wino_cache_put(key, ns, 5);
        }
        for (int mode = 0; mode <= 2; mode += 2) { // auto, on
            cd_dnnl_op *op = NULL;
            CHECK_EQ(cd_dnnl_conv_create_sw(&d, l, l, 1, w, NULL, &(cd_backend_opts){.winograd = mode}, &op), 0);
            const char *impl = cd_dnnl_op_impl(op, 1);
            if (strstr(impl, "F6x6")) CD_CHECK_FAIL_("cached %d mode %d: %s", cached, mode, impl);
            if (cached && !strstr(impl, "F4x4"))
                CD_CHECK_FAIL_("cached, mode %d: %s, not the next fastest", mode, impl);
            cd_dnnl_op_free(op);
        }
    }
    free(w);
    restore_cache_home(saved, dir);
}

// oneDNN's own Winograd conv of d (cd_dnnl_conv_create_wino) in layout l:
// its relative L2 error against the reference, or -1 when oneDNN declines d.
static double onednn_wino_err(cd_conv_desc d, int batch, cd_layout l, in_kind kind) {
    d.n = batch;
    const size_t wn = (size_t)d.k * d.c * 9, sn = (size_t)batch * d.c * d.h * d.w;
    const size_t dn = (size_t)batch * d.k * d.oh * d.ow;
    const float sc = 1.0f / sqrtf((float)d.c * 9);
    float *w = tk_rand_buf(wn, -sc, sc), *bias = tk_rand_buf(d.k, -0.5f, 0.5f);
    cd_dnnl_op *op = NULL;
    const int rc = cd_dnnl_conv_create_wino(&d, l, l, batch, w, bias, &op);
    if (rc) {
        CHECK_EQ(rc, CD_EUNSUPPORTED);
        free(bias), free(w);
        return -1;
    }
    float *src = input_buf(sn, kind), *res = d.has_residual ? input_buf(dn, kind) : NULL, *ref = tk_alloc(dn);
    cd_ref_conv2d(&d, src, w, bias, res, ref);
    float *ls = tk_to_layout(l, batch, d.c, d.h, d.w, src);
    float *lr = res ? tk_to_layout(l, batch, d.k, d.oh, d.ow, res) : NULL;
    float *ld = tk_alloc(cd_layout_numel(l, batch, d.k, d.oh, d.ow));
    cd_dnnl_ctx *ctx = NULL;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    const float *in[2] = {ls, lr};
    CHECK_EQ(cd_dnnl_op_run(op, ctx, batch, res ? 2 : 1, in, ld), 0);
    float *out = tk_from_layout(l, batch, d.k, d.oh, d.ow, ld);
    const double err = rel_l2(out, ref, dn);
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(out), free(ld), free(lr), free(ls), free(ref), free(res), free(src), free(bias), free(w);
    return err;
}

// ResNet's 3x3 layers (64@56, 128@28, 256@14, 512@7): every tile offered
// (ours F2, F4, F6 and oneDNN's own Winograd where it builds) must stay
// within the bound, on the plain conv with inputs over 1e-3..1e3 and N(0,1),
// and with ReLU and the residual of a basic block.
static void resnet_shape(int c, int hw) {
    const cd_sparse_isa isa = cd_sparse_isa_f32(cd_sparse_isa_best());
    if (isa < CD_SPARSE_ISA_AVX2) CD_SKIP("no AVX2: the scalar body is too slow for ResNet's layers here");
    const cd_layout l = isa == CD_SPARSE_ISA_AVX512F ? CD_LAYOUT_NCHW16C : CD_LAYOUT_NCHW8C;
    cd_conv_desc plain = cd_conv_square(c, hw, hw, c, 3, 1, 1), block = plain;
    block.act.kind = CD_ACT_RELU;
    block.has_residual = 1;
    for (int m = 2; m <= 6; m += 2) {
        const double ew = wino_case(plain, 1, m, isa, l, IN_WIDE), en = wino_case(plain, 1, m, isa, l, IN_NORMAL);
        const double eb = wino_case(block, 1, m, isa, l, IN_WIDE);
        fprintf(stderr, "F%dx%d %d@%d rel L2: wide %.3g, N(0,1) %.3g, ReLU+residual wide %.3g\n", m, m, c, hw, ew, en,
                eb);
    }
    double e[3] = {onednn_wino_err(plain, 1, l, IN_WIDE), onednn_wino_err(plain, 1, l, IN_NORMAL),
                   onednn_wino_err(block, 1, l, IN_WIDE)};
    for (int i = 0; i < 3; i++)
        if (e[i] > WINO_TOL) CD_CHECK_FAIL_("oneDNN's Winograd %d@%d case %d: rel L2 %g", c, hw, i, e[i]);
    if (e[0] >= 0)
        fprintf(stderr, "oneDNN Winograd %d@%d rel L2: wide %.3g, N(0,1) %.3g, ReLU+residual wide %.3g\n", c, hw, e[0],
                e[1], e[2]);
    else
        fprintf(stderr, "oneDNN Winograd %d@%d: declined (oneDNN ISA %s)\n", c, hw, cd_dnnl_isa());
}

CD_TEST(winograd_resnet_64x56) { resnet_shape(64, 56); }
CD_TEST(winograd_resnet_128x28) { resnet_shape(128, 28); }
CD_TEST(winograd_resnet_256x14) { resnet_shape(256, 14); }
CD_TEST(winograd_resnet_512x7) { resnet_shape(512, 7); }

CD_TEST(winograd_declines_what_it_cannot_run) {
    const float w[9 * 4 * 4] = {0};
    cd_wino *wg = NULL;
    cd_conv_desc d = cd_conv_square(4, 8, 8, 4, 3, 1, 1);
    CHECK_EQ(cd_wino_create(&d, CD_LAYOUT_NCHW16C, 8, CD_SPARSE_ISA_SCALAR, w, NULL, &wg), CD_EPARAMS); // no F8
    CHECK_EQ(cd_wino_create(&d, CD_LAYOUT_NCHW, 2, CD_SPARSE_ISA_SCALAR, w, NULL, &wg), CD_EPARAMS);
    CHECK_EQ(cd_wino_create(&d, CD_LAYOUT_NCHW8C, 2, CD_SPARSE_ISA_AVX512F, w, NULL, &wg), CD_EPARAMS);
    CHECK(!cd_wino_qualifies(&d, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW8C));
    cd_conv_desc s2 = cd_conv_square(4, 8, 8, 4, 3, 2, 1);
    CHECK(!cd_wino_qualifies(&s2, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C));
    cd_conv_desc k1 = cd_conv_square(4, 8, 8, 4, 1, 1, 0);
    CHECK(!cd_wino_qualifies(&k1, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C));
    cd_conv_desc g2 = d;
    g2.groups = 2;
    CHECK(!cd_wino_qualifies(&g2, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C));
    cd_conv_desc dl = cd_conv_square(4, 8, 8, 4, 3, 1, 2);
    dl.dil_h = dl.dil_w = 2;
    cd_conv_out_dims(&dl);
    CHECK(!cd_wino_qualifies(&dl, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C));
    CHECK(cd_wino_qualifies(&d, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW16C));
    CHECK(cd_wino_mats_for(6) != NULL && cd_wino_mats_for(6)->t == 8);
    CHECK(cd_wino_mats_for(8) == NULL && cd_wino_mats_for(3) == NULL);
}

// 1 when oneDNN builds its own Winograd here (oneDNN 2.6: f32 on AVX-512
// core only, not under ONEDNN_MAX_CPU_ISA=AVX2).
static int onednn_has_wino(void) {
    cd_conv_desc d = cd_conv_square(16, 8, 8, 16, 3, 1, 1);
    float w[16 * 16 * 9] = {0};
    cd_dnnl_op *op = NULL;
    const int rc = cd_dnnl_conv_create_wino(&d, cd_dnnl_blocked_layout(), cd_dnnl_blocked_layout(), 1, w, NULL, &op);
    cd_dnnl_op_free(op);
    return rc == 0;
}

// The oneDNN conv op of d with the setting forced: its kernel string, its
// weight bytes, and its output at every batch against the reference.
static void dnnl_conv_case(int mode, cd_conv_desc d, int max_batch, const char *want) {
    const cd_layout l = cd_dnnl_blocked_layout();
    const size_t wn = (size_t)d.k * d.c * 9;
    float *w = tk_rbuf(wn), *bias = tk_rbuf(d.k);
    cd_dnnl_op *op = NULL;
    CHECK_EQ(cd_dnnl_conv_create_sw(&d, l, l, max_batch, w, bias, &(cd_backend_opts){.winograd = mode}, &op), 0);
    const char *impl = cd_dnnl_op_impl(op, 1);
    if (!strstr(impl, want)) CD_CHECK_FAIL_("kernel \"%s\" lacks \"%s\"", impl, want);
    if (!*want && strstr(impl, "wino")) CD_CHECK_FAIL_("kernel \"%s\": Winograd where none was to be", impl);
    if (*want) CHECK(cd_dnnl_op_weight_bytes(op) >= wn * sizeof(float) * 16 / 9);
    cd_dnnl_ctx *ctx = NULL;
    CHECK_EQ(cd_dnnl_ctx_create(&ctx), 0);
    for (int b = 1; b <= max_batch; b++) {
        cd_conv_desc db = d;
        db.n = b;
        const size_t sn = (size_t)b * d.c * d.h * d.w, dn = (size_t)b * d.k * d.oh * d.ow;
        float *src = tk_rbuf(sn), *res = d.has_residual ? tk_rbuf(dn) : NULL, *ref = tk_alloc(dn);
        cd_ref_conv2d(&db, src, w, bias, res, ref);
        float *ls = tk_to_layout(l, b, d.c, d.h, d.w, src);
        float *lr = res ? tk_to_layout(l, b, d.k, d.oh, d.ow, res) : NULL;
        float *ld = tk_alloc(cd_layout_numel(l, b, d.k, d.oh, d.ow));
        const float *in[2] = {ls, lr};
        CHECK_EQ(cd_dnnl_op_run(op, ctx, b, res ? 2 : 1, in, ld), 0);
        float *out = tk_from_layout(l, b, d.k, d.oh, d.ow, ld);
        const double err = rel_l2(out, ref, dn);
        if (err > WINO_TOL) CD_CHECK_FAIL_("batch %d (%s): rel L2 %g", b, cd_dnnl_op_impl(op, b), err);
        free(out), free(ld), free(lr), free(ls), free(ref), free(res), free(src);
    }
    cd_dnnl_ctx_free(ctx);
    cd_dnnl_op_free(op);
    free(bias), free(w);
}

// A random qualifying conv for the op tests, any activation when acts.
static cd_conv_desc rand_op_conv(int acts) {
    cd_conv_desc d = cd_conv_square(cd_test_randi(5, 40), cd_test_randi(5, 16), 1, cd_test_randi(5, 40), 3, 1, 1);
    d.w = cd_test_randi(5, 16);
    d.act = acts ? tk_rand_act() : tk_act(cd_test_randi(0, 1) ? CD_ACT_RELU : CD_ACT_NONE);
    d.has_residual = cd_test_randi(0, 1);
    cd_conv_out_dims(&d);
    return d;
}

static void dnnl_conv_mode(int mode, const char *want) {
    if (cd_dnnl_init()) CD_SKIP("no oneDNN engine");
    if (cd_layout_block(cd_dnnl_blocked_layout()) < 8) CD_SKIP("no blocked layout on this CPU");
    if (mode != 1 && cd_sparse_isa_best() < CD_SPARSE_ISA_AVX2) CD_SKIP("no AVX2: Winograd is offered only forced");
    dnnl_conv_case(mode, rand_op_conv(mode != 5), 3, want);
}

CD_TEST(winograd_dnnl_conv_forced_on) { dnnl_conv_mode(2, "wino"); }
CD_TEST(winograd_dnnl_conv_forced_f2) { dnnl_conv_mode(3, "winograd:F2x2"); }
CD_TEST(winograd_dnnl_conv_forced_f4) { dnnl_conv_mode(4, "winograd:F4x4"); }
CD_TEST(winograd_dnnl_conv_forced_f6) { dnnl_conv_mode(5, "winograd:F6x6"); }
CD_TEST(winograd_dnnl_conv_off) {
    dnnl_conv_mode(1, "");
    cd_dnnl_op *op = NULL;
    const cd_layout l = cd_dnnl_blocked_layout();
    cd_conv_desc d = cd_conv_square(16, 8, 8, 16, 3, 1, 1);
    float *w = tk_rbuf(16 * 16 * 9);
    CHECK_EQ(cd_dnnl_conv_create_sw(&d, l, l, 1, w, NULL, &(cd_backend_opts){.winograd = 1}, &op), 0);
    CHECK(strstr(cd_dnnl_op_impl(op, 1), "wino") == NULL);
    cd_dnnl_op_free(op);
    free(w);
}

// CONVD_WINOGRAD=onednn: oneDNN's own Winograd where it has one (its impl
// string, "jit_wino_4x3:avx512_core" or "jit_fp32_wino_2x3:avx512_core"),
// else oneDNN's direct conv.
CD_TEST(winograd_dnnl_conv_forced_onednn) {
    if (cd_dnnl_init()) CD_SKIP("no oneDNN engine");
    if (cd_layout_block(cd_dnnl_blocked_layout()) < 8) CD_SKIP("no blocked layout on this CPU");
    dnnl_conv_case(6, rand_op_conv(0), 3, onednn_has_wino() ? "wino" : "");
}

// oneDNN's Winograd is asked and declines what it lacks: every conv when
// its ISA is below AVX-512 (the AVX2 cap), and on AVX-512 a stride-2 conv
// and activations other than ReLU (its only eltwise).
CD_TEST(winograd_onednn_asked_declines) {
    if (cd_dnnl_init()) CD_SKIP("no oneDNN engine");
    const cd_layout l = cd_dnnl_blocked_layout();
    if (cd_layout_block(l) < 8) CD_SKIP("no blocked layout on this CPU");
    float *w = tk_rbuf(16 * 16 * 9);
    cd_dnnl_op *op = NULL;
    cd_conv_desc d = cd_conv_square(16, 9, 9, 16, 3, 1, 1), s2 = cd_conv_square(16, 9, 9, 16, 3, 2, 1), sig = d;
    sig.act = tk_act(CD_ACT_SIGMOID);
    const int avx512 = strncmp(cd_dnnl_isa(), "avx512_core", 11) == 0;
    CHECK_EQ(cd_dnnl_conv_create_wino(&d, l, l, 2, w, NULL, &op), avx512 ? 0 : CD_EUNSUPPORTED);
    CHECK_EQ(onednn_has_wino(), avx512);
    if (op) CHECK(strstr(cd_dnnl_op_impl(op, 1), "wino") != NULL);
    cd_dnnl_op_free(op), op = NULL;
    CHECK_EQ(cd_dnnl_conv_create_wino(&s2, l, l, 2, w, NULL, &op), CD_EUNSUPPORTED);
    CHECK_EQ(cd_dnnl_conv_create_wino(&sig, l, l, 2, w, NULL, &op), CD_EUNSUPPORTED);
    CHECK(op == NULL);
    free(w);
}

// oneDNN picks its 2x3 Winograd for 64@56 at batch 1 and its 4x3 one at
// batch 3, each with weights in its own format: both packed from the kept
// copy, both within the bound.
CD_TEST(winograd_onednn_batches_pack_their_own_weights) {
    if (cd_dnnl_init() || !onednn_has_wino()) CD_SKIP("oneDNN has no f32 Winograd on this CPU (or under the cap)");
    cd_conv_desc d = cd_conv_square(64, 56, 56, 64, 3, 1, 1);
    d.act = tk_act(CD_ACT_RELU);
    d.has_residual = 1;
    dnnl_conv_case(6, d, 3, "wino");
    const cd_layout l = cd_dnnl_blocked_layout();
    float *w = tk_rbuf((size_t)64 * 64 * 9);
    cd_dnnl_op *op = NULL;
    CHECK_EQ(cd_dnnl_conv_create_wino(&d, l, l, 3, w, NULL, &op), 0);
    const size_t one = cd_dnnl_op_weight_bytes(op);
    char impl1[64];
    snprintf(impl1, sizeof impl1, "%s", cd_dnnl_op_impl(op, 1));
    if (strcmp(impl1, cd_dnnl_op_impl(op, 3)) != 0) CHECK(cd_dnnl_op_weight_bytes(op) > one); // a second set
    fprintf(stderr, "64@56: batch 1 %s, batch 3 %s\n", impl1, cd_dnnl_op_impl(op, 3));
    cd_dnnl_op_free(op);
    free(w);
}

// The choice's timings on disk (winograd-cache.c, v2): n figures per record;
// a record of another length is not this one's.
CD_TEST(winograd_cache_keeps_its_figures) {
    char dir[] = "/tmp/cd-wino-cache-XXXXXX";
    char *saved = use_cache_home(dir);
    const uint64_t put[5] = {5, 4, 3, UINT64_MAX, 1};
    uint64_t got[5] = {0}, three[3];
    CHECK_EQ(cd_wino_cache_get("k1", got, 5), 0);
    cd_wino_cache_put("k1", put, 5);
    cd_wino_cache_put("k11", put, 3);
    CHECK_EQ(cd_wino_cache_get("k1", got, 5), 1);
    CHECK(memcmp(got, put, sizeof put) == 0);
    CHECK_EQ(cd_wino_cache_get("k1", three, 3), 0);
    CHECK_EQ(cd_wino_cache_get("k11", three, 3), 1);
    CHECK_EQ(three[2], 3);
    restore_cache_home(saved, dir);
}
