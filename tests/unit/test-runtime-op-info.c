// The operator listing (runtime.h cd_op_info) and the loader's refusals that
// come from it: an unknown operator (the list of supported ones, whole or
// said to be too long for the caller's buffer) and an operator, attribute or
// input outside the model's opset.

#include "core/errors.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/onnx-builder.h"

#include <string.h>
#include <unistd.h>

CD_TEST(runtime_op_info_every_op_has_its_families) {
    int n = cd_op_info_count();
    CHECK(n >= 60);
    for (int i = 0; i < n; i++) {
        cd_op_info e;
        CHECK_EQ(cd_op_info_get(i, &e), 0);
        if (strcmp(e.runs_as, "?") == 0) CD_CHECK_FAIL_("%s: no families in op-info.c's table", e.op);
        // Every family of every operator runs on the CPU.
        if (strcmp(e.backends, "any") != 0 && strcmp(e.backends, "none") != 0 && strncmp(e.backends, "cpu", 3) != 0)
            CD_CHECK_FAIL_("%s: runs as %s on %s only", e.op, e.runs_as, e.backends);
    }
    cd_op_info e;
    CHECK_EQ(cd_op_info_get(n, &e), CD_EPARAMS);
}

// A one-node model (op on x) at opset; returns its path.
static const char *one_node(mb *b, const char *op, int opset) {
    int64_t xs[4] = {1, 3, 4, 4};
    mb_input(b, "x", 4, xs);
    mb_node(b, op, "x", NULL, NULL, "y");
    mb_output(b, "y");
    return mb_write(b, opset);
}

static int load(const char *path, char *err, size_t len) {
    cd_model *m = NULL;
    cd_model_opts opts = {.max_batch = 1};
    int rc = cd_model_load(path, &opts, &m, err, len);
    if (m) cd_model_free(m);
    return rc;
}

CD_TEST(runtime_unknown_op_lists_every_supported_op_or_says_it_does_not_fit) {
    mb b = {0};
    const char *path = one_node(&b, "Hardmax", 13);
    char big[CD_LOAD_ERR_MAX], small[200];
    CHECK_EQ(load(path, big, sizeof big), CD_EUNSUPPORTED);
    // Whole: the last default-domain operator of the table and the closing parenthesis.
    int last = -1;
    for (int i = 0; i < cd_op_info_count(); i++) {
        cd_op_info e;
        CHECK_EQ(cd_op_info_get(i, &e), 0);
        if (!*e.domain) last = i;
        if (!*e.domain && !strstr(big, e.op)) CD_CHECK_FAIL_("%s not listed: %s", e.op, big);
    }
    cd_op_info e;
    CHECK_EQ(cd_op_info_get(last, &e), 0);
    char tail[64];
    snprintf(tail, sizeof tail, ", %s)", e.op);
    CHECK(strstr(big, tail) != NULL);
    CHECK(strlen(big) > 512);
    // Too small a buffer: a complete sentence that points at the listing.
    CHECK_EQ(load(path, small, sizeof small), CD_EUNSUPPORTED);
    CHECK(strstr(small, "convctl ops") != NULL);
    CHECK(strstr(small, "Hardmax") != NULL);
    unlink(path);
    mb_free(&b);
}

CD_TEST(runtime_op_newer_than_the_opset_is_refused_naming_it) {
    mb b = {0};
    const char *path = one_node(&b, "Mish", 17);
    char err[512];
    CHECK_EQ(load(path, err, sizeof err), CD_EUNSUPPORTED);
    CHECK(strstr(err, "opset 18") != NULL);
    CHECK(strstr(err, "opset 17") != NULL);
    unlink(path);
    mb_free(&b);
    mb b2 = {0};
    path = one_node(&b2, "Mish", 18);
    CHECK_EQ(load(path, err, sizeof err), 0);
    unlink(path);
    mb_free(&b2);
}

CD_TEST(runtime_opset_outside_11_to_21_is_refused_naming_it) {
    static const int bad[] = {10, 22};
    for (int i = 0; i < 2; i++) {
        mb b = {0};
        const char *path = one_node(&b, "Relu", bad[i]);
        char err[512], want[16];
        CHECK_EQ(load(path, err, sizeof err), CD_EUNSUPPORTED);
        snprintf(want, sizeof want, "opset %d", bad[i]);
        CHECK(strstr(err, want) != NULL);
        unlink(path);
        mb_free(&b);
    }
}
