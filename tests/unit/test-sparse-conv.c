// Sparse conv/FC (sparse/sparse-conv.h) against cd_ref_conv2d on the same
// pruned weights: every ISA this CPU runs (scalar, AVX2, AVX-512) x every
// format (CSR, BSR4, BSR8, auto), randomised shapes, sparsities 0/50/90/99/100%.

#include "core/errors.h"
#include "tests/unit/test-sparse-util.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

static const double k_sparsities[] = {0.0, 0.5, 0.9, 0.99, 1.0};

// run_case below runs each case at every ISA this run has (sp_isas); these
// make each level it could not run a named skip instead of a silent gap.
CD_TEST(sparse_conv_cases_ran_at__avx512f) {
    sp_require_isa(CD_SPARSE_ISA_AVX512F);
    cd_sparse_isa isas[3];
    CHECK_EQ(isas[sp_isas(isas) - 1], CD_SPARSE_ISA_AVX512F);
}
CD_TEST(sparse_conv_cases_ran_at__avx2) {
    sp_require_isa(CD_SPARSE_ISA_AVX2);
    cd_sparse_isa isas[3];
    CHECK(sp_isas(isas) >= 2 && isas[1] == CD_SPARSE_ISA_AVX2);
}
static const cd_sparse_format k_formats[] = {CD_SPARSE_FMT_CSR, CD_SPARSE_FMT_BSR4, CD_SPARSE_FMT_BSR8,
                                             CD_SPARSE_FMT_AUTO};

// Reference multiply-adds of a layer, to keep each case within the budget.
static double ref_cost(const cd_conv_desc *d, int batch) {
    return (double)batch * d->k * d->oh * d->ow * (d->c / d->groups) * d->r * d->s;
}

// What the last layer run_case created chose.
static cd_sparse_conv_info g_last_info;

// Runs one layer at one sparsity through every ISA and format. block_h > 0
// prunes blocks of block_h filters instead of single weights. Returns the
// mode string of the last layer created (for mode coverage checks).
static const char *run_case(cd_conv_desc d, int batch, double sparsity, int block_h) {
    d.n = batch;
    cd_conv_out_dims(&d);
    CHECK(d.oh >= 1 && d.ow >= 1);
    const int cpg = d.c / d.groups;
    sp_layer L;
    sp_layer_make(&L, &d, batch, sparsity, block_h);
    const float *w = L.w, *bias = L.bias, *x = L.x, *res = L.res, *ref = L.ref;
    float *y = L.y;
    const size_t yn = L.yn;

    static char mode[16];
    cd_sparse_isa isas[3];
    const int nisa = sp_isas(isas);
    for (int i = 0; i < nisa; i++)
        for (size_t f = 0; f < 2 * sizeof k_formats / sizeof k_formats[0]; f++) {
            // Second round: input channels forced into small column blocks
            // (later blocks accumulate onto the output of earlier ones).
            const int split = f >= sizeof k_formats / sizeof k_formats[0];
            cd_sparse_conv_options opt = {.format = k_formats[f % (sizeof k_formats / sizeof k_formats[0])],
                                          .isa = isas[i],
                                          .cin_block = split ? cd_test_randi(1, cpg > 1 ? cpg - 1 : 1) : 0};
            cd_sparse_conv *h = NULL;
            CHECK_EQ(cd_sparse_conv_create(&d, w, bias, &opt, &h), 0);
            cd_sparse_conv_info info;
            cd_sparse_conv_get_info(h, &info);
            snprintf(mode, sizeof mode, "%s", info.mode);
            g_last_info = info;
            // The residual in dst itself half the time (the plan's residual in place).
            const int in_place = d.has_residual && cd_test_randi(0, 1);
            for (size_t j = 0; j < yn; j++) y[j] = in_place ? res[j] : NAN; // every output must be written
            CHECK_EQ(cd_sparse_conv_run(h, x, d.has_residual ? (in_place ? y : res) : NULL, y, batch), 0);
            char what[256];
            snprintf(what, sizeof what,
                     "%s/%s/%s cb%d n%d c%d k%d g%d %dx%d k%dx%d s%d,%d p%d,%d,%d,%d d%d,%d act%d res%d%s sp%.2f",
                     cd_sparse_isa_name(isas[i]), cd_sparse_format_name(info.format), info.mode, info.cin_blocks, batch,
                     d.c, d.k, d.groups, d.h, d.w, d.r, d.s, d.stride_h, d.stride_w, d.pad_t, d.pad_l, d.pad_b, d.pad_r,
                     d.dil_h, d.dil_w, d.act.kind, d.has_residual, in_place ? " in place" : "", sparsity);
            sp_check_close(y, ref, yn, what);
            cd_sparse_conv_free(h);
        }
    sp_layer_free(&L);
    return mode;
}

