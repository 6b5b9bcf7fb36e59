"""Lifecycle under traffic: `load` of an existing name
swaps atomically while clients keep sending (nothing lost, every answer from
the old or the new model); `unload` under traffic (in-flight finish, later
requests E_NOT_FOUND); SIGTERM under load answers every accepted request and
exits 0; SIGHUP re-reads the config file and the models directory (new files
loaded, removed ones unloaded, changed ones reloaded). Every test counts
requests sent vs answers received."""
import os
import re
import signal
import threading
import time

import numpy as np
import onnxruntime as ort
import pytest

from tests.integration.daemon_wire import Wire, request, stats
from tests.models.builders import Graph, save
from tests.support.daemon import TestDaemon

RNG = np.random.default_rng()
C, HW = 3, 6


def conv_model(path, seed, cout=4):
    g = Graph(np.random.default_rng(seed))
    y = g.relu(g.conv(g.input("x", [C, HW, HW]), C, cout, 3))
    return save(g.build([y], f"m{seed}"), path)


def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


def from_wire(t):
    return np.frombuffer(t["data"], np.float32).reshape(t["shape"])


def ref(path, x):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def close(a, b):
    return a.shape == b.shape and (np.abs(a - b) / np.maximum(1.0, np.abs(b))).max() <= 1e-4


class Sender(threading.Thread):
    """Closed loop of `depth` pipelined infer requests on its own connection
    until stopped; records every answer by msgid."""

    def __init__(self, d, model, x, depth=4):
        super().__init__(daemon=True)
        self.w = Wire.connect(d, timeout=60)
        self.model, self.x, self.depth = model, x, depth
        self.sent, self.answers, self.stop_flag, self.error = 0, {}, False, None
        self.sent_times = {}

    def run(self):
        try:
            out = 0
            while not self.stop_flag or out:
                while out < self.depth and not self.stop_flag:
                    self.sent += 1
                    self.sent_times[self.sent] = time.monotonic()
                    self.w.send(request(self.sent, "infer", {"model": self.model,
                                                             "inputs": {"x": tensor(self.x)}}))
                    out += 1
                m = self.w.recv_one(timeout=60)
                assert m[1] not in self.answers, "answered twice"
                self.answers[m[1]] = (m, time.monotonic())
                out -= 1
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self.w.close()


def test_swap_under_traffic_loses_nothing(tmp_path):
    md = tmp_path / "models"
    md.mkdir()
    conv_model(md / "a.onnx", 1)
    conv_model(md / "b.onnx", 2)
    x = RNG.standard_normal((1, C, HW, HW)).astype(np.float32)
    ra, rb = ref(md / "a.onnx", x), ref(md / "b.onnx", x)
    with TestDaemon(tmp_path, models_dir=md, args=["--workers", "2"]) as d, \
            Wire.connect(d, timeout=60) as ctl:
        ctl.result("load", {"name": "m", "path": "a.onnx", "max_delay_us": 500})
        senders = [Sender(d, "m", x) for _ in range(4)]
        for s in senders:
            s.start()
        # A fixed number of swaps, each once traffic has been answered since
        # the last one (how many fit in a time window depends on the load).
        swaps = 0
        for swaps in range(1, 7):
            seen = sum(len(s.answers) for s in senders)
            assert wait_for(lambda: sum(len(s.answers) for s in senders) > seen, 60), \
                "no answer between two swaps"
            ctl.result("load", {"name": "m", "path": "b.onnx" if swaps % 2 else "a.onnx",
                                "max_delay_us": 500 * (swaps % 3)})
        for s in senders:
            s.stop_flag = True
        for s in senders:
            s.join(60)
            assert s.error is None, s.error
            assert len(s.answers) == s.sent > 0  # every request answered once
            for m, _ in s.answers.values():
                assert m[2] is None, m[2]
                y = from_wire(m[3]["outputs"][next(iter(m[3]["outputs"]))])
                assert close(y, ra) or close(y, rb)
        assert swaps >= 3
        assert [e["name"] for e in ctl.result("models")["models"]].count("m") == 1
        st = ctl.result("stats")
        assert st["models"]["m"]["ok"] == sum(s.sent for s in senders)


def test_unload_under_traffic(tmp_path):
    md = tmp_path / "models"
    md.mkdir()
    conv_model(md / "a.onnx", 3)
    x = RNG.standard_normal((1, C, HW, HW)).astype(np.float32)
    with TestDaemon(tmp_path, models_dir=md, args=["--workers", "2"]) as d, \
            Wire.connect(d, timeout=60) as ctl:
        ctl.result("load", {"name": "u", "path": "a.onnx"})
        senders = [Sender(d, "u", x) for _ in range(3)]
        for s in senders:
            s.start()

        def answered(code):
            return any((m[2] or {}).get("code") == code
                       for s in senders for m, _ in list(s.answers.values()))

        assert wait_for(lambda: answered(None), 60), "no answer before the unload"
        assert ctl.result("unload", {"name": "u"}) == {"name": "u"}
        t_unloaded = time.monotonic()
        assert wait_for(lambda: answered("E_NOT_FOUND"), 60), "no E_NOT_FOUND after the unload"
        for s in senders:
            s.stop_flag = True
        ok = not_found = 0
        for s in senders:
            s.join(60)
            assert s.error is None, s.error
            assert len(s.answers) == s.sent
            for msgid, (m, _) in s.answers.items():
                if m[2] is None:
                    ok += 1
                    # Sent after the unload was answered: must not succeed.
                    assert s.sent_times[msgid] < t_unloaded
                else:
                    assert m[2]["code"] == "E_NOT_FOUND", m[2]
                    not_found += 1
        assert ok > 0 and not_found > 0
        assert ctl.result("stats")["requests"]["in_flight"] == 0


