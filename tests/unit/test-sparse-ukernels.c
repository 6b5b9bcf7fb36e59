// Every micro-kernel of sparse/spmm-ukernels.inc (one test row each) against a
// plain loop over the same packed stream: pixel counts below, at and above
// the tile (m_lt_mr, m_eq_mr, m_gt_mr, odd multiples), empty blocks, the
// residual and the clamp.

#include "runtime/runtime.h"
#include "sparse/spmm-ukernel.h"
#include "tests/unit/test-sparse-util.h"

#include <sys/wait.h>
#include <unistd.h>

// The stream of nblk blocks of nr channels: bias, then per entry nr weights.
// Entries per block random (some 0); offsets inside [0, span).
typedef struct {
    float *w;
    int32_t *off;
    uint32_t *nnz;
} stream;

static void make_stream(stream *s, int nr, size_t nblk, int span, int max_entries) {
    s->nnz = malloc(nblk * sizeof *s->nnz);
    size_t total = 0;
    for (size_t b = 0; b < nblk; b++) {
        s->nnz[b] = b == 1 ? 0 : (uint32_t)cd_test_randi(0, max_entries); // block 1 empty
        total += s->nnz[b];
    }
    s->off = malloc((total + 1) * sizeof *s->off);
    s->w = malloc((nblk + total) * nr * sizeof *s->w);
    CHECK(s->nnz && s->off && s->w);
    for (size_t e = 0; e < total; e++) s->off[e] = cd_test_randi(0, span - 1);
    sp_fill_random(s->w, (nblk + total) * nr);
}

static void free_stream(stream *s) {
    free(s->w);
    free(s->off);
    free(s->nnz);
}

// out[(b*nr+i)*stride + m] by the contract of spmm-ukernel.h, in double.
static void reference(size_t mc, size_t nblk, int nr, const float *in, const stream *s, const float *res, size_t stride,
                      float *out, float lo, float hi) {
    const float *w = s->w;
    const int32_t *off = s->off;
    for (size_t b = 0; b < nblk; b++) {
        const float *bias = w;
        const float *vals = w + nr;
        for (int i = 0; i < nr; i++)
            for (size_t m = 0; m < mc; m++) {
                double a = bias[i];
                for (uint32_t j = 0; j < s->nnz[b]; j++) a += (double)vals[j * nr + i] * in[off[j] + m];
                const size_t o = (b * nr + i) * stride + m;
                if (res) a += res[o];
                a = a < lo ? lo : a;
                out[o] = (float)(a > hi ? hi : a);
            }
        w += nr * (1 + s->nnz[b]);
        off += s->nnz[b];
    }
}

static void check_ukernel(const cd_spmm_ukernel_info *uk) {
    sp_require_isa(uk->isa);
    const int mr = uk->mr, nr = uk->nr;
    const size_t mcs[] = {1,
                          (size_t)mr - 1,
                          (size_t)mr,
                          (size_t)mr + 1,
                          2 * (size_t)mr + 3,
                          5 * (size_t)mr + (size_t)cd_test_randi(1, mr - 1),
                          7};
    for (size_t t = 0; t < sizeof mcs / sizeof mcs[0]; t++)
        for (int with_res = 0; with_res < 3; with_res++) {
            const size_t mc = mcs[t] ? mcs[t] : 1;
            const size_t nblk = (size_t)cd_test_randi(2, 5);
            const int span = 97;
            const size_t stride = mc + (size_t)cd_test_randi(0, 5);
            const size_t nout = nblk * nr * stride;
            // Input sized exactly to what the kernel may read: span - 1 + mc.
            float *in = malloc((span - 1 + mc) * sizeof *in);
            float *res = malloc(nout * sizeof *res);
            float *got = malloc(nout * sizeof *got), *want = malloc(nout * sizeof *want);
            CHECK(in && res && got && want);
            sp_fill_random(in, span - 1 + mc);
            sp_fill_random(res, nout);
            stream s;
            make_stream(&s, nr, nblk, span, 40);
            // with_res 2 (inplace): accumulate onto out itself with no clamp,
            // as a later column block does; empty blocks with a zero bias
            // may leave their rows untouched.
            const int inplace = with_res == 2;
            if (inplace) {
                size_t at = 0;
                for (size_t b = 0; b < nblk; b++) {
                    if (s.nnz[b] == 0)
                        for (int i = 0; i < nr; i++) s.w[at + i] = 0.0f;
                    at += (size_t)nr * (1 + s.nnz[b]);
                }
            }
            const cd_spmm_params p = {with_res == 1 ? -0.8f : -INFINITY, with_res == 1 ? 0.9f : INFINITY};
            for (size_t i = 0; i < nout; i++) got[i] = want[i] = inplace ? res[i] : 12345.0f; // gaps stay untouched
            reference(mc, nblk, nr, in, &s, with_res ? res : NULL, stride, want, p.min, p.max);
            uk->fn(mc, nblk, in, s.w, s.off, s.nnz, inplace ? got : with_res ? res : NULL, stride, got, stride, &p);
            char what[128];
            snprintf(what, sizeof what, "%s mc %zu nblk %zu res %d", uk->name, mc, nblk, with_res);
            sp_check_close(got, want, nout, what);
            free_stream(&s);
            free(in);
            free(res);
            free(got);
            free(want);
        }
}