// A random conv: kernel size ksz (0: one of 1/3/5/7), stride (0: 1 or 2),
// groups 1, a random divisor, or depthwise (gmode 0/1/2). Odd sizes allowed.
// *batch is chosen too (1..9) and the shape shrunk until the reference is cheap.
static cd_conv_desc random_desc(int ksz, int stride, int gmode, int *batch) {
    static const int ks[] = {1, 3, 5, 7};
    for (;;) {
        cd_conv_desc d = {0};
        const int k = ksz ? ksz : ks[cd_test_randi(0, 3)];
        d.r = k;
        d.s = cd_test_randi(0, 3) == 0 ? ks[cd_test_randi(0, 3)] : k; // sometimes non-square
        d.stride_h = stride ? stride : cd_test_randi(1, 2);
        d.stride_w = stride ? stride : cd_test_randi(1, 2);
        d.dil_h = d.r > 1 ? cd_test_randi(1, 2) : 1;
        d.dil_w = d.s > 1 ? cd_test_randi(1, 2) : 1;
        d.pad_t = cd_test_randi(0, d.r / 2 + 1);
        d.pad_b = cd_test_randi(0, d.r / 2);
        d.pad_l = cd_test_randi(0, d.s / 2 + 1);
        d.pad_r = cd_test_randi(0, d.s / 2);
        d.groups = 1;
        int cpg = cd_test_randi(1, 24), kpg = cd_test_randi(1, 24);
        if (gmode == 1) d.groups = cd_test_randi(2, 4);
        if (gmode == 2) {
            d.groups = cd_test_randi(3, 24);
            cpg = 1;
            kpg = cd_test_randi(1, 2); // depthwise, sometimes with a multiplier
        }
        d.c = cpg * d.groups;
        d.k = kpg * d.groups;
        d.h = cd_test_randi(1, 23);
        d.w = cd_test_randi(1, 23);
        d.act = sp_random_act();
        d.has_residual = cd_test_randi(0, 1);
        *batch = cd_test_randi(1, 9);
        cd_conv_out_dims(&d);
        if (d.oh < 1 || d.ow < 1) continue;
        while (ref_cost(&d, *batch) > 1.5e6 && *batch > 1) (*batch)--;
        if (ref_cost(&d, *batch) > 1.5e6) continue;
        return d;
    }
}

static void run_random(int iters, int ksz, int stride, int gmode) {
    for (int it = 0; it < iters; it++) {
        int batch;
        cd_conv_desc d = random_desc(ksz, stride, gmode, &batch);
        for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++)
            run_case(d, batch, k_sparsities[s], 0);
    }
}

