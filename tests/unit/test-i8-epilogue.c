// The int8 epilogue at its extremes: the division-free rounding
// (sparse/i8-rint-quot.h) against rintf(y / s), and each ISA level's vector
// epilogue (sparse/i8-spmm.h) against the portable one (the reference's
// formulas) bit for bit: s32 accumulators near +-2^31, scales 1e-6..1e3 and
// powers of two (exact rounding ties), every zero point of u8 and s8, mid
// rounding, float and integer residuals, runs of 1..64 pixels; and the
// residual block's and the plain ReLU's own loops at their corners.

#include "sparse/i8-rint-quot.h"
#include "sparse/i8-spmm.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint32_t bits_of(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static float from_bits(uint32_t b) {
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

// A scale: log-uniform in [1e-6, 1e3], or a power of two there (ties).
static float random_scale(void) {
    if (cd_test_randi(0, 3) == 0) return ldexpf(1.0f, cd_test_randi(-19, 9));
    return expf(cd_test_randf(logf(1e-6f), logf(1e3f)));
}

// y of one case: on a tie, a few ulps off one, an accumulator near
// +-2^31 times a multiplier, or anything.
static float random_y(float s) {
    const float t = (float)cd_test_randi(-600, 600) + 0.5f;
    switch (cd_test_randi(0, 3)) {
    case 0: return t * s;
    case 1: return from_bits(bits_of(t * s) + (uint32_t)cd_test_randi(-4, 4));
    case 2: {
        const int32_t acc =
            cd_test_randi(0, 1) ? INT32_MAX - cd_test_randi(0, 1000) : INT32_MIN + cd_test_randi(0, 1000);
        return fmaf((float)acc, random_scale() * random_scale(), 0.0f);
    }
    default: return cd_test_randf(-700.0f, 700.0f) * s;
    }
}

// Equal to rintf(y / s) wherever that is below 1023 in magnitude; beyond,
// the same sign and beyond 1023 too (what every 8-bit clamp makes equal).
static void check_quot(float y, float s) {
    const float want = rintf(y / s), got = cd_i8_rint_quot(y, s, 1.0f / s);
    if (fabsf(want) < 1023.0f || fabsf(got) < 1023.0f) {
        if (bits_of(want) != bits_of(got))
            CD_CHECK_FAIL_("rint(%a / %a) = %a, got %a", (double)y, (double)s, (double)want, (double)got);
    } else if ((want > 0.0f) != (got > 0.0f)) {
        CD_CHECK_FAIL_("rint(%a / %a) = %a, got %a (sign)", (double)y, (double)s, (double)want, (double)got);
    }
}

CD_TEST(i8_rint_quot_equals_the_division) {
    // The ends of the proof: +-1/2 (below a power of two), zeros of both
    // signs, the largest exact range, the smallest and largest scales.
    static const float ts[] = {0.5f, 1.5f, 2.5f, 1022.5f, 1023.5f, 511.5f, 0.25f, 0.0f};
    static const float ss[] = {1e-6f, 1e3f, 1.0f, 0x1p-20f, 0.1f, 3.0f};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        for (size_t j = 0; j < sizeof ss / sizeof ss[0]; j++)
            for (int u = -3; u <= 3; u++)
                for (int sign = -1; sign <= 1; sign += 2) {
                    const float y = (float)sign * ts[i] * ss[j];
                    check_quot(y == 0.0f ? y : from_bits(bits_of(y) + (uint32_t)u), ss[j]);
                }
    for (int it = 0; it < 2000000; it++) {
        const float s = random_scale();
        check_quot(random_y(s), s);
    }
}

// One random epilogue: extreme scales and zero points, any storage.
static cd_i8_epilogue random_epilogue(void) {
    cd_i8_epilogue e = {0};
    cd_conv_quant *q = &e.q;
    q->in_scale = 1.0f;
    if (cd_test_randi(0, 4)) {
        q->out_scale = random_scale();
        q->out_signed = cd_test_randi(0, 1);
        q->out_zp = q->out_signed ? cd_test_randi(-128, 127) : cd_test_randi(0, 255);
        q->dst_int = cd_test_randi(0, 3) != 0;
    }
    if (cd_test_randi(0, 2) == 0) {
        q->mid_scale = random_scale();
        q->mid_signed = cd_test_randi(0, 1);
        q->mid_zp = q->mid_signed ? cd_test_randi(-128, 127) : cd_test_randi(0, 255);
    }
    e.has_residual = cd_test_randi(0, 1);
    if (e.has_residual && cd_test_randi(0, 1)) {
        q->res_int = 1;
        q->res_scale = random_scale();
        q->res_signed = cd_test_randi(0, 1);
        q->res_zp = q->res_signed ? cd_test_randi(-128, 127) : cd_test_randi(0, 255);
    }
    static const cd_act kinds[] = {CD_ACT_NONE, CD_ACT_RELU, CD_ACT_RELU, CD_ACT_CLIP, CD_ACT_LEAKYRELU};
    e.act.kind = kinds[cd_test_randi(0, 4)];
    e.act.alpha = e.act.kind == CD_ACT_CLIP ? -0.5f : 0.1f;
    e.act.beta = 6.0f;
    e.qmin = cd_quant_qmin(q->out_signed);
    e.qmax = cd_quant_qmax(q->out_signed);
    return e;
}

