// What is particular to the CPU backend: the reference-only mode and its
// blocked layout. Every operator family of every backend against the
// reference kernels is the conformance table, tests/unit/test-backend-ops.c.

#include "backends/devices.h"
#include "backends/cpu/dnnl.h"
#include "core/errors.h"
#include "runtime/runtime.h"
#include "kernels/cpu/ref.h"
#include "tests/unit/backend-run.h"
#include "tests/unit/check.h"

#include <stdlib.h>

static cd_backend_t cpu_with(const cd_backend_opts *opts) {
    cd_backend_t be;
    CHECK_EQ(cd_backend_create("cpu", opts, &be, NULL, 0), 0);
    CHECK_STREQ(cd_backend_name(be), "cpu");
    return be;
}

static cd_backend_t cpu(void) { return cpu_with(NULL); }

// The switch is the backend's own, given at create: another CPU backend of
// the same process keeps the fast kernels.
CD_TEST(backend_ref_only_mode_keeps_nchw) {
    cd_backend_t be = cpu_with(&(cd_backend_opts){.kernels_ref = true});
    cd_backend_t fast = cpu();
    CHECK_EQ(cd_backend_blocked_layout(fast), cd_dnnl_blocked_layout());
    cd_backend_free(fast);
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = CD_BOP_CONV2D;
    d.max_batch = 1;
    d.nsrc = 1;
    cd_conv_desc c = cd_conv_square(16, 8, 8, 16, 3, 1, 1);
    d.u.conv = c;
    int64_t s[4] = {1, 16, 8, 8};
    d.src[0] = d.dst = cd_test_tdesc(4, s);
    d.src[0].layout = d.dst.layout = CD_LAYOUT_NCHW16C;
    CHECK(!cd_backend_supports_op(be, &d));
    CHECK_EQ(cd_backend_blocked_layout(be), CD_LAYOUT_NCHW);
    d.src[0].layout = d.dst.layout = CD_LAYOUT_NCHW;
    CHECK(cd_backend_supports_op(be, &d));
    float w[16 * 16 * 9] = {0};
    d.w = w;
    cd_op_state *st;
    CHECK_EQ(cd_backend_op_init(be, &d, &st), 0);
    CHECK_STREQ(cd_backend_op_kernel(be, st), "ref");
    cd_backend_op_state_free(be, st);
    cd_backend_t other;
    char err[128];
    CHECK_EQ(cd_backend_create("tpu", NULL, &other, err, sizeof err), CD_EUNSUPPORTED);
    CHECK(strstr(err, "tpu") != NULL);
    cd_backend_free(be);
}

// The CPU backend's blocked layout is oneDNN's choice for this CPU, and the
// names of reference kernels are recognised.
CD_TEST(backend_cpu_blocked_layout_is_the_cpu_choice) {
    cd_backend_t be = cpu();
    CHECK_EQ(cd_backend_blocked_layout(be), cd_dnnl_blocked_layout());
    CHECK(cd_backend_blocked_layout(be) != CD_LAYOUT_NCHW);
    CHECK(cd_backend_kernel_is_reference("ref"));
    CHECK(cd_backend_kernel_is_reference("dnnl:ref:any"));
    CHECK(!cd_backend_kernel_is_reference("dnnl:jit:avx2"));
    CHECK(!cd_backend_kernel_is_reference("sparse:csr:avx2:plane"));
    CHECK(!cd_backend_kernel_is_reference(NULL));
    cd_backend_free(be);
}