CD_TEST(sparse_conv_1x1_stride1_direct) {
    for (int it = 0; it < 6; it++) {
        int batch;
        cd_conv_desc d = random_desc(1, 1, 0, &batch);
        d.r = d.s = 1;
        d.pad_t = d.pad_l = d.pad_b = d.pad_r = 0;
        d.dil_h = d.dil_w = 1;
        for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++) {
            const char *mode = run_case(d, batch, k_sparsities[s], 0);
            // The last ISA run is the best: planes a whole number of its
            // vectors run in place, others on an aligned copy.
            cd_sparse_isa isas[3];
            const int vec = isas[sp_isas(isas) - 1] == CD_SPARSE_ISA_AVX512F ? 16 : 8;
            if (d.h * d.w > 1) CHECK_STREQ(mode, (d.h * d.w) % vec == 0 ? "direct" : "plane");
        }
    }
}

// H*W a multiple of 16 (aligned planes): the kernels read the caller's planes.
CD_TEST(sparse_conv_1x1_aligned_planes_direct) {
    cd_conv_desc d = cd_conv_square(13, 6, 8, 21, 1, 1, 0);
    d.has_residual = 1;
    d.act.kind = CD_ACT_RELU;
    for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++)
        CHECK_STREQ(run_case(d, cd_test_randi(1, 9), k_sparsities[s], 0), "direct");
}

// 14x14 and 7x7 (H*W not a multiple of 16): an aligned copy of the planes,
// with the input channels in column blocks so that the pixels run in
// balanced passes (196 = 80 + 64 + 52, odd_width tails), residual and clamp.
CD_TEST(sparse_conv_1x1_unaligned_planes_balanced_passes) {
    const int hws[] = {14, 7, 13};
    for (int i = 0; i < 3; i++) {
        cd_conv_desc d = cd_conv_square(cd_test_randi(20, 40), hws[i], hws[i], cd_test_randi(5, 17), 1, 1, 0);
        d.has_residual = 1;
        d.act = (cd_activation){CD_ACT_CLIP, -0.5f, 0.75f};
        for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++)
            CHECK_STREQ(run_case(d, cd_test_randi(1, 3), k_sparsities[s], 0), "plane");
    }
}

// Prepared input in several bands of output rows: k x k planes beyond one
// band's byte budget (n_gt_nr: bands of many rows); a small map in one band
// that two threads share by output channels (each prepares it); and a single
// output row likewise.
CD_TEST(sparse_conv_bands) {
    omp_set_num_threads(2);
    cd_conv_desc d = cd_conv_square(96, 30, 150, 5, 3, 1, 1);
    d.has_residual = 1;
    d.act.kind = CD_ACT_RELU;
    run_case(d, 1, 0.9, 0);
    CHECK(g_last_info.bands >= 3);
    d.c = 7;
    d.h = 9;
    d.w = 11;
    d.k = 13;
    run_case(d, 1, 0.5, 0);
    CHECK_EQ(g_last_info.bands, 1); // two block chunks, one per thread
    d.h = 1;                        // one output row: one band, two block chunks
    for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++) run_case(d, 1, k_sparsities[s], 0);
    CHECK_EQ(g_last_info.bands, 1);
    d.h = 5; // stride 2, dilation 2: phase planes in bands
    d.w = 17;
    d.stride_h = d.stride_w = 2;
    d.dil_h = 2;
    run_case(d, 2, 0.9, 0);
}

// The workspace holds one band slot per thread of create: running with more
// threads than at create uses only that many; with fewer, fewer slots.
CD_TEST(sparse_conv_threads_differ_from_create) {
    for (int t = 1; t <= 2; t++) {
        omp_set_num_threads(t);
        int batch;
        cd_conv_desc d = random_desc(3, 0, cd_test_randi(0, 1), &batch);
        d.n = batch;
        cd_conv_out_dims(&d);
        sp_layer L;
        sp_layer_make(&L, &d, batch, 0.9, 0);
        cd_sparse_conv *h = NULL;
        CHECK_EQ(cd_sparse_conv_create(&d, L.w, L.bias, NULL, &h), 0);
        const size_t ws_n = cd_sparse_conv_workspace_size(h, batch);
        void *ws = ws_n ? aligned_alloc(64, ws_n) : NULL; // exact (a multiple of 64): ASan sees a slot too many
        omp_set_num_threads(3 - t);
        for (size_t j = 0; j < L.yn; j++) L.y[j] = NAN;
        CHECK_EQ(cd_sparse_conv_run_ws(h, L.x, d.has_residual ? L.res : NULL, L.y, batch, ws), 0);
        sp_check_close(L.y, L.ref, L.yn, "threads differ from create");
        cd_sparse_conv_free(h);
        free(ws);
        sp_layer_free(&L);
    }
}

