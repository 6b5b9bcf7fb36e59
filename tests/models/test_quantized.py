"""Quantized ONNX (docs/QUANTIZATION.md): small CNNs from builders.py quantized
with onnxruntime's own quantize_static (per-channel s8 weights, u8
activations, calibrated on a few random inputs), in the QDQ form and the
QOperator form, must load, and convd's f32 run (dequantized weights,
fake-quantized activations) must agree with onnxruntime running the same
quantized file: relative L2 error <= 1e-2 and the same top-1 class. A 90%
pruned model keeps its zeros through quantization and still gets sparse
kernels. Corrupt QDQ files are refused with E_MODEL and a clear message.
Fresh random shapes and weights per run (CD_TEST_SEED fixes them)."""
import json
import os
import re
import shutil
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from tests.models import builders as B
from tests.models.runner import convd_run
from tests.models.test_errors import fails
from tests.models.builders import ri
from tests.models.test_sparse_models import cache_env, plan_json, weighted  # noqa: F401 (fixtures)

REL_L2 = 1e-2
# convd computes a quantized file in f32 (dequantized weights, fake-quantized
# activations), onnxruntime with integer kernels: an activation that lands on
# a rounding boundary (x / scale = k + 0.5, up to the last bit) can round one
# step apart, and on these small models one such step can move an input's
# whole answer by a few percent. So the bound holds for the median input of
# a batch, and the top-1 class for TOP1 of them; a wrong scale, zero point or
# lowering moves every input (exact agreement is for the int8 kernels).
TOP1 = 0.75


