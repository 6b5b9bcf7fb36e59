"""Whole-model tests: small models built with the onnx package (random weights,
fresh random shapes and inputs each run; CD_TEST_SEED fixes them), run with
convd-run and compared with onnxruntime: max relative error <= 1e-4, at batch 1
and at a batch > 1, on the fast kernels and on the reference kernels."""

import numpy as np
import pytest

from tests.models import builders as B
from tests.models.builders import ri
from tests.models.runner import compare, convd_run


# Each builder returns an onnx.ModelProto using fresh random sizes.

def m_resnet_basic(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 4, 24), ri(rng, 7, 15)
    x = g.input("x", [3, h, h + 1])
    y = g.conv_bn_relu(x, 3, c, 3)
    y = B.resnet_basic(g, y, c, c, 1)
    y = B.resnet_basic(g, y, c, c + 8, 2)  # projection shortcut, stride 2
    return g.build([y])


def m_resnet_bottleneck(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 8, 32), ri(rng, 6, 14)
    x = g.input("x", [c, h, h])
    y = B.resnet_bottleneck(g, x, c, c // 2, c, 1)
    y = B.resnet_bottleneck(g, y, c, ri(rng, 4, 16), 2 * c, 2)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    return g.build([y])


def m_mobilenetv2_block(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 4, 20), ri(rng, 8, 17)
    x = g.input("x", [c, h, h])
    y = B.mbv2_inverted(g, x, c, c, 6, 1)      # depthwise, ReLU6, residual
    y = B.mbv2_inverted(g, y, c, c + 4, 4, 2)  # stride 2, no residual
    y = B.mbv2_inverted(g, y, c + 4, c + 4, 1, 1)
    return g.build([y])


def m_squeezenet_fire(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 8, 32), ri(rng, 5, 13)
    x = g.input("x", [c, h, h])
    e1, e3 = ri(rng, 4, 24), ri(rng, 4, 24)
    y = B.squeeze_fire(g, x, c, ri(rng, 2, 8), e1, e3)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    y = B.squeeze_fire(g, y, e1 + e3, ri(rng, 2, 8), 8, 8)
    return g.build([y])


def m_shufflenet(rng, dynamic=False, opset=13):
    g = B.Graph(rng, opset)
    groups = ri(rng, 2, 4)
    c, h = groups * ri(rng, 2, 8), ri(rng, 4, 11)
    x = g.input("x", [c, h, h])
    y = g.conv_bn_relu(x, c, c, 1)
    y = B.channel_shuffle(g, y, c, h, h, groups, dynamic)
    y = g.conv_bn_act(y, c, c, 3, group=c, act=None)
    return g.build([y], out_shapes={y: ["N", c, h, h]})


def m_shufflenet_dynamic(rng):
    return m_shufflenet(rng, dynamic=True)


def m_shufflenet_dynamic_opset11(rng):
    return m_shufflenet(rng, dynamic=True, opset=11)


def m_se_block(rng, gate="sigmoid"):
    g = B.Graph(rng)
    c, h = ri(rng, 8, 40), ri(rng, 4, 12)
    x = g.input("x", [c, h, h])
    y = g.conv_bn_act(x, c, c, 3, group=c, act="relu")
    y = B.se_block(g, y, c, 4, gate)
    return g.build([y])


def m_se_hardsigmoid(rng):
    return m_se_block(rng, "hardsigmoid")


def m_hardswish(rng):
    g = B.Graph(rng, opset=14)
    c, h = ri(rng, 4, 24), ri(rng, 6, 12)
    x = g.input("x", [3, h, h])
    y = g.conv_bn_act(x, 3, c, 3, 2, act="hardswish")
    y = B.mbv2_inverted(g, y, c, c, 3, 1, act="hardswish")
    y = g.node("HardSwish", [g.node("Add", [y, y])])
    return g.build([y])


def m_fc_head(rng):
    g = B.Graph(rng)
    c, h, k = ri(rng, 8, 64), ri(rng, 3, 9), ri(rng, 5, 40)
    x = g.input("x", [c, h, h])
    y = g.conv_bn_relu(x, c, c, 3)
    y = B.fc_head(g, y, c, k)
    return g.build([y])


def m_gemm_variants(rng):
    g = B.Graph(rng)
    k, n = ri(rng, 8, 48), ri(rng, 4, 32)
    x = g.input("x", [k])
    y = g.gemm(x, k, n, trans_b=False, alpha=0.5, beta=2.0)
    y = g.relu(y)
    y = g.gemm(y, n, n + 3, trans_b=True, bias=False)
    return g.build([y])


def m_matmul_softmax(rng):
    g = B.Graph(rng)
    t, k, n = ri(rng, 2, 9), ri(rng, 4, 32), ri(rng, 3, 20)
    x = g.input("x", [t, k])
    w = g.init(rng.normal(0, 0.3, (k, n)).astype(np.float32))
    y = g.node("MatMul", [x, w])
    y = g.node("Softmax", [y], axis=-1)
    return g.build([y])


def m_softmax_opset11(rng):
    # Before opset 13 Softmax coerces to 2-D at axis: softmax over all of C*H*W.
    g = B.Graph(rng, opset=11)
    c, h = ri(rng, 2, 8), ri(rng, 2, 6)
    x = g.input("x", [c, h, h])
    y = g.node("Softmax", [g.conv(x, c, c, 1)], axis=1)
    return g.build([y])


def m_auto_pad(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 3, 12), ri(rng, 7, 16)
    x = g.input("x", [c, h, h + 3])
    a = g.relu(g.conv(x, c, 8, 3, 2, auto_pad="SAME_UPPER"))
    a = g.conv(a, 8, 8, 4, 1, auto_pad="SAME_LOWER")
    a = g.node("MaxPool", [a], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    b = g.conv(x, c, 8, 5, 2, auto_pad="VALID")
    b = g.node("AveragePool", [b], kernel_shape=[2, 2], strides=[1, 1], auto_pad="SAME_LOWER")
    return g.build([a, b])


def m_dilations(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 3, 16), ri(rng, 11, 19)
    x = g.input("x", [c, h, h])
    y = g.relu(g.conv(x, c, 16, 3, 1, dilation=2))
    y = g.conv(y, 16, 16, 3, 2, dilation=(1, 3), group=4)
    y = g.node("MaxPool", [y], kernel_shape=[2, 2], dilations=[2, 2], strides=[1, 1])
    return g.build([y])


def m_ceil_pools(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 2, 20), ri(rng, 6, 15)
    x = g.input("x", [c, h, h + 2])
    a = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    b = g.node("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
               count_include_pad=1)
    cc = g.node("AveragePool", [x], kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=1,
                count_include_pad=0)
    d = g.node("GlobalMaxPool", [x])
    return g.build([a, b, cc, d])


def m_bn_standalone(rng):
    # BN after a pool (no conv to fold into) and after an Add; BN folded after convs.
    g = B.Graph(rng)
    c, h = ri(rng, 3, 24), ri(rng, 4, 12)
    x = g.input("x", [c, h, h])
    y = g.bn(g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[1, 1]), c)
    z = g.bn(g.conv(x, c, c, 2, 1, pad=[0, 0, 0, 0]), c)
    y = g.bn(g.node("Add", [y, z]), c)
    y = g.node("LeakyRelu", [y], alpha=0.1)
    return g.build([y])


def m_eltwise(rng):
    # Add+Relu on non-conv producers, Mul/Sub/Div by broadcast constants, Sigmoid, Concat along H.
    g = B.Graph(rng)
    c, h = ri(rng, 2, 16), ri(rng, 3, 10)
    x = g.input("x", [c, h, h])
    p = g.node("AveragePool", [x], kernel_shape=[1, 1])
    y = g.relu(g.node("Add", [p, x]))
    y = g.node("Mul", [y, g.init(rng.uniform(0.5, 2, (c, 1, 1)).astype(np.float32))])
    y = g.node("Sub", [y, g.init(rng.uniform(-1, 1, (1, h)).astype(np.float32))])
    y = g.node("Div", [y, g.init(rng.uniform(1, 2, (1,)).astype(np.float32))])
    s = g.node("Sigmoid", [y])
    y = g.node("Concat", [y, s], axis=2)
    y = g.node("Dropout", [g.node("Identity", [y])])
    return g.build([y])


def m_densenet(rng, opset=13):
    """Dense block (concats), transition (AveragePool), Inception's padded average pool (Pad + AveragePool)."""
    g = B.Graph(rng, opset)
    c, h = ri(rng, 4, 16), 2 * ri(rng, 3, 7)
    x = g.input("x", [3, h, h])
    y = g.conv_bn_relu(x, 3, c, 3)
    y, c2 = B.densenet_block(g, y, c, ri(rng, 2, 8), ri(rng, 2, 4))
    y = B.densenet_transition(g, y, c2, c2 // 2)
    y = B.padded_avgpool(g, y)
    return g.build([y])


def m_shufflenet_v2(rng, form="split", opset=13):
    g = B.Graph(rng, opset)
    c, h = 2 * ri(rng, 2, 12), ri(rng, 4, 11)
    x = g.input("x", [c, h, h])
    y = g.conv_bn_relu(x, c, c, 1)
    y = B.shufflenet_v2_unit(g, y, c, form)
    y = B.channel_shuffle(g, y, c, h, h, 2)
    y = B.shufflenet_v2_unit(g, y, c, "slice" if form == "split" else "split")
    return g.build([y])


def m_shufflenet_v2_slice(rng):
    return m_shufflenet_v2(rng, "slice")


def m_shufflenet_v2_opset11(rng):
    return m_shufflenet_v2(rng, "split", 11)


def m_convnext(rng, opset=13):
    """ConvNeXt stem (4x4 stride 4, LayerNorm2d), two blocks, downsample (LayerNorm2d, 2x2 stride 2)."""
    g = B.Graph(rng, opset)
    c, h = ri(rng, 4, 24), 8 * ri(rng, 2, 4)
    x = g.input("x", [3, h, h])
    y = B.layernorm2d(g, g.conv(x, 3, c, 4, stride=4, pad=0), c)
    y = B.convnext_block(g, y, c)
    y = B.convnext_block(g, y, c)
    y = g.conv(B.layernorm2d(g, y, c), c, 2 * c, 2, stride=2, pad=0)
    return g.build([y])


def m_convnext_opset17(rng):
    return m_convnext(rng, 17)


def m_convnext_opset20(rng):
    return m_convnext(rng, 20)


def m_mnasnet_head(rng, opset=13):
    g = B.Graph(rng, opset)
    c, h = ri(rng, 4, 24), ri(rng, 3, 9)
    x = g.input("x", [c, h, h])
    y = B.mbv2_inverted(g, x, c, c, 3, 1, act="relu")
    return g.build([B.mnasnet_head(g, y, c, ri(rng, 8, 40), ri(rng, 5, 20))])


def m_mnasnet_head_opset18(rng):
    return m_mnasnet_head(rng, 18)


def m_reshape_forms(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 2, 8), ri(rng, 2, 6)
    x = g.input("x", [c, h, h])
    a = g.node("Reshape", [x, g.init(np.array([0, -1], np.int64))])
    a = g.node("Reshape", [a, g.init(np.array([0, c * h, h], np.int64))])
    a = g.node("Unsqueeze", [a, g.init(np.array([2], np.int64))])
    a = g.node("Squeeze", [a, g.init(np.array([2], np.int64))])
    a = g.node("Transpose", [a], perm=[0, 2, 1])
    b = g.node("Flatten", [x], axis=1)
    return g.build([a, b])


def m_multi_io(rng):
    g = B.Graph(rng)
    c, h = ri(rng, 2, 8), ri(rng, 4, 8)
    x = g.input("x", [c, h, h])
    z = g.input("z", [c, h, h])
    y = g.relu(g.node("Add", [g.conv(x, c, c, 3), z]))  # residual from a graph input
    w = g.node("Mul", [x, z])
    return g.build([y, w])


MODELS = {f.__name__[2:]: f for f in [
    m_resnet_basic, m_resnet_bottleneck, m_mobilenetv2_block, m_squeezenet_fire, m_shufflenet,
    m_shufflenet_dynamic, m_shufflenet_dynamic_opset11, m_se_block, m_se_hardsigmoid, m_hardswish, m_fc_head,
    m_gemm_variants, m_matmul_softmax, m_softmax_opset11, m_auto_pad, m_dilations, m_ceil_pools, m_bn_standalone,
    m_eltwise, m_reshape_forms, m_multi_io, m_densenet, m_shufflenet_v2, m_shufflenet_v2_slice,
    m_shufflenet_v2_opset11, m_convnext, m_convnext_opset17, m_convnext_opset20, m_mnasnet_head,
    m_mnasnet_head_opset18]}


@pytest.mark.parametrize("kernels", ["fast", "ref"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_onnxruntime(name, kernels, rng, tmp_path):
    path = B.save(MODELS[name](rng), tmp_path / f"{name}.onnx")
    k = None if kernels == "fast" else "ref"
    compare(path, tmp_path, 1, rng, kernels=k)
    compare(path, tmp_path, ri(rng, 2, 5), rng, kernels=k)


def test_batch_below_max_batch(rng, tmp_path):
    """A plan sized for max_batch 6 runs batch 2 correctly (arena offsets stay per item)."""
    path = B.save(m_resnet_basic(rng), tmp_path / "m.onnx")
    compare(path, tmp_path, 2, rng, extra=["--max-batch", 6])


def test_bn_folded_and_fused(rng, tmp_path):
    """Conv+BN+Add+Relu becomes one layer; the info output says so."""
    import json
    path = B.save(m_resnet_basic(rng), tmp_path / "m.onnx")
    info = json.loads(convd_run(path, ["--info", "--json"]).stdout)
    ops = [l["op"] for l in info["layers"]]
    assert "Conv+BN+Add+Relu" in ops, ops
    assert not any(o.startswith("BN") or o == "Relu" for o in ops), ops
    assert info["summary"]["activation_bytes"] > 0 and info["summary"]["weight_bytes"] > 0
    # Each residual conv is its skip tensor's last reader: it writes into the
    # skip tensor (runtime/plan-in-place.c); test_model_matches_onnxruntime
    # checks the outputs of such plans.
    assert info["summary"]["residual_in_place"] == ops.count("Conv+BN+Add+Relu"), info["summary"]


def test_external_data(rng, tmp_path):
    """Weights stored in an external file next to the model."""
    import onnx
    m = m_fc_head(rng)
    onnx.save_model(m, str(tmp_path / "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.weights", size_threshold=0)
    assert (tmp_path / "ext.weights").exists()
    compare(tmp_path / "ext.onnx", tmp_path, 2, rng)


def test_typed_fields_and_double(rng, tmp_path):
    """Initializers in float_data / int64_data fields (not raw_data), and a float64 one."""
    import onnx
    from onnx import numpy_helper
    m = m_shufflenet(rng)
    for t in m.graph.initializer:
        arr = numpy_helper.to_array(t)
        t.ClearField("raw_data")
        if arr.dtype == np.float32:
            t.float_data.extend(arr.ravel().tolist())
        else:
            t.int64_data.extend(arr.ravel().tolist())
    path = tmp_path / "typed.onnx"
    onnx.save(m, str(path))
    compare(path, tmp_path, 2, rng)


def test_static_batch_one_export(rng, tmp_path):
    """A file exported with a fixed batch of 1 (input dim 1, Reshape to [1, -1]) runs at batch > 1: dim 0 is
    taken as the batch. Compared item by item with onnxruntime at batch 1."""
    import onnxruntime as ort
    g = B.Graph(rng)
    c, h = ri(rng, 2, 8), ri(rng, 3, 7)
    x = g.input("x", [c, h, h], batch=1)
    y = g.node("Reshape", [g.relu(g.conv(x, c, c, 3)), g.init(np.array([1, -1], np.int64))])
    y = g.gemm(y, c * h * h, 5)
    path = B.save(g.build([y]), tmp_path / "static.onnx")
    batch = ri(rng, 2, 5)
    xs = rng.uniform(-1, 1, (batch, c, h, h)).astype(np.float32)
    np.save(tmp_path / "x.npy", xs)
    convd_run(path, ["--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy"])
    got = np.load(tmp_path / "y.npy")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([sess.run(None, {"x": xs[i:i + 1]})[0] for i in range(batch)])
    assert got.shape == want.shape
    assert (np.abs(got - want) / np.maximum(1, np.abs(want))).max() <= 1e-4


@pytest.mark.parametrize("arch", ["resnet50", "mobilenetv2"])
def test_whole_network_keeps_one_layout(arch, rng, tmp_path):
    """Narrow, small-input ResNet-50 / MobileNetV2 (the bench builders): equal to onnxruntime at batches 1 and 2,
    and the planner inserts at most two reorders in the whole network (into the blocked layout at the start, out
    of it before the classifier)."""
    import json
    build = getattr(B, arch)
    path = B.save(build(rng, classes=10, size=64, width=0.25), tmp_path / f"{arch}.onnx")
    compare(path, tmp_path, 1, rng)
    compare(path, tmp_path, 2, rng)
    info = json.loads(convd_run(path, ["--info", "--json"]).stdout)
    reorders = [l for l in info["layers"] if l["op"].startswith("Reorder")]
    assert len(reorders) <= 2, [(l["name"], l["op"]) for l in info["layers"]]
