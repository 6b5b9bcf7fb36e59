// The supported-operator listing (runtime.h cd_op_info): the lowering's op
// table (lower.c) with each operator's opsets (lower-opset.c), the backend
// op families it becomes (the table below), and the devices that run those
// families, asked from each device's supports_op on a plain NCHW float32
// case of the family. `convctl ops` prints it; docs/OPERATORS.md is its
// output, checked against it by a test.

#include "runtime/lower-internal.h"
#include "runtime/options.h"
#include "runtime/runtime.h"

#include "backends/backend.h"
#include "backends/devices.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define FAM(x) (1u << CD_BOP_##x)

// What each operator becomes. 0: nothing runs per request (folded into
// constants at load, or a view of its input's bytes). Where an op is usually
// fused into its producer (an activation into a conv) it still lists the
// family it runs as alone. An operator of lower.c's table missing here is a
// test failure (runtime_op_info_every_op_has_its_families).
static const struct {
    const char *op;
    unsigned families;
    int none; // families 0: 0 folded at load, 1 a view of its input (no copy), 2 always refused
} g_runs_as[] = {
    {"Conv", FAM(CONV2D)},
    {"BatchNormalization", FAM(BINARY)}, // or folded into the conv before it
    {"Relu", FAM(ACTIVATION)},
    {"Clip", FAM(ACTIVATION)},
    {"Sigmoid", FAM(ACTIVATION)},
    {"HardSigmoid", FAM(ACTIVATION)},
    {"HardSwish", FAM(ACTIVATION)},
    {"LeakyRelu", FAM(ACTIVATION)},
    {"Add", FAM(BINARY)},
    {"Mul", FAM(BINARY)},
    {"Sub", FAM(BINARY)},
    {"Div", FAM(BINARY)},
    {"MaxPool", FAM(POOL)},
    {"AveragePool", FAM(POOL)},
    {"GlobalAveragePool", FAM(POOL)},
    {"GlobalMaxPool", FAM(POOL)},
    {"Flatten", 0, 1},
    {"Reshape", 0, 1},
    {"Transpose", FAM(TRANSPOSE)},
    {"Concat", FAM(CONCAT)},
    {"Gemm", FAM(GEMM)},
    {"MatMul", FAM(GEMM)},
    {"Softmax", FAM(SOFTMAX)},
    {"Identity", 0, 1},
    {"Dropout", 0, 1},
    {"Constant", 0},
    {"Shape", 0},
    {"Gather", FAM(GATHER)},
    {"Unsqueeze", 0, 1},
    {"Squeeze", 0, 1},
    {"Cast", 0},
    {"QuantizeLinear", FAM(FAKEQUANT)},
    {"DequantizeLinear", 0, 1},
    {"QLinearConv", FAM(CONV2D) | FAM(FAKEQUANT)},
    {"QLinearMatMul", FAM(GEMM) | FAM(FAKEQUANT)},
    {"ConvInteger", FAM(CONV2D)},
    {"MatMulInteger", FAM(GEMM)},
    {"DynamicQuantizeLinear", FAM(FAKEQUANT)}, // its dynamic form (lower-dynquant.c)
    {"QGemm", FAM(GEMM) | FAM(FAKEQUANT)},
    {"QLinearAdd", FAM(BINARY) | FAM(FAKEQUANT)},
    {"QLinearMul", FAM(BINARY) | FAM(FAKEQUANT)},
    {"QLinearGlobalAveragePool", FAM(POOL) | FAM(FAKEQUANT)},
    {"Pad", FAM(PAD)},
    {"Slice", FAM(SLICE)},
    {"Split", FAM(SLICE)},
    {"ReduceMean", FAM(REDUCE)},
    {"ReduceSum", FAM(REDUCE)},
    {"ReduceMax", FAM(REDUCE)},
    {"LayerNormalization", FAM(LAYERNORM)},
    {"Pow", FAM(ACTIVATION)},
    {"Sqrt", FAM(ACTIVATION)},
    {"Erf", FAM(ACTIVATION)},
    {"Gelu", FAM(ACTIVATION)},
    {"Tanh", FAM(ACTIVATION)},
    {"Softplus", FAM(ACTIVATION)},
    {"Mish", FAM(ACTIVATION)},
    {"Neg", FAM(ACTIVATION)},
    {"Abs", FAM(ACTIVATION)},
    {"Min", FAM(BINARY)},
    {"Max", FAM(BINARY)},
    {"Expand", FAM(TILE)},
    {"Tile", FAM(TILE)},
    {"Where", 0},
    {"Equal", 0},
    {"Less", 0},
    {"Greater", 0},
    {"Not", 0},
    {"Range", 0},
    {"ConstantOfShape", 0},
    {"Resize", FAM(RESIZE)},
    {"Upsample", FAM(RESIZE)},
    {"ConvTranspose", FAM(DECONV)}, // stride 1: as a Conv
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static cd_tdesc td4(int64_t c, int64_t h, int64_t w) {
    cd_tdesc t = {.rank = 4, .shape = {1, c, h, w}, .layout = CD_LAYOUT_NCHW};
    return t;
}

// A small plain case of family f: NCHW float32, 8 channels of 4 x 4.
static cd_bop_desc family_case(cd_bop f) {
    static const int64_t idx[2] = {0, 1};
    cd_bop_desc d;
    memset(&d, 0, sizeof d);
    d.op = f;
    d.max_batch = 1;
    d.nsrc = 1;
    d.src[0] = td4(8, 4, 4);
    d.dst = td4(8, 4, 4);
    switch (f) {
    case CD_BOP_CONV2D: d.u.conv = cd_conv_square(8, 4, 4, 8, 3, 1, 1); break;
    case CD_BOP_GEMM:
        d.src[0] = (cd_tdesc){.rank = 2, .shape = {1, 8}};
        d.dst = d.src[0];
        d.u.gemm.rows = 1;
        d.u.gemm.n = d.u.gemm.k = 8;
        break;
    case CD_BOP_POOL:
        d.u.pool = (cd_pool_desc){.kind = CD_POOL_MAX,
                                  .n = 1,
                                  .c = 8,
                                  .h = 4,
                                  .w = 4,
                                  .kh = 2,
                                  .kw = 2,
                                  .stride_h = 2,
                                  .stride_w = 2,
                                  .dil_h = 1,
                                  .dil_w = 1,
                                  .oh = 2,
                                  .ow = 2};
        d.dst = td4(8, 2, 2);
        break;
    case CD_BOP_BINARY:
        d.nsrc = 2;
        d.src[1] = td4(8, 4, 4);
        d.u.binary.kind = CD_BINARY_ADD;
        break;
    case CD_BOP_ACTIVATION: d.u.act.kind = CD_ACT_RELU; break;
    case CD_BOP_SOFTMAX:
        d.u.softmax.outer = 1;
        d.u.softmax.len = 8;
        d.u.softmax.inner = 16;
        break;
    case CD_BOP_CONCAT:
        d.nsrc = 2;
        d.src[1] = td4(8, 4, 4);
        d.dst = td4(16, 4, 4);
        d.u.axis = 1;
        break;
    case CD_BOP_TRANSPOSE:
        for (int i = 0; i < 4; i++) d.u.perm[i] = i;
        d.u.perm[2] = 3;
        d.u.perm[3] = 2;
        break;
    case CD_BOP_FAKEQUANT:
        d.u.fq.channels = 1;
        d.u.fq.qmax = 255;
        break;
    case CD_BOP_SLICE:
        for (int i = 0; i < 4; i++) d.u.slice.step[i] = 1;
        d.dst = td4(4, 4, 4);
        break;
    case CD_BOP_REDUCE:
        d.u.reduce = (cd_reduce_desc){CD_REDUCE_MEAN, 1u << 2 | 1u << 3};
        d.dst = td4(8, 1, 1);
        break;
    case CD_BOP_LAYERNORM: d.u.ln = (cd_layernorm_desc){32, 4, 1e-5f}; break;
    case CD_BOP_GATHER:
        d.u.gather = (cd_gather_desc){.axis = 1, .nidx = 2, .idx = idx};
        d.dst = td4(2, 4, 4);
        break;
    case CD_BOP_TILE: d.src[0] = td4(8, 1, 1); break;
    case CD_BOP_RESIZE:
        d.u.resize = (cd_resize_desc){
            .mode = CD_RESIZE_LINEAR, .c = 8, .h = 4, .w = 4, .oh = 8, .ow = 8, .scale_h = 2.0f, .scale_w = 2.0f};
        d.dst = td4(8, 8, 8);
        break;
    case CD_BOP_DECONV:
        d.u.deconv = (cd_deconv_desc){.c = 8,
                                      .h = 4,
                                      .w = 4,
                                      .k = 8,
                                      .r = 2,
                                      .s = 2,
                                      .groups = 1,
                                      .stride_h = 2,
                                      .stride_w = 2,
                                      .dil_h = 1,
                                      .dil_w = 1,
                                      .oh = 8,
                                      .ow = 8};
        d.dst = td4(8, 8, 8);
        break;
    default: break; // REORDER (NCHW to NCHW), PAD (zero pads): the defaults
    }
    return d;
}

// Bit f of *cpu / *hip: the device's supports_op takes family f's case.
static unsigned g_cpu_ok, g_hip_ok;
static int g_probe_rc;
static pthread_once_t g_probe_once = PTHREAD_ONCE_INIT;

static void probe_devices(void) {
    const char *dev[2] = {"cpu", "hip-emu"};
    unsigned *ok[2] = {&g_cpu_ok, &g_hip_ok};
    for (int k = 0; k < 2; k++) {
        cd_backend_t be;
        char err[256];
        int rc = cd_backend_create(dev[k], cd_runtime_backend_opts(), &be, err, sizeof err);
        if (rc) {
            g_probe_rc = rc;
            return;
        }
        for (int f = 0; f < CD_BOP_COUNT; f++) {
            cd_bop_desc d = family_case((cd_bop)f);
            if (cd_backend_supports_op(be, &d)) *ok[k] |= 1u << f;
        }
        cd_backend_free(be);
    }
}

int cd_op_info_count(void) { return cd_lower_table_size(); }

int cd_op_attr_opsets(const char *op, const char *attr, int *from, int *to) {
    return cd_lower_attr_opsets(op, attr, from, to);
}

int cd_op_info_get(int i, cd_op_info *out) {
    memset(out, 0, sizeof *out);
    const char *op = cd_lower_table_entry(i, &out->domain, &out->attrs);
    if (!op) return CD_EPARAMS;
    pthread_once(&g_probe_once, probe_devices);
    if (g_probe_rc) return g_probe_rc;
    out->op = op;
    if (!*out->domain) {
        out->opset_from = cd_lower_op_since(op);
        out->opset_to = CD_OPSET_MAX;
    }
    unsigned fam = 0;
    int known = 0, none = 0;
    for (size_t k = 0; k < COUNT(g_runs_as); k++)
        if (strcmp(g_runs_as[k].op, op) == 0) {
            fam = g_runs_as[k].families;
            none = g_runs_as[k].none;
            known = 1;
        }
    if (!known) {
        snprintf(out->runs_as, sizeof out->runs_as, "?");
        snprintf(out->backends, sizeof out->backends, "?");
        return 0;
    }
    if (!fam) {
        static const char *what[3] = {"folded at load", "a view (no copy)", "refused (with the reason)"};
        snprintf(out->runs_as, sizeof out->runs_as, "%s", what[none]);
        snprintf(out->backends, sizeof out->backends, "%s", none == 2 ? "none" : "any");
        return 0;
    }
    size_t l = 0;
    for (int f = 0; f < CD_BOP_COUNT; f++)
        if (fam & (1u << f))
            l += (size_t)snprintf(out->runs_as + l, sizeof out->runs_as - l, "%s%s", l ? ", " : "",
                                  cd_bop_name((cd_bop)f));
    const int cpu = (g_cpu_ok & fam) == fam, hip = (g_hip_ok & fam) == fam;
    snprintf(out->backends, sizeof out->backends, "%s%s%s", cpu ? "cpu" : "", cpu && hip ? ", " : "",
             hip ? "hip, hip-emu" : "");
    return 0;
}
