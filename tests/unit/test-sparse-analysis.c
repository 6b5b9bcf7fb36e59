// Weight analysis (sparse/analysis.h) on weights built with a known structure.

#include "core/errors.h"
#include "sparse/analysis.h"
#include "sparse/bsr.h"
#include "sparse/csr.h"
#include "tests/unit/test-sparse-util.h"

static float *dense_weights(size_t n) {
    float *w = malloc(n * sizeof *w);
    CHECK(w);
    sp_fill_random(w, n);
    return w;
}

CD_TEST(sparse_analysis_zero_filters_and_inputs) {
    const int k = 12, c = 10, r = 3, s = 3;
    float *w = dense_weights((size_t)k * c * r * s);
    const int zf[] = {0, 5, 11}; // zero filters
    const int zc[] = {2, 3, 9};  // zero input channels
    for (int i = 0; i < 3; i++) memset(w + (size_t)zf[i] * c * r * s, 0, sizeof(float) * c * r * s);
    for (int o = 0; o < k; o++)
        for (int i = 0; i < 3; i++) memset(w + ((size_t)o * c + zc[i]) * r * s, 0, sizeof(float) * r * s);
    // One more zero connection (filter 1, channel 0) that is neither.
    memset(w + ((size_t)1 * c + 0) * r * s, 0, sizeof(float) * r * s);
    cd_sparse_analysis a;
    CHECK_EQ(cd_sparse_analyze(w, k, c, r, s, 1, &a), 0);
    CHECK_EQ(a.zero_out_channels, 3);
    CHECK_EQ(a.zero_in_channels, 3);
    CHECK_EQ(a.connections, (size_t)k * c);
    // 3 whole filters (30) + 9 other filters x 3 channels (27) + 1 = 58.
    CHECK_EQ(a.zero_connections, 58);
    CHECK_EQ(a.nnz, (size_t)(k * c - 58) * r * s);
    unsigned char zo[12], zi[10];
    CHECK_EQ(cd_sparse_zero_masks(w, k, c, r, s, 1, zo, zi), 0);
    for (int o = 0; o < k; o++) CHECK_EQ(zo[o], o == 0 || o == 5 || o == 11);
    for (int i = 0; i < c; i++) CHECK_EQ(zi[i], i == 2 || i == 3 || i == 9);
    char buf[256];
    CHECK(cd_sparse_analysis_format(&a, buf, sizeof buf) > 0);
    CHECK(strstr(buf, "zero-filters 3/12") != NULL);
    free(w);
}

// Grouped conv: an input channel is zero when no filter of its group reads it.
CD_TEST(sparse_analysis_grouped_zero_inputs) {
    const int groups = 3, kpg = 4, cpg = 2;
    float *w = dense_weights((size_t)groups * kpg * cpg);
    for (int o = 4; o < 8; o++) w[o * cpg + 1] = 0.0f; // group 1, its channel 1 → C index 3
    cd_sparse_analysis a;
    CHECK_EQ(cd_sparse_analyze(w, groups * kpg, cpg, 1, 1, groups, &a), 0);
    CHECK_EQ(a.zero_in_channels, 1);
    unsigned char zi[6];
    CHECK_EQ(cd_sparse_zero_masks(w, groups * kpg, cpg, 1, 1, groups, NULL, zi), 0);
    for (int i = 0; i < 6; i++) CHECK_EQ(zi[i], i == 3);
    free(w);
}

// 4x1 blocks at ~80% block sparsity: 4x1 fill 1, the best shape (8x1 is not full).
CD_TEST(sparse_analysis_4x1_blocks) {
    const int k = 32, c = 16, r = 3, s = 3;
    const size_t cols = (size_t)c * r * s;
    float *w = dense_weights(k * cols);
    sp_prune_blocks(w, k, k, cols, 4, 0.8);
    // Make sure 8x1 is not accidentally full: break pairs of 4-blocks.
    for (size_t j = 0; j < cols; j++) {
        int any0 = 0, any1 = 0;
        for (int i = 0; i < 4; i++) any0 |= w[i * cols + j] != 0.0f, any1 |= w[(4 + i) * cols + j] != 0.0f;
        if (any0 && any1)
            for (int i = 4; i < 8; i++) w[i * cols + j] = 0.0f;
    }
    cd_sparse_analysis a;
    CHECK_EQ(cd_sparse_analyze(w, k, c, r, s, 1, &a), 0);
    CHECK(a.blocks[1].bh == 4 && a.blocks[1].bw == 1);
    CHECK(a.blocks[1].fill == 1.0);
    CHECK(a.blocks[2].fill < 0.75); // 8x1 half empty
    CHECK_EQ(a.best_block, 1);
    CHECK(a.density < 0.3);
    // BSR4 packing stores exactly the nonzeros; BSR8 stores fill.
    int32_t *tap = malloc(cols * sizeof *tap);
    for (size_t j = 0; j < cols; j++) tap[j] = (int32_t)j;
    cd_sparse_pack p;
    CHECK_EQ(cd_bsr_pack(w, NULL, 1, k, (int)cols, tap, 4, &p), 0);
    CHECK(cd_bsr_fill(&p) == 1.0);
    CHECK_EQ(p.entries * 4, a.nnz);
    CHECK_EQ((uintptr_t)p.mem % 64, 0);
    cd_sparse_pack_free(&p);
    CHECK_EQ(cd_bsr_pack(w, NULL, 1, k, (int)cols, tap, 8, &p), 0);
    CHECK(cd_bsr_fill(&p) < 0.75);
    cd_sparse_pack_free(&p);
    CHECK_EQ(cd_bsr_pack(w, NULL, 1, k, (int)cols, tap, 3, &p), CD_EPARAMS);
    free(tap);
    free(w);
}

