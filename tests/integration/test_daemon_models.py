"""The model methods over raw msgpack-RPC: --models DIR at start, models,
load (path confinement, atomic replace), unload, infer (results equal
onnxruntime's within 1e-4 relative, every bad input's exact code), inference
on worker threads (responses out of order), and shutdown with inference in
flight."""
import os
import signal
import time

import msgpack
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.integration.daemon_wire import Wire, request, stats
from tests.support import slow_model
from tests.support.daemon import TestDaemon

RNG = np.random.default_rng()  # fresh shapes and weights every run
C = int(RNG.integers(2, 6))
H = int(RNG.integers(3, 12))
W = int(RNG.integers(3, 12))
COUT = int(RNG.integers(2, 7))
MAX_BATCH = 4


def conv_model(path, cin, cout, h, w, seed, relu=True, two_outputs=False):
    """x [N,cin,h,w] -> y = relu(conv3x3(x) + b) (and y2 = conv1x1(x) when
    two_outputs). Random weights; returns the path."""
    rng = np.random.default_rng(seed)
    wt = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1])]
    nodes.append(helper.make_node("Relu", ["c"], ["y"]) if relu
                 else helper.make_node("Identity", ["c"], ["y"]))
    inits = [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(b, "b")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", cout, h, w])]
    if two_outputs:
        w2 = rng.standard_normal((2, cin, 1, 1)).astype(np.float32)
        inits.append(numpy_helper.from_array(w2, "w2"))
        nodes.append(helper.make_node("Conv", ["x", "w2"], ["y2"], kernel_shape=[1, 1]))
        outputs.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["N", 2, h, w]))
    graph = helper.make_graph(
        nodes, "convd_test",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", cin, h, w])],
        outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


# The slow model (tests/support/slow_model.py): sized on this machine for
# ~30 ms per item, so requests queue behind it; its inputs and outputs stay
# small, so pipelined requests are read long before answers fill buffers.
SLOW_CH, SLOW_HW = slow_model.CH, slow_model.HW


def reference(path, x):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))


def tensor(a):
    return {"dtype": {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[a.dtype.type],
            "shape": list(a.shape), "data": a.tobytes()}


def from_wire(t):
    assert t["dtype"] == "f32"
    return np.frombuffer(t["data"], np.float32).reshape(t["shape"])


def assert_close(got, ref):
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got - ref) / np.maximum(1.0, np.abs(ref))
    assert err.max() <= 1e-4, err.max()


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, slow):
    d = tmp_path_factory.mktemp("models")
    conv_model(d / "conv.onnx", C, COUT, H, W, seed=1)
    conv_model(d / "two.onnx", C, COUT, H, W, seed=2, two_outputs=True)
    conv_model(d / "other.onnx", C, COUT, H, W, seed=3, relu=False)
    slow.write(d / "slow.onnx")
    (d / "broken.onnx").write_bytes(b"this is not a protobuf \x00\x01\x02" * 10)
    (d / "truncated.onnx").write_bytes(open(d / "conv.onnx", "rb").read()[:60])
    (d / "notes.txt").write_text("not a model")
    (d / "sub").mkdir()
    conv_model(d / "sub" / "nested.onnx", C, COUT, H, W, seed=4)
    outside = tmp_path_factory.mktemp("outside")
    conv_model(outside / "secret.onnx", C, COUT, H, W, seed=5)
    os.symlink(outside / "secret.onnx", d / "link_out.onnx.lnk")
    os.symlink(d / "conv.onnx", d / "sub" / "link_in.onnx.lnk")
    return d


@pytest.fixture(scope="module")
def d(models_dir):
    with TestDaemon(models_dir=models_dir,
                    args=["--max-batch", str(MAX_BATCH), "--workers", "2"]) as daemon:
        yield daemon


@pytest.fixture
def w(d):
    with Wire.connect(d, timeout=60) as wire:
        yield wire


def infer(w, model, x, **extra):
    return w.call("infer", dict({"model": model, "inputs": {"x": tensor(x)}}, **extra))


# ---- start-up ----------------------------------------------------------------

def test_models_dir_loaded_bad_ones_skipped(d, w):
    names = sorted(m["name"] for m in w.result("models")["models"])
    assert names == ["conv", "other", "slow", "two"]
    assert w.result("health")["models"] == 4
    log = d.stderr_text()
    assert "skipping model 'broken.onnx'" in log
    assert "skipping model 'truncated.onnx'" in log
    assert "4 of 6 models" in log