#define CD_SPMM_UKERNEL(name, isa_, mr_, nr_)                            \
    CD_TEST(sparse_ukernel_##name) {                                     \
        const cd_spmm_ukernel_info info = {#name, name, isa_, mr_, nr_}; \
        check_ukernel(&info);                                            \
    }
#include "sparse/spmm-ukernels.inc"
#undef CD_SPMM_UKERNEL

// The registry lists every row once and finds the best kernel per ISA and NR.
CD_TEST(sparse_ukernel_registry_and_cpuid) {
    size_t n = 0;
    const cd_spmm_ukernel_info *all = cd_spmm_ukernels(&n);
    CHECK_EQ(n, 9);
    for (size_t i = 0; i < n; i++) {
        CHECK(all[i].fn != NULL);
        CHECK(all[i].mr >= 8 && all[i].nr >= 1);
        if (cd_sparse_isa_supported(all[i].isa)) CHECK(cd_spmm_ukernel_find(all[i].isa, all[i].nr) != NULL);
    }
    CHECK(cd_sparse_isa_supported(CD_SPARSE_ISA_SCALAR));
    CHECK(cd_spmm_ukernel_find(CD_SPARSE_ISA_SCALAR, 3) == NULL);
    const cd_sparse_isa best = cd_sparse_isa_best();
    CHECK(cd_sparse_isa_supported(best));
    for (int i = best + 1; i <= CD_SPARSE_ISA_AVX512VNNI; i++)
        CHECK(!cd_sparse_isa_supported((cd_sparse_isa)i) || cd_sparse_isa_capped());
    CHECK_STREQ(cd_sparse_isa_name(CD_SPARSE_ISA_AVX2), "avx2");
    CHECK_STREQ(cd_sparse_isa_name(CD_SPARSE_ISA_AVX512VNNI), "avx512vnni");
    // The f32 code has no VNNI kernels: a VNNI machine finds the AVX512F ones.
    if (cd_sparse_isa_supported(CD_SPARSE_ISA_AVX512VNNI)) {
        CHECK(cd_spmm_ukernel_find(CD_SPARSE_ISA_AVX512VNNI, 1) == cd_spmm_ukernel_find(CD_SPARSE_ISA_AVX512F, 1));
        CHECK(cd_spmm_ukernel_find(CD_SPARSE_ISA_AVX512VNNI, 4) == cd_spmm_ukernel_find(CD_SPARSE_ISA_AVX512F, 4));
    }
}

// What this CPU runs, by CPUID alone (no cap).
static int cpu_runs(int isa) {
    __builtin_cpu_init();
    if (isa == CD_SPARSE_ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == CD_SPARSE_ISA_AVX512F)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("fma");
    if (isa == CD_SPARSE_ISA_AVX512VNNI) return cpu_runs(CD_SPARSE_ISA_AVX512F) && __builtin_cpu_supports("avx512vnni");
    return isa == CD_SPARSE_ISA_SCALAR;
}

// In a fresh child (the cap is parsed once, on first use): CONVD_MAX_ISA
// set to `value` (NULL: unset) and read into the runtime's options before
// anything sparse runs; best, supported,
// capped, the kernel lookup and availability must all obey cap `want`.
// Returns what the child wrote to stderr.
static char *cap_case(const char *value, int want) {
    int fd[2];
    CHECK(pipe(fd) == 0);
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        if (value)
            setenv("CONVD_MAX_ISA", value, 1);
        else
            unsetenv("CONVD_MAX_ISA");
        cd_runtime_options o;
        cd_runtime_options_from_env(&o);
        cd_runtime_configure(&o);
        int top = CD_SPARSE_ISA_SCALAR, best = CD_SPARSE_ISA_SCALAR;
        for (int i = CD_SPARSE_ISA_SCALAR; i <= CD_SPARSE_ISA_AVX512VNNI; i++) {
            if (cpu_runs(i)) top = i;
            if (cpu_runs(i) && i <= want) best = i;
        }
        for (int i = CD_SPARSE_ISA_SCALAR; i <= CD_SPARSE_ISA_AVX512VNNI; i++) {
            const int ok = cpu_runs(i) && i <= want;
            if (cd_sparse_isa_supported((cd_sparse_isa)i) != ok) _exit(10 + i);
            if ((cd_spmm_ukernel_find((cd_sparse_isa)i, 1) != NULL) != ok) _exit(20 + i);
            if (cd_sparse_conv_available(CD_SPARSE_FMT_BSR4, (cd_sparse_isa)i) != ok) _exit(30 + i);
        }
        if (cd_sparse_isa_best() != (cd_sparse_isa)best) _exit(2);
        if (cd_sparse_isa_capped() != (best != top)) _exit(3);
        cd_sparse_isa_best(); // logged once only
        fflush(stderr);
        _exit(0);
    }
    close(fd[1]);
    static char buf[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
    buf[n] = 0;
    close(fd[0]);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        CD_CHECK_FAIL_("CONVD_MAX_ISA=%s: child status %d (stderr: %s)", value ? value : "(unset)",
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf);
    return buf;
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) n++;
    return n;
}

