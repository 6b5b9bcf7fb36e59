"""One-node models of the ops of issue 22 (Pad, Slice, Split, ReduceMean/Sum/Max,
LayerNormalization, Pow, Sqrt, Erf, Gelu, Tanh, Softplus, Mish, Neg, Abs, Min,
Max), each at the opsets where its signature changed, on fresh random shapes and
attributes, run with convd-run and compared with onnxruntime (max relative error
<= 1e-4, batch 1 and > 1). Then the patterns fused into one op (LayerNorm and
Erf-GELU as older exporters write them, a zero Pad folded into a conv or pool),
and the attribute checks (E_UNSUPPORTED naming the node)."""
import json
import os
import random

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tests.models import builders as B
from tests.models.runner import compare, convd_run


@pytest.fixture
def rng():
    seed = int(os.environ.get("CD_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def ri(rng, lo, hi):
    return int(rng.integers(lo, hi + 1))


def ints(g, values):
    return g.init(np.array(values, np.int64), "i")


def shape4(rng):
    return [ri(rng, 1, 9), ri(rng, 2, 9), ri(rng, 2, 9)]


def run(rng, tmp_path, model, name="m"):
    path = B.save(model, tmp_path / f"{name}.onnx")
    compare(path, tmp_path, 1, rng)
    compare(path, tmp_path, ri(rng, 2, 4), rng)
    return path


def layers(path):
    r = convd_run(path, ["--info", "--json"])
    return json.loads(r.stdout)["layers"]


# ---- Pad --------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_modes(opset, mode, rng, tmp_path):
    g = B.Graph(rng, opset)
    s = shape4(rng)
    x = g.input("x", s)
    # A Relu in front so a conv after it is not what folds; pads on C, H, W.
    y = g.node("Relu", [x])
    n = len(s) + 1
    lim = [d - 1 for d in s] if mode == "reflect" else [3] * 3
    begin = [0] + [ri(rng, 0, lim[i]) for i in range(3)]
    end = [0] + [ri(rng, 0, lim[i]) for i in range(3)]
    ins = [y, ints(g, begin + end)]
    if mode == "constant":
        ins.append(g.init(np.array(rng.uniform(-2, 2), np.float32), "v"))
    axes = None
    if opset >= 18 and ri(rng, 0, 1):
        # pads for the axes given only (negative axes too).
        axes = [-2, -1]
        ins = [y, ints(g, begin[2:] + end[2:])] + (ins[2:] if mode == "constant" else [""])
        ins.append(ints(g, axes))
    y = g.node("Pad", ins, mode=mode)
    run(rng, tmp_path, g.build([y]))


def test_pad_negative_crops(rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [3, 8, 9])
    y = g.node("Pad", [x, ints(g, [0, 0, -1, 2, 0, 1, -2, 0])])
    run(rng, tmp_path, g.build([y]))


@pytest.mark.parametrize("reader", ["conv", "avgpool", "maxpool_after_relu"])
def test_zero_pad_folds_into_the_reader(reader, rng, tmp_path):
    g = B.Graph(rng, 13)
    c, h = ri(rng, 2, 8), ri(rng, 5, 12)
    x = g.input("x", [c, h, h])
    x = g.node("Relu", [g.conv(x, c, c, 1)])
    p = g.node("Pad", [x, ints(g, [0, 0, 1, ri(rng, 0, 1), 0, 0, 1, 1])])
    if reader == "conv":
        y = g.conv(p, c, c + 1, 3, pad=0)
    elif reader == "avgpool":
        y = g.node("AveragePool", [p], kernel_shape=[3, 3], strides=[1, 1])
    else:
        y = g.node("MaxPool", [p], kernel_shape=[3, 3], strides=[2, 2])
    path = run(rng, tmp_path, g.build([y]))
    ops = [l["op"] for l in layers(path)]  # the layers' labels
    assert "Pad" not in ops and any(o.startswith("Pad+") for o in ops), ops


def test_zero_pad_before_maxpool_of_signed_input_stays(rng, tmp_path):
    """Zero padding is not -inf padding: a MaxPool of an input that may be negative keeps its Pad."""
    g = B.Graph(rng, 13)
    x = g.input("x", [3, 7, 7])
    p = g.node("Pad", [x, ints(g, [0, 0, 1, 1, 0, 0, 1, 1])])
    y = g.node("MaxPool", [p], kernel_shape=[3, 3], strides=[2, 2])
    path = B.save(g.build([y]), tmp_path / "m.onnx")
    assert "Pad" in [l["op"] for l in layers(path)]
    # onnxruntime 1.31's default graph optimizations fold this Pad into the
    # MaxPool (PadFusion) and answer the window maximum where the zero pad
    # should win: compare with its unoptimized graph.
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    x = rng.uniform(-1, 1, (2, 3, 7, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    convd_run(path, ["--input", f"x={tmp_path / 'x.npy'}", "--output", tmp_path / "y.npy", "--batch", 2])
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=0, atol=1e-6)


# ---- Slice and Split ------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13])
def test_slice_random(opset, rng, tmp_path):
    for _ in range(3):
        g = B.Graph(rng, opset)
        s = [ri(rng, 1, 10), ri(rng, 1, 10), ri(rng, 1, 10)]
        x = g.input("x", s)
        axes = [a for a in (1, 2, 3) if ri(rng, 0, 1)] or [1]
        starts, ends, steps = [], [], []
        for a in axes:
            d = s[a - 1]
            step = ri(rng, 1, 3) * (1 if ri(rng, 0, 2) else -1)
            st = ri(rng, -d - 2, d + 2)
            en = ri(rng, -d - 2, d + 2)
            # Keep the result non-empty: fall back to the whole dim.
            sl = list(range(d))[slice(st, en, step)]
            if not sl:
                st, en = (0, d) if step > 0 else (d - 1, -d - 1)
            starts.append(st)
            ends.append(en if ri(rng, 0, 3) else (2 ** 63 - 1 if step > 0 else -(2 ** 63)))
            steps.append(step)
        neg = [a - 4 if ri(rng, 0, 1) else a for a in axes]
        y = g.node("Slice", [g.node("Relu", [x]), ints(g, starts), ints(g, ends), ints(g, neg), ints(g, steps)])
        run(rng, tmp_path, g.build([y]))


def test_slice_channel_halves_and_batch_all(rng, tmp_path):
    g = B.Graph(rng, 13)
    c = 2 * ri(rng, 1, 8)
    x = g.input("x", [c, 5, 6])
    a = g.node("Slice", [x, ints(g, [0, 0]), ints(g, [2 ** 63 - 1, c // 2]), ints(g, [0, 1])])
    b = g.node("Slice", [x, ints(g, [c // 2]), ints(g, [c]), ints(g, [1])])
    run(rng, tmp_path, g.build([g.node("Add", [a, b])]))


def test_slice_on_shape_constants_folds(rng, tmp_path):
    """Slice of a Shape (a shape computation) folds at load; the batch stays the batch."""
    g = B.Graph(rng, 13)
    x = g.input("x", [4, 6, 6])
    shp = g.node("Shape", [x])
    head = g.node("Slice", [shp, ints(g, [0]), ints(g, [1])])
    tgt = g.node("Concat", [head, ints(g, [-1])], axis=0)
    y = g.node("Reshape", [x, tgt])
    run(rng, tmp_path, g.build([y], out_shapes={y: ["N", 144]}))


@pytest.mark.parametrize("form", ["attr11", "equal13", "input13", "num_outputs18"])
def test_split(form, rng, tmp_path):
    opset = {"attr11": 11, "equal13": 13, "input13": 13, "num_outputs18": 18}[form]
    g = B.Graph(rng, opset)
    parts = ri(rng, 2, 4)
    c = parts * ri(rng, 1, 5) + (ri(rng, 0, parts - 1) if form == "num_outputs18" else 0)
    while form == "num_outputs18" and c - -(-c // parts) * (parts - 1) < 1:
        c += 1  # the chunks are ceil(c / parts): the last must keep an element (4 in 3 does not split)
    x = g.input("x", [c, 4, 5])
    if form == "attr11" or form == "input13":
        sizes = [1] * parts
        for _ in range(c - parts):
            sizes[ri(rng, 0, parts - 1)] += 1
        if form == "attr11":
            outs = g.node("Split", [x], n_out=parts, axis=1, split=sizes)
        else:
            outs = g.node("Split", [x, ints(g, sizes)], n_out=parts, axis=-3)
    elif form == "equal13":
        outs = g.node("Split", [x], n_out=parts, axis=1)
    else:
        outs = g.node("Split", [x], n_out=parts, axis=1, num_outputs=parts)
    outs = [g.node("Relu", [o]) for o in outs]
    run(rng, tmp_path, g.build(outs))


# ---- reductions ------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax"])
def test_reduce(op, opset, rng, tmp_path):
    for keep in (0, 1):
        g = B.Graph(rng, opset)
        x = g.input("x", shape4(rng))
        axes = [a for a in (1, 2, 3) if ri(rng, 0, 1)] or [ri(rng, 1, 3)]
        axes = [a - 4 if ri(rng, 0, 1) else a for a in axes]
        as_input = opset >= (13 if op == "ReduceSum" else 18)
        if as_input:
            y = g.node(op, [x, ints(g, axes)], keepdims=keep)
        else:
            y = g.node(op, [x], axes=axes, keepdims=keep)
        run(rng, tmp_path, g.build([y]), f"{op}{keep}")


@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_mean_over_hw_is_the_global_pool(opset, rng, tmp_path):
    """MnasNet's head: x.mean([2, 3]) runs on the GlobalAveragePool kernel, keepdims or not."""
    for keep in (0, 1):
        g = B.Graph(rng, opset)
        c = ri(rng, 2, 20)
        x = g.input("x", [c, ri(rng, 1, 9), ri(rng, 1, 9)])
        y = g.node("ReduceMean", [x, ints(g, [2, 3])] if opset >= 18 else [x], keepdims=keep,
                   **({} if opset >= 18 else {"axes": [-2, -1]}))
        if not keep:
            y = g.gemm(y, c, 5)
        path = run(rng, tmp_path, g.build([y]), f"m{keep}")
        ops = [l["op"] for l in layers(path)]
        assert "ReduceMean(GlobalAvgPool)" in ops and "ReduceMean" not in ops, ops


def test_reduce_sum_noop_with_empty_axes(rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [3, 4, 5])
    y = g.node("ReduceSum", [x], noop_with_empty_axes=1)
    run(rng, tmp_path, g.build([g.node("Relu", [y])]))


# ---- LayerNormalization -----------------------------------------------------------------

def test_layernorm_opset17(rng, tmp_path):
    for axis in (-1, -2, 1):
        g = B.Graph(rng, 17)
        s = [ri(rng, 1, 6), ri(rng, 1, 6), ri(rng, 2, 12)]
        x = g.input("x", s)
        a = axis if axis < 0 else axis
        norm = s[(a % 4) - 1:] if a % 4 else s
        gam = g.init(rng.uniform(0.5, 1.5, norm).astype(np.float32))
        ins = [x, gam] + ([g.init(rng.uniform(-1, 1, norm).astype(np.float32))] if ri(rng, 0, 1) else [])
        y = g.node("LayerNormalization", ins, axis=axis, epsilon=float(rng.uniform(1e-6, 1e-3)))
        run(rng, tmp_path, g.build([y]), f"ln{axis}")


def layernorm_pattern(g, x, c, eps=1e-6, affine=True):
    """torch's layer_norm before opset 17: over the last axis."""
    kw = {"axes": [-1]} if g.opset < 18 else {}
    extra = [ints(g, [-1])] if g.opset >= 18 else []
    m = g.node("ReduceMean", [x] + extra, keepdims=1, **kw)
    s = g.node("Sub", [x, m])
    p = g.node("Pow", [s, g.init(np.array(2.0, np.float32), "two")])
    v = g.node("ReduceMean", [p] + extra, keepdims=1, **kw)
    e = g.node("Add", [v, g.init(np.array(eps, np.float32), "eps")])
    y = g.node("Div", [s, g.node("Sqrt", [e])])
    if affine:
        y = g.node("Mul", [y, g.init(g.rng.uniform(0.5, 1.5, c).astype(np.float32), "gamma")])
        y = g.node("Add", [y, g.init(g.rng.uniform(-0.5, 0.5, c).astype(np.float32), "beta")])
    return y


@pytest.mark.parametrize("opset", [13, 18])
def test_layernorm_pattern_fuses(opset, rng, tmp_path):
    g = B.Graph(rng, opset)
    c = ri(rng, 2, 24)
    x = g.input("x", [ri(rng, 1, 6), ri(rng, 1, 6), c])
    y = layernorm_pattern(g, g.node("Relu", [x]), c, affine=bool(ri(rng, 0, 1)))
    path = run(rng, tmp_path, g.build([y]))
    ops = [l["op"] for l in layers(path)]
    assert "LayerNorm(pattern)" in ops and "ReduceMean" not in ops and "Sqrt" not in ops, ops


# ---- element-wise ------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Tanh", "Softplus", "Mish", "Neg", "Abs", "Sqrt", "Erf"])
def test_unary(op, rng, tmp_path):
    g = B.Graph(rng, 18 if op == "Mish" else 13)
    x = g.input("x", shape4(rng))
    if op == "Sqrt":
        x = g.node("Abs", [x])
    y = g.node(op, [g.node("Mul", [x, g.init(np.array(4.0, np.float32), "k")])])
    run(rng, tmp_path, g.build([y]))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate, rng, tmp_path):
    g = B.Graph(rng, 20)
    x = g.input("x", shape4(rng))
    y = g.node("Gelu", [x], approximate=approximate)
    run(rng, tmp_path, g.build([y]))


@pytest.mark.parametrize("form", ["x*a*0.5", "x*(a*0.5)", "(x*0.5)*a", "mul_rsqrt2"])
def test_erf_gelu_pattern_fuses(form, rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", shape4(rng))
    x = g.node("Mul", [x, g.init(np.array(3.0, np.float32), "k")])
    half = g.init(np.array(0.5, np.float32), "half")
    if form == "mul_rsqrt2":
        t = g.node("Mul", [x, g.init(np.array(0.7071067811865476, np.float32), "r")])
    else:
        t = g.node("Div", [x, g.init(np.array(1.4142135623730951, np.float32), "s")])
    a = g.node("Add", [g.node("Erf", [t]), g.init(np.array(1.0, np.float32), "one")])
    if form in ("x*a*0.5", "mul_rsqrt2"):
        y = g.node("Mul", [g.node("Mul", [x, a]), half])
    elif form == "x*(a*0.5)":
        y = g.node("Mul", [x, g.node("Mul", [a, half])])
    else:
        y = g.node("Mul", [g.node("Mul", [x, half]), a])
    path = run(rng, tmp_path, g.build([y]))
    ops = [l["op"] for l in layers(path)]
    assert "Gelu(Erf pattern)" in ops and "Erf" not in ops, ops


@pytest.mark.parametrize("exp", [2.0, 3.0, 0.5])
def test_pow_constant_exponent(exp, rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", shape4(rng))
    if exp == 0.5:
        x = g.node("Abs", [x])
    y = g.node("Pow", [x, g.init(np.array(exp, np.float32), "e")])
    run(rng, tmp_path, g.build([y]))


@pytest.mark.parametrize("op", ["Min", "Max"])
def test_min_max_variadic_broadcast(op, rng, tmp_path):
    for n in (1, 2, 3, 4):
        g = B.Graph(rng, 13)
        s = shape4(rng)
        ins = [g.input(f"x{i}", s) for i in range(n)]
        if n >= 2:
            # one broadcast activation and one constant operand
            ins[1] = g.node("ReduceMean", [ins[1]], axes=[2], keepdims=1)
        if n >= 3:
            ins[2] = g.init(rng.uniform(-1, 1, [1, s[1], 1]).astype(np.float32))
        y = g.node(op, ins)
        run(rng, tmp_path, g.build([g.node("Relu", [y]) if n == 1 else y]), f"{op}{n}")


# ---- refusals ----------------------------------------------------------------------------

def fails(path, *needles):
    r = convd_run(path, [], check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    return r.stderr


@pytest.mark.parametrize("case", ["pad_wrap", "pad_batch", "slice_batch", "reduce_batch", "axes_attr_at_18",
                                  "gelu_approx", "ln_stash", "split_batch", "pad_unknown_attr", "split_attr_at_13"])
def test_refusals_name_the_node(case, rng, tmp_path):
    opset = {"axes_attr_at_18": 18, "gelu_approx": 20, "ln_stash": 17, "pad_wrap": 19}.get(case, 13)
    g = B.Graph(rng, opset)
    x = g.input("x", [3, 6, 6])
    if case == "pad_wrap":
        y = g.node("Pad", [x, ints(g, [0, 0, 1, 1, 0, 0, 1, 1])], name="the_node", mode="wrap")
        want = ["wrap"]
    elif case == "pad_batch":
        y = g.node("Pad", [x, ints(g, [1, 0, 0, 0, 0, 0, 0, 0])], name="the_node")
        want = ["batch"]
    elif case == "slice_batch":
        y = g.node("Slice", [x, ints(g, [0]), ints(g, [1]), ints(g, [0])], name="the_node")
        want = ["batch"]
    elif case == "reduce_batch":
        y = g.node("ReduceSum", [x, ints(g, [0, 1])], name="the_node")
        want = ["batch"]
    elif case == "axes_attr_at_18":
        y = g.node("ReduceMean", [x], axes=[1], name="the_node")
        want = ["axes"]
    elif case == "gelu_approx":
        y = g.node("Gelu", [x], approximate="erf", name="the_node")
        want = ["approximate"]
    elif case == "ln_stash":
        y = g.node("LayerNormalization", [x, g.init(np.ones(6, np.float32))], stash_type=0, name="the_node")
        want = ["stash_type"]
    elif case == "split_attr_at_13":
        y = g.node("Split", [x], n_out=1, axis=1, split=[3], name="the_node")
        want = ["split", "opset 13"]
    elif case == "split_batch":
        y = g.node("Split", [x], n_out=1, axis=0, name="the_node")
        want = ["batch"]
    else:
        y = g.node("Pad", [x, ints(g, [0, 0, 1, 1, 0, 0, 1, 1])], name="the_node", frobnicate=1)
        want = ["frobnicate"]
    m = g.build([y], out_shapes={y: ["N", 3, 6, 6]})
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    fails(path, "E_UNSUPPORTED", "the_node", *want)


def test_densenet_batchnorm_runs_no_reference_loop(rng, tmp_path):
    """DenseNet's BN-ReLU before each conv (a per-channel Mul and Add on a blocked concat) takes a jit
    kernel: its constants go blocked with the activation (a plain one put oneDNN on its reference loop,
    ~40x slower: 1.6 of 1.7 s of a DenseNet-121-shaped prefix)."""
    from tests.models.test_models import MODELS
    path = B.save(MODELS["densenet"](rng), tmp_path / "d.onnx")
    bn = [l for l in layers(path) if l["op"].startswith("BN(")]
    assert bn and not any(l["kernel"].startswith("dnnl:ref") for l in bn), bn


@pytest.mark.parametrize("step", [2 ** 63 - 1, -(2 ** 63 - 1), -1])
def test_slice_extreme_bounds_and_steps(step, rng, tmp_path):
    """INT64 bounds and steps clamp without overflowing (the count is computed without start + step)."""
    g = B.Graph(rng, 13)
    x = g.input("x", [4, 5, 6])
    lo, hi = -(2 ** 63), 2 ** 63 - 1
    y = g.node("Slice", [x, ints(g, [lo if step > 0 else hi]), ints(g, [hi if step > 0 else lo]), ints(g, [2]),
                         ints(g, [step])])
    run(rng, tmp_path, g.build([y]))


def test_slice_step_int64_min_is_refused(rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [4, 5, 6])
    y = g.node("Slice", [x, ints(g, [4]), ints(g, [0]), ints(g, [2]), ints(g, [-(2 ** 63)])], name="the_node")
    path = tmp_path / "m.onnx"
    onnx.save(g.build([y], out_shapes={y: ["N", 4, 1, 6]}), str(path))
    r = convd_run(path, [], check=False)
    assert r.returncode == 1 and "E_MODEL" in r.stderr and "the_node" in r.stderr, r.stderr


def test_split_num_outputs_that_leave_an_empty_chunk_refused(rng, tmp_path):
    """num_outputs 3 over 4 channels: chunks of ceil(4/3) = 2 leave the last
    one empty; onnxruntime refuses it when it runs, convd at load."""
    g = B.Graph(rng, 18)
    x = g.input("x", [4, 3, 3])
    outs = g.node("Split", [x], n_out=3, axis=1, num_outputs=3)
    path = tmp_path / "split.onnx"
    onnx.save(g.build([g.node("Relu", [o]) for o in outs]), str(path))
    fails(path, "E_MODEL", "split sizes do not add up to dim 4")