def test_models_entry_fields(w):
    m = {x["name"]: x for x in w.result("models")["models"]}["conv"]
    assert m["path"] == "conv.onnx"
    assert m["max_batch"] == MAX_BATCH
    assert m["inputs"] == [{"name": "x", "dtype": "f32", "shape": [-1, C, H, W]}]
    assert m["outputs"] == [{"name": "y", "dtype": "f32", "shape": [-1, COUT, H, W]}]
    assert m["params"] == COUT * C * 9 + COUT
    assert m["flops"] > 0 and m["weight_bytes"] > 0 and m["activation_bytes"] > 0
    assert m["device_bytes"] == 0  # host memory on the cpu device
    assert 0.0 < m["density"] <= 1.0
    assert m["layers"] >= 1


# ---- infer -------------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, MAX_BATCH])
def test_infer_matches_onnxruntime(models_dir, w, batch):
    x = (RNG.standard_normal((batch, C, H, W)) * 2).astype(np.float32)
    resp = infer(w, "conv", x)
    assert resp[2] is None, resp[2]
    outs = resp[3]["outputs"]
    assert list(outs) == ["y"]
    assert outs["y"]["shape"] == [batch, COUT, H, W]
    assert_close(from_wire(outs["y"]), reference(str(models_dir / "conv.onnx"), x)["y"])


def test_infer_selected_outputs(models_dir, w):
    x = RNG.standard_normal((2, C, H, W)).astype(np.float32)
    ref = reference(str(models_dir / "two.onnx"), x)
    both = infer(w, "two", x)[3]["outputs"]
    assert sorted(both) == ["y", "y2"]
    only = infer(w, "two", x, outputs=["y2"])[3]["outputs"]
    assert list(only) == ["y2"]
    assert_close(from_wire(only["y2"]), ref["y2"])
    assert_close(from_wire(both["y"]), ref["y"])


def test_infer_misaligned_input_data(models_dir, w):
    # Params packed before `inputs` shift the bin payload: none, timeout_ms
    # (14 bytes), outputs (11) and both (25) put it at every offset mod 4.
    # (An unknown key would be E_PARAMS: infer takes only its own.)
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32)
    for extra in ({}, {"timeout_ms": 60000}, {"outputs": ["y"]},
                  {"outputs": ["y"], "timeout_ms": 60000}):
        resp = w.call("infer", {"model": "conv", **extra, "inputs": {"x": tensor(x)}})
        assert resp[2] is None
        assert_close(from_wire(resp[3]["outputs"]["y"]),
                     reference(str(models_dir / "conv.onnx"), x)["y"])


def good_x(batch=1):
    return np.ones((batch, C, H, W), np.float32)


INFER_ERRORS = {
    "unknown_model": ({"model": "nope", "inputs": {"x": tensor(good_x())}}, "E_NOT_FOUND"),
    "no_model_param": ({"inputs": {"x": tensor(good_x())}}, "E_PARAMS"),
    "model_not_str": ({"model": 5, "inputs": {"x": tensor(good_x())}}, "E_PARAMS"),
    "inputs_missing": ({"model": "conv"}, "E_PARAMS"),
    "inputs_not_map": ({"model": "conv", "inputs": [tensor(good_x())]}, "E_PARAMS"),
    "missing_input": ({"model": "conv", "inputs": {}}, "E_PARAMS"),
    "extra_input": ({"model": "conv", "inputs": {"x": tensor(good_x()),
                                                 "z": tensor(good_x())}}, "E_PARAMS"),
    "wrong_input_name": ({"model": "conv", "inputs": {"z": tensor(good_x())}}, "E_PARAMS"),
    "tensor_not_map": ({"model": "conv", "inputs": {"x": [1, 2]}}, "E_PARAMS"),
    "wrong_rank": ({"model": "conv", "inputs": {"x": tensor(np.ones((C, H, W), np.float32))}},
                   "E_SHAPE"),
    "wrong_dims": ({"model": "conv", "inputs": {"x": tensor(np.ones((1, C, W + 1, H),
                                                                  np.float32))}}, "E_SHAPE"),
    "batch_over_max": ({"model": "conv", "inputs": {"x": tensor(good_x(MAX_BATCH + 1))}},
                       "E_SHAPE"),
    "f64_input": ({"model": "conv", "inputs": {"x": tensor(good_x().astype(np.float64))}},
                  "E_DTYPE"),
    "i32_input": ({"model": "conv", "inputs": {"x": tensor(good_x().astype(np.int32))}},
                  "E_DTYPE"),
    "data_size_mismatch": ({"model": "conv", "inputs": {"x": {
        "dtype": "f32", "shape": [1, C, H, W], "data": b"\0" * 12}}}, "E_SHAPE"),
    "zero_dim": ({"model": "conv", "inputs": {"x": {
        "dtype": "f32", "shape": [0, C, H, W], "data": b""}}}, "E_SHAPE"),
    "unknown_output": ({"model": "conv", "inputs": {"x": tensor(good_x())},
                        "outputs": ["nope"]}, "E_PARAMS"),
    "timeout_negative": ({"model": "conv", "inputs": {"x": tensor(good_x())},
                          "timeout_ms": -1}, "E_PARAMS"),
}


