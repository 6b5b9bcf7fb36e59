#ifndef CD_TOOLS_CONVCTL_QUANTIZE_H
#define CD_TOOLS_CONVCTL_QUANTIZE_H

// convctl quantize's shared state (cmd-quantize.c drives it): the layers,
// the activations quantized, the calibration inputs, the measurement.
// quant-calib.c reads the calibration inputs, quant-write.c rewrites the
// model into QDQ, quant-report.c prints the result.

#include "core/limits.h"
#include "tools/convctl/onnx-rewrite.h"
#include "tools/convctl/quant-range.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { CTL_QMETHOD_MINMAX, CTL_QMETHOD_PERCENTILE, CTL_QMETHOD_ENTROPY } ctl_qmethod;

// An activation that OUT quantizes.
typedef struct {
    char *name;      // the ONNX value (owned: the rewrite renames node inputs)
    char *src;       // the value whose numbers it is (itself, or a reshape's source; owned)
    int all_readers; // 1: every reader gets the DequantizeLinear (a conv's output);
                     // 0: only the quantized layers reading it
    ctl_qstat st;    // calibration statistics of src
    double lo, hi;   // the range chosen
    float scale;     // its quantization
    int zero_point;
    char *qname, *dqname; // outputs of its QuantizeLinear and DequantizeLinear
} ctl_qval;

// A Conv/Gemm/MatMul of IN.
typedef struct {
    int node;        // index in IN's graph
    const char *key; // its name (as convd names its layer)
    const char *op;  // op type
    char *weight;    // the constant weight's name (owned)
    int axis;        // the weight's output-channel axis
    int quantize;    // 1 quantized, 0 kept float32 (why says why)
    const char *why;
    int in_q, out_q; // ctl_qval indices of its input and (convs) output, -1 none
    const char *cmp; // the value its SQNR compares: a conv's quantized output, else its output
    int64_t params, zeros_before, zeros_after;
    double sig, noise; // sums of ref^2 and (ref - quantized)^2 over the inputs
    float *ref, *got;  // this input's values of cmp in IN and OUT
    size_t nref, ngot;
} ctl_qlayer;

// Where the calibration inputs come from.
typedef struct {
    char **files; // --calib: sorted .npy paths
    int nfiles;
    int random_n; // --calib-random
    uint64_t seed;
    int rank;                   // the model input's rank
    int64_t shape[CD_MAX_RANK]; // its shape, shape[0] = 1
    size_t item;                // elements per item
    int items;                  // total items
} ctl_calib_src;

// One run of the command.
typedef struct {
    const char *in, *out; // the file paths
    ctl_qmethod method;   // --method
    double percentile;    // --percentile
    int act_u8;           // --act u8 (1) or s8 (0)
    ctl_calib_src cal;    // --calib / --calib-random
    ctl_onnx_model model; // IN, rewritten in place into OUT
    ctl_qlayer *L;        // the Conv/Gemm/MatMul layers, graph order
    int nl;
    ctl_qval *V; // the activations quantized
    int nv;
    int progress;                    // stderr is a terminal: progress redrawn in place
    double out_sig, out_noise;       // the output's sums of ref^2 and error^2
    int64_t zero_before, zero_after; // zero weights of the quantized layers
    double calib_s, measure_s;       // seconds
} ctl_qctx;

// "a" followed by "b", malloc'd (NULL when out of memory).
char *ctl_str_cat(const char *a, const char *b);
// The index of the quantized activation called name, or -1.
int ctl_quant_find_qval(const ctl_qctx *q, const char *name);

// Lists and checks every .npy of dir (dtype, rank, per-item dims) before
// anything runs. Returns the exit status (the error printed).
int ctl_calib_open_dir(ctl_calib_src *c, const char *dir);
void ctl_calib_close(ctl_calib_src *c);
// Calls fn(ud, item, index) on every calibration item, in the same order on
// every call. Returns 0 or the first non-zero fn or read status.
int ctl_calib_each(const ctl_calib_src *c, int (*fn)(void *ud, const float *x, int index), void *ud);

// Rewrites the model in memory into its QDQ form. Returns the exit status.
int ctl_quant_rewrite(ctl_qctx *q);

// SQNR in dB of a signal and its error; +inf when there is no error.
double ctl_sqnr_db(double sig, double noise);
void ctl_quant_print_table(const ctl_qctx *q);
int ctl_quant_print_json(const ctl_qctx *q);

#endif // CD_TOOLS_CONVCTL_QUANTIZE_H