#define ROWS 5
#define ROW_STRIDE 96

// An accumulator: near +-2^31, small (ties with power-of-two scales), or any.
static int32_t random_acc(void) {
    switch (cd_test_randi(0, 3)) {
    case 0: return cd_test_randi(0, 1) ? INT32_MAX - cd_test_randi(0, 100) : INT32_MIN + cd_test_randi(0, 100);
    case 1: return cd_test_randi(-300, 300);
    default: return (int32_t)(uint32_t)cd_test_rand();
    }
}

static void epilogue_extremes_at(cd_sparse_isa isa) {
    const cd_i8_isa_info *k = cd_i8_isa(isa);
    if (!k) CD_SKIP("%s: this CPU (or CONVD_MAX_ISA) does not run it", cd_sparse_isa_name(isa));
    int32_t acc[ROWS * 64];
    float mult[ROWS], bias[ROWS], res_f[ROWS * ROW_STRIDE];
    uint8_t res_b[ROWS * ROW_STRIDE];
    float out[ROWS * ROW_STRIDE], want[ROWS * ROW_STRIDE];
    for (int it = 0; it < 3000; it++) {
        const cd_i8_epilogue e = random_epilogue();
        const int nrows = cd_test_randi(1, ROWS);
        // Ties: y / s = acc / 2 (or 3 acc / 2) exactly, for the first rounding.
        const float first = e.q.mid_scale > 0.0f ? e.q.mid_scale : e.q.out_scale;
        const int ties = first > 0.0f && cd_test_randi(0, 2) == 0;
        for (int r = 0; r < nrows; r++) {
            mult[r] = ties ? first * (cd_test_randi(0, 1) ? 0.5f : 1.5f) : random_scale() * random_scale();
            bias[r] = ties || cd_test_randi(0, 1) ? 0.0f : cd_test_randf(-2.0f, 2.0f) * mult[r] * 1000.0f;
        }
        for (int i = 0; i < ROWS * 64; i++) acc[i] = ties ? cd_test_randi(-700, 700) : random_acc();
        for (int i = 0; i < ROWS * ROW_STRIDE; i++) {
            res_f[i] = cd_test_randf(-3.0f, 3.0f);
            res_b[i] = (uint8_t)cd_test_randi(0, 255);
        }
        // Runs: consecutive stretches of the tile with gaps, to shifted outputs.
        cd_i8_run runs[64];
        int nruns = 0;
        for (uint32_t m = (uint32_t)cd_test_randi(0, 3); m < 64 && nruns < 64;) {
            const uint32_t len = (uint32_t)cd_test_randi(1, (int)(64 - m));
            runs[nruns++] = (cd_i8_run){m, len, (size_t)m + 20, (size_t)m + 20};
            m += len + (uint32_t)cd_test_randi(0, 9);
        }
        const void *res = !e.has_residual ? NULL : e.q.res_int ? (const void *)res_b : (const void *)res_f;
        memset(out, 0x5a, sizeof out);
        memset(want, 0x5a, sizeof want);
        cd_i8_epilogue_rows__scalar(&e, mult, bias, nrows, acc, 64, runs, nruns, res, want, ROW_STRIDE);
        k->epilogue(&e, mult, bias, nrows, acc, 64, runs, nruns, res, out, ROW_STRIDE);
        const size_t bytes = e.q.dst_int ? ROWS * ROW_STRIDE : sizeof out;
        if (memcmp(out, want, bytes) != 0) {
            size_t i = 0;
            while (((uint8_t *)out)[i] == ((uint8_t *)want)[i]) i++;
            CD_CHECK_FAIL_("%s case %d: byte %zu differs (dst_int %d out_scale %a mid %a res_int %d act %d)",
                           cd_sparse_isa_name(isa), it, i, e.q.dst_int, (double)e.q.out_scale, (double)e.q.mid_scale,
                           e.q.res_int, (int)e.act.kind);
        }
    }
}

