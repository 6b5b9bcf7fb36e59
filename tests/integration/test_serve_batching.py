"""Dynamic batching: requests of one model, of different
batch sizes, are combined into one model run and split back; the results
equal onnxruntime's and the daemon's own unbatched ones; the batch-size
histogram in `stats` shows batches > 1 and never over max_batch; per-model
settings come from `load` params and from `<model>.onnx.conf` next to the
file (params over the file over the daemon's defaults). Every test counts
requests sent against responses received."""
import numpy as np
import onnxruntime as ort
import pytest

from tests.integration.daemon_wire import Wire, assert_close, from_wire, request, tensor
from tests.models.builders import Graph, save
from tests.support.daemon import TestDaemon

RNG = np.random.default_rng()
C = int(RNG.integers(2, 5))
HW = int(RNG.integers(4, 10))


def small_cnn(path, seed):
    """conv3x3+bn+relu -> conv3x3 -> relu, two outputs (the second a 1x1
    conv of the input): enough layers that batching is not trivial."""
    g = Graph(np.random.default_rng(seed))
    x = g.input("x", [C, HW, HW])
    y = g.conv_bn_relu(x, C, 8, 3)
    y = g.relu(g.conv(y, 8, 6, 3))
    z = g.conv(x, C, 2, 1)
    return save(g.build([y, z], "small_cnn"), path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    small_cnn(d / "cnn.onnx", 1)
    small_cnn(d / "conf.onnx", 2)
    (d / "conf.onnx.conf").write_text("# per-model settings\nmax_batch = 3\n"
                                      "max_delay_us = 7000   # 7 ms\nmax_queue=50\n")
    small_cnn(d / "badconf.onnx", 3)
    (d / "badconf.onnx.conf").write_text("max_batch = 3\nmax_dealy_us = 10\n")
    return d


@pytest.fixture(scope="module")
def d(models):
    # One worker and a long delay: requests pile up and are batched.
    with TestDaemon(models_dir=models, args=["--workers", "1", "--max-batch", "4"]) as daemon:
        yield daemon


def model_stats(w, name):
    return w.result("stats")["models"][name]


def test_batches_form_and_results_equal_unbatched(d, models):
    with Wire.connect(d, timeout=60) as w:
        info = w.result("load", {"name": "b", "path": "cnn.onnx", "max_batch": 8,
                                 "max_delay_us": 50000})
        assert info["max_batch"] == 8
        n = int(RNG.integers(16, 33))
        sizes = [int(RNG.integers(1, 4)) for _ in range(n)]
        xs = [RNG.standard_normal((b, C, HW, HW)).astype(np.float32) for b in sizes]
        # All pipelined in one write: the worker finds them queued together.
        w.send(b"".join(request(i + 1, "infer", {"model": "b", "inputs": {"x": tensor(x)}})
                        for i, x in enumerate(xs)))
        got = {m[1]: m for m in w.recv(n, timeout=60)}
        assert len(got) == n  # every request answered exactly once
        sess = ort.InferenceSession(str(models / "cnn.onnx"), providers=["CPUExecutionProvider"])
        outs = [o.name for o in sess.get_outputs()]
        for i, x in enumerate(xs):
            m = got[i + 1]
            assert m[2] is None, m[2]
            ref = dict(zip(outs, sess.run(None, {"x": x})))
            for name in outs:
                assert_close(from_wire(m[3]["outputs"][name]), ref[name])
        s = model_stats(w, "b")
        assert s["requests"] == n and s["ok"] == n and s["errors"] == 0
        assert s["items"] == sum(sizes)
        assert s["batches"] < n  # some runs carried several requests
        assert s["batch_size"]["max"] > 1
        assert s["batch_size"]["max"] <= 8
        assert s["batch_size"]["count"] == s["batches"]
        by_size = {int(k): v for k, v in s["batch_sizes"].items()}  # exact below 64 items
        assert sum(by_size.values()) == s["batches"] and sum(k * v for k, v in by_size.items()) == s["items"]
        assert max(by_size) == s["batch_size"]["max"]
        assert s["queue_wait_us"]["count"] == n and s["total_us"]["count"] == n
        # The same inputs one at a time (never batched with another) give the
        # same outputs as the batched run.
        for i in RNG.choice(n, 4, replace=False):
            alone = w.call("infer", {"model": "b", "inputs": {"x": tensor(xs[i])}})
            for name in outs:
                np.testing.assert_allclose(from_wire(alone[3]["outputs"][name]),
                                           from_wire(got[i + 1][3]["outputs"][name]),
                                           rtol=1e-4, atol=1e-4)
        w.result("unload", {"name": "b"})


def test_mixed_sizes_never_exceed_max_batch(d):
    with Wire.connect(d, timeout=60) as w:
        w.result("load", {"name": "mix", "path": "cnn.onnx", "max_batch": 5,
                          "max_delay_us": 30000})
        sizes = [int(RNG.integers(1, 6)) for _ in range(int(RNG.integers(12, 25)))]
        w.send(b"".join(request(i + 1, "infer", {"model": "mix", "inputs": {
            "x": tensor(RNG.standard_normal((b, C, HW, HW)).astype(np.float32))}})
            for i, b in enumerate(sizes)))
        got = {m[1]: m for m in w.recv(len(sizes), timeout=60)}
        assert len(got) == len(sizes)
        for i, b in enumerate(sizes):
            assert got[i + 1][2] is None
            for out in got[i + 1][3]["outputs"].values():
                assert out["shape"][0] == b
        s = model_stats(w, "mix")
        assert s["items"] == sum(sizes)
        assert s["batch_size"]["max"] <= 5
        assert s["batches"] >= -(-sum(sizes) // 5)
        w.result("unload", {"name": "mix"})


def test_no_delay_single_request_not_held(d):
    # max_delay_us 0: a lone request runs at once (no waiting for company).
    with Wire.connect(d, timeout=60) as w:
        w.result("load", {"name": "nodelay", "path": "cnn.onnx", "max_delay_us": 0})
        x = RNG.standard_normal((1, C, HW, HW)).astype(np.float32)
        for _ in range(3):
            assert w.call("infer", {"model": "nodelay", "inputs": {"x": tensor(x)}})[2] is None
        s = model_stats(w, "nodelay")
        assert s["batches"] == 3 and s["batch_size"]["max"] == 1
        assert s["max_delay_us"] == 0
        w.result("unload", {"name": "nodelay"})


def test_conf_file_next_to_model_and_load_params_override(d):
    with Wire.connect(d) as w:
        s = model_stats(w, "conf")
        assert (s["max_batch"], s["max_delay_us"], s["max_queue"]) == (3, 7000, 50)
        assert s["max_batch"] == [m for m in w.result("models")["models"]
                                  if m["name"] == "conf"][0]["max_batch"]
        x4 = RNG.standard_normal((4, C, HW, HW)).astype(np.float32)
        assert w.error("infer", {"model": "conf", "inputs": {"x": tensor(x4)}}) == "E_SHAPE"
        # load: the .conf applies, params override it key by key.
        w.result("load", {"name": "conf2", "path": "conf.onnx", "max_delay_us": 0})
        s2 = model_stats(w, "conf2")
        assert (s2["max_batch"], s2["max_delay_us"], s2["max_queue"]) == (3, 0, 50)
        # Without a .conf: the daemon's defaults (--max-batch 4, delay 0, queue 2048).
        s3 = model_stats(w, "cnn")
        assert (s3["max_batch"], s3["max_delay_us"], s3["max_queue"]) == (4, 0, 2048)
        w.result("unload", {"name": "conf2"})


def test_bad_conf_file_skips_model_at_start_and_fails_load(d):
    assert "badconf" not in [m["name"] for m in Wire.connect(d).result("models")["models"]]
    assert "badconf.onnx.conf:2: unknown key 'max_dealy_us'" in d.stderr_text()
    with Wire.connect(d) as w:
        assert w.error("load", {"name": "bc", "path": "badconf.onnx"}) == "E_PARAMS"


@pytest.mark.parametrize("key,value", [("max_delay_us", -1), ("max_delay_us", "5"),
                                       ("max_queue", 0), ("max_delay_us", 10000001)])
def test_load_bad_scheduling_params(d, key, value):
    with Wire.connect(d) as w:
        assert w.error("load", {"name": "e", "path": "cnn.onnx", key: value}) == "E_PARAMS"
