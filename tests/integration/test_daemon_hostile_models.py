"""A --models folder holding hostile files next to a good model: the daemon
starts, serves the good one, and logs each bad one as skipped with its error
code; nothing crashes (also under ASan/UBSan: CONVD_BUILD=build-san).
The model-file cases themselves are in tests/models/test_errors.py."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.integration.daemon_wire import Wire
from tests.support.daemon import TestDaemon


def _save(nodes, inits, path, x_shape=(3, 5, 5), y_shape=None):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *x_shape])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())


def test_sigfpe_model_next_to_good_one(tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    rng = np.random.default_rng(3)
    w = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    _save([helper.make_node("Conv", ["x", "w"], ["y"])], [numpy_helper.from_array(w, "w")], d / "good.onnx",
          y_shape=["N", 2, 5, 5])
    # INT64_MIN / -1 in a shape sub-graph: was SIGFPE at start-up.
    i64 = lambda v, n: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array([v], np.int64)))
    _save([i64(-2**63, "a"), i64(-1, "b"), helper.make_node("Div", ["a", "b"], ["c"]),
           helper.make_node("Relu", ["x"], ["y"])], [], d / "sigfpe.onnx")
    # Two small constants broadcast to 2^31 elements.
    _save([helper.make_node("Add", ["p", "q"], ["c"]), helper.make_node("Relu", ["x"], ["y"])],
          [numpy_helper.from_array(np.ones((65536, 1), np.float32), "p"),
           numpy_helper.from_array(np.ones((1, 32768), np.float32), "q")], d / "blowup.onnx")
    # 16 GiB declared, 8 bytes stored.
    t = TensorProto()
    t.name, t.data_type, t.raw_data = "huge", TensorProto.INT64, b"\0" * 8
    t.dims.extend([2, 2**30])
    _save([helper.make_node("Relu", ["x"], ["y"])], [t], d / "huge.onnx")
    with TestDaemon(tmp_path, models_dir=d) as daemon:
        with Wire.connect(daemon, timeout=60) as w_:
            assert [m["name"] for m in w_.result("models")["models"]] == ["good"]
            assert w_.result("health")["models"] == 1
            x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
            out = w_.result("infer", {"model": "good", "inputs": {
                "x": {"dtype": "f32", "shape": list(x.shape), "data": x.tobytes()}}})["outputs"]["y"]
            got = np.frombuffer(out["data"], np.float32).reshape(out["shape"])
            want = np.einsum("kc,nchw->nkhw", w[:, :, 0, 0], x)
            assert np.abs(got - want).max() < 1e-4
        log = daemon.stderr_text()
        assert "skipping model 'sigfpe.onnx': E_MODEL" in log, log
        assert "overflows" in log
        assert "skipping model 'blowup.onnx': E_TOO_LARGE" in log, log
        assert "skipping model 'huge.onnx': E_MODEL" in log, log
        assert "1 of 4 models" in log, log
        assert daemon.stop() == 0
        log = daemon.stderr_text()
        assert "Sanitizer" not in log and "runtime error" not in log, log