@pytest.mark.parametrize("case", sorted(INFER_ERRORS))
def test_infer_bad_input_exact_code(d, w, case):
    params, code = INFER_ERRORS[case]
    assert w.error("infer", params) == code
    assert w.result("health")["status"] == "ok"  # connection still open


def test_infer_params_not_a_map(w):
    w.send(msgpack.packb([0, 5, "infer", ["conv"]]))
    assert w.recv_one()[2]["code"] == "E_PARAMS"
    w.send(msgpack.packb([0, 6, "infer", []]))
    assert w.recv_one()[2]["code"] == "E_PARAMS"


def test_per_model_stats(w):
    before = w.result("stats")["models"]["other"]
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32)
    for _ in range(3):
        assert infer(w, "other", x)[2] is None
    assert w.error("infer", {"model": "other", "inputs": {}}) == "E_PARAMS"
    after = w.result("stats")["models"]["other"]
    assert after["requests"] - before["requests"] == 4
    assert after["batches"] - before["batches"] == 3
    assert after["errors"] - before["errors"] == 1


# ---- inference on workers ----------------------------------------------------

def test_hello_answered_while_model_computes(d, w, slow):
    x = RNG.standard_normal((2, SLOW_CH, SLOW_HW, SLOW_HW)).astype(np.float32)
    with Wire.connect(d) as other:
        w.send(request(1, "infer", {"model": "slow", "inputs": {"x": tensor(x)}}) +
               request(2, "hello"))
        t0 = time.monotonic()
        assert other.result("health")["status"] == "ok"
        t_health = time.monotonic() - t0
        first, second = w.recv(2, timeout=slow.limit(2))
        t_infer = time.monotonic() - t0
    # The pipelined hello overtook the infer sent before it: out of order.
    assert first[1] == 2 and first[3]["server"] == "convd"
    assert second[1] == 1 and second[2] is None, second[2]
    assert t_health < t_infer, (t_health, t_infer)


def test_infer_timeout_in_queue(d, w, slow):
    x = RNG.standard_normal((2, SLOW_CH, SLOW_HW, SLOW_HW)).astype(np.float32)
    params = {"model": "slow", "inputs": {"x": tensor(x)}}
    small = {"model": "conv", "inputs": {"x": tensor(good_x())}, "timeout_ms": 1}
    # Both workers busy with three rounds of slow requests (batch 2 each,
    # an item takes slow.item_s, measured to be tens of ms): the last one
    # waits far longer than 1 ms before it could start.
    w.send(b"".join(request(i, "infer", params) for i in range(1, 7)) +
           request(7, "infer", small))
    got = {m[1]: m for m in w.recv(7, timeout=slow.limit(12))}
    assert all(got[i][2] is None for i in range(1, 7))
    assert got[7][2]["code"] == "E_TIMEOUT"
    assert w.result("stats")["errors"]["E_TIMEOUT"] >= 1


# ---- load / unload -----------------------------------------------------------

def test_load_unload_cycle(models_dir, w):
    m = w.result("load", {"name": "c2", "path": "sub/nested.onnx", "max_batch": 2})
    assert m["name"] == "c2" and m["path"] == "sub/nested.onnx" and m["max_batch"] == 2
    assert m["inputs"][0]["shape"] == [-1, C, H, W]
    assert "c2" in [x["name"] for x in w.result("models")["models"]]
    x = RNG.standard_normal((2, C, H, W)).astype(np.float32)
    assert_close(from_wire(infer(w, "c2", x)[3]["outputs"]["y"]),
                 reference(str(models_dir / "sub" / "nested.onnx"), x)["y"])
    assert w.error("infer", {"model": "c2", "inputs": {"x": tensor(good_x(3))}}) == "E_SHAPE"
    assert w.result("unload", {"name": "c2"}) == {"name": "c2"}
    assert w.error("unload", {"name": "c2"}) == "E_NOT_FOUND"
    assert w.error("infer", {"model": "c2", "inputs": {"x": tensor(x)}}) == "E_NOT_FOUND"
    assert "c2" not in [x["name"] for x in w.result("models")["models"]]


