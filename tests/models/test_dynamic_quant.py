"""Dynamic quantization (docs/QUANTIZATION.md): small CNNs from builders.py
quantized by onnxruntime's own quantize_dynamic (DynamicQuantizeLinear ->
ConvInteger/MatMulInteger -> Cast -> Mul by the scales) must load, and
convd's output must equal onnxruntime's on the same file, input by input
(onnxruntime takes one scale over the whole batch, convd one per batch item:
so onnxruntime runs each input alone). Any other use of a
DynamicQuantizeLinear's outputs is refused by name. Fresh random shapes and
weights per run (CD_TEST_SEED fixes them)."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from tests.models import builders as B
from tests.models.runner import convd_run
from tests.models.test_errors import fails
from tests.models.test_quantized import models

# Per input, relative L2 against onnxruntime. convd's conv runs in float
# over the fake-quantized values where onnxruntime sums integers: the
# answers agree to float rounding, unless a later DynamicQuantizeLinear
# sees a value on a rounding tie and the two round it a step apart. So
# the bound holds for the median input, and a looser one for every input
# (a step apart early in a random-weight network moves its answer by up
# to ~10%; a wrong scale, zero point or pattern moves every input by O(1)).
MEDIAN_REL = 1e-4
MAX_REL = 0.2


def dyn_quantize(model, path, per_channel=False):
    src = path.with_suffix(".f32.onnx")
    onnx.save(model, str(src))
    quantize_dynamic(str(src), str(path), weight_type=QuantType.QInt8, per_channel=per_channel)
    return path


def compare_per_input(path, tmp_path, rng, batch=6, device=None):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    i = sess.get_inputs()[0]
    x = rng.standard_normal([batch] + [int(d) for d in i.shape[1:]]).astype(np.float32)
    x[0] *= 0.0  # an all-zero input: scale 1, zero point 0
    xp, yp = tmp_path / "x.npy", tmp_path / f"y-{path.stem}.npy"
    np.save(xp, x)
    args = ["--input", f"{i.name}={xp}", "--output", yp, "--batch", batch]
    if device:
        args += ["--device", device, "--max-batch", batch]
    convd_run(path, args)
    got = np.load(yp).astype(np.float64).reshape(batch, -1)
    want = np.stack([sess.run(None, {i.name: x[b:b + 1]})[0].ravel() for b in range(batch)]).astype(np.float64)
    errs = np.linalg.norm(got - want, axis=1) / np.maximum(np.linalg.norm(want, axis=1), 1e-30)
    print(f"{path.name}: relative L2 per input {errs.tolist()}")
    return errs


@pytest.mark.parametrize("device,per_channel", [(None, False), (None, True), ("hip-emu", False)])
def test_quantize_dynamic_models_match_onnxruntime(device, per_channel, tmp_path, rng):
    for name, m in models(rng).items():
        if device and name != "cnn":
            continue  # one model is enough for the HIP kernels
        q = dyn_quantize(m, tmp_path / f"{name}-dyn.onnx", per_channel)
        ops = {n.op_type for n in onnx.load(str(q)).graph.node}
        assert {"DynamicQuantizeLinear", "ConvInteger"} <= ops, ops
        errs = compare_per_input(q, tmp_path, rng, device=device)
        assert np.median(errs) <= MEDIAN_REL and errs.max() <= MAX_REL, (name, errs)


def test_quantize_dynamic_plan_shows_the_dynamic_fakequant(tmp_path, rng):
    q = dyn_quantize(models(rng)["cnn"], tmp_path / "cnn-dyn.onnx")
    info = convd_run(q, ["--info"]).stdout
    assert "DynamicQuantizeLinear" in info and "fakequant-dynamic" in info, info


def dql_graph(rng, reader):
    """x -> DynamicQuantizeLinear -> (y, y_scale, y_zp), one of them read by
    something quantize_dynamic never writes."""
    c, h = int(rng.integers(2, 6)), int(rng.integers(4, 9))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zp"], name="dql")]
    if reader == "relu_of_y":
        nodes += [helper.make_node("Cast", ["y"], ["yf"], to=TensorProto.FLOAT, name="cast_y"),
                  helper.make_node("Relu", ["yf"], ["out"], name="relu")]
    elif reader == "y_as_output":
        nodes[0].output[0] = "out"
    elif reader == "add_of_scale":
        nodes += [helper.make_node("Add", ["x", "y_scale"], ["out"], name="add_scale")]
    else:  # the sums multiplied by something else than the scales
        w = helper.make_tensor("w", TensorProto.INT8, [c, c, 1, 1], rng.integers(-5, 5, c * c).tolist())
        k = helper.make_tensor("k", TensorProto.FLOAT, [1], [0.5])
        nodes += [helper.make_node("ConvInteger", ["y", "w", "y_zp"], ["acc"], name="convint"),
                  helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT, name="cast"),
                  helper.make_node("Mul", ["accf", "k"], ["out"], name="mul_k")]
        g = helper.make_graph(nodes, "dql", [x], [out], [w, k])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    g = helper.make_graph(nodes, "dql", [x], [out])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("reader,needle", [("relu_of_y", "Cast of the quantized values"),
                                           ("add_of_scale", "'add_scale'"),
                                           ("mul_of_sums", "Mul of the integer sums"),
                                           ("y_as_output", "graph output 'out' is the quantized values")])
def test_other_readers_of_dynamic_quantization_are_refused(reader, needle, tmp_path, rng):
    p = tmp_path / f"{reader}.onnx"
    onnx.save(dql_graph(rng, reader), str(p))
    err = fails(p, "E_UNSUPPORTED", needle)
    assert "DynamicQuantizeLinear" in err


def test_quantize_dynamic_pruned_model_keeps_zeros(tmp_path, rng):
    """A pruned model quantized dynamically: its zeros stay zero (int8 0),
    so the plan still counts them."""
    from tests.models.test_quantized import prune_magnitude
    m = prune_magnitude(B.resnet18(rng, classes=10, size=32, width=0.25), 0.9)
    q = dyn_quantize(m, tmp_path / "pruned-dyn.onnx")
    errs = compare_per_input(q, tmp_path, rng, batch=12)
    assert np.median(errs) <= MEDIAN_REL and errs.max() <= MAX_REL, errs
    info = convd_run(q, ["--info"]).stdout
    zeros = int(info.split(" params (")[1].split(" zero")[0])
    params = int(info.split(" layers, ")[1].split(" params")[0])
    assert zeros >= 0.8 * params, info
