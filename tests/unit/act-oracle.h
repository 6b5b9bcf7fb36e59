#ifndef CD_TESTS_UNIT_ACT_ORACLE_H
#define CD_TESTS_UNIT_ACT_ORACLE_H

// Each activation's expected value, written here from its ONNX definition,
// in double and in piecewise form, sharing no code with the product's
// cd_act_apply (which the reference and HIP kernels both call, so checking
// one against the other could not catch a wrong formula). A kind this
// switch does not know fails the test: a new activation needs its formula.

#include "kernels/op-desc.h"
#include "tests/unit/check.h"

#include <math.h>

#define CD_ACT_ORACLE_LAST CD_ACT_SILU // the last kind written below

static inline float act_oracle(cd_activation act, float xf) {
    const double x = xf, a = act.alpha, b = act.beta;
    switch (act.kind) {
    case CD_ACT_NONE: return xf;
    case CD_ACT_RELU: return x < 0 ? 0.0f : xf;
    case CD_ACT_CLIP: return (float)(x < a ? a : x > b ? b : x);
    case CD_ACT_SIGMOID: // the form that does not overflow for large |x|
        return (float)(x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)));
    case CD_ACT_HARDSIGMOID: {
        const double y = a * x + b;
        return (float)(y <= 0 ? 0.0 : y >= 1 ? 1.0 : y);
    }
    case CD_ACT_HARDSWISH: // ONNX HardSwish: alpha 1/6, beta 1/2
        return (float)(x <= -3 ? 0.0 : x >= 3 ? x : x * (x + 3) / 6);
    case CD_ACT_LEAKYRELU: return (float)(x < 0 ? a * x : x);
    case CD_ACT_TANH: return (float)tanh(x);
    case CD_ACT_SOFTPLUS: return (float)(x > 30 ? x : log(1.0 + exp(x)));
    case CD_ACT_MISH: return (float)(x * tanh(x > 30 ? x : log(1.0 + exp(x))));
    case CD_ACT_NEG: return -xf;
    case CD_ACT_ABS: return (float)fabs(x);
    case CD_ACT_SQRT: return (float)sqrt(x);
    case CD_ACT_ERF: return (float)erf(x);
    case CD_ACT_GELU: return (float)(0.5 * x * (1.0 + erf(x / sqrt(2.0))));
    case CD_ACT_GELU_TANH: return (float)(0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))));
    case CD_ACT_POW: return (float)pow(x, a);
    case CD_ACT_SILU: return (float)(x >= 0 ? x / (1.0 + exp(-x)) : x * exp(x) / (1.0 + exp(x)));
    }
    CD_CHECK_FAIL_("act_oracle: no formula for activation kind %d", (int)act.kind);
    return 0;
}

#endif // CD_TESTS_UNIT_ACT_ORACLE_H