class Reader(CalibrationDataReader):
    """A few random inputs, the calibration of quantize_static."""

    def __init__(self, model, rng, n=4):
        name, shape = model.graph.input[0].name, [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        self.items = iter([{name: rng.standard_normal([1] + shape[1:]).astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.items, None)


def quantize(model, path, rng, fmt="QDQ", per_channel=True):
    src = path.with_suffix(".f32.onnx")
    onnx.save(model, str(src))
    quantize_static(str(src), str(path), Reader(model, rng), quant_format=getattr(QuantFormat, fmt),
                    per_channel=per_channel, weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
    return path


def cnn(rng):
    """conv/BN/relu, a residual block (Add), max and global average pools, an FC head."""
    g = B.Graph(rng)
    c, h = ri(rng, 8, 16), ri(rng, 12, 20)
    x = g.input("x", [3, h, h])
    y = g.conv_bn_relu(x, 3, c, 3)
    y = g.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = B.resnet_basic(g, y, c, c)
    y = B.resnet_basic(g, y, c, 2 * c, 2)
    y = B.fc_head(g, y, 2 * c, 10, softmax=False)
    return g.build([y])


def models(rng):
    return {
        "cnn": cnn(rng),
        "resnet18": B.resnet18(rng, classes=10, size=32, width=0.125),
        "mobilenetv2": B.mobilenetv2(rng, classes=10, size=32, width=0.25),
    }


def compare(path, tmp_path, rng, batch=8, device=None, env=None):
    """Runs convd-run and onnxruntime on the same random inputs; returns the
    median over the inputs of the relative L2 error, and the top-1 agreement."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    i = sess.get_inputs()[0]
    x = rng.standard_normal([batch] + [int(d) for d in i.shape[1:]]).astype(np.float32)
    xp, yp = tmp_path / "x.npy", tmp_path / f"y-{path.stem}.npy"
    np.save(xp, x)
    args = ["--input", f"{i.name}={xp}", "--output", yp, "--batch", batch]
    if device:
        args += ["--device", device, "--max-batch", batch]
    convd_run(path, args, env=env)
    got, want = np.load(yp).astype(np.float64), sess.run(None, {i.name: x})[0].astype(np.float64)
    assert got.shape == want.shape
    g, w = got.reshape(batch, -1), want.reshape(batch, -1)
    errs = np.linalg.norm(g - w, axis=1) / np.maximum(np.linalg.norm(w, axis=1), 1e-30)
    err = float(np.median(errs))
    top1 = float((g.argmax(1) == w.argmax(1)).mean())
    print(f"{path.name}: relative L2 per input {np.round(errs, 4).tolist()}, top-1 agreement {top1:.2f}")
    return err, top1


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_quantize_static_models_match_onnxruntime(fmt, tmp_path, rng):
    for name, m in models(rng).items():
        q = quantize(m, tmp_path / f"{name}-{fmt}.onnx", rng, fmt)
        err, top1 = compare(q, tmp_path, rng)
        assert err <= REL_L2, f"{name} {fmt}: median relative L2 {err:.3g}"
        assert top1 >= TOP1, f"{name} {fmt}: top-1 agreement {top1}"


def test_qdq_per_tensor_and_reference_kernels(tmp_path, rng):
    q = quantize(cnn(rng), tmp_path / "pt.onnx", rng, "QDQ", per_channel=False)
    for env in (None, {"CONVD_CPU_KERNELS": "ref"}):
        err, top1 = compare(q, tmp_path, rng, env=env)
        assert err <= REL_L2 and top1 >= TOP1


def test_qdq_model_on_hip_emu(tmp_path, rng):
    q = quantize(cnn(rng), tmp_path / "hip.onnx", rng)
    err, top1 = compare(q, tmp_path, rng, batch=4, device="hip-emu")
    assert err <= REL_L2 and top1 >= TOP1
    info = json.loads(convd_run(q, ["--device", "hip-emu", "--info", "--json"]).stdout)
    kernels = [l["kernel"] for l in info["layers"]]
    assert any("fakequant" in k for k in kernels), kernels


def prune_magnitude(model, sparsity):
    """Zeroes the smallest weights of every conv and FC (unstructured)."""
    weights = {n.input[1] for n in model.graph.node if n.op_type in ("Conv", "Gemm")}
    for t in model.graph.initializer:
        if t.name in weights:
            w = numpy_helper.to_array(t).copy()
            cut = np.quantile(np.abs(w), sparsity)
            w[np.abs(w) <= cut] = 0
            t.CopyFrom(numpy_helper.from_array(w, t.name))
    return model


def test_pruned_qdq_model_keeps_zeros_and_sparse_kernels(tmp_path, rng, cache_env):  # noqa: F811
    g = B.Graph(rng)  # BN folded, as quantize_static's pre-processing leaves a model
    x = g.input("x", [32, 14, 14])
    y = g.relu(g.conv(x, 32, 128, 1))
    y = g.relu(g.conv(y, 128, 128, 3, pad=1))
    y = g.relu(g.conv(y, 128, 128, 1))
    y = B.fc_head(g, y, 128, 10, softmax=False)
    m = prune_magnitude(g.build([y]), 0.9)
    q = quantize(m, tmp_path / "p90.onnx", rng)
    # The quantized weights keep the pruned zeros (symmetric s8: zero point 0).
    qm = onnx.load(str(q))
    inits = {t.name: numpy_helper.to_array(t) for t in qm.graph.initializer}
    zeros = [float((inits[n.input[0]] == 0).mean()) for n in qm.graph.node
             if n.op_type == "DequantizeLinear" and n.input[0] in inits and inits[n.input[0]].ndim == 4]
    assert len(zeros) == 3 and min(zeros) >= 0.89, zeros
    err, top1 = compare(q, tmp_path, rng, env=cache_env)
    assert err <= REL_L2 and top1 >= TOP1
    # The planner sees the same weights as in the f32 pruned file: the same
    # density in every layer. (Not the same dense/sparse choices: on layers
    # this small the cost model's choice can follow the calibration samples
    # of the moment, which differ between two processes while the cache fills.)
    plan, plan_f32 = plan_json(q, env=cache_env), plan_json(q.with_suffix(".f32.onnx"), env=cache_env)
    for layer in weighted(plan)[:3]:
        assert layer["density"] <= 0.11, layer
    assert [round(l["density"], 6) for l in weighted(plan)] == [round(l["density"], 6) for l in weighted(plan_f32)]
    # And the sparse kernels take the dequantized weights (forced: CONVD_PLAN=sparse).
    if os.environ.get("CONVD_BUILD", "build") != "build-san":  # see test_sparse_models.py
        forced = dict(cache_env, CONVD_PLAN="sparse")
        assert all(l["sparse"] for l in weighted(plan_json(q, env=forced))[:3])
        info = convd_run(q, ["--info"], env=forced).stdout
        assert "sparse:" in info, info


# ---- the int8 kernels (CONVD_INT8=on: wherever a conv can; auto times both) --------------


def quantize_folded(model, path, rng, per_channel=True):
    """quantize_static after onnxruntime's own pre-processing, which folds
    BatchNormalization into the convs (what a torchvision export gives): the
    convs then feed their QuantizeLinear directly, which the int8 conv does."""
    from onnxruntime.quantization.shape_inference import quant_pre_process
    src, pre = path.with_suffix(".f32.onnx"), path.with_suffix(".pre.onnx")
    onnx.save(model, str(src))
    quant_pre_process(str(src), str(pre))
    quantize_static(str(pre), str(path), Reader(model, rng), quant_format=QuantFormat.QDQ,
                    per_channel=per_channel, weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
    return path


def info_json(path, env):
    return json.loads(convd_run(path, ["--info", "--json"], env=env).stdout)


@pytest.mark.parametrize("name", ["cnn", "resnet18", "mobilenetv2"])
def test_int8_kernels_match_onnxruntime(name, tmp_path, rng):
    q = quantize_folded(models(rng)[name], tmp_path / f"{name}-i8.onnx", rng, per_channel=name != "cnn")
    on, off = {"CONVD_INT8": "on"}, {"CONVD_INT8": "off"}
    layers_on, layers_off = info_json(q, on)["layers"], info_json(q, off)["layers"]
    convs = [l for l in layers_off if l["op"].startswith("Conv")]
    int8 = [l for l in layers_on if l["dtype"] == "int8"]
    # Every conv runs int8 (their inputs all come quantized in these files),
    # none does with CONVD_INT8=off, and an int8 conv does the QuantizeLinear
    # after it: the plan has fewer layers.
    assert len(int8) == len(convs) > 0, [(l["name"], l["kernel"], l["dtype"]) for l in layers_on]
    assert all(l["dtype"] == "f32" and l["out_dtype"] == "f32" for l in layers_off)
    assert len(layers_on) < len(layers_off)
    # Between two int8 convs the activation stays in its integers (conv ->
    # conv chains: the stem into the first block, MobileNetV2's expand ->
    # depthwise -> project); an int8 output is only ever read by int8 convs,
    # or by a max pool that passes the integers on to them (the stem's).
    stored = {l["name"] for l in layers_on if l["out_dtype"] == "int8"}
    pools = {l["name"] for l in layers_on if l["op"] == "MaxPool"}
    assert stored and stored <= {l["name"] for l in int8} | pools
    # Each residual block's conv -> Q -> DQ -> Add(+Relu) -> Q is one layer.
    assert any(l["op"].startswith("Conv+QAdd") for l in int8), [l["op"] for l in layers_on]
    # Where oneDNN runs them, the stored integers are in NHWC, its int8
    # kernels' own layout (runtime/plan-int8-storage.c): no reorder between
    # two int8 layers; residual blocks read their skip as those bytes too.
    # Every float32 output stays in a layout float32 ops take.
    if all(l["kernel"].startswith("dnnl:") for l in int8):
        assert all(l["layout"] == "NHWC" for l in layers_on if l["out_dtype"] == "int8"), [
            (l["name"], l["layout"]) for l in layers_on]
        stored_res = [l for l in layers_on if l["op"].startswith("Conv+QAdd") and l["out_dtype"] == "int8"]
        if name != "cnn":
            assert stored_res, [(l["name"], l["op"], l["out_dtype"]) for l in layers_on]
    assert all(l["layout"] != "NHWC" for l in layers_on if l["out_dtype"] != "int8")
    for env in (on, dict(on, CONVD_CPU_KERNELS="ref")):
        err, top1 = compare(q, tmp_path, rng, env=env)
        assert err <= REL_L2, f"{name} int8: median relative L2 {err:.3g}"
        assert top1 >= TOP1, f"{name} int8: top-1 agreement {top1}"


def test_int8_and_f32_plans_of_a_pruned_model_agree(tmp_path, rng, cache_env):  # noqa: F811
    """A 90% pruned, BN-folded model: the int8 plan and the f32 plan of the
    same quantized file compute the same grid values but where a sum lands
    within float rounding of a rounding boundary (f32 sums in another order),
    so they agree closely; and auto mode (timing both) gives a valid plan
    whose every conv says what it chose."""
    g = B.Graph(rng)
    x = g.input("x", [16, 12, 12])
    y = g.relu(g.conv(x, 16, 64, 1))
    y = g.relu(g.conv(y, 64, 64, 3, pad=1))
    y = g.relu(g.conv(y, 64, 64, 3, pad=1, stride=2))
    y = B.fc_head(g, y, 64, 10, softmax=False)
    q = quantize_folded(prune_magnitude(g.build([y]), 0.9), tmp_path / "p90-i8.onnx", rng)
    on = dict(cache_env, CONVD_INT8="on")
    e_on, t_on = compare(q, tmp_path, rng, env=on)
    e_off, t_off = compare(q, tmp_path, rng, env=dict(cache_env, CONVD_INT8="off"))
    assert e_on <= REL_L2 and e_off <= REL_L2 and t_on >= TOP1
    auto = info_json(q, dict(cache_env, CONVD_INT8="auto"))["layers"]
    assert {l["dtype"] for l in auto if l["op"].startswith("Conv")} <= {"int8", "f32"}


def test_sparse_int8_residual_blocks_keep_their_integers(tmp_path, rng, cache_env):  # noqa: F811
    """A 90% pruned ResNet on the sparse int8 kernels (forced: CONVD_PLAN=sparse,
    CONVD_INT8=on): a block's output, read by the next block's conv and as the
    skip of a Conv+QAdd, stays u8 in NCHW (the sparse kernels take an integer
    residual), and the model still matches onnxruntime."""
    q = quantize_folded(prune_magnitude(models(rng)["resnet18"], 0.9), tmp_path / "r18-p90-i8.onnx", rng)
    env = dict(cache_env, CONVD_INT8="on", CONVD_PLAN="sparse")
    layers = info_json(q, env)["layers"]
    sparse = [l for l in layers if l["kernel"].startswith("sparse-i8")]
    assert sparse, [(l["name"], l["kernel"]) for l in layers]
    res = [l for l in sparse if l["op"].startswith("Conv+QAdd") and l["out_dtype"] == "int8"]
    assert res, [(l["name"], l["op"], l["kernel"], l["out_dtype"]) for l in layers]
    assert all(l["layout"] == "NCHW" for l in sparse if l["out_dtype"] == "int8")
    err, top1 = compare(q, tmp_path, rng, env=env)
    assert err <= REL_L2 and top1 >= TOP1, (err, top1)


def test_int8_after_compaction_of_a_filter_pruned_model(tmp_path, rng, cache_env):  # noqa: F811
    """Zero filters make constant channels: compaction drops them, folds them
    into the next convs' biases and, behind padding, inserts border maps
    (new ops). The int8 convs must still find their inputs' quantization and
    keep their weights' scales (sliced with the filters)."""
    g = B.Graph(rng)
    x = g.input("x", [8, 12, 12])
    y = g.relu(g.conv(x, 8, 32, 3, pad=1))
    y = g.relu(g.conv(y, 32, 32, 3, pad=1))
    y = g.relu(g.conv(y, 32, 16, 1))
    y = B.fc_head(g, y, 16, 10, softmax=False)
    m = g.build([y])
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    for t in m.graph.initializer:  # every third filter of the first two convs: weights 0, bias kept
        if t.name in (convs[0].input[1], convs[1].input[1]):
            w = numpy_helper.to_array(t).copy()
            w[::3] = 0
            t.CopyFrom(numpy_helper.from_array(w, t.name))
        # Some of the first conv's constant channels positive, so that Relu
        # keeps them and the second conv's padding needs a border map (with
        # every such bias negative, as CD_TEST_SEED=269314810 drew, there is none).
        if t.name == convs[0].input[2]:
            b = numpy_helper.to_array(t).copy()
            b[::6] = np.abs(b[::6]) + 0.02
            t.CopyFrom(numpy_helper.from_array(b, t.name))
    q = quantize_folded(m, tmp_path / "f-i8.onnx", rng)
    on = dict(cache_env, CONVD_INT8="on")
    plan = plan_json(q, env=on)
    assert any("border map" in l["compaction"] for l in weighted(plan)), [l["compaction"] for l in weighted(plan)]
    assert sum(l["dtype"] == "int8" for l in weighted(plan)) >= 3
    # The int8 conv adds its border map itself, before its activation and
    # its output's quantization: no float32 BorderMap layer or FakeQuant
    # pass is left after it, and the map is added once per image at batch 8.
    layers = info_json(q, on)["layers"]
    ops = [(l["name"], l["op"], l["kernel"], l["dtype"], l["out_dtype"]) for l in layers]
    assert any(l["op"].startswith("Conv+BorderMap") and l["dtype"] == "int8" for l in layers), ops
    assert not any(l["op"].startswith("BorderMap") for l in layers), ops
    # The sparse int8 kernels add it too, in their epilogue.
    sp = dict(on, CONVD_PLAN="sparse")
    layers = info_json(q, sp)["layers"]
    ops = [(l["name"], l["op"], l["kernel"], l["dtype"], l["out_dtype"]) for l in layers]
    assert any(l["op"].startswith("Conv+BorderMap") and l["dtype"] == "int8" and l["kernel"].startswith("sparse")
               for l in layers), ops
    assert not any(l["op"].startswith("BorderMap") for l in layers), ops
    for env in (on, sp, dict(on, CONVD_CPU_KERNELS="ref"), dict(cache_env, CONVD_INT8="off")):
        err, top1 = compare(q, tmp_path, rng, env=env)
        assert err <= REL_L2 and top1 >= TOP1, (env, err, top1)


# ---- hand-made files: every form of the ops, and the bad ones -----------------------------


def qdq_model(opset=13, x_type=TensorProto.FLOAT, out_q=False, w_scale=None, w_zp=None, axis=0, mutate=None):
    """x -> Q -> DQ -> Conv(DQ(int8 weights)) -> Q -> DQ -> y, made by hand."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    inits = [
        numpy_helper.from_array(w, "w_q"),
        numpy_helper.from_array(np.array(w_scale if w_scale is not None else [0.01, 0.02, 0.03, 0.04], np.float32),
                                "w_s"),
        numpy_helper.from_array(np.array(w_zp if w_zp is not None else [0, 0, 0, 0], np.int8), "w_zp"),
        numpy_helper.from_array(np.array(0.02, np.float32), "x_s"),
        numpy_helper.from_array(np.array(128, np.uint8), "x_zp"),
        numpy_helper.from_array(np.array(0.05, np.float32), "y_s"),
        numpy_helper.from_array(np.array(120, np.uint8), "y_zp"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_s", "x_zp"], ["xq"], name="q_x"),
        helper.make_node("DequantizeLinear", ["xq", "x_s", "x_zp"], ["xd"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_zp"], ["w"], name="dq_w", axis=axis),
        helper.make_node("Conv", ["xd", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c", "y_s", "y_zp"], ["cq"], name="q_y"),
    ]
    if not out_q:
        nodes.append(helper.make_node("DequantizeLinear", ["cq", "y_s", "y_zp"], ["y"], name="dq_y"))
    out = "cq" if out_q else "y"
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", x_type, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info(out, TensorProto.UINT8 if out_q else TensorProto.FLOAT,
                                                             None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 19 else 9
    if mutate:
        mutate(m)
    return m


def save(m, path):
    onnx.save(m, str(path))
    return path


@pytest.mark.parametrize("opset", [13, 19, 21])
def test_hand_made_qdq_matches_onnxruntime_exactly_on_the_grid(opset, tmp_path, rng):
    p = save(qdq_model(opset), tmp_path / f"qdq{opset}.onnx")
    err, _ = compare(p, tmp_path, rng, batch=3)
    # Outputs are multiples of y_s: equal except where a tie rounds the other way.
    assert err <= 1e-3


def test_qdq_requantization_with_other_parameters(tmp_path, rng):
    def other_dq(m):  # the activation dequantized with a scale and zero point of its own
        m.graph.initializer.extend([numpy_helper.from_array(np.array(0.03, np.float32), "x_s2"),
                                    numpy_helper.from_array(np.array(100, np.uint8), "x_zp2")])
        m.graph.node[1].input[1:] = ["x_s2", "x_zp2"]
    err, _ = compare(save(qdq_model(mutate=other_dq), tmp_path / "rq.onnx"), tmp_path, rng)
    assert err <= 1e-3


def test_qdq_missing_scale(tmp_path):
    def drop(m):
        m.graph.node[2].input[1] = ""
    fails(save(qdq_model(mutate=drop), tmp_path / "m.onnx"), "E_MODEL", "dq_w", "input 1")


def test_qdq_zero_point_type_mismatch(tmp_path):
    def u8_zp(m):
        for t in m.graph.initializer:
            if t.name == "w_zp":
                t.CopyFrom(numpy_helper.from_array(np.zeros(4, np.uint8), "w_zp"))
    fails(save(qdq_model(mutate=u8_zp), tmp_path / "m.onnx"), "E_MODEL", "dq_w", "zero point is uint8", "int8")


def test_qdq_axis_out_of_range(tmp_path):
    fails(save(qdq_model(axis=4), tmp_path / "m.onnx"), "E_MODEL", "dq_w", "axis 4 is out of range")


def test_qdq_scale_count_disagrees_with_the_axis(tmp_path):
    fails(save(qdq_model(w_scale=[0.1, 0.2, 0.3]), tmp_path / "m.onnx"), "E_MODEL", "dq_w", "scale has 3 values")


def test_qdq_zero_scale(tmp_path):
    fails(save(qdq_model(w_scale=[0.1, 0.0, 0.3, 0.4]), tmp_path / "m.onnx"), "E_MODEL", "dq_w", "positive")


def test_qdq_quantized_graph_input_and_output_refused_by_name(tmp_path):
    def u8_in(m):  # the input arrives quantized: the first QuantizeLinear goes
        del m.graph.node[0]
        m.graph.node[0].input[0] = "x"
    fails(save(qdq_model(x_type=TensorProto.UINT8, mutate=u8_in), tmp_path / "i.onnx"), "E_UNSUPPORTED",
          "graph input 'x' is uint8", "dq_x")
    fails(save(qdq_model(out_q=True), tmp_path / "o.onnx"), "E_UNSUPPORTED", "graph output 'cq'", "q_y")


def test_quantized_tensor_into_a_float_op_is_refused(tmp_path):
    def relu_on_q(m):
        m.graph.node[1].CopyFrom(helper.make_node("Relu", ["xq"], ["xd"], name="relu_q"))
    fails(save(qdq_model(mutate=relu_on_q), tmp_path / "m.onnx"), "E_MODEL", "relu_q", "quantized uint8")


def test_dynamic_quantization_sums_as_output_refused_clearly(tmp_path):
    """quantize_dynamic's pattern cut short: the integer sums as the graph's
    output (convd holds them times the scale). The full pattern runs:
    tests/models/test_dynamic_quant.py."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((4, 2), np.int8), "w")
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dql"),
             helper.make_node("MatMulInteger", ["xq", "w", "xz"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["y"], to=TensorProto.FLOAT)]
    m = helper.make_model(helper.make_graph(nodes, "dyn", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    fails(save(m, tmp_path / "d.onnx"), "E_UNSUPPORTED", "graph output 'y'", "integer sums", "DynamicQuantizeLinear")


def test_conv_integer_and_matmul_integer_after_static_quantize(tmp_path, rng):
    """QuantizeLinear -> ConvInteger -> Cast -> Mul(scale) -> Flatten -> QuantizeLinear -> MatMulInteger -> Cast."""
    r = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
        numpy_helper.from_array(np.array(128, np.uint8), "xz"),
        numpy_helper.from_array(r.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8), "w"),
        numpy_helper.from_array(np.array(2, np.int8), "wz"),
        numpy_helper.from_array(np.array(0.001, np.float32), "ms"),
        numpy_helper.from_array(np.array(0.1, np.float32), "hs"),
        numpy_helper.from_array(np.array(10, np.uint8), "hz"),
        numpy_helper.from_array(r.integers(-100, 100, (4 * 6 * 6, 5)).astype(np.int8), "b"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["accf", "ms"], ["h"]),
        helper.make_node("Flatten", ["h"], ["hf"]),
        helper.make_node("QuantizeLinear", ["hf", "hs", "hz"], ["hq"]),
        helper.make_node("MatMulInteger", ["hq", "b", "hz"], ["acc2"]),
        helper.make_node("Cast", ["acc2"], ["y"], to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(nodes, "int", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    err, top1 = compare(save(m, tmp_path / "int.onnx"), tmp_path, rng)
    assert err <= 1e-3 and top1 >= TOP1


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_quantized_model_through_the_daemon(fmt, tmp_path, rng):
    """The same files served: `load` of a quantized file and `infer` through
    the socket (dynamic batching of two requests included) give onnxruntime's
    answers on the same file."""
    from tests.integration.daemon_wire import Wire, request
    from tests.support.daemon import TestDaemon
    models_dir = tmp_path / "m"
    models_dir.mkdir()
    path = quantize(cnn(rng), models_dir / "q.onnx", rng, fmt)
    path.with_suffix(".f32.onnx").unlink()  # only the quantized file is served
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    i = sess.get_inputs()[0]
    xs = [rng.standard_normal([ri(rng, 1, 3)] + [int(d) for d in i.shape[1:]]).astype(np.float32) for _ in range(6)]
    with TestDaemon(models_dir=models_dir, args=["--max-batch", "8"]) as d, Wire.connect(d, timeout=60) as w:
        assert w.result("models")["models"][0]["name"] == "q"
        w.send(b"".join(request(k + 1, "infer", {"model": "q", "inputs": {
            i.name: {"dtype": "f32", "shape": list(x.shape), "data": x.tobytes()}}}) for k, x in enumerate(xs)))
        got = {m[1]: m for m in w.recv(len(xs), timeout=60)}
    errs, same = [], []
    for k, x in enumerate(xs):
        m = got[k + 1]
        assert m[2] is None, m[2]
        (t,) = m[3]["outputs"].values()
        y = np.frombuffer(t["data"], np.float32).reshape(t["shape"]).astype(np.float64).reshape(len(x), -1)
        want = sess.run(None, {i.name: x})[0].astype(np.float64).reshape(len(x), -1)
        errs += list(np.linalg.norm(y - want, axis=1) / np.maximum(np.linalg.norm(want, axis=1), 1e-30))
        same += list(y.argmax(1) == want.argmax(1))
    assert np.median(errs) <= REL_L2, errs  # per input, as in compare()
    assert np.mean(same) >= TOP1, same


def test_int8_auto_timings_are_cached(tmp_path, rng, cache_env):  # noqa: F811
    """--int8 auto times each conv's f32 and int8 candidates at load; the
    times go to the planner's cache (int8-v5.txt), so a second load of the
    model times nothing and makes the same choices. (A recorded calibration,
    cache_env, keeps the dense/sparse choice that the int8 one builds on the
    same in both processes.)"""
    q = quantize(cnn(rng), tmp_path / "c.onnx", rng)
    # The sparse kernels: their int8 form exists at every ISA level, so
    # there is an int8 candidate to time under the AVX2 cap too (oneDNN's
    # dense int8 declines full-range weights without VNNI).
    env = dict(cache_env, CONVD_INT8="auto", CONVD_PLAN="sparse")
    cache = Path(cache_env["XDG_CACHE_HOME"]) / "convd" / "int8-v5.txt"
    cache.unlink(missing_ok=True)
    first = json.loads(convd_run(q, ["--info", "--json"], env=env).stdout)["layers"]
    lines = cache.read_text().splitlines()
    assert lines and all("|i8 " in line for line in lines), lines
    second = json.loads(convd_run(q, ["--info", "--json"], env=env).stdout)["layers"]
    assert cache.read_text().splitlines() == lines  # nothing timed again
    assert [(l["kernel"], l["dtype"]) for l in first] == [(l["kernel"], l["dtype"]) for l in second]


def test_daemon_shows_int8_layers_in_models_stats_and_plan(tmp_path, rng):
    """An operator sees which layers run int8: `models` counts them,
    `stats` breaks the layers down by type, `plan` gives each layer's dtype;
    the three agree (--int8 on: every conv that can, whatever the timing)."""
    from tests.integration.daemon_wire import Wire
    from tests.support.daemon import TestDaemon
    models_dir = tmp_path / "m"
    models_dir.mkdir()
    path = quantize(cnn(rng), models_dir / "q.onnx", rng)
    path.with_suffix(".f32.onnx").unlink()
    with TestDaemon(models_dir=models_dir, args=["--int8", "on"]) as d, Wire.connect(d, timeout=60) as w:
        (entry,) = w.result("models")["models"]
        stats = w.result("stats")["models"]["q"]["layer_dtypes"]
        plan = w.result("plan", {"model": "q"})
    dtypes = [l["dtype"] for l in plan["layers"]]
    assert entry["int8_layers"] > 0 and dtypes.count("int8") == entry["int8_layers"], (entry, dtypes)
    assert stats == {"int8": dtypes.count("int8"), "f32": len(dtypes) - dtypes.count("int8")}, stats


@pytest.mark.parametrize("name", ["cnn", "mobilenetv2"])
def test_float32_convs_do_their_fakequant(name, tmp_path, rng):
    """Where a QDQ model's convs run in float32 (CONVD_INT8=off here; without
    VNNI the planner times them so), each conv whose output only feeds a
    QuantizeLinear does that FakeQuant in oneDNN's epilogue instead of a pass
    of its own (CONVD_FQ_FUSE=off keeps the passes): fewer layers, and the
    same arithmetic (the unit tests check it element by element)."""
    q = quantize_folded(models(rng)[name], tmp_path / f"{name}-fq.onnx", rng)
    fused_env = {"CONVD_INT8": "off"}
    plain_env = dict(fused_env, CONVD_FQ_FUSE="off")
    fused, plain = info_json(q, fused_env)["layers"], info_json(q, plain_env)["layers"]
    fq_convs = [l for l in fused if l["op"].endswith("+FQ")]
    assert fq_convs, [(l["name"], l["op"], l["kernel"]) for l in fused]
    assert all(l["kernel"].startswith("dnnl:") and l["dtype"] == "f32" for l in fq_convs)
    assert not any(l["op"].endswith("+FQ") for l in plain)
    # Our depthwise kernel quantizes in its own epilogue too.
    if any("dw3x3" in l["kernel"] for l in plain):
        assert any("dw3x3" in l["kernel"] for l in fq_convs), [(l["name"], l["op"], l["kernel"]) for l in fused]
    passes = lambda layers: sum(l["kernel"].startswith("fakequant") for l in layers)  # noqa: E731
    assert passes(plain) - passes(fused) == len(fq_convs) <= len(plain) - len(fused)  # (a reorder may go too)
    # Same input through both plans: equal but where a conv's sum landed
    # within float noise of a half step (one step apart there, and what
    # follows moves a little).
    x = rng.standard_normal([4] + [d.dim_value for d in onnx.load(str(q)).graph.input[0].type.tensor_type.shape.dim][1:])
    xp = tmp_path / "x.npy"
    np.save(xp, x.astype(np.float32))
    outs = []
    for env, tag in ((fused_env, "fused"), (plain_env, "plain")):
        yp = tmp_path / f"y-{tag}.npy"
        convd_run(q, ["--input", xp, "--output", yp, "--batch", 4], env=env)
        outs.append(np.load(yp).astype(np.float64))
    diff = np.linalg.norm(outs[0] - outs[1]) / max(np.linalg.norm(outs[1]), 1e-30)
    assert diff <= 1e-3, f"fused against the FakeQuant passes: relative L2 {diff:.3g}"
    err, top1 = compare(q, tmp_path, rng, env=fused_env)
    assert err <= REL_L2 and top1 >= TOP1, (err, top1)


def test_int8_auto_times_the_residual_block_it_would_fuse(tmp_path, rng, cache_env):  # noqa: F811
    """Where an int8 conv would do a QDQ residual block (Conv+QAdd), --int8
    auto times that fused layer against the float32 conv plus the block's Add
    and FakeQuant, not the plain int8 conv (which timed as fast as float32 at
    AVX2 while its Conv+QAdd cost up to 4x in the model); the times are cached
    (int8-qadd-v4.txt) and a second load makes the same choices."""
    q = quantize_folded(cnn(rng), tmp_path / "r.onnx", rng)
    env = dict(cache_env, CONVD_INT8="auto", CONVD_PLAN="sparse")
    cache = Path(cache_env["XDG_CACHE_HOME"]) / "convd" / "int8-qadd-v4.txt"
    cache.unlink(missing_ok=True)
    first = info_json(q, env)["layers"]
    lines = cache.read_text().splitlines()
    assert lines and all("|qadd " in line and "res1" in line for line in lines), lines
    second = info_json(q, env)["layers"]
    assert cache.read_text().splitlines() == lines  # nothing timed again
    assert [(l["op"], l["kernel"], l["dtype"]) for l in first] == [(l["op"], l["kernel"], l["dtype"]) for l in second]


@pytest.mark.parametrize("plan", ["sparse", "dense"])
def test_int8_residual_block_is_timed_on_its_integers(plan, tmp_path, rng, cache_env):  # noqa: F811
    """The fused Conv+QAdd candidate is timed as it runs between int8 layers:
    integers out, and in and the skip as integers where convs write them, in
    the kernels' own layout (NCHW sparse, NHWC dense). Timed on float tensors,
    the dense one paid oneDNN's boundary reorders (1x1 64>256 @56 on AMX 1.59
    ms against 0.3 in the plan) and auto kept whole blocks float32."""
    q = quantize_folded(models(rng)["resnet18"], tmp_path / "r18.onnx", rng)
    cache = Path(cache_env["XDG_CACHE_HOME"]) / "convd" / "int8-qadd-v4.txt"
    cache.unlink(missing_ok=True)
    info_json(q, dict(cache_env, CONVD_INT8="auto", CONVD_PLAN=plan))
    if not cache.exists():  # under the AVX2 cap oneDNN has no int8 kernel for these small dense convs
        pytest.skip(f"no int8 residual block candidate timed ({plan}): no fast int8 kernel for it on this CPU/cap")
    lines = cache.read_text().splitlines()
    # Always integers out, in the kernels' layout (sparse "sp1": NCHW, cd_layout
    # 0; dense: NHWC, 3); integers in and a skip of integers where convs write
    # them (the stem's block reads a MaxPool's skip; a block left float32
    # writes float32). Over sparse weights the dense int8 kernels are timed
    # too.
    for line in lines:
        head, flags = line.split("|qadd ")[1].split("\t")[0].split(" int")
        stored, lay = flags.split()
        assert stored.endswith(",1") and lay == ("lay0" if head.startswith("sp1") else "lay3"), line
    assert any("int1,1,1" in line for line in lines), lines
    assert any("qadd sp1" in line for line in lines) == (plan == "sparse"), lines


def test_dense_int8_kernels_over_sparse_weights(tmp_path, rng, cache_env):  # noqa: F811
    """CONVD_INT8=dense runs a pruned model's int8 convs on the dense int8
    kernels (their zeros multiplied; where oneDNN has no fast int8 kernel for
    a layer, as under the AVX2 cap for these small ones, it stays float32 on
    the sparse kernels), still matching onnxruntime; auto puts
    all of its int8 convs over sparse weights on one kind of kernel, never a
    mix (a dense NHWC layer between sparse NCHW ones pays relayouts)."""
    q = quantize_folded(prune_magnitude(models(rng)["resnet18"], 0.9), tmp_path / "r18-p90-i8.onnx", rng)
    dense = dict(cache_env, CONVD_INT8="dense", CONVD_PLAN="sparse")
    layers = info_json(q, dense)["layers"]
    convs = [l for l in layers if l["op"].startswith("Conv")]
    assert convs and all(l["dtype"] == "f32" or l["kernel"].startswith("dnnl:") for l in convs), [
        (l["name"], l["kernel"], l["dtype"]) for l in convs]
    err, top1 = compare(q, tmp_path, rng, env=dense)
    assert err <= REL_L2 and top1 >= TOP1, (err, top1)
    # The convs the float32 plan runs sparse: in auto, those that run int8
    # all run on one kind of kernel.
    off = info_json(q, dict(cache_env, CONVD_INT8="off", CONVD_PLAN="sparse"))["layers"]
    sparse = {l["name"] for l in off if l["op"].startswith("Conv") and l["kernel"].startswith("sparse")}
    # (A plan forced sparse keeps them on the sparse int8 kernels.)
    auto = info_json(q, dict(cache_env, CONVD_INT8="auto", CONVD_PLAN="sparse"))["layers"]
    kinds = {l["kernel"].split(":")[0] for l in auto if l["name"] in sparse and l["dtype"] == "int8"}
    assert sparse and kinds <= {"sparse-i8"}, [(l["name"], l["kernel"], l["dtype"]) for l in auto]


def _rig_int8_times(folder):
    """Rewrites the int8 timing caches in folder: every dense int8 candidate
    far faster than anything, the sparse int8 ones alternately
    faster and far slower than their float32 choice."""
    for name in ("int8-v5.txt", "int8-qadd-v4.txt", "int8-border-v1.txt"):
        path = folder / name
        if not path.exists():
            continue
        out = []
        for line in path.read_text().splitlines():
            key, _, vals = line.rpartition("\t")
            a, b = (float(v) for v in vals.split())
            # "|i8 spF,I": the float32 and the int8 candidates' sparse flags; "|qadd spI", "|border spI".
            dense = re.search(r"\|i8 sp\d,0 |\|qadd sp0 |\|border sp0 ", key) is not None
            wins = zlib.crc32(key.split("|")[3].encode()) % 2  # by the layer's shape
            if name == "int8-v5.txt":  # f32 ms, int8 ms
                b = 1e-4 if dense else (a * 0.5 if wins else 1e3)
            else:  # the fused block's (residual or border map) int8 ms, the float32 tail
                a = 1e-4 if dense else (1e-3 if wins else 1e3)
            out.append(f"{key}\t{a:g} {b:g}")
        path.write_text("\n".join(out) + "\n")


def test_dense_int8_choice_takes_every_conv_it_beats(tmp_path, rng, cache_env):  # noqa: F811
    """--int8 auto over sparse weights, when it puts its int8 convs on the
    dense int8 kernels (runtime/plan-int8.c dense_over_sparse), also takes
    there each conv that had stayed float32 (its sparse float32 kernel beat
    the sparse int8 one) where the dense int8 kernels beat float32: no
    sparse float32 conv is left among dense int8 ones. The timing caches are
    rigged so that dense int8 wins everywhere and half the sparse int8
    candidates lose to float32 (the decisions change the keys later convs
    are timed under, so rigged until they stop changing)."""
    g = B.Graph(rng)  # layers wide enough at 95% for the float32 plan to run them sparse
    x = g.input("x", [64, 14, 14])
    y = g.relu(g.conv(x, 64, 256, 1))
    for k in (3, 1, 3, 1):
        y = g.relu(g.conv(y, 256, 256, k, pad=k // 2))
    y = B.fc_head(g, y, 256, 10, softmax=False)
    q = quantize(prune_magnitude(g.build([y]), 0.95), tmp_path / "p95.onnx", rng)
    xdg = tmp_path / "xdg"
    shutil.copytree(cache_env["XDG_CACHE_HOME"], xdg)
    # The layers' sums decide (the whole-model pick would time the plans for real: test_int8_pick.py).
    env = dict(cache_env, XDG_CACHE_HOME=str(xdg), CONVD_INT8="auto", CONVD_INT8_PICK="layers")
    layers, before = None, None
    for _ in range(6):
        layers = info_json(q, env)["layers"]
        _rig_int8_times(xdg / "convd")
        plan = [(l["name"], l["kernel"], l["dtype"]) for l in layers]
        if plan == before:
            break
        before = plan
    layers = info_json(q, env)["layers"]
    over_sparse = [l for l in layers if l.get("int8_dense_ms", -1) >= 0]
    if not over_sparse:
        pytest.skip("no conv over sparse weights was timed on the dense int8 kernels here "
                    "(no fast dense int8 kernel on this CPU/cap, or the float32 plan runs none sparse)")
    show = [(l["name"], l["kernel"], l["dtype"], l["int8_ms"], l["int8_dense_ms"], l["int8_f32_ms"]) for l in layers
            if l["op"].startswith("Conv")]
    assert all(l["dtype"] == "int8" and l["kernel"].startswith("dnnl:") for l in over_sparse), show
    err, top1 = compare(q, tmp_path, rng, env=env)
    assert err <= REL_L2 and top1 >= TOP1, (err, top1)
