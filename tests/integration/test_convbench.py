"""convbench (tools/convbench) against a real daemon running scale2.onnx
(tests/integration/client_models.py), plus its command-line errors.

The load tests skip, saying why, while the daemon cannot run the model (no
'infer' method yet, or scale2 did not load), as test_client_c.py does.
Each load test cross-checks convbench's own counts against the daemon's
`stats` (requests sent == infer requests the daemon received).
"""
import json
import os
import struct
import subprocess
import time

import pytest

from tests.integration import client_models
from tests.support import paths
from tests.support.daemon import TestDaemon

TIMEOUT = 120


def bench(*args, socket=None, timeout=TIMEOUT):
    cmd = [paths.binary("convbench")]
    if socket:
        cmd += ["--socket", socket]
    cmd += [str(a) for a in args]
    env = {k: v for k, v in os.environ.items() if k != "CONVD_SOCKET"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def bench_json(d, *args):
    r = bench("--json", *args, socket=d.socket)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def d(scale2_daemon):
    return scale2_daemon


def infer_count(d):
    import convd
    with convd.Client(d.socket) as c:
        return c.stats()["requests"]["by_method"].get("infer", 0)


def check_latency_order(lat):
    assert lat["count"] > 0
    keys = ["min", "p50", "p90", "p99", "p999", "max"]
    vals = [lat[k] for k in keys]
    assert all(v > 0 for v in vals), lat
    assert vals == sorted(vals), lat
    assert lat["min"] <= lat["mean"] <= lat["max"]


# ---- command line ------------------------------------------------------------

def test_help_lists_every_option():
    r = bench("--help")
    assert r.returncode == 0
    for opt in ["--model", "--concurrency", "--rate", "--arrival", "--duration", "--requests",
                "--warmup", "--batch", "--socket", "--input-shape", "--json", "--csv",
                "--plot", "--progress", "--connections", "--timeout"]:
        assert opt in r.stdout, opt


@pytest.mark.parametrize("args,msg", [
    ([], "--model is required"),
    (["--model", "m"], "--concurrency is required"),
    (["--model", "m", "--concurrency", "0"], "--concurrency must be"),
    (["--model", "m", "--concurrency", "2", "--bogus", "1"], "unknown option '--bogus'"),
    (["--model", "m", "--concurrency", "2", "--duration", "1", "--requests", "5"], "not both"),
    (["--model", "m", "--concurrency", "2", "--arrival", "poisson"], "--arrival needs --rate"),
    (["--model", "m", "--concurrency", "2", "--rate", "10", "--arrival", "bursty"],
     "poisson or uniform"),
    (["--model", "m", "--concurrency", "2", "--rate", "-5"], "--rate must be"),
    (["--model", "m", "--concurrency", "2", "--connections", "3"], "cannot exceed"),
    (["--model", "m", "--concurrency", "2", "--timeout"], "needs a value"),
])
def test_usage_errors_exit_2(args, msg):
    r = bench(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert msg in r.stderr
    assert "usage: convbench" in r.stderr


def test_cannot_connect_exit_3(tmp_path):
    sock = str(tmp_path / "nobody.sock")
    r = bench("--model", "m", "--concurrency", "1", "--requests", "1", socket=sock)
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"cannot connect to {sock}" in r.stderr
    assert r.stdout == ""


def test_unknown_model_names_the_loaded_ones(scale2_daemon):
    import convd
    with convd.Client(scale2_daemon.socket) as c:
        loaded = [m["name"] for m in c.models()]
    r = bench("--model", "no_such_model", "--concurrency", "1", "--requests", "1",
              socket=scale2_daemon.socket)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "unknown model 'no_such_model'" in r.stderr
    if loaded:
        assert "loaded: " + ", ".join(loaded) in r.stderr
    else:
        assert "no model is loaded" in r.stderr


# ---- closed loop -------------------------------------------------------------

def test_closed_loop_requests_exact_count_matches_daemon(d):
    n = 3000
    before = infer_count(d)
    out = bench_json(d, "--model", "scale2", "--concurrency", 6, "--connections", 3,
                     "--requests", n, "--warmup", 0, "--no-progress")
    after = infer_count(d)
    assert out["mode"] == "closed"
    assert out["connections"] == 3
    assert out["requests"] == {"sent": n, "ok": n, "errors": 0}
    assert out["errors"] == {}
    assert out["ended_early"] is None
    # Every request sent reached the daemon once, nothing more.
    assert after - before == n
    check_latency_order(out["latency_ms"])
    assert out["latency_ms"]["count"] == n
    assert out["throughput_rps"] > 0
    assert out["throughput_rps"] == pytest.approx(n / out["elapsed_s"], rel=1e-3)


def test_daemon_batch_sizes_add_up_to_the_requests(d):
    # The daemon's runs by batch size over the measured part (its stats'
    # batch_sizes, read before the first request when there is no warm-up):
    # their items are exactly the requests' samples.
    n = 400
    out = bench_json(d, "--model", "scale2", "--concurrency", 6, "--requests", n, "--warmup", 0, "--no-progress")
    b = out["daemon_batches"]
    assert b is not None, out
    sizes = {int(k): v for k, v in b["by_size"].items()}
    assert sum(k * v for k, v in sizes.items()) == n, sizes
    assert b["runs"] == sum(sizes.values())
    assert 1 <= min(sizes) and max(sizes) <= 8  # scale2's max_batch
    assert b["mean_items"] == pytest.approx(n / b["runs"], rel=1e-6)
    r = bench("--model", "scale2", "--concurrency", 2, "--requests", 20, "--warmup", 0, "--no-progress",
              socket=d.socket)
    assert r.returncode == 0 and "daemon runs " in r.stdout and "mean batch" in r.stdout, r.stdout


def test_closed_loop_duration_with_warmup_text_report(d):
    before = infer_count(d)
    r = bench("--model", "scale2", "--concurrency", 4, "--duration", 1.5, "--warmup", 0.5,
              "--no-progress", socket=d.socket)
    after = infer_count(d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == ""  # no progress line: stderr is not a tty
    text = r.stdout
    for word in ["closed loop", "concurrency 4", "throughput", "req/s", "p50", "p90", "p99",
                 "p99.9", "max", "measured    1.5 s after 0.5 s warm-up"]:
        assert word in text, text
    sent = int(text.split("requests    ")[1].split()[0])
    # Warm-up requests reached the daemon too but are not in the report.
    assert 0 < sent < after - before


def test_batch_sets_samples_per_request(d):
    out = bench_json(d, "--model", "scale2", "--concurrency", 2, "--requests", 200,
                     "--warmup", 0, "--batch", 4)
    assert out["batch"] == 4
    assert out["requests"]["ok"] == 200
    assert out["samples_per_s"] == pytest.approx(4 * out["throughput_rps"], rel=1e-6)


def test_errors_are_reported_by_code(d):
    # scale2's max_batch is 8 (the daemon's default): batch 9 is E_SHAPE.
    import convd
    with convd.Client(d.socket) as c:
        max_batch = [m for m in c.models() if m["name"] == "scale2"][0]["max_batch"]
    r = bench("--json", "--model", "scale2", "--concurrency", 2, "--requests", 50,
              "--warmup", 0, "--batch", max_batch + 1, socket=d.socket)
    assert r.returncode == 1, r.stdout + r.stderr  # nothing succeeded
    assert "no request succeeded" in r.stderr
    out = json.loads(r.stdout)
    assert out["requests"] == {"sent": 50, "ok": 0, "errors": 50}
    assert out["errors"] == {"E_SHAPE": 50}
    assert out["latency_ms"] == {"count": 0}


def test_explicit_input_shape(d):
    out = bench_json(d, "--model", "scale2", "--concurrency", 1, "--requests", 20,
                     "--warmup", 0, "--input-shape", "x=3x3x5x7")
    assert out["batch"] == 3 and out["requests"]["ok"] == 20
    out = bench_json(d, "--model", "scale2", "--concurrency", 1, "--requests", 20,
                     "--warmup", 0, "--input-shape", "2x3x5x7")
    assert out["batch"] == 2 and out["requests"]["ok"] == 20
    r = bench("--model", "scale2", "--concurrency", 1, "--requests", 5, "--json",
              "--input-shape", "1x3x7x5", socket=d.socket)
    assert r.returncode == 1
    assert json.loads(r.stdout)["errors"] == {"E_SHAPE": 5}
    for spec, msg in [("2xx3", "is not AxBx"), ("y=1x3x5x7", "has no input 'y'"),
                      ("x=1x0x5", "is not AxBx")]:
        r = bench("--model", "scale2", "--concurrency", 1, "--requests", 1,
                  "--input-shape", spec, socket=d.socket)
        assert r.returncode == 1, spec
        assert msg in r.stderr, (spec, r.stderr)


# ---- open loop ---------------------------------------------------------------

@pytest.mark.parametrize("arrival", ["uniform", "poisson"])
def test_open_loop_sends_its_schedule_after_warmup(d, arrival):
    # A fixed number of scheduled requests, so the count does not depend on
    # how fast this machine is; the rate actually reached is a benchmark
    # figure (bench/, docs/PERFORMANCE.md), and the arrival times themselves
    # are checked without a clock in tests/unit/test-bench-arrival.c.
    rate, n = 400, 800
    before = infer_count(d)
    out = bench_json(d, "--model", "scale2", "--concurrency", 16, "--rate", rate,
                     "--arrival", arrival, "--requests", n, "--warmup", 0.5, "--seed", 7)
    after = infer_count(d)
    assert out["mode"] == "open" and out["arrival"] == arrival and out["rate"] == rate
    assert out["requests"]["sent"] == n, out["requests"]
    assert out["requests"]["ok"] == n and out["errors"] == {}
    # Warm-up came first, at the same rate: the daemon saw more than the run.
    assert after - before > n, (before, after)
    check_latency_order(out["latency_ms"])
    assert out["max_lag_ms"] >= 0
    assert out["throughput_rps"] > 0


def test_open_loop_latency_counts_from_schedule(d):
    # At most 1 request in flight and a rate far above what one connection can
    # answer one at a time: requests queue behind the bound, so latency
    # measured from the scheduled time grows well past the service time
    # (a closed-loop measurement would hide that).
    closed = bench_json(d, "--model", "scale2", "--concurrency", 1, "--requests", 300,
                        "--warmup", 0)
    service_p50 = closed["latency_ms"]["p50"]
    rate = min(200000, 4 * closed["throughput_rps"])
    out = bench_json(d, "--model", "scale2", "--concurrency", 1, "--rate", rate,
                     "--arrival", "uniform", "--requests", 2000, "--warmup", 0)
    assert out["requests"]["ok"] == 2000
    assert out["latency_ms"]["p99"] > 5 * service_p50, (out["latency_ms"], service_p50)
    assert out["max_lag_ms"] > 0


# ---- outputs -----------------------------------------------------------------

def test_csv_per_second_rows(d, tmp_path):
    csv = tmp_path / "run.csv"
    out = bench_json(d, "--model", "scale2", "--concurrency", 2, "--duration", 2,
                     "--warmup", 1, "--csv", csv)
    lines = csv.read_text().splitlines()
    assert lines[0] == ("second,phase,sent,ok,errors,throughput_rps,p50_ms,p90_ms,p99_ms,"
                        "max_ms")
    rows = [l.split(",") for l in lines[1:]]
    # One row per second of the run: how many depends on this machine's
    # pace, so only their order is checked: warm-up rows, then measured ones.
    phases = [r[1] for r in rows]
    assert phases[0] == "warmup" and phases[-1] == "measure", phases
    assert phases == sorted(phases, key=lambda p: p == "measure"), phases
    assert [float(r[0]) for r in rows] == sorted(float(r[0]) for r in rows)
    for r in rows:
        assert len(r) == 10
        if int(r[3]):
            p50, p90, p99, mx = map(float, r[6:10])
            assert 0 < p50 <= p90 <= p99 <= mx
    # The rows hold every completion, warm-up included.
    assert sum(int(r[3]) for r in rows) >= out["requests"]["ok"]
    assert len(out["timeline"]) == len(rows)


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    return w, h, len(data)


def test_plot_writes_a_png(d, tmp_path):
    png = tmp_path / "lat.png"
    r = bench("--model", "scale2", "--concurrency", 3, "--duration", 1.5, "--warmup", 0.5,
              "--plot", png, socket=d.socket)
    assert r.returncode == 0, r.stdout + r.stderr
    w, h, size = png_size(png)
    assert (w, h) == (1200, 1000)
    assert size > 20000  # two panels with text, not an empty canvas


def test_plot_unwritable_fails(d, tmp_path):
    r = bench("--model", "scale2", "--concurrency", 1, "--requests", 20, "--warmup", 0,
              "--plot", tmp_path / "no" / "dir" / "x.png", socket=d.socket)
    assert r.returncode == 1
    assert "gnuplot" in r.stderr


def test_progress_line_every_second(d):
    r = bench("--model", "scale2", "--concurrency", 2, "--duration", 1.5, "--warmup", 1.2,
              "--progress", socket=d.socket)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("[")]
    assert len(lines) >= 2, r.stderr
    for word in ["sent", "ok", "errors", "req/s", "p50", "p99"]:
        assert word in lines[-1]
    assert "warmup" in lines[0]


# ---- the daemon goes away ----------------------------------------------------

def test_daemon_stops_mid_run(tmp_path):
    models = tmp_path / "m"
    models.mkdir()
    client_models.write_scale2(models / "scale2.onnx")
    dd = TestDaemon(tmp_path, models_dir=models).start()
    try:
        client_models.assert_loaded(dd)
        p = subprocess.Popen([paths.binary("convbench"), "--socket", dd.socket, "--json",
                              "--model", "scale2", "--concurrency", "4", "--duration", "30",
                              "--warmup", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Stop the daemon once the run has had answers (not after a time).
        deadline = time.monotonic() + 60  # hang guard
        while infer_count(dd) < 10:
            assert time.monotonic() < deadline and p.poll() is None, "convbench got no answers"
            time.sleep(0.02)  # polls the daemon's counter: the state waited for
        dd.stop()
        out, err = p.communicate(timeout=60)
    finally:
        dd.stop()
    assert p.returncode == 1, out + err
    assert "ended early" in err
    res = json.loads(out)
    assert res["ended_early"]
    assert res["requests"]["ok"] > 0
    # Each request got exactly one outcome.
    assert res["requests"]["sent"] == res["requests"]["ok"] + res["requests"]["errors"]


# ---- shared memory (--shm) ----------------------------------------------------

def test_shm_closed_loop_requests_exact_count(d):
    """--shm: a worker, a connection and a region each; every request counted
    once by the daemon, none failed; the regions go with the connections."""
    n = 400
    before = infer_count(d)
    out = bench_json(d, "--model", "scale2", "--concurrency", 3, "--shm",
                     "--requests", n, "--warmup", 0, "--no-progress")
    assert out["mode"] == "closed shared-memory"
    assert out["connections"] == 3
    assert out["requests"] == {"sent": n, "ok": n, "errors": 0}
    assert infer_count(d) - before == n


def test_shm_takes_no_rate(d):
    r = bench("--model", "scale2", "--concurrency", 2, "--shm", "--rate", 10, socket=d.socket)
    assert r.returncode == 2
    assert "--shm is a closed loop" in r.stderr
