"""Tiny ONNX models for the client tests (test_client_c, test_client_python,
test_convctl): small enough to run in microseconds, with outputs that are easy
to compute in numpy.

scale2: x [N, 3, 5, 7] f32 -> y = relu(conv1x1(x, W = 2*I, b = 0)),
i.e. y = max(0, 2x).
"""
import numpy as np


def write_scale2(path, channels=3, h=5, w=7):
    import onnx
    from onnx import TensorProto, helper

    weight = (2.0 * np.eye(channels, dtype=np.float32)).reshape(channels, channels, 1, 1)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
         helper.make_node("Relu", ["c"], ["y"])],
        "scale2",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", channels, h, w])],
        [helper.make_tensor("w", TensorProto.FLOAT, weight.shape, weight.flatten())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def scale2_reference(x):
    return np.maximum(0.0, 2.0 * x).astype(np.float32)


def assert_loaded(d, name="scale2"):
    """Fails, with the daemon's log, unless daemon d has loaded model `name`."""
    import convd
    with convd.Client(d.socket) as c:
        names = [m.get("name") for m in c.models()]
    assert name in names, f"the daemon did not load {name}: {names}\n" + d.stderr_text()[-2000:]