// CONVD_MAX_ISA caps every ISA query, in any case, with "avx512",
// "avx512f" and "avx512_core" the same level (AVX-512 without VNNI: on a VNNI
// CPU the best level is then AVX512F), "avx512vnni" and "avx512_vnni" the
// VNNI level; unset or unknown (reported once, then ignored) caps nothing.
CD_TEST(sparse_isa_cap_env_obeyed_by_best_and_supported) {
    static const struct {
        const char *value;
        int cap;
    } c[] = {
        {NULL, CD_SPARSE_ISA_AVX512VNNI},
        {"", CD_SPARSE_ISA_AVX512VNNI},
        {"avx512vnni", CD_SPARSE_ISA_AVX512VNNI},
        {"AVX512_VNNI", CD_SPARSE_ISA_AVX512VNNI},
        {"avx512", CD_SPARSE_ISA_AVX512F},
        {"AVX512F", CD_SPARSE_ISA_AVX512F},
        {"avx512_core", CD_SPARSE_ISA_AVX512F},
        {"avx2", CD_SPARSE_ISA_AVX2},
        {"Avx2", CD_SPARSE_ISA_AVX2},
        {"scalar", CD_SPARSE_ISA_SCALAR},
        {"SCALAR", CD_SPARSE_ISA_SCALAR},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *err = cap_case(c[i].value, c[i].cap);
        CHECK_EQ(count_of(err, "sparse kernels use"), 1);
        CHECK_EQ(count_of(err, "capped by CONVD_MAX_ISA"),
                 c[i].cap < CD_SPARSE_ISA_AVX512VNNI && cpu_runs(c[i].cap + 1));
        CHECK(strstr(err, "ignoring") == NULL);
    }
    const char *err = cap_case("sse9", CD_SPARSE_ISA_AVX512VNNI);
    CHECK_EQ(count_of(err, "ignoring CONVD_MAX_ISA=sse9"), 1);
    CHECK(strstr(err, "capped") == NULL);
}
