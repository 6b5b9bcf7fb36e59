"""A QDQ MaxPool (docs/QUANTIZATION.md): onnxruntime's quantize_static puts
Q -> DQ on both sides of a MaxPool with the same parameters. The max of
values on a quantization grid is on that grid, so the QuantizeLinear after
the pool changes nothing and convd plans it as an alias
(runtime/plan-int8.c elide_pool_fakequants); with other parameters it stays.
Either way the output matches onnxruntime running the same file on the
output grid (up to a tie rounding the other way)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.models.test_quantized import compare, info_json


def pool_model(rng, same_params):
    w1 = rng.integers(-127, 128, size=(4, 3, 3, 3)).astype(np.int8)
    w2 = rng.integers(-127, 128, size=(5, 4, 1, 1)).astype(np.int8)
    y_s, y_zp = 0.03, 7
    p_s, p_zp = (y_s, y_zp) if same_params else (0.045, 3)

    def q(name, s, zp):
        return [numpy_helper.from_array(np.array(s, np.float32), f"{name}_s"),
                numpy_helper.from_array(np.array(zp, np.uint8), f"{name}_zp")]

    inits = (q("x", 0.02, 128) + q("y", y_s, y_zp) + q("p", p_s, p_zp) + q("o", 0.05, 100) + [
        numpy_helper.from_array(w1, "w1_q"),
        numpy_helper.from_array(rng.uniform(0.002, 0.01, 4).astype(np.float32), "w1_s"),
        numpy_helper.from_array(np.zeros(4, np.int8), "w1_zp"),
        numpy_helper.from_array(w2, "w2_q"),
        numpy_helper.from_array(rng.uniform(0.002, 0.01, 5).astype(np.float32), "w2_s"),
        numpy_helper.from_array(np.zeros(5, np.int8), "w2_zp"),
    ])

    def qdq(x, name, tag):
        return [helper.make_node("QuantizeLinear", [x, f"{name}_s", f"{name}_zp"], [f"{tag}_q"], name=f"q_{tag}"),
                helper.make_node("DequantizeLinear", [f"{tag}_q", f"{name}_s", f"{name}_zp"], [f"{tag}_d"],
                                 name=f"dq_{tag}")]

    nodes = (qdq("x", "x", "x") + [
        helper.make_node("DequantizeLinear", ["w1_q", "w1_s", "w1_zp"], ["w1"], name="dq_w1", axis=0),
        helper.make_node("Conv", ["x_d", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    ] + qdq("r1", "y", "y") + [
        helper.make_node("MaxPool", ["y_d"], ["pool"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
    ] + qdq("pool", "p", "p") + [
        helper.make_node("DequantizeLinear", ["w2_q", "w2_s", "w2_zp"], ["w2"], name="dq_w2", axis=0),
        helper.make_node("Conv", ["p_d", "w2"], ["c2"], name="conv2"),
    ] + qdq("c2", "o", "o"))
    graph = helper.make_graph(nodes, "qdq_pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                ["N", 3, 10, 10])],
                              [helper.make_tensor_value_info("o_d", TensorProto.FLOAT, ["N", 5, 5, 5])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("same_params", [True, False], ids=["same", "other"])
@pytest.mark.parametrize("int8", ["on", "off"])
def test_quantize_after_maxpool_is_an_alias_on_the_same_grid(same_params, int8, tmp_path, rng):
    path = tmp_path / f"pool-{same_params}.onnx"
    onnx.save(pool_model(rng, same_params), str(path))
    env = {"CONVD_INT8": int8}
    names = [l["name"] for l in info_json(path, env)["layers"]]
    assert "pool" in names, names
    # The pool's QuantizeLinear is a layer only when it changes the grid.
    assert ("q_p" in names) == (not same_params), names
    err, _ = compare(path, tmp_path, rng, batch=4, env=env)
    assert err <= 1e-3, err


def test_maxpool_between_int8_convs_runs_on_the_bytes(tmp_path, rng):
    """Where both convs run oneDNN's int8 kernels (NHWC integers), the pool
    between them takes the integers as they are (runtime/plan-int8-storage.c):
    its input and output are int8 and no reorder is planned around it.
    Elsewhere (the sparse or reference int8 kernels, NCHW: oneDNN has no jit
    int8 pool there) it stays float32; either way the output is right."""
    path = tmp_path / "pool.onnx"
    onnx.save(pool_model(rng, True), str(path))
    env = {"CONVD_INT8": "on"}
    layers = info_json(path, env)["layers"]
    by = {l["name"]: l for l in layers}
    convs = [by["conv1"], l2 := next(l for l in layers if l["name"].startswith("conv2"))]
    on_dnnl = all(c["dtype"] == "int8" and c["kernel"].startswith("dnnl:") for c in convs)
    pool = by["pool"]
    assert pool["out_dtype"] == ("int8" if on_dnnl else "f32"), [(l["name"], l["kernel"], l["out_dtype"])
                                                                  for l in layers]
    if on_dnnl:
        assert by["conv1"]["out_dtype"] == "int8" and "int" in pool["kernel"], pool
        names = [l["name"] for l in layers]
        assert names[names.index("conv1"):names.index(l2["name"]) + 1] == ["conv1", "pool", l2["name"]], names
    assert l2["dtype"] == "int8"
    err, _ = compare(path, tmp_path, rng, batch=4, env=env)
    assert err <= 1e-3, err