CD_TEST(sparse_conv_1x1_stride2_subsample) { run_random(6, 1, 2, 0); }

CD_TEST(sparse_conv_1x1_padded) { run_random(4, 1, 1, 0); }

CD_TEST(sparse_conv_kxk_stride1) { run_random(6, 0, 1, 0); }

CD_TEST(sparse_conv_kxk_stride2) { run_random(6, 0, 2, 0); }

CD_TEST(sparse_conv_3x3_mixed) { run_random(6, 3, 0, 0); }

CD_TEST(sparse_conv_grouped) { run_random(5, 0, 0, 1); }

CD_TEST(sparse_conv_depthwise) { run_random(5, 3, 0, 2); }

CD_TEST(sparse_conv_depthwise_5x5_7x7) {
    run_random(2, 5, 0, 2);
    run_random(2, 7, 0, 2);
}

// FC: 1x1 kernel on 1x1 input, the batch is the pixel axis; batch 1..9 and
// batches past one fold of 16 images.
CD_TEST(sparse_conv_fc_batch_as_pixels) {
    const int batches[] = {1, 2, 5, 9, 16, 17, 35};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        cd_conv_desc d = cd_conv_square(cd_test_randi(1, 70), 1, 1, cd_test_randi(1, 40), 1, 1, 0);
        d.act = sp_random_act();
        d.has_residual = cd_test_randi(0, 1);
        for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++)
            CHECK_STREQ(run_case(d, batches[b], k_sparsities[s], 0), "fc");
    }
}

// All-zero weights: the output is act(bias + residual) everywhere.
CD_TEST(sparse_conv_all_zero_layer) {
    for (int it = 0; it < 4; it++) {
        int batch;
        cd_conv_desc d = random_desc(0, 0, it % 2, &batch);
        d.has_residual = 1;
        run_case(d, batch, 1.0, 0);
    }
}

// Every activation kind, with and without residual, on a direct and a padded
// 3x3 layer.
CD_TEST(sparse_conv_activations_residual) {
    for (int a = CD_ACT_NONE; a <= CD_ACT_LEAKYRELU; a++)
        for (int r = 0; r < 2; r++)
            for (int k = 1; k <= 3; k += 2) {
                cd_conv_desc d = cd_conv_square(11, 9, 13, 10, k, 1, k / 2);
                d.has_residual = r;
                d.act.kind = (cd_act)a;
                d.act.alpha = a == CD_ACT_CLIP ? -0.25f : 0.2f;
                d.act.beta = a == CD_ACT_CLIP ? 0.5f : 0.5f;
                run_case(d, 2, 0.7, 0);
            }
}

// Output-channel block pruning (4x1, 8x1); K not a multiple of the block so
// BSR leaves tail rows.
CD_TEST(sparse_conv_bsr_blocks_with_tail_rows) {
    const int bhs[] = {4, 8};
    for (int b = 0; b < 2; b++)
        for (int it = 0; it < 3; it++) {
            int batch;
            cd_conv_desc d = random_desc(it == 0 ? 1 : 3, 0, 0, &batch);
            d.k = bhs[b] * cd_test_randi(1, 3) + cd_test_randi(1, bhs[b] - 1);
            d.c = cd_test_randi(1, 16);
            d.groups = 1;
            if (ref_cost(&d, 1) > 1.5e6) continue;
            while (ref_cost(&d, batch) > 1.5e6 && batch > 1) batch--;
            for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++)
                run_case(d, batch, k_sparsities[s], bhs[b]);
        }
}