def test_sigterm_under_load_answers_every_accepted_request(tmp_path, slow):
    md = tmp_path / "models"
    md.mkdir()
    conv_model(md / "a.onnx", 4, cout=16)
    slow.write(md / "slow.onnx")
    d = TestDaemon(tmp_path, models_dir=md, args=["--workers", "2"]).start()
    try:
        x = RNG.standard_normal((2, C, HW, HW)).astype(np.float32)
        # First four runs of the slow model (tests/support/slow_model.py,
        # slow.item_s each, measured) on one connection: they hold both
        # workers while the tiny requests queue behind them, so the SIGTERM
        # below finds work in flight however fast the CPU (a fixed sleep
        # was outlasted by the tiny requests alone at times).
        n_slow = 4
        sw = Wire.connect(d, timeout=slow.limit(n_slow))
        sw.send(b"".join(request(i + 1, "infer", {"model": "slow",
                                                  "inputs": {"x": tensor(slow.input(RNG))}})
                         for i in range(n_slow)))
        conns = [Wire.connect(d, timeout=slow.limit(n_slow)) for _ in range(6)]
        per = 40
        for w in conns:
            w.send(b"".join(request(i + 1, "infer", {"model": "a", "inputs": {"x": tensor(x)}})
                            for i in range(per)))
        # SIGTERM once every request was read (counted), not after a sleep.
        deadline = time.monotonic() + max(60, slow.limit(1))  # hang guard
        while True:
            s = stats(d)["models"]
            if s["slow"]["requests"] == n_slow and s["a"]["requests"] == per * len(conns):
                break
            assert time.monotonic() < deadline, s
            time.sleep(0.002)  # polls the counters: the state waited for
        d.signal(signal.SIGTERM)
        total = 0
        for w in conns + [sw]:
            msgs = w.expect_eof(timeout=slow.limit(n_slow))
            n = n_slow if w is sw else per
            assert sorted(m[1] for m in msgs) == list(range(1, n + 1))
            assert all(m[2] is None for m in msgs), [m[2] for m in msgs if m[2]][:3]
            total += len(msgs)
            w.close()
        assert total == per * len(conns) + n_slow
        assert d.proc.wait(slow.limit(n_slow)) == 0
        log = d.stderr_text()
        assert "all connections closed" in log
        # The signal came while work was in flight: the drain was exercised.
        in_flight = re.search(r"SIGTERM: shutting down \(\d+ connections, (\d+) requests in flight",
                              log)
        assert in_flight and int(in_flight[1]) >= 1, (log, str(slow))
    finally:
        d.stop()


def wait_for(pred, timeout=60):
    """Waits until pred() holds; the deadline only guards against a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)  # polls the state waited for
    return pred()


def test_sighup_rescans_models_and_rereads_config(tmp_path):
    md = tmp_path / "models"
    md.mkdir()
    conv_model(md / "keep.onnx", 5)
    conv_model(md / "gone.onnx", 6)
    conv_model(md / "changed.onnx", 7)
    conf = tmp_path / "convd.conf"
    conf.write_text("max-queue = 100\nworkers = 2\n")
    x = RNG.standard_normal((1, C, HW, HW)).astype(np.float32)
    with TestDaemon(tmp_path, models_dir=md, args=["--config", str(conf)]) as d, \
            Wire.connect(d, timeout=60) as w:
        names = lambda: {m["name"] for m in w.result("models")["models"]}
        assert names() == {"keep", "gone", "changed"}
        # A client's model under a name the directory lacks: does not survive.
        w.result("load", {"name": "mine", "path": "gone.onnx"})
        assert w.result("stats")["settings"]["max-queue"] == 100
        os.unlink(md / "gone.onnx")
        conv_model(md / "new.onnx", 8)
        conv_model(md / "changed.onnx", 9, cout=5)  # other weights and shape
        (md / "keep.onnx.conf").write_text("max_delay_us = 1234\n")
        conf.write_text("max-queue = 7\nworkers = 3\n")
        d.signal(signal.SIGHUP)
        assert wait_for(lambda: names() == {"keep", "changed", "new"}), names()
        assert wait_for(lambda: w.result("stats")["models"]["keep"]["max_delay_us"] == 1234)
        # The loader thread replaces "changed" in its own time (its name was
        # there all along): wait for the new one, 5 output channels.
        def changed_replaced():
            r = w.call("infer", {"model": "changed", "inputs": {"x": tensor(x)}})
            assert r[2] is None, r[2]
            return r if next(iter(r[3]["outputs"].values()))["shape"][1] == 5 else None
        assert wait_for(changed_replaced)
        r = changed_replaced()
        assert close(from_wire(r[3]["outputs"][next(iter(r[3]["outputs"]))]),
                     ref(md / "changed.onnx", x))
        s = w.result("stats")
        assert s["settings"]["max-queue"] == 7      # reloadable: applied
        assert s["settings"]["workers"] == 2        # needs a restart: kept
        log = d.stderr_text()
        assert "rescan: loading new from new.onnx (new file)" in log
        assert "rescan: loading changed from changed.onnx (file changed)" in log
        assert "rescan: loading keep from keep.onnx (.conf changed)" in log
        assert "rescan: unloading gone (gone.onnx is gone)" in log
        assert ("rescan: unloading mine (loaded by a client from gone.onnx; not in the "
                "models directory)") in log
        assert "SIGHUP: workers changed in the configuration; it takes effect at restart" in log
        # A broken config file on SIGHUP: kept as is, daemon fine.
        conf.write_text("max-queue = lots\n")
        d.signal(signal.SIGHUP)
        assert wait_for(lambda: "keeping the current settings" in d.stderr_text())
        assert w.result("stats")["settings"]["max-queue"] == 7