// The two layers with their own loops, their every corner: a residual
// block (mid grid, u8 or s8 skip, ReLU, u8 or s8 out) and a plain conv's
// ReLU to u8 or s8, in rows of one to ROWS (rows go in pairs), runs of
// whole 4-vector blocks and tails, scales from 1e-6 to 1e3 (quotients far
// beyond 2^31 as well as ties), every zero point.
static void epilogue_fast_paths_at(cd_sparse_isa isa) {
    const cd_i8_isa_info *k = cd_i8_isa(isa);
    if (!k) CD_SKIP("%s: this CPU (or CONVD_MAX_ISA) does not run it", cd_sparse_isa_name(isa));
    int32_t acc[ROWS * 64];
    float mult[ROWS], bias[ROWS];
    uint8_t res[ROWS * ROW_STRIDE], out[ROWS * ROW_STRIDE], want[ROWS * ROW_STRIDE];
    for (int it = 0; it < 4000; it++) {
        cd_i8_epilogue e = {0};
        cd_conv_quant *q = &e.q;
        q->in_scale = 1.0f;
        q->dst_int = 1;
        q->out_scale = random_scale();
        q->out_signed = cd_test_randi(0, 3) == 0;
        q->out_zp = q->out_signed ? cd_test_randi(-128, 127) : cd_test_randi(0, 255);
        const int block = cd_test_randi(0, 1);
        if (block) {
            e.has_residual = 1;
            q->mid_scale = random_scale();
            q->mid_signed = cd_test_randi(0, 3) == 0;
            q->mid_zp = q->mid_signed ? cd_test_randi(-128, 127) : cd_test_randi(0, 255);
            q->res_int = 1;
            q->res_scale = random_scale();
            q->res_signed = cd_test_randi(0, 3) == 0;
            q->res_zp = q->res_signed ? cd_test_randi(-128, 127) : cd_test_randi(0, 255);
        }
        e.act.kind = CD_ACT_RELU;
        e.qmin = cd_quant_qmin(q->out_signed);
        e.qmax = cd_quant_qmax(q->out_signed);
        const int nrows = cd_test_randi(1, ROWS);
        // Ties (y / s = acc / 2 or 3 acc / 2), or a few ulps off them: the
        // vector code's division-free rounding checks its window there.
        const float first = block ? q->mid_scale : q->out_scale;
        const int ties = cd_test_randi(0, 2) == 0;
        for (int r = 0; r < nrows; r++) {
            const float tie = first * (cd_test_randi(0, 1) ? 0.5f : 1.5f);
            mult[r] = ties ? from_bits(bits_of(tie) + (uint32_t)cd_test_randi(-3, 3)) : random_scale() * random_scale();
            bias[r] = ties || cd_test_randi(0, 1) ? 0.0f : cd_test_randf(-2.0f, 2.0f) * mult[r] * 1000.0f;
        }
        for (int i = 0; i < ROWS * 64; i++) acc[i] = ties ? cd_test_randi(-700, 700) : random_acc();
        for (int i = 0; i < ROWS * ROW_STRIDE; i++) res[i] = (uint8_t)cd_test_randi(0, 255);
        // One whole tile (the 1x1 layers), or runs of any length.
        cd_i8_run runs[64];
        int nruns = 0;
        if (cd_test_randi(0, 1))
            runs[nruns++] = (cd_i8_run){0, 64, 20, 20};
        else
            for (uint32_t m = (uint32_t)cd_test_randi(0, 3); m < 64 && nruns < 64;) {
                const uint32_t len = (uint32_t)cd_test_randi(1, (int)(64 - m));
                runs[nruns++] = (cd_i8_run){m, len, (size_t)m + 20, (size_t)m + 20};
                m += len + (uint32_t)cd_test_randi(0, 9);
            }
        const void *r = block ? res : NULL;
        memset(out, 0x5a, sizeof out);
        memset(want, 0x5a, sizeof want);
        cd_i8_epilogue_rows__scalar(&e, mult, bias, nrows, acc, 64, runs, nruns, r, want, ROW_STRIDE);
        k->epilogue(&e, mult, bias, nrows, acc, 64, runs, nruns, r, out, ROW_STRIDE);
        if (memcmp(out, want, sizeof out) != 0) {
            size_t i = 0;
            while (out[i] == want[i]) i++;
            CD_CHECK_FAIL_("%s case %d: byte %zu is %u, want %u (block %d out_scale %a zp %d mid %a res_signed %d)",
                           cd_sparse_isa_name(isa), it, i, out[i], want[i], block, (double)q->out_scale, q->out_zp,
                           (double)q->mid_scale, q->res_signed);
        }
    }
}

CD_TEST(i8_epilogue_residual_block_and_relu_avx512vnni) { epilogue_fast_paths_at(CD_SPARSE_ISA_AVX512VNNI); }
CD_TEST(i8_epilogue_residual_block_and_relu_avx512f) { epilogue_fast_paths_at(CD_SPARSE_ISA_AVX512F); }
CD_TEST(i8_epilogue_residual_block_and_relu_avx2) { epilogue_fast_paths_at(CD_SPARSE_ISA_AVX2); }

CD_TEST(i8_epilogue_extremes_avx512vnni) { epilogue_extremes_at(CD_SPARSE_ISA_AVX512VNNI); }
CD_TEST(i8_epilogue_extremes_avx512f) { epilogue_extremes_at(CD_SPARSE_ISA_AVX512F); }
CD_TEST(i8_epilogue_extremes_avx2) { epilogue_extremes_at(CD_SPARSE_ISA_AVX2); }
