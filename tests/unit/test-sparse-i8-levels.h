#ifndef CD_TESTS_UNIT_TEST_SPARSE_I8_LEVELS_H
#define CD_TESTS_UNIT_TEST_SPARSE_I8_LEVELS_H

// One test per int8 ISA level of the sparse int8 kernels, NAME__<level>
// (avx512vnni, avx512f, avx2, scalar): each runs the body at its level, or is
// a named skip where this run lacks it (the CPU, or CONVD_MAX_ISA).
//
//   I8_LEVEL_TEST(sparse_i8_x) { ... isa ... }

#include "kernels/cpu/ref.h"
#include "sparse/i8-spmm.h"
#include "sparse/sparse-conv-i8.h"
#include "tests/unit/test-sparse-util.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static inline void i8_level_require(cd_sparse_isa isa) {
    if (!cd_i8_isa(isa)) sp_require_isa(isa);
}

#define I8_LEVEL_TEST(name)                                      \
    static void name##_at(cd_sparse_isa isa);                    \
    CD_TEST(name##__avx512vnni) {                                \
        i8_level_require(CD_SPARSE_ISA_AVX512VNNI);              \
        name##_at(CD_SPARSE_ISA_AVX512VNNI);                     \
    }                                                            \
    CD_TEST(name##__avx512f) {                                   \
        i8_level_require(CD_SPARSE_ISA_AVX512F);                 \
        name##_at(CD_SPARSE_ISA_AVX512F);                        \
    }                                                            \
    CD_TEST(name##__avx2) {                                      \
        i8_level_require(CD_SPARSE_ISA_AVX2);                    \
        name##_at(CD_SPARSE_ISA_AVX2);                           \
    }                                                            \
    CD_TEST(name##__scalar) { name##_at(CD_SPARSE_ISA_SCALAR); } \
    static void name##_at(cd_sparse_isa isa)

// Four pages whose first and last are inaccessible (munmap(map, 4 * page)):
// the rows tests place a tensor of total <= 2 pages against either,
// (at_end) ending at the last or starting after the first, filled with
// random bytes; returns it.
static inline uint8_t *i8_guarded_pages(size_t *page) {
    *page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *map = mmap(NULL, 4 * *page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    CHECK(mprotect(map, *page, PROT_NONE) == 0);
    CHECK(mprotect(map + 3 * *page, *page, PROT_NONE) == 0);
    return map;
}

static inline uint8_t *i8_tensor_against_page(uint8_t *map, size_t page, size_t total, int at_end) {
    uint8_t *x = at_end ? map + 3 * page - total : map + page;
    for (size_t i = 0; i < total; i++) x[i] = (uint8_t)cd_test_randi(0, 255);
    return x;
}

// One whole int8 conv d (u8 or s8 input, weights `sparsity` zero) at level
// isa whose input tensor ends (at_end) or starts against an inaccessible
// page: its accumulators must equal the reference's. For the plane-row
// tests of each stride (test-sparse-i8-s1.c, -s2.c).
static inline void i8_conv_against_guard_pages(cd_sparse_isa isa, const cd_conv_desc *dp, int at_end, double sparsity,
                                               int it) {
    const cd_conv_desc d = *dp;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t xn = (size_t)d.n * d.c * d.h * d.w, wn = (size_t)d.k * (d.c / d.groups) * d.r * d.s,
                 yn = (size_t)d.n * d.k * d.oh * d.ow;
    const size_t span = (xn + page - 1) / page * page + 2 * page;
    uint8_t *map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    CHECK(mprotect(map, page, PROT_NONE) == 0);
    CHECK(mprotect(map + span - page, page, PROT_NONE) == 0);
    uint8_t *x = at_end ? map + span - page - xn : map + page;
    cd_conv_quant q = {.in_scale = 0.03f, .in_signed = cd_test_randi(0, 1), .src_int = 1};
    q.in_zp = q.in_signed ? cd_test_randi(-20, 20) : cd_test_randi(0, 255);
    int8_t *wq = malloc(wn);
    float *wsc = malloc(sizeof(float) * d.k);
    int32_t *xq = malloc(sizeof(int32_t) * xn), *acc = malloc(sizeof(int32_t) * yn),
            *ref = malloc(sizeof(int32_t) * yn);
    CHECK(wq && wsc && xq && acc && ref);
    for (size_t i = 0; i < wn; i++) wq[i] = cd_test_randf(0.0f, 1.0f) < sparsity ? 0 : (int8_t)cd_test_randi(-128, 127);
    for (int k = 0; k < d.k; k++) wsc[k] = 0.01f;
    q.w_scale = wsc;
    for (size_t i = 0; i < xn; i++) {
        x[i] = (uint8_t)cd_test_randi(0, 255);
        xq[i] = q.in_signed ? (int8_t)x[i] : x[i];
    }
    cd_sparse_conv_options opt = {.isa = isa};
    cd_sparse_conv_i8 *h = NULL;
    CHECK_EQ(cd_sparse_conv_i8_create(&d, wq, NULL, &q, &opt, &h), 0);
    void *ws = aligned_alloc(64, cd_sparse_conv_i8_workspace_size(h, d.n));
    CHECK(ws != NULL);
    cd_ref_conv2d_i8_acc(&d, xq, q.in_zp, wq, ref);
    CHECK_EQ(cd_sparse_conv_i8_run_acc(h, x, acc, d.n, ws), 0);
    for (size_t i = 0; i < yn; i++)
        if (acc[i] != ref[i])
            CD_CHECK_FAIL_("%s case %d (%s): acc[%zu] = %d, want %d (c%d k%d g%d %dx%d r%d s%d stride %d,%d "
                           "pad%d,%d,%d,%d batch %d)",
                           cd_sparse_isa_name(isa), it, at_end ? "page after" : "page before", i, acc[i], ref[i], d.c,
                           d.k, d.groups, d.h, d.w, d.r, d.s, d.stride_h, d.stride_w, d.pad_t, d.pad_l, d.pad_b,
                           d.pad_r, d.n);
    cd_sparse_conv_i8_free(h);
    free(ws);
    free(wq);
    free(wsc);
    free(xq);
    free(acc);
    free(ref);
    munmap(map, span);
}

#endif // CD_TESTS_UNIT_TEST_SPARSE_I8_LEVELS_H
