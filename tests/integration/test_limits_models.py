"""Limits on models: --max-models (a load of one more name is E_TOO_LARGE,
replacing a loaded name is not), --max-model-bytes (a larger file is refused
with E_TOO_LARGE before it is read), --max-pending-loads (E_OVERLOADED past
it), and loads running on their own thread: a load completes while the only
inference worker is busy, instead of waiting behind inference."""
import time

import numpy as np
import pytest

from tests.integration.daemon_wire import Wire, request, stats
from tests.models.builders import Graph, save
from tests.support.daemon import TestDaemon

RNG = np.random.default_rng()
TINY_X = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)


def tiny_model(path, seed=8):
    g = Graph(np.random.default_rng(seed))
    y = g.relu(g.conv(g.input("x", [2, 4, 4]), 2, 2, 1))
    return save(g.build([y], "tiny"), path)


def heavy_file(path):
    """A 3x3 conv 64 -> 64: ~147 KiB of weights."""
    g = Graph(np.random.default_rng(3))
    y = g.conv(g.input("x", [64, 8, 8]), 64, 64, 3)
    return save(g.build([y], "heavy"), path)


def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


@pytest.fixture(scope="module")
def models(tmp_path_factory, slow):
    d = tmp_path_factory.mktemp("models")
    tiny_model(d / "a.onnx")
    tiny_model(d / "b.onnx", seed=9)
    extra = d / "extra"  # not scanned at start; `load` reaches it
    extra.mkdir()
    tiny_model(extra / "c.onnx", seed=10)
    heavy_file(extra / "heavy.onnx")
    slow.write(extra / "slow.onnx")
    return d


@pytest.fixture(scope="module")
def d(models):
    with TestDaemon(models_dir=models, args=["--max-models", "3", "--max-model-bytes", "64K",
                                            "--max-pending-loads", "1",
                                            "--workers", "1"]) as daemon:
        yield daemon


def test_max_models(d):
    with Wire.connect(d) as w:
        assert len(w.result("models")["models"]) == 2  # a, b from the directory
        w.result("load", {"name": "c", "path": "extra/c.onnx"})
        resp = w.call("load", {"name": "d", "path": "extra/c.onnx"})
        assert resp[2]["code"] == "E_TOO_LARGE" and "max-models" in resp[2]["message"]
        # Replacing a loaded name is not one more model.
        w.result("load", {"name": "a", "path": "extra/c.onnx"})
        w.result("unload", {"name": "c"})
        w.result("load", {"name": "d", "path": "extra/c.onnx"})
        assert sorted(m["name"] for m in w.result("models")["models"]) == ["a", "b", "d"]
        w.result("unload", {"name": "d"})


def test_max_model_bytes(d):
    with Wire.connect(d) as w:
        resp = w.call("load", {"name": "heavy", "path": "extra/heavy.onnx"})
        assert resp[2]["code"] == "E_TOO_LARGE", resp[2]
        assert "max-model-bytes" in resp[2]["message"]
        assert "heavy" not in [m["name"] for m in w.result("models")["models"]]


def test_max_pending_loads(d):
    with Wire.connect(d) as w:
        n = 5
        # One read carries them all: the first is pending while the rest arrive.
        w.send(b"".join(request(10 + i, "load", {"name": f"p{i}", "path": "extra/c.onnx"})
                        for i in range(n)))
        got = {m[1]: m for m in w.recv(n)}
        codes = [got[10 + i][2]["code"] if got[10 + i][2] else "OK" for i in range(n)]
        assert codes[0] == "OK", codes
        assert codes.count("E_OVERLOADED") >= 1, codes
        assert set(codes) <= {"OK", "E_OVERLOADED"}, codes
        for i in range(n):
            if codes[i] == "OK":
                w.result("unload", {"name": f"p{i}"})
        assert w.result("stats")["limits"]["pending_loads"] == 0


def test_load_runs_while_the_only_worker_computes(tmp_path, models, slow):
    # No size cap here: the slow model is larger than 64K.
    items = max(2, min(64, int(3.0 / slow.item_s)))
    with TestDaemon(tmp_path, models_dir=models, args=["--workers", "1"]) as d2, \
            Wire.connect(d2, timeout=slow.limit(items)) as w:
        w.result("load", {"name": "slow", "path": "extra/slow.onnx", "max_batch": items})
        x = RNG.standard_normal((items, 4, 64, 64)).astype(np.float32)
        w.send(request(1, "infer", {"model": "slow", "inputs": {"x": tensor(x)}}))
        # Wait until the worker has started the run (taken, not queued).
        deadline = time.monotonic() + max(60, slow.limit(1))  # hang guard
        with Wire.connect(d2) as w2:
            while w2.result("stats")["requests"]["running"] == 0:
                assert time.monotonic() < deadline, "the run never started"
                time.sleep(0.01)  # polls the counter: the state waited for
            t0 = time.monotonic()
            w2.result("load", {"name": "c", "path": "extra/c.onnx"})
            load_s = time.monotonic() - t0
            # The infer has not finished: the load did not wait for it.
            s = w2.result("stats")
            assert s["models"]["slow"]["ok"] == 0, (load_s, str(slow))
        resp = w.recv_one(timeout=slow.limit(items))
        assert resp[1] == 1 and resp[2] is None
        assert load_s < items * slow.item_s, (load_s, items, str(slow))