// Whether the last layer of run_case takes the im2col layout by default:
// CSR, denser than 15% (sparse-conv.c: IM2COL_MIN_DENSITY), and not on the
// aligned-shift path, which goes first.
static int im2col_dense(const cd_conv_desc *d) {
    const double total = (double)d->k * (d->c / d->groups) * d->r * d->s;
    return g_last_info.format == CD_SPARSE_FMT_CSR && !g_last_info.shift && (double)g_last_info.nnz / total > 0.15;
}

// Wide outputs run one kernel call per row; narrow ones over padded rows
// ("junk" columns discarded); on AVX-512 and AVX2, outputs of at most 64
// pixels on im2col planes. All must be exercised (run_case reports the last
// ISA's, the best this machine runs under CONVD_MAX_ISA).
CD_TEST(sparse_conv_rows_and_junk_modes) {
    cd_conv_desc wide = cd_conv_square(5, 6, 47, 9, 3, 1, 1);
    wide.has_residual = 1;
    wide.act.kind = CD_ACT_RELU;
    cd_conv_desc narrow = wide, small = wide;
    narrow.h = 9;
    narrow.w = 9;
    small.h = 7;
    small.w = 7;
    const int vector_rows = cd_sparse_isa_best() != CD_SPARSE_ISA_SCALAR; // im2col planes
    for (size_t s = 0; s < sizeof k_sparsities / sizeof k_sparsities[0]; s++) {
        CHECK_STREQ(run_case(wide, 3, k_sparsities[s], 0), "rows");
        CHECK_STREQ(run_case(narrow, 3, k_sparsities[s], 0), "junk");
        // (im2col only where denser than 15%: at 90% its planes cost more.)
        const char *mode = run_case(small, 3, k_sparsities[s], 0);
        CHECK_STREQ(mode, vector_rows && im2col_dense(&small) ? "im2col" : "junk");
    }
}

// im2col planes (small outputs; AVX-512 and AVX2, each this machine runs
// under CONVD_MAX_ISA; never on the portable code) on fresh random layers of
// random_desc with at most 64 output pixels (kernels 1/3/5/7, non-square
// too, strides, pads, dilation, groups incl. depthwise, batch 1..9,
// residual and activations),
// at 0/50/90/99/100%: taken by default below 85% (run_case, against the
// reference), and forced on against the same layer laid out as shifted
// planes (im2col off), at each of those ISAs.
CD_TEST(sparse_conv_im2col_small_outputs) {
    static const cd_sparse_isa vector_isas[] = {CD_SPARSE_ISA_AVX512F, CD_SPARSE_ISA_AVX2};
    if (cd_sparse_isa_best() == CD_SPARSE_ISA_SCALAR) sp_require_isa(CD_SPARSE_ISA_AVX2);
    for (int it = 0; it < 40; it++) {
        int batch;
        cd_conv_desc d;
        do d = random_desc(0, 0, cd_test_randi(0, 2), &batch);
        while (d.r * d.s < 2 || d.ow > 16 || d.oh * d.ow > 64);
        d.n = batch;
        const double sp = k_sparsities[cd_test_randi(0, 4)];
        const char *mode = run_case(d, batch, sp, 0);
        CHECK((strcmp(mode, "im2col") == 0) == im2col_dense(&d));
        // The same weights with im2col off: equal up to summation order.
        sp_layer L;
        sp_layer_make(&L, &d, batch, sp, 0);
        float *y0 = malloc(L.yn * sizeof *y0);
        CHECK(y0);
        for (int v = 0; v < 2; v++) {
            if (!cd_sparse_isa_supported(vector_isas[v])) continue;
            for (int off = 0; off < 2; off++) {
                cd_sparse_conv_options opt = {
                    .format = CD_SPARSE_FMT_CSR, .isa = vector_isas[v], .shift = -1, .im2col = off ? -1 : 1};
                cd_sparse_conv *h = NULL;
                CHECK_EQ(cd_sparse_conv_create(&d, L.w, L.bias, &opt, &h), 0);
                cd_sparse_conv_info info;
                cd_sparse_conv_get_info(h, &info);
                CHECK((strcmp(info.mode, "im2col") == 0) == !off);
                CHECK_EQ(info.isa, vector_isas[v]);
                float *out = off ? L.y : y0;
                for (size_t j = 0; j < L.yn; j++) out[j] = NAN; // every output must be written
                CHECK_EQ(cd_sparse_conv_run(h, L.x, d.has_residual ? L.res : NULL, out, batch), 0);
                sp_check_close(out, L.ref, L.yn, off ? "im2col off" : "im2col forced");
                cd_sparse_conv_free(h);
            }
            char what[64];
            snprintf(what, sizeof what, "%s im2col on vs off", cd_sparse_isa_name(vector_isas[v]));
            sp_check_close(y0, L.y, L.yn, what);
        }
        free(y0);
        sp_layer_free(&L);
    }
}

