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
# A forced exit is immediate; how much later than its bound the process is
# gone depends on the machine's load, so past the bound only a hang guard.
HANG_S = 60


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


def wait_running(d, n=1, timeout=HANG_S):
    """Waits until n threads of the daemon run a request (taken, not only
    queued: stats' requests.running); the deadline only guards a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = stats(d)
        if s["requests"]["running"] >= n:
            return s
        time.sleep(0.02)  # polls the counter: the state waited for
    raise AssertionError("work never ran: " + str(stats(d)["requests"]))


def wait_log(d, line, timeout=HANG_S):
    deadline = time.monotonic() + timeout
    while line not in d.stderr_text():
        assert time.monotonic() < deadline, f"no {line!r} in the log: {d.stderr_text()}"
        time.sleep(0.02)  # polls the log: the state waited for


def test_sigterm_during_a_long_load_exits_after_drain_and_grace(tmp_path, tune_models):
    d = tune_daemon(tmp_path, tune_models, "--drain-timeout", "1",
                    "--shutdown-grace", "1").start()
    try:
        w = Wire.connect(d, timeout=60)
        w.send(request(7, "load", {"name": "slow", "path": "sub/slow.onnx"}))
        wait_running(d)  # the loader has taken it
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(1 + 1 + HANG_S)
        elapsed = time.monotonic() - t0
        log = d.stderr_text()
        assert rc == 3, log
        assert elapsed > 1.8, (elapsed, log)  # not before drain + grace
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
        wait_running(d)
        d.signal(signal.SIGTERM)
        wait_log(d, "SIGTERM: shutting down")
        assert d.proc.poll() is None  # draining: the load holds it (60 + 60 s)
        d.signal(signal.SIGTERM)
        # "At once": long before the 60 s drain and the 60 s grace could end
        # (the wait is the guard; the log says which path it took).
        rc = d.proc.wait(HANG_S)
        log = d.stderr_text()
        assert rc == 3, log
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
        wait_running(d)  # the loader has taken it
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        # The drain (60 s) does not wait for it: only the grace (1 s) does.
        rc = d.proc.wait(1 + HANG_S)
        elapsed = time.monotonic() - t0
        log = d.stderr_text()
        assert rc == 3, log
        assert elapsed > 0.8, (elapsed, log)  # not before the grace
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
        wait_running(d)
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(1 + 2 + HANG_S)
        log = d.stderr_text()
        # Exit 0, not 3: the profile stopped at its next run once the drain
        # cut its connection, inside drain + grace (a later stop would be
        # the forced exit, status 3).
        assert rc == 0, log
        assert "drain timeout (1s)" in log
        assert "shutdown grace" not in log
        assert w.expect_eof() == []  # closed unanswered: its client's connection was cut
    finally:
        d.stop()