def test_load_default_max_batch_and_symlink_inside(w):
    m = w.result("load", {"name": "viainside", "path": "sub/link_in.onnx.lnk"})
    assert m["max_batch"] == MAX_BATCH
    assert w.result("unload", {"name": "viainside"}) == {"name": "viainside"}


LOAD_ERRORS = {
    "dotdot": ({"name": "e", "path": "../outside/secret.onnx"}, "E_ACCESS"),
    "dotdot_inner": ({"name": "e", "path": "sub/../conv.onnx"}, "E_ACCESS"),
    "absolute": ({"name": "e", "path": "/etc/passwd"}, "E_ACCESS"),
    "symlink_escape": ({"name": "e", "path": "link_out.onnx.lnk"}, "E_ACCESS"),
    "missing_file": ({"name": "e", "path": "nope.onnx"}, "E_IO"),
    "directory": ({"name": "e", "path": "sub"}, "E_IO"),
    "corrupt": ({"name": "e", "path": "broken.onnx"}, "E_MODEL"),
    "truncated": ({"name": "e", "path": "truncated.onnx"}, "E_MODEL"),
    "no_name": ({"path": "conv.onnx"}, "E_PARAMS"),
    "no_path": ({"name": "e"}, "E_PARAMS"),
    "bad_name": ({"name": "a/b", "path": "conv.onnx"}, "E_PARAMS"),
    "empty_name": ({"name": "", "path": "conv.onnx"}, "E_PARAMS"),
    "max_batch_zero": ({"name": "e", "path": "conv.onnx", "max_batch": 0}, "E_PARAMS"),
    "max_batch_str": ({"name": "e", "path": "conv.onnx", "max_batch": "2"}, "E_PARAMS"),
    # CD_MAX_BATCH (core/limits.h) is 4096: the one bound of a model's max_batch.
    "max_batch_past_bound": ({"name": "e", "path": "conv.onnx", "max_batch": 4097}, "E_PARAMS"),
}


@pytest.mark.parametrize("case", sorted(LOAD_ERRORS))
def test_load_bad_input_exact_code(w, case):
    params, code = LOAD_ERRORS[case]
    assert w.error("load", params) == code
    assert "e" not in [x["name"] for x in w.result("models")["models"]]
    assert w.result("health")["status"] == "ok"


def test_unload_bad_params(w):
    assert w.error("unload", {"name": 3}) == "E_PARAMS"
    assert w.error("unload", {}) == "E_PARAMS"


def test_load_replaces_atomically_in_flight_finish_on_old(models_dir, d, w, slow):
    # "swap" starts as conv.onnx; a slow request keeps one worker busy so the
    # next infer on "swap" is queued, then "swap" is replaced by other.onnx.
    w.result("load", {"name": "swap", "path": "conv.onnx"})
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32)
    big = RNG.standard_normal((1, SLOW_CH, SLOW_HW, SLOW_HW)).astype(np.float32)
    w.send(request(1, "infer", {"model": "slow", "inputs": {"x": tensor(big)}}) +
           request(2, "infer", {"model": "slow", "inputs": {"x": tensor(big)}}) +
           request(3, "infer", {"model": "swap", "inputs": {"x": tensor(x)}}) +
           request(4, "load", {"name": "swap", "path": "other.onnx"}))
    got = {m[1]: m for m in w.recv(4, timeout=slow.limit(2))}
    assert all(m[2] is None for m in got.values()), got
    # Request 3 was accepted before the replace: it ran on the old model.
    assert_close(from_wire(got[3][3]["outputs"]["y"]),
                 reference(str(models_dir / "conv.onnx"), x)["y"])
    assert got[4][3]["path"] == "other.onnx"
    # Later requests use the new one.
    assert_close(from_wire(infer(w, "swap", x)[3]["outputs"]["y"]),
                 reference(str(models_dir / "other.onnx"), x)["y"])
    assert [m["name"] for m in w.result("models")["models"]].count("swap") == 1
    assert w.result("unload", {"name": "swap"}) == {"name": "swap"}


