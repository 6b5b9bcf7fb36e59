"""Metrics: the `metrics` method's Prometheus text parses
(a small parser of the exposition format below) and its counters match what
the test sent; histograms are cumulative with +Inf == _count; --metrics-file
is written periodically and atomically; `convctl metrics`, `convctl stats`
(per-model table) and `convctl top` (piped: snapshots without escape codes)."""
import os
import re
import subprocess
import time

import numpy as np
import pytest

from tests.integration.daemon_wire import Wire, request
from tests.models.builders import Graph, save
from tests.support import paths
from tests.support.daemon import TestDaemon

RNG = np.random.default_rng()

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_prometheus(text):
    """{(name, frozenset(labels.items())): value}, plus {name: type}. Raises
    on any line that is not a comment, blank, or `name{labels} value`."""
    samples, types = {}, {}
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in types, f"TYPE twice for {name}"
            types[name] = typ
            continue
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = {}
        if m.group(3):
            rest = m.group(3)
            while rest:
                lm = LABEL.match(rest)
                assert lm, f"bad labels in {line!r}"
                labels[lm.group(1)] = lm.group(2)
                rest = rest[lm.end():]
        key = (m.group(1), frozenset(labels.items()))
        assert key not in samples, f"duplicate sample {line!r}"
        v = m.group(4)
        samples[key] = float("inf") if v == "+Inf" else float(v)
    return samples, types


def get(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


def tiny(path):
    g = Graph(np.random.default_rng(3))
    y = g.relu(g.conv(g.input("x", [2, 4, 4]), 2, 3, 1))
    return save(g.build([y], "tiny"), path)


def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    tiny(d / "tiny.onnx")
    return d


def test_metrics_text_parses_and_counts_match(tmp_path, models):
    n_ok, n_bad = int(RNG.integers(5, 30)), int(RNG.integers(1, 6))
    with TestDaemon(tmp_path, models_dir=models, args=["--max-delay-us", "1000"]) as d, \
            Wire.connect(d) as w:
        x = lambda b: tensor(RNG.standard_normal((b, 2, 4, 4)).astype(np.float32))
        reqs = [request(i + 1, "infer", {"model": "tiny", "inputs": {"x": x(int(RNG.integers(1, 4)))}})
                for i in range(n_ok)]
        reqs += [request(100 + i, "infer", {"model": "tiny", "inputs": {
            "x": tensor(np.zeros((1, 2, 5, 4), np.float32))}}) for i in range(n_bad)]
        w.send(b"".join(reqs))
        got = w.recv(n_ok + n_bad)
        assert len({m[1] for m in got}) == n_ok + n_bad
        assert sum(m[2] is None for m in got) == n_ok
        text = w.result("metrics")
        assert isinstance(text, str)
        s, types = parse_prometheus(text)
        assert get(s, "convd_requests_total", model="tiny", code="OK") == n_ok
        assert get(s, "convd_requests_total", model="tiny", code="E_SHAPE") == n_bad
        assert get(s, "convd_method_requests_total", method="infer") == n_ok + n_bad
        assert get(s, "convd_errors_total", code="E_SHAPE") == n_bad
        assert get(s, "convd_connections") == 1
        assert get(s, "convd_models_loaded") == 1
        assert get(s, "convd_resident_memory_bytes") > 1 << 20
        assert get(s, "convd_bytes_in_total") > 0
        st = w.result("stats")["models"]["tiny"]
        assert get(s, "convd_batches_total", model="tiny") == st["batches"] > 0
        assert get(s, "convd_batch_items_total", model="tiny") == st["items"]
        for h in ("convd_queue_wait_seconds", "convd_compute_seconds", "convd_request_seconds",
                  "convd_batch_size"):
            assert types[h] == "histogram"
            buckets = sorted(((float(dict(k[1])["le"]), v) for k, v in s.items()
                              if k[0] == h + "_bucket"), key=lambda t: t[0])
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), f"{h} buckets not cumulative"
            assert buckets[-1][0] == float("inf")
            assert buckets[-1][1] == get(s, h + "_count", model="tiny")
            assert get(s, h + "_sum", model="tiny") >= 0
        assert get(s, "convd_request_seconds_count", model="tiny") == n_ok
        assert get(s, "convd_batch_size_count", model="tiny") == st["batches"]
        assert get(s, "convd_batch_size_bucket", model="tiny", le="+Inf") == st["batches"]
        for name in types:
            assert name.startswith("convd_")


def test_metrics_file_written_periodically_and_atomically(tmp_path, models):
    mf = tmp_path / "convd.prom"
    with TestDaemon(tmp_path, models_dir=models,
                    args=["--metrics-file", str(mf), "--metrics-interval", "1"]) as d, \
            Wire.connect(d) as w:
        assert mf.exists()  # written at start
        parse_prometheus(mf.read_text())
        x = tensor(RNG.standard_normal((1, 2, 4, 4)).astype(np.float32))
        n = int(RNG.integers(2, 9))
        for _ in range(n):
            assert w.call("infer", {"model": "tiny", "inputs": {"x": x}})[2] is None
        deadline = time.monotonic() + 60  # hang guard
        while time.monotonic() < deadline:
            s, _ = parse_prometheus(mf.read_text())
            if get(s, "convd_requests_total", model="tiny", code="OK") == n:
                break
            time.sleep(0.1)  # polls the metrics file: the state waited for
        assert get(s, "convd_requests_total", model="tiny", code="OK") == n
        assert not os.path.exists(str(mf) + ".tmp")


def run_ctl(d, *args, timeout=30):
    return subprocess.run([paths.binary("convctl"), "--socket", d.socket, *args],
                          capture_output=True, text=True, timeout=timeout)


def test_convctl_metrics_stats_top(tmp_path, models):
    with TestDaemon(tmp_path, models_dir=models) as d, Wire.connect(d) as w:
        x = tensor(RNG.standard_normal((2, 2, 4, 4)).astype(np.float32))
        for _ in range(3):
            assert w.call("infer", {"model": "tiny", "inputs": {"x": x}})[2] is None
        r = run_ctl(d, "metrics")
        assert r.returncode == 0, r.stderr
        s, _ = parse_prometheus(r.stdout)
        assert get(s, "convd_requests_total", model="tiny", code="OK") == 3
        r = run_ctl(d, "stats")
        assert r.returncode == 0, r.stderr
        assert re.search(r"^\s+MODEL\s+REQ/S\s+REQUESTS\s+ERRORS\s+BATCHES", r.stdout, re.M)
        assert re.search(r"^\s+tiny\s+-\s+3\s+0\s+3\s+2\.00\s", r.stdout, re.M), r.stdout
        assert re.search(r"^uptime_s\s", r.stdout, re.M)  # the existing output stays
        r = run_ctl(d, "top", "--interval", "0.2", "--count", "3")
        assert r.returncode == 0, r.stderr
        assert "\033" not in r.stdout  # piped: no escape codes
        assert r.stdout.count("convd  up ") == 3
        assert len(re.findall(r"^tiny\s", r.stdout, re.M)) == 3
        r = run_ctl(d, "top", "--count", "0")
        assert r.returncode == 2
        r = run_ctl(d, "top", "--interval", "x")
        assert r.returncode == 2
