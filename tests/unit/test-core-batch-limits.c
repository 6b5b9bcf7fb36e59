// core/limits.h: the two batch checks and their one bound (CD_MAX_BATCH at
// load, the model's max_batch per request), with their stable codes.

#include "tests/unit/check.h"

#include "core/errors.h"
#include "core/limits.h"

#include <string.h>

CD_TEST(core_max_batch_check_bounds_and_code) {
    char err[128];
    CHECK_EQ(cd_max_batch_check(1, err, sizeof err), 0);
    CHECK_EQ(cd_max_batch_check(CD_MAX_BATCH, err, sizeof err), 0);
    CHECK_EQ(cd_max_batch_check(0, err, sizeof err), CD_EPARAMS);
    CHECK_EQ(cd_max_batch_check(-1, err, sizeof err), CD_EPARAMS);
    CHECK_EQ(cd_max_batch_check(CD_MAX_BATCH + 1, err, sizeof err), CD_EPARAMS);
    CHECK(strstr(err, "out of range (1..4096)") != NULL);
    CHECK_EQ(cd_max_batch_check(INT64_MAX, NULL, 0), CD_EPARAMS);
}

CD_TEST(core_batch_check_against_the_model_max_batch) {
    char err[128];
    for (int i = 0; i < 200; i++) {
        int max_batch = cd_test_randi(1, CD_MAX_BATCH);
        int batch = cd_test_randi(-2, CD_MAX_BATCH + 2);
        int want = batch >= 1 && batch <= max_batch ? 0 : CD_ESHAPE;
        CHECK_EQ(cd_batch_check(batch, max_batch, "input 'x'", err, sizeof err), want);
        if (want) CHECK(strstr(err, "input 'x': batch") == err);
    }
    CHECK_EQ(cd_batch_check(4, 4, "x", err, sizeof err), 0);
    CHECK_EQ(cd_batch_check(5, 4, "x", err, sizeof err), CD_ESHAPE);
    CHECK_EQ(cd_batch_check(0, 4, "x", err, sizeof err), CD_ESHAPE);
}
