"""Every supported op family at opsets 11, 13, 17, 18 and 21, each in the signature of that
opset (attributes that 13 and 18 moved to inputs: Squeeze/Unsqueeze axes, Split, ReduceSum
axes at 13; ReduceMean/Max axes, Split num_outputs, Pad axes at 18; Clip's bounds as
inputs), as small models vs onnxruntime (batch 1 and > 1). An op that does not exist yet
at an opset must be refused naming the opset; the wrong form of an opset likewise.
Where this onnxruntime cannot run an opset the case is skipped with the reason (counted
in the summary by -rs)."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tests.models import builders as B
from tests.models.test_ops import fails, ints, ri, run

OPSETS = [11, 13, 17, 18, 21]
SINCE = {"HardSwish": 14, "LayerNormalization": 17, "Mish": 18, "Gelu": 20}


_ORT_RUNS = {}


def ort_runs_opset(opset):
    """Whether this onnxruntime loads a model importing opset (asked once per opset)."""
    if opset not in _ORT_RUNS:
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 10
        try:
            ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            _ORT_RUNS[opset] = True
        except Exception:
            _ORT_RUNS[opset] = False
    return _ORT_RUNS[opset]


def f32(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def axes_form(g, op, x, axes, opset, **attrs):
    """Squeeze/Unsqueeze/ReduceSum (input from 13) and ReduceMean/Max (input from 18)."""
    moved = 13 if op in ("Squeeze", "Unsqueeze", "ReduceSum") else 18
    if opset >= moved:
        return g.node(op, [x, ints(g, axes)], **attrs)
    return g.node(op, [x], axes=axes, **attrs)


# family -> builder(g, x, c, h, w, opset, rng) -> output; x is [N, c, h, w].
def b_conv(g, x, c, h, w, opset, rng):
    return g.conv(x, c, c + 1, 3, stride=1)


def b_batchnorm(g, x, c, h, w, opset, rng):
    return g.bn(g.node("Relu", [x]), c)


def b_activations(g, x, c, h, w, opset, rng):
    y = g.node("Relu", [x])
    y = g.node("Clip", [g.node("LeakyRelu", [x], alpha=0.1), g.init(np.float32(-0.5)), g.init(np.float32(0.5))])
    y = g.node("Add", [y, g.node("HardSigmoid", [x], alpha=0.3, beta=0.4)])
    return g.node("Add", [y, g.node("Sigmoid", [g.node("Relu", [x])])])


def b_binary(g, x, c, h, w, opset, rng):
    y = g.node("Mul", [x, g.init(f32(rng, [1, c, 1, 1]))])
    y = g.node("Sub", [y, g.init(f32(rng, [w]))])
    y = g.node("Div", [y, g.init(f32(rng, [1, 1, h, 1], 1, 2))])
    return g.node("Add", [y, x])


def b_pools(g, x, c, h, w, opset, rng):
    a = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[1, 1], pads=[1, 1, 0, 0])
    a = g.node("AveragePool", [a], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    return g.node("Add", [g.node("GlobalAveragePool", [a]), g.node("GlobalMaxPool", [x])])


def b_views(g, x, c, h, w, opset, rng):
    y = axes_form(g, "Unsqueeze", g.node("Identity", [x]), [2], opset)
    y = axes_form(g, "Squeeze", y, [2], opset)
    y = g.node("Dropout", [y])
    y = g.node("Reshape", [y, ints(g, [0, c * h, w])])
    y = g.node("Transpose", [y], perm=[0, 2, 1])
    return g.node("Flatten", [y], axis=1)


def b_gemm_softmax(g, x, c, h, w, opset, rng):
    f = g.node("Flatten", [x], axis=1)
    y = g.node("Gemm", [f, g.init(f32(rng, [7, c * h * w])), g.init(f32(rng, [7]))], transB=1)
    y = g.node("MatMul", [y, g.init(f32(rng, [7, 5]))])
    return g.node("Softmax", [g.node("Reshape", [y, ints(g, [0, 5, 1])])], axis=1)


def b_softmax_axis(g, x, c, h, w, opset, rng):
    # Before 13 an axis flattens the dims from it on; from 13 it is the one axis.
    return g.node("Softmax", [x], axis=2)


def b_concat(g, x, c, h, w, opset, rng):
    return g.node("Concat", [x, g.node("Relu", [x]), x], axis=1)


def b_split(g, x, c, h, w, opset, rng):
    if opset >= 18 and ri(rng, 0, 1):
        a, b = g.node("Split", [x], n_out=2, axis=3, num_outputs=2)
    elif opset >= 13:
        a, b = g.node("Split", [x, ints(g, [w // 2, w - w // 2])], n_out=2, axis=3)
    else:
        a, b = g.node("Split", [x], n_out=2, axis=3, split=[w // 2, w - w // 2])
    return g.node("Concat", [b, a], axis=3)


def b_slice(g, x, c, h, w, opset, rng):
    return g.node("Slice", [x, ints(g, [1, -1]), ints(g, [h, 0]), ints(g, [2, 3]), ints(g, [1, -1])])


def b_pad(g, x, c, h, w, opset, rng):
    if opset >= 18:
        return g.node("Pad", [x, ints(g, [1, 2, 0, 1]), g.init(np.float32(0.5)), ints(g, [2, 3])])
    return g.node("Pad", [x, ints(g, [0, 0, 1, 2, 0, 0, 0, 1]), g.init(np.float32(0.5))])


def b_reduce(g, x, c, h, w, opset, rng):
    a = axes_form(g, "ReduceMean", x, [2, 3], opset, keepdims=1)
    b = axes_form(g, "ReduceSum", x, [1], opset, keepdims=1)
    m = axes_form(g, "ReduceMax", x, [-1], opset, keepdims=1)
    return g.node("Add", [g.node("Add", [a, b]), m])


def b_unary(g, x, c, h, w, opset, rng):
    y = g.node("Tanh", [x])
    y = g.node("Add", [y, g.node("Softplus", [x])])
    y = g.node("Add", [y, g.node("Neg", [g.node("Abs", [x])])])
    y = g.node("Add", [y, g.node("Sqrt", [g.node("Abs", [x])])])
    y = g.node("Add", [y, g.node("Erf", [x])])
    y = g.node("Add", [y, g.node("Pow", [x, g.init(np.float32(2.0))])])
    return g.node("Max", [g.node("Min", [y, g.init(np.float32(1.5))]), g.init(np.float32(-1.5))])


def b_hardswish(g, x, c, h, w, opset, rng):
    return g.node("HardSwish", [x])


def b_mish(g, x, c, h, w, opset, rng):
    return g.node("Mish", [x])


def b_gelu(g, x, c, h, w, opset, rng):
    return g.node("Gelu", [x])


def b_layernorm(g, x, c, h, w, opset, rng):
    return g.node("LayerNormalization", [x, g.init(f32(rng, [w], 0.5, 1.5)), g.init(f32(rng, [w]))], axis=-1,
                  epsilon=1e-5)


def b_qdq(g, x, c, h, w, opset, rng):
    s, z = g.init(np.float32(0.02)), g.init(np.uint8(128))
    return g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, s, z]), s, z])


def b_shape_ops(g, x, c, h, w, opset, rng):
    """Expand, Tile, Gather, Where/Equal, Range, ConstantOfShape, Shape, Cast."""
    shp = g.node("Shape", [x])
    hw = g.node("Cast", [g.node("Gather", [shp, ints(g, [2, 3])], axis=0)], to=TensorProto.INT64)
    tgt = g.node("Concat", [ints(g, [1, c]), hw], axis=0)
    ones = g.node("ConstantOfShape", [ints(g, [4])], value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
    tgt = g.node("Where", [g.node("Equal", [tgt, ints(g, [-1, -1, -1, -1])]), ones, tgt])
    pooled = g.node("GlobalAveragePool", [x])
    e = g.node("Expand", [pooled, tgt])
    r = g.node("Cast", [g.node("Range", [g.init(np.int64(0)), g.init(np.int64(w)), g.init(np.int64(1))])],
               to=TensorProto.FLOAT)
    y = g.node("Add", [g.node("Mul", [x, e]), r])
    t = g.node("Tile", [g.node("Gather", [y, g.init(np.int64(0))], axis=1), ints(g, [1, 1, 2])])
    return g.node("Add", [g.node("Reshape", [t, ints(g, [0, 1, h, 2 * w])]), g.node("Concat", [y, y], axis=3)])


FAMILIES = {
    "conv": b_conv, "batchnorm": b_batchnorm, "activations": b_activations, "binary": b_binary, "pools": b_pools,
    "views": b_views, "gemm_softmax": b_gemm_softmax, "softmax_axis": b_softmax_axis, "concat": b_concat,
    "split": b_split, "slice": b_slice, "pad": b_pad, "reduce": b_reduce, "unary": b_unary,
    "hardswish": b_hardswish, "mish": b_mish, "gelu": b_gelu, "layernorm": b_layernorm, "qdq": b_qdq,
    "shape_ops": b_shape_ops,
}
NEEDS = {"hardswish": "HardSwish", "mish": "Mish", "gelu": "Gelu", "layernorm": "LayerNormalization"}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_at_opset(family, opset, rng, tmp_path):
    if not ort_runs_opset(opset):
        pytest.skip(f"onnxruntime {ort.__version__} does not run opset {opset}")
    g = B.Graph(rng, opset, ir_version=10 if opset >= 21 else 8)
    c, h, w = ri(rng, 1, 6), ri(rng, 2, 7), ri(rng, 2, 7)
    x = g.input("x", [c, h, w])
    y = FAMILIES[family](g, x, c, h, w, opset, rng)
    op = NEEDS.get(family)
    if op and opset < SINCE[op]:
        # Not in this opset: convd refuses it naming the opset (the checker would too).
        m = g.build([y], out_shapes={y: ["N", c, h, w]})
        path = tmp_path / "m.onnx"
        onnx.save(m, str(path))
        fails(path, "E_UNSUPPORTED", op, f"opset {SINCE[op]}", f"opset {opset}")
        return
    run(rng, tmp_path, g.build([y]))


@pytest.mark.parametrize("case", ["unsqueeze_attr_at_13", "unsqueeze_input_at_11", "clip_attrs_at_11",
                                  "reducemean_input_at_17", "shape_start_at_13", "dropout_ratio_attr_at_13",
                                  "opset_10", "opset_22"])
def test_the_wrong_form_for_the_opset_is_refused_naming_it(case, rng, tmp_path):
    opset = {"unsqueeze_input_at_11": 11, "clip_attrs_at_11": 11, "reducemean_input_at_17": 17, "opset_10": 10,
             "opset_22": 22}.get(case, 13)
    g = B.Graph(rng, opset)
    x = g.input("x", [3, 4, 4])
    out = ["N", 3, 4, 4]
    if case == "unsqueeze_attr_at_13":
        y = g.node("Squeeze", [g.node("Unsqueeze", [x], axes=[1], name="the_node"), ints(g, [1])])
        want = ["axes", "opset 13"]
    elif case == "unsqueeze_input_at_11":
        y = g.node("Squeeze", [g.node("Unsqueeze", [x, ints(g, [1])], name="the_node")], axes=[1])
        want = ["axes", "opset 11", "opset 13"]
    elif case == "clip_attrs_at_11":
        y = g.node("Clip", [x], min=0.0, max=1.0, name="the_node")
        want = ["Clip", "opset 11", "opsets 1 to 10"]
    elif case == "reducemean_input_at_17":
        y = g.node("ReduceMean", [x, ints(g, [1])], name="the_node")
        want = ["axes", "opset 17"]
        out = ["N", 1, 4, 4]
    elif case == "shape_start_at_13":
        s = g.node("Shape", [x], start=1, name="the_node")
        y = g.node("Reshape", [x, g.node("Concat", [ints(g, [-1]), s], axis=0)])
        want = ["start", "opset 13", "15"]
    elif case == "dropout_ratio_attr_at_13":
        y = g.node("Dropout", [x], ratio=0.5, name="the_node")
        want = ["ratio", "opset 13"]
    else:
        y = g.node("Relu", [x], name="the_node")
        want = [f"opset {opset}", "11 to 21"]
    # (the checker's shape inference refuses some of these forms itself)
    m = _model_any_opset(g, y, out)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    fails(path, "E_UNSUPPORTED", *([] if case.startswith("opset_") else ["the_node"]), *want)


def _model_any_opset(g, y, out):
    graph = helper.make_graph(g.nodes, "t", g.inputs, [helper.make_tensor_value_info(y, TensorProto.FLOAT, out)],
                              g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", g.opset)])
    m.ir_version = 10
    return m
