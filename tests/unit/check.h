#ifndef CD_TESTS_CHECK_H
#define CD_TESTS_CHECK_H

// A tiny test harness. Define a test with
//
//     CD_TEST(proto_tensor_negative_dim) { ... CHECK_EQ(rc, CD_ESHAPE); }
//
// Tests register themselves at start-up (no central list to edit). The runner
// (tests/unit/main.c) runs each test in a forked child with a timeout; a
// failed CHECK prints the expression and both values at file:line and ends
// that child with status 1. A test that cannot run here says why with
// CD_SKIP("reason", ...): the runner counts it as skipped, not passed, and
// names the reason (tests/test_c_units.py turns it into pytest.skip).

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*cd_test_fn)(void);

// Adds a test to the global list; called from CD_TEST's constructor.
void cd_test_register(const char *name, cd_test_fn fn, const char *file);

#define CD_TEST(name)                                                   \
    static void cd_test_fn_##name(void);                                \
    __attribute__((constructor)) static void cd_test_reg_##name(void) { \
        cd_test_register(#name, cd_test_fn_##name, __FILE__);           \
    }                                                                   \
    static void cd_test_fn_##name(void)

#define CD_CHECK_FAIL_(...)                             \
    do {                                                \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                   \
        fprintf(stderr, "\n");                          \
        fflush(stderr);                                 \
        exit(1);                                        \
    } while (0)

// Exit status of a skipped test's child (automake's convention).
#define CD_TEST_SKIP_STATUS 77

// Ends the running test as skipped; the formatted reason reaches the runner.
void cd_test_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
#define CD_SKIP(...) cd_test_skip(__VA_ARGS__)

#define CHECK(cond)                                             \
    do {                                                        \
        if (!(cond)) CD_CHECK_FAIL_("CHECK(%s) failed", #cond); \
    } while (0)

#define CHECK_EQ(a, b)                                                                         \
    do {                                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                                    \
        if (a_ != b_) CD_CHECK_FAIL_("CHECK_EQ(%s, %s) failed: %lld != %lld", #a, #b, a_, b_); \
    } while (0)

#define CHECK_NE(a, b)                                                                  \
    do {                                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);                             \
        if (a_ == b_) CD_CHECK_FAIL_("CHECK_NE(%s, %s) failed: both %lld", #a, #b, a_); \
    } while (0)

#define CHECK_STREQ(a, b)                                                                              \
    do {                                                                                               \
        const char *a_ = (a), *b_ = (b);                                                               \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                         \
            CD_CHECK_FAIL_("CHECK_STREQ(%s, %s) failed: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", \
                           b_ ? b_ : "(null)");                                                        \
    } while (0)

// Relative error check for float buffers: |a-b| <= tol * max(1, |b|).
#define CHECK_CLOSE_F32(a, b, n, tol)                                       \
    do {                                                                    \
        const float *a_ = (a), *b_ = (b);                                   \
        for (size_t i_ = 0; i_ < (size_t)(n); i_++) {                       \
            double d_ = fabs((double)a_[i_] - (double)b_[i_]);              \
            double s_ = fabs((double)b_[i_]);                               \
            if (!(d_ <= (tol) * (s_ > 1.0 ? s_ : 1.0)))                     \
                CD_CHECK_FAIL_("CHECK_CLOSE_F32(%s, %s) failed at [%zu]: "  \
                               "%.9g vs %.9g",                              \
                               #a, #b, i_, (double)a_[i_], (double)b_[i_]); \
        }                                                                   \
    } while (0)

// Deterministic per-test random numbers (seed from CD_TEST_SEED or the name).
uint64_t cd_test_rand(void);
float cd_test_randf(float lo, float hi);
int cd_test_randi(int lo, int hi); // inclusive

#endif // CD_TESTS_CHECK_H