// 1x4 blocks along columns (4 consecutive input positions of one filter).
CD_TEST(sparse_analysis_1x4_blocks) {
    const int k = 8, c = 32;
    float *w = dense_weights((size_t)k * c);
    for (int o = 0; o < k; o++)
        for (int j = 0; j < c; j += 4)
            if ((o + j / 4) % 3)
                for (int i = 0; i < 4; i++) w[o * c + j + i] = 0.0f;
    cd_sparse_analysis a;
    CHECK_EQ(cd_sparse_analyze(w, k, c, 1, 1, 1, &a), 0);
    CHECK(a.blocks[0].fill == 1.0);
    CHECK_EQ(a.best_block, 0);
    free(w);
}

// 2:4 pruning conforms to 2:4 and 4:8; unstructured 50% does not conform.
CD_TEST(sparse_analysis_nm_2_4) {
    const int k = 16, c = 8, r = 3, s = 3;
    const size_t cols = (size_t)c * r * s; // 72: a multiple of 4 and 8
    float *w = dense_weights(k * cols);
    for (int o = 0; o < k; o++)
        for (size_t j = 0; j < cols; j += 4) {
            const int keep0 = cd_test_randi(0, 3), keep1 = (keep0 + cd_test_randi(1, 3)) % 4;
            for (int i = 0; i < 4; i++)
                if (i != keep0 && i != keep1) w[o * cols + j + i] = 0.0f;
        }
    cd_sparse_analysis a;
    CHECK_EQ(cd_sparse_analyze(w, k, c, r, s, 1, &a), 0);
    CHECK(a.is_2_4 && a.is_4_8);
    CHECK(a.nm_2_4 == 1.0);
    CHECK(fabs(a.density - 0.5) < 1e-9);
    // Put three nonzeros in one group of 4: 2:4 breaks, 4:8 may still hold.
    w[0] = w[1] = w[2] = 1.0f;
    w[3] = 0.0f;
    CHECK_EQ(cd_sparse_analyze(w, k, c, r, s, 1, &a), 0);
    CHECK(!a.is_2_4);
    CHECK(a.nm_2_4 < 1.0 && a.nm_2_4 > 0.9);
    free(w);
}

CD_TEST(sparse_analysis_dense_and_all_zero) {
    const int k = 8, c = 4;
    float *w = dense_weights((size_t)k * c * 9);
    cd_sparse_analysis a;
    CHECK_EQ(cd_sparse_analyze(w, k, c, 3, 3, 1, &a), 0);
    CHECK(a.density == 1.0);
    CHECK_EQ(a.zero_out_channels, 0);
    CHECK(!a.is_2_4);
    CHECK_EQ(a.best_block, 3); // everything full: the largest block (4x4)
    memset(w, 0, sizeof(float) * k * c * 9);
    CHECK_EQ(cd_sparse_analyze(w, k, c, 3, 3, 1, &a), 0);
    CHECK_EQ(a.nnz, 0);
    CHECK_EQ(a.zero_out_channels, k);
    CHECK_EQ(a.zero_in_channels, c);
    CHECK_EQ(a.best_block, -1);
    CHECK(a.is_2_4);
    CHECK_EQ(cd_sparse_analyze(w, 7, c, 3, 3, 2, &a), CD_EPARAMS); // 7 filters, 2 groups
    CHECK_EQ(cd_sparse_analyze(NULL, k, c, 3, 3, 1, &a), CD_EPARAMS);
    free(w);
}

// CSR pack of a known matrix: counts, offsets and the value stream.
CD_TEST(sparse_pack_csr_layout) {
    const float w[3 * 4] = {0, 2, 0, 3, /**/ 0, 0, 0, 0, /**/ 5, 0, 0, 0};
    const float bias[3] = {1, 2, 3};
    const int32_t tap[4] = {0, 10, 20, 30};
    cd_sparse_pack p;
    CHECK_EQ(cd_csr_pack(w, bias, 1, 3, 4, tap, &p), 0);
    CHECK_EQ(p.nnz, 3);
    CHECK_EQ(p.entries, 3);
    CHECK_EQ(p.nnz_map[0], 2);
    CHECK_EQ(p.nnz_map[1], 0);
    CHECK_EQ(p.nnz_map[2], 1);
    CHECK_EQ(p.offsets[0], 10);
    CHECK_EQ(p.offsets[1], 30);
    CHECK_EQ(p.offsets[2], 0);
    const float want[] = {1, 2, 3, 2, 3, 5};
    for (int i = 0; i < 6; i++) CHECK(p.values[i] == want[i]);
    CHECK_EQ(p.vfirst[2], 4);
    CHECK_EQ(p.first[3], 3);
    CHECK_EQ(p.max_off, 30);
    cd_sparse_pack_free(&p);
    CHECK(p.mem == NULL);
}
