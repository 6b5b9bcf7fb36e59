// convctl quantize's report (quantize.h): the per-layer table or --json.

#include "tools/convctl/quantize.h"

#include "core/errors.h"
#include "tools/convctl/convctl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// SQNR in dB of a signal and its error; +inf when there is no error.
double ctl_sqnr_db(double sig, double noise) {
    if (!(noise > 0)) return INFINITY;
    return 10.0 * log10(sig / noise);
}

// ---- output -----------------------------------------------------------------------

static const char *method_name(ctl_qmethod m) {
    return m == CTL_QMETHOD_MINMAX ? "minmax" : m == CTL_QMETHOD_PERCENTILE ? "percentile" : "entropy";
}

void ctl_quant_print_table(const ctl_qctx *q) {
    static const char *heads[] = {"NODE",      "OP",     "DTYPE", "IN SCALE", "IN ZP",
                                  "OUT SCALE", "OUT ZP", "ZEROS", "SQNR dB"};
    static const bool num[] = {false, false, false, true, true, true, true, true, true};
    ctl_table t;
    ctl_table_init(&t, 9, heads, num);
    int nq = 0;
    for (int i = 0; i < q->nl; i++) {
        const ctl_qlayer *y = &q->L[i];
        char is[32] = "-", iz[16] = "-", os[32] = "-", oz[16] = "-", zs[48] = "-", sq[32] = "-", dt[48];
        if (y->quantize) {
            nq++;
            const ctl_qval *a = &q->V[y->in_q];
            snprintf(is, sizeof is, "%.4g", a->scale);
            snprintf(iz, sizeof iz, "%d", a->zero_point);
            if (y->out_q >= 0) {
                snprintf(os, sizeof os, "%.4g", q->V[y->out_q].scale);
                snprintf(oz, sizeof oz, "%d", q->V[y->out_q].zero_point);
            }
            snprintf(zs, sizeof zs, "%.1f%%", y->params ? 100.0 * y->zeros_after / y->params : 0.0);
            snprintf(sq, sizeof sq, "%.1f", ctl_sqnr_db(y->sig, y->noise));
            snprintf(dt, sizeof dt, "int8");
        } else {
            snprintf(dt, sizeof dt, "f32 (%s)", y->why);
        }
        ctl_table_add(&t, y->key, y->op, dt, is, iz, os, oz, zs, sq);
    }
    ctl_table_print(&t, 0);
    ctl_table_free(&t);
    printf("\n%d of %d layers quantized (weights s8 per channel, activations %s per tensor, %s); biases float32\n", nq,
           q->nl, q->act_u8 ? "u8" : "s8", method_name(q->method));
    printf("pruned zeros: %lld weights were 0, %lld are 0 now (of the quantized layers)\n", (long long)q->zero_before,
           (long long)q->zero_after);
    printf("output vs float32 on %d calibration input%s: relative L2 %.3g, SQNR %.1f dB\n", q->cal.items,
           q->cal.items == 1 ? "" : "s", sqrt(q->out_noise / (q->out_sig > 0 ? q->out_sig : 1)),
           ctl_sqnr_db(q->out_sig, q->out_noise));
    printf("wrote %s (calibration %.1f s, measurement %.1f s)\n", q->out, q->calib_s, q->measure_s);
}

static void kv_db(msgpack_packer *pk, const char *k, double v) {
    if (isfinite(v)) {
        ctl_mp_kv_f64(pk, k, v);
    } else {
        ctl_mp_str(pk, k);
        msgpack_pack_nil(pk); // no error at all: JSON has no infinity
    }
}

int ctl_quant_print_json(const ctl_qctx *q) {
    ctl_mp m;
    ctl_mp_init(&m);
    msgpack_packer *pk = &m.pk;
    msgpack_pack_map(pk, 11);
    ctl_mp_kv_str(pk, "in", q->in);
    ctl_mp_kv_str(pk, "out", q->out);
    ctl_mp_kv_str(pk, "method", method_name(q->method));
    ctl_mp_kv_str(pk, "act", q->act_u8 ? "u8" : "s8");
    ctl_mp_kv_str(pk, "bias", "float32");
    ctl_mp_kv_i64(pk, "calib_inputs", q->cal.items);
    ctl_mp_kv_str(pk, "calib", q->cal.nfiles ? "dir" : "random");
    ctl_mp_str(pk, "layers");
    msgpack_pack_array(pk, (size_t)q->nl);
    for (int i = 0; i < q->nl; i++) {
        const ctl_qlayer *y = &q->L[i];
        msgpack_pack_map(pk, 12);
        ctl_mp_kv_str(pk, "node", y->key);
        ctl_mp_kv_str(pk, "op", y->op);
        ctl_mp_kv_str(pk, "weight", y->weight);
        ctl_mp_kv_bool(pk, "quantized", y->quantize);
        ctl_mp_kv_str(pk, "kept_f32_because", y->quantize ? NULL : y->why);
        ctl_mp_kv_str(pk, "input", y->quantize ? q->V[y->in_q].name : NULL);
        ctl_mp_kv_f64(pk, "input_scale", y->quantize ? q->V[y->in_q].scale : 0);
        ctl_mp_kv_i64(pk, "input_zero_point", y->quantize ? q->V[y->in_q].zero_point : 0);
        ctl_mp_kv_str(pk, "output", y->cmp);
        ctl_mp_kv_f64(pk, "output_scale", y->out_q >= 0 ? q->V[y->out_q].scale : 0);
        ctl_mp_kv_i64(pk, "zero_weights", y->zeros_after);
        kv_db(pk, "sqnr_db", y->quantize ? ctl_sqnr_db(y->sig, y->noise) : NAN);
    }
    ctl_mp_str(pk, "output");
    msgpack_pack_map(pk, 2);
    ctl_mp_kv_f64(pk, "rel_l2", sqrt(q->out_noise / (q->out_sig > 0 ? q->out_sig : 1)));
    kv_db(pk, "sqnr_db", ctl_sqnr_db(q->out_sig, q->out_noise));
    ctl_mp_str(pk, "zeros");
    msgpack_pack_map(pk, 2);
    ctl_mp_kv_i64(pk, "before", q->zero_before);
    ctl_mp_kv_i64(pk, "after", q->zero_after);
    ctl_mp_str(pk, "seconds");
    msgpack_pack_map(pk, 2);
    ctl_mp_kv_f64(pk, "calibration", q->calib_s);
    ctl_mp_kv_f64(pk, "measurement", q->measure_s);
    return ctl_mp_print(&m);
}
