"""Shutdown that cannot hang: after SIGTERM the connections drain for at most
--drain-timeout, then whatever a worker still runs gets --shutdown-grace
seconds; after that, or at a second SIGTERM, convd logs what it abandons and
exits 3 at once.

Work that does not stop when its client goes (a load) is made long for real:
a pruned model loaded with --tune on and an empty tuning cache times the
dense and sparse kernels of every layer (seconds per layer here), far longer
than the bounds the tests set."""
import os
import signal
import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.integration.daemon_wire import Wire, request, stats
from tests.support import slow_model
from tests.support.daemon import TestDaemon

# Whatever the machine, one layer's tuning takes a while: 48 of them far
# outlast drain + grace (1 + 1 s) below.
TUNE_LAYERS = 48
# A forced exit is immediate; this much more than the bound is the test's
# allowance for a busy machine.
SLACK_S = 4.0


def write_pruned(path, layers=TUNE_LAYERS, sparsity=0.9, seed=3):
    """The slow model's chain with 90% of every weight zero (so the planner
    has a sparse kernel to tune against the dense one)."""
    slow_model.write(path, layers)
    m = onnx.load(str(path))
    rng = np.random.default_rng(seed)
    for i, t in enumerate(m.graph.initializer):
        a = numpy_helper.to_array(t).copy()
        if a.ndim == 4:
            a[rng.random(a.shape) < sparsity] = 0.0
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
    onnx.save(m, str(path))
    return str(path)


@pytest.fixture(scope="module")
def tune_models(tmp_path_factory):
    """A models directory whose sub/slow.onnx is not loaded at start (only
    the top level is) and takes long to load with --tune on."""
    md = tmp_path_factory.mktemp("shutdown-models")
    (md / "sub").mkdir()
    write_pruned(md / "sub" / "slow.onnx")
    return md


def tune_daemon(tmp_path, models, *args):
    cache = tmp_path / "tune-cache"   # empty: every layer is timed
    return TestDaemon(tmp_path, models_dir=models,
                      args=["--tune", "on", "--tune-cache", str(cache), "--workers", "1",
                            *args])


def wait_in_flight(d, n=1, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = stats(d)
        if s["requests"]["in_flight"] >= n:
            return s
        time.sleep(0.02)
    raise AssertionError("work never showed in flight: " + str(stats(d)["requests"]))


def test_sigterm_during_a_long_load_exits_after_drain_and_grace(tmp_path, tune_models):
    d = tune_daemon(tmp_path, tune_models, "--drain-timeout", "1",
                    "--shutdown-grace", "1").start()
    try:
        w = Wire.connect(d, timeout=60)
        w.send(request(7, "load", {"name": "slow", "path": "sub/slow.onnx"}))
        wait_in_flight(d)
        time.sleep(0.2)  # the worker has taken it
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(1 + 1 + SLACK_S + 30)  # (the assert below is the bound)
        elapsed = time.monotonic() - t0
        log = d.stderr_text()
        assert rc == 3, log
        assert 1.8 < elapsed < 1 + 1 + SLACK_S, (elapsed, log)
        assert "drain timeout (1s): closing 1 connections" in log
        assert "shutdown grace (1s) is over: exiting now (status 3)" in log
        assert "abandoned: loader 0: load (msgid 7) for" in log
        assert "loaded model slow" not in log
        assert not os.path.exists(d.socket)
        w.close()
    finally:
        d.stop()


def test_second_sigterm_exits_at_once(tmp_path, tune_models):
    d = tune_daemon(tmp_path, tune_models, "--drain-timeout", "60",
                    "--shutdown-grace", "60").start()
    try:
        w = Wire.connect(d, timeout=60)
        w.send(request(9, "load", {"name": "slow", "path": "sub/slow.onnx"}))
        wait_in_flight(d)
        d.signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while "SIGTERM: shutting down" not in d.stderr_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert d.proc.poll() is None  # draining: the load holds it
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(30)
        elapsed = time.monotonic() - t0
        log = d.stderr_text()
        assert rc == 3, log
        assert elapsed < SLACK_S, (elapsed, log)
        assert ("SIGTERM again: exiting now (status 3), abandoning 1 connection(s) and "
                "1 request(s) in flight") in log
        assert "abandoned: loader 0: load (msgid 9) for" in log
        w.close()
    finally:
        d.stop()


def test_sigterm_during_a_rescan_load_is_bounded_too(tmp_path, tune_models):
    # A load with no client (SIGHUP found a new file): no connection keeps
    # the drain going; the workers' join itself must be bounded.
    md = tmp_path / "models"
    md.mkdir()
    d = tune_daemon(tmp_path, md, "--drain-timeout", "60", "--shutdown-grace", "1").start()
    try:
        os.link(tune_models / "sub" / "slow.onnx", md / "slow.onnx")
        d.signal(signal.SIGHUP)
        wait_in_flight(d)
        time.sleep(0.2)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(1 + SLACK_S + 30)
        elapsed = time.monotonic() - t0
        log = d.stderr_text()
        assert rc == 3, log
        assert 0.8 < elapsed < 1 + SLACK_S, (elapsed, log)
        assert "shutdown grace (1s) is over" in log
        assert "abandoned: loader 0: load (msgid 0) for" in log
    finally:
        d.stop()


def test_sigterm_during_a_long_plan_exits_within_drain_and_grace(tmp_path, slow):
    # A profile of many runs stops at its next run once its connection is
    # closed (drain timeout): a clean exit, inside the same bound.
    md = tmp_path / "models"
    md.mkdir()
    slow.write(md / "slow.onnx")
    d = TestDaemon(tmp_path, models_dir=md, args=["--max-batch", "8", "--drain-timeout", "1",
                                                  "--shutdown-grace", "2"]).start()
    try:
        w = Wire.connect(d, timeout=60)
        w.send(request(3, "plan", {"model": "slow", "batch": 8, "runs": 1000}))
        wait_in_flight(d)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(60)
        elapsed = time.monotonic() - t0
        log = d.stderr_text()
        assert rc == 0, log
        assert elapsed < 1 + 2 + SLACK_S, (elapsed, log)
        assert "drain timeout (1s)" in log
        assert w.expect_eof() == []  # closed unanswered: its client's connection was cut
    finally:
        d.stop()