// Planes larger than one pixel chunk (512) and more channels than threads x 4:
// the work split over pixels and output channels.
CD_TEST(sparse_conv_large_plane_chunks) {
    cd_conv_desc d = cd_conv_square(6, 37, 45, 37, 1, 1, 0);
    d.has_residual = 1;
    d.act = (cd_activation){CD_ACT_CLIP, 0.0f, 6.0f};
    run_case(d, 2, 0.9, 0);
    run_case(d, 1, 0.5, 4);
    d.r = d.s = 3;
    d.pad_t = d.pad_l = d.pad_b = d.pad_r = 1;
    run_case(d, 1, 0.9, 0);
}

CD_TEST(sparse_conv_bad_params) {
    cd_conv_desc d = cd_conv_square(4, 5, 5, 4, 3, 1, 0);
    float w[4 * 4 * 9] = {0}, x[4 * 25] = {0}, y[4 * 9];
    cd_sparse_conv *h = (cd_sparse_conv *)1;
    cd_conv_desc bad = d;
    bad.groups = 3; // does not divide c
    CHECK_EQ(cd_sparse_conv_create(&bad, w, NULL, NULL, &h), CD_EPARAMS);
    CHECK(h == NULL);
    bad = d;
    bad.stride_h = 0;
    CHECK_EQ(cd_sparse_conv_create(&bad, w, NULL, NULL, &h), CD_EPARAMS);
    bad = d;
    bad.pad_l = -1;
    CHECK_EQ(cd_sparse_conv_create(&bad, w, NULL, NULL, &h), CD_EPARAMS);
    bad = d;
    bad.h = 1; // 3x3 kernel, no padding: no output row
    CHECK_EQ(cd_sparse_conv_create(&bad, w, NULL, NULL, &h), CD_EPARAMS);
    CHECK_EQ(cd_sparse_conv_create(&d, NULL, NULL, NULL, &h), CD_EPARAMS);
    cd_sparse_conv_options opt = {.format = (cd_sparse_format)9};
    CHECK_EQ(cd_sparse_conv_create(&d, w, NULL, &opt, &h), CD_EPARAMS);

    CHECK_EQ(cd_sparse_conv_create(&d, w, NULL, NULL, &h), 0);
    CHECK_EQ(cd_sparse_conv_run(h, x, NULL, y, 0), CD_EPARAMS);
    CHECK_EQ(cd_sparse_conv_run(h, NULL, NULL, y, 1), CD_EPARAMS);
    CHECK_EQ(cd_sparse_conv_run_ws(h, x, NULL, y, 1, NULL), CD_EPARAMS); // needs a workspace
    cd_sparse_conv_free(h);

    d.has_residual = 1; // residual required
    CHECK_EQ(cd_sparse_conv_create(&d, w, NULL, NULL, &h), 0);
    CHECK_EQ(cd_sparse_conv_run(h, x, NULL, y, 1), CD_EPARAMS);
    cd_sparse_conv_free(h);
    cd_sparse_conv_free(NULL);
}

