// Every micro-kernel of sparse/spmm-ukernels.inc (one test row each) against a
// plain loop over the same packed stream: pixel counts below, at and above
// the tile (m_lt_mr, m_eq_mr, m_gt_mr, odd multiples), empty blocks, the
// residual and the clamp.

#include "sparse/spmm-ukernel.h"
#include "tests/unit/test-sparse-util.h"

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
static void reference(size_t mc, size_t nblk, int nr, const float *in, const stream *s,
                      const float *res, size_t stride, float *out, float lo, float hi) {
    const float *w = s->w;
    const int32_t *off = s->off;
    for (size_t b = 0; b < nblk; b++) {
        const float *bias = w;
        const float *vals = w + nr;
        for (int i = 0; i < nr; i++)
            for (size_t m = 0; m < mc; m++) {
                double a = bias[i];
                for (uint32_t j = 0; j < s->nnz[b]; j++)
                    a += (double)vals[j * nr + i] * in[off[j] + m];
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
    if (!cd_sparse_isa_supported(uk->isa)) {
        printf("  %s: CPU lacks %s, not run\n", uk->name, cd_sparse_isa_name(uk->isa));
        return;
    }
    const int mr = uk->mr, nr = uk->nr;
    const size_t mcs[] = {1, (size_t)mr - 1, (size_t)mr, (size_t)mr + 1, 2 * (size_t)mr + 3,
                          5 * (size_t)mr + (size_t)cd_test_randi(1, mr - 1), 7};
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
            uk->fn(mc, nblk, in, s.w, s.off, s.nnz, inplace ? got : with_res ? res : NULL, stride, got,
                   stride, &p);
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

#define CD_SPMM_UKERNEL(name, isa_, mr_, nr_)                                  \
    CD_TEST(sparse_ukernel_##name) {                                           \
        const cd_spmm_ukernel_info info = {#name, name, isa_, mr_, nr_};       \
        check_ukernel(&info);                                                  \
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
        if (cd_sparse_isa_supported(all[i].isa))
            CHECK(cd_spmm_ukernel_find(all[i].isa, all[i].nr) != NULL);
    }
    CHECK(cd_sparse_isa_supported(CD_SPARSE_ISA_SCALAR));
    CHECK(cd_spmm_ukernel_find(CD_SPARSE_ISA_SCALAR, 3) == NULL);
    const cd_sparse_isa best = cd_sparse_isa_best();
    CHECK(cd_sparse_isa_supported(best));
    for (int i = best + 1; i <= CD_SPARSE_ISA_AVX512F; i++)
        CHECK(!cd_sparse_isa_supported((cd_sparse_isa)i) || getenv("CONVD_SPARSE_ISA"));
    CHECK_STREQ(cd_sparse_isa_name(CD_SPARSE_ISA_AVX2), "avx2");
}