def test_unload_with_request_in_flight(d, w, slow):
    w.result("load", {"name": "slow2", "path": "slow.onnx", "max_batch": 1})
    x = RNG.standard_normal((1, SLOW_CH, SLOW_HW, SLOW_HW)).astype(np.float32)
    w.send(request(1, "infer", {"model": "slow2", "inputs": {"x": tensor(x)}}) +
           request(2, "unload", {"name": "slow2"}) +
           request(3, "infer", {"model": "slow2", "inputs": {"x": tensor(x)}}))
    got = {m[1]: m for m in w.recv(3, timeout=slow.limit(2))}
    assert got[1][2] is None
    assert got[1][3]["outputs"]["y"]["shape"] == [1, SLOW_CH, SLOW_HW, SLOW_HW]
    assert got[2][3] == {"name": "slow2"}
    assert got[3][2]["code"] == "E_NOT_FOUND"


def test_client_gone_with_inference_queued(d, slow):
    s0 = stats(d)
    x = RNG.standard_normal((1, SLOW_CH, SLOW_HW, SLOW_HW)).astype(np.float32)
    with Wire.connect(d) as w:
        w.send(b"".join(request(i, "infer", {"model": "slow", "inputs": {"x": tensor(x)}})
                        for i in range(8)))
    # Closed at once: none of the 8 can be answered.
    with Wire.connect(d) as w2:
        assert w2.result("hello")["server"] == "convd"
        deadline = time.monotonic() + slow.limit(8)
        while (w2.result("stats")["requests"]["in_flight"] > 0
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert w2.result("stats")["requests"]["in_flight"] == 0
        # The daemon saw the close (EOF with POLLHUP): queued work of the
        # departed client was cancelled, not computed; what was already
        # running finished and its answers were dropped (or written, had it
        # ended before the close was seen). Each of the 8 is accounted once,
        # and no write failed.
        s = w2.result("stats")
        cancelled = s["requests"]["cancelled"] - s0["requests"]["cancelled"]
        dropped = s["requests"]["dropped"] - s0["requests"]["dropped"]
        computed = s["models"]["slow"]["ok"] - s0["models"]["slow"]["ok"]
        assert cancelled >= 1
        assert cancelled + computed == 8
        assert dropped <= computed
        assert s["connections"]["write_errors"] == s0["connections"]["write_errors"]


def test_load_without_models_dir_is_e_access(tmp_path):
    with TestDaemon(tmp_path) as d0, Wire.connect(d0) as w:
        assert w.error("load", {"name": "a", "path": "a.onnx"}) == "E_ACCESS"


def test_sigterm_with_inference_in_flight(models_dir, tmp_path, slow):
    d0 = TestDaemon(tmp_path, models_dir=models_dir,
                    args=["--max-batch", "2", "--workers", "2"]).start()
    try:
        x = RNG.standard_normal((2, SLOW_CH, SLOW_HW, SLOW_HW)).astype(np.float32)
        xs = RNG.standard_normal((1, C, H, W)).astype(np.float32)
        w = Wire.connect(d0, timeout=slow.limit(8))
        w.send(b"".join(request(i, "infer", {"model": "slow", "inputs": {"x": tensor(x)}})
                        for i in range(4)) +
               request(10, "infer", {"model": "conv", "inputs": {"x": tensor(xs)}}))
        # SIGTERM once the daemon has read all five, while the slow ones are
        # in flight: 8 items of slow.item_s each on two workers outlast this
        # wait by far (no fixed sleep that a fast CPU would outlast).
        deadline = time.monotonic() + slow.limit(1)
        while True:
            s = stats(d0)
            read = sum(s["models"][m]["requests"] for m in ("slow", "conv"))
            if read == 5 or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        assert read == 5 and s["requests"]["in_flight"] >= 1, (s["requests"], str(slow))
        d0.signal(signal.SIGTERM)
        msgs = w.expect_eof(timeout=slow.limit(8))
        assert sorted(m[1] for m in msgs) == [0, 1, 2, 3, 10]
        assert all(m[2] is None for m in msgs), [m[2] for m in msgs]
        assert_close(from_wire({m[1]: m for m in msgs}[10][3]["outputs"]["y"]),
                     reference(str(models_dir / "conv.onnx"), xs)["y"])
        assert d0.proc.wait(slow.limit(8)) == 0
        assert not os.path.exists(d0.socket)
    finally:
        d0.stop()