CD_TEST(sparse_conv_info_and_availability) {
    CHECK(cd_sparse_conv_available(CD_SPARSE_FMT_CSR, CD_SPARSE_ISA_SCALAR));
    CHECK(cd_sparse_conv_available(CD_SPARSE_FMT_BSR8, CD_SPARSE_ISA_AUTO));
    for (int i = CD_SPARSE_ISA_SCALAR; i <= CD_SPARSE_ISA_AVX512F; i++)
        CHECK_EQ(cd_sparse_conv_available(CD_SPARSE_FMT_BSR4, (cd_sparse_isa)i),
                 cd_sparse_isa_supported((cd_sparse_isa)i));
    // 8x1 blocks, fully filled: auto picks BSR8 and reports fill 1.
    cd_conv_desc d = cd_conv_square(8, 4, 4, 16, 1, 1, 0);
    float w[16 * 8];
    sp_fill_random(w, 16 * 8);
    for (int k = 0; k < 16; k++)
        for (int c = 0; c < 8; c++)
            if ((c + k / 8) % 2) w[k * 8 + c] = 0.0f;
    cd_sparse_conv *h;
    CHECK_EQ(cd_sparse_conv_create(&d, w, NULL, NULL, &h), 0);
    cd_sparse_conv_info info;
    CHECK_EQ(cd_sparse_conv_get_info(h, &info), 0);
    CHECK_EQ(info.format, CD_SPARSE_FMT_BSR8);
    CHECK_EQ(info.nnz, 64);
    CHECK_EQ(info.entries, 8);
    CHECK(info.fill == 1.0);
    CHECK(info.tail_kernel == NULL);
    CHECK_EQ(cd_sparse_conv_workspace_size(h, 3), 0); // direct: runs on its input
    cd_sparse_conv_free(h);
    // Unstructured: auto picks CSR.
    sp_fill_random(w, 16 * 8);
    for (int i = 0; i < 16 * 8; i++)
        if (i % 7) w[i] = 0.0f;
    CHECK_EQ(cd_sparse_conv_create(&d, w, NULL, NULL, &h), 0);
    CHECK_EQ(cd_sparse_conv_get_info(h, &info), 0);
    CHECK_EQ(info.format, CD_SPARSE_FMT_CSR);
    cd_sparse_conv_free(h);
}

// Wide layers: CSR splits the input channels into column blocks on its own
// (input rows of one pass kept within L1); results stay exact.
CD_TEST(sparse_conv_cin_blocks_auto_split) {
    cd_conv_desc d = cd_conv_square(300, 5, 7, 9, 1, 1, 0);
    d.has_residual = 1;
    d.act.kind = CD_ACT_RELU;
    run_case(d, 2, 0.9, 0);
    float *w = calloc((size_t)9 * 300, sizeof *w);
    w[5] = 1.0f;
    cd_sparse_conv *h;
    cd_sparse_conv_options opt = {.format = CD_SPARSE_FMT_CSR};
    CHECK_EQ(cd_sparse_conv_create(&d, w, NULL, &opt, &h), 0);
    cd_sparse_conv_info info;
    cd_sparse_conv_get_info(h, &info);
    CHECK(info.cin_blocks >= 2);
    CHECK_EQ(info.nnz, 1);
    cd_sparse_conv_free(h);
    free(w);
    cd_conv_desc k3 = d;
    k3.c = 120;
    k3.r = k3.s = 3;
    k3.pad_t = k3.pad_l = k3.pad_b = k3.pad_r = 1;
    run_case(k3, 1, 0.9, 0);
}
