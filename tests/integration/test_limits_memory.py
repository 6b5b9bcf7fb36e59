"""The one memory budget for requests (--max-buffered): several connections
pipelining large messages (a valid infer padded with a huge unknown param, or
large valid inputs queued behind slow work) cannot make the daemon hold more
than the budget; what does not fit gets E_OVERLOADED, connections stay in
sync, other clients are answered, and nothing accepted is lost. The peak RSS
of the daemon (VmHWM) is measured around each burst."""
import threading
import time

import numpy as np
import pytest

from tests.integration.daemon_wire import Wire, request
from tests.models.builders import Graph, save
from tests.support.daemon import TestDaemon
from tests.support.threads import Thread

MiB = 1 << 20
BUDGET = 96 * MiB
RNG = np.random.default_rng()
TINY_X = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)


def tiny_model(path):
    g = Graph(np.random.default_rng(8))
    y = g.relu(g.conv(g.input("x", [2, 4, 4]), 2, 2, 1))
    return save(g.build([y], "tiny"), path)


def big_model(path):
    """1x1 conv 1 -> 1 channel on 512x512: 1 MiB in and out per item."""
    g = Graph(np.random.default_rng(9))
    y = g.conv(g.input("x", [1, 512, 512]), 1, 1, 1)
    return save(g.build([y], "big"), path)


def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


@pytest.fixture(scope="module")
def models(tmp_path_factory, slow):
    d = tmp_path_factory.mktemp("models")
    tiny_model(d / "tiny.onnx")
    big_model(d / "big.onnx")
    slow.write(d / "slow.onnx")
    return d


def daemon(tmp_path, models):
    # Under AddressSanitizer freed memory waits in a quarantine (256 MiB by
    # default) before it is reused or unmapped, which the peak RSS would
    # count: a small one keeps the figure about what is held (no effect on
    # other builds).
    env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:quarantine_size_mb=4"}
    return TestDaemon(tmp_path, models_dir=models, env=env,
                      args=["--workers", "1", "--max-message", "64M",
                            "--max-buffered", str(BUDGET), "--max-batch", "16"])


def pipeline(d, msgs, out, i):
    """One attacker connection: sends msgs back to back while a thread reads
    the answers; out[i] gets {msgid: answer} and whether hello still works."""
    with Wire.connect(d, timeout=120) as w:
        got = {}
        reader = Thread(target=lambda: got.update(
            {m[1]: m for m in w.recv(len(msgs), timeout=120)}))
        reader.start()
        for m in msgs:
            w.send(m)
        reader.join()
        out[i] = (got, w.call("hello")[2] is None)


def watch_others(d, stop, lat, held):
    """A well-behaved client during the burst: its calls must all succeed.
    It also samples the bytes the daemon says it holds for requests."""
    with Wire.connect(d, timeout=60) as w:
        while True:  # at least one call, however short the burst
            t0 = time.monotonic()
            assert w.call("infer", {"model": "tiny", "inputs": {"x": tensor(TINY_X)}})[2] is None
            held.append(w.result("stats")["limits"]["buffered_bytes"])
            lat.append(time.monotonic() - t0)
            # Paces this client (a sample every 20 ms), not a synchronisation.
            if stop.wait(0.02):
                break


def burst(d, per_conn):
    """Runs one pipelining connection per list of messages at once; returns
    their answers and the most the daemon held for requests meanwhile."""
    outs = [None] * len(per_conn)
    stop, lat, held = threading.Event(), [], []
    other = Thread(target=watch_others, args=(d, stop, lat, held))
    other.start()
    ts = [Thread(target=pipeline, args=(d, m, outs, i)) for i, m in enumerate(per_conn)]
    for t in ts:
        t.start()
    try:
        for t in ts:
            t.join()  # re-raises a pipeline's failed assert here
    finally:
        stop.set()
        other.join()  # and the other client's
    assert lat, "the other client got no answer during the burst"
    # The budget itself: what requests hold never passes it by more than one
    # read per connection (a message of one read is always taken).
    assert max(held) <= BUDGET + (len(per_conn) + 1) * (64 << 10), max(held)
    return outs, max(held)


def test_padded_requests_from_many_connections_stay_in_budget(tmp_path, models):
    conns, per, pad = 6, 3, 40 * MiB
    blob = b"\0" * pad
    with daemon(tmp_path, models) as d:
        with Wire.connect(d) as w:  # warm up: every code path once
            assert w.call("infer", {"model": "tiny", "inputs": {"x": tensor(TINY_X)}})[2] is None
        base = d.rss_peak_kib()
        msgs = [[request(k + 1, "infer", {"model": "tiny", "inputs": {"x": tensor(TINY_X)},
                                          "pad": blob}) for k in range(per)]
                for _ in range(conns)]
        outs, held = burst(d, msgs)
        peak = d.rss_peak_kib()
        codes = {}
        for got, hello_ok in outs:
            assert hello_ok  # the connection stayed in sync and open
            assert sorted(got) == list(range(1, per + 1))
            for m in got.values():
                codes[m[2]["code"]] = codes.get(m[2]["code"], 0) + 1
        assert set(codes) <= {"E_PARAMS", "E_OVERLOADED"}, codes
        with Wire.connect(d) as w:
            s = w.result("stats")
        assert s["limits"]["buffered_bytes"] == 0
        assert s["limits"]["budget_refused"] == codes.get("E_OVERLOADED", 0)
        grew = (peak - base) * 1024
        print(f"padded burst: {conns} x {per} x {pad // MiB} MiB sent "
              f"({conns * per * pad // MiB} MiB); answers {codes}; held at most "
              f"{held // MiB} MiB; peak RSS "
              f"{base // 1024} -> {peak // 1024} MiB (+{grew // MiB} MiB, budget {BUDGET // MiB} MiB)")
        # Without the budget the six connections hold 6 x 40 MiB at once.
        assert grew < BUDGET + 48 * MiB, (base, peak)


def test_accepted_requests_stay_in_budget_none_lost(tmp_path, models, slow):
    conns, per, items = 6, 4, 12  # 24 requests of 12 MiB behind slow work
    x = RNG.standard_normal((items, 1, 512, 512)).astype(np.float32)
    # Hold the only worker (~3 s of measured work, in requests of one item:
    # small, and a one-item activation arena) while all of them are sent:
    # they queue, so the budget decides what is accepted.
    n_slow = max(2, min(1000, int(3.0 / slow.item_s)))
    with daemon(tmp_path, models) as d, Wire.connect(d, timeout=slow.limit(n_slow)) as w:
        w.result("load", {"name": "hold", "path": "slow.onnx", "max_batch": 1})
        sx = RNG.standard_normal((1, 4, 64, 64)).astype(np.float32)
        hold = {"model": "hold", "inputs": {"x": tensor(sx)}}
        assert w.call("infer", {"model": "big", "inputs": {"x": tensor(x[:1])}})[2] is None
        assert w.call("infer", hold)[2] is None  # warm: arenas and code paths
        base = d.rss_peak_kib()
        w.send(b"".join(request(1 + i, "infer", hold) for i in range(n_slow)))
        msgs = [[request(k + 1, "infer", {"model": "big", "inputs": {"x": tensor(x)}})
                 for k in range(per)] for _ in range(conns)]
        outs, held = burst(d, msgs)
        assert all(m[2] is None for m in w.recv(n_slow, timeout=slow.limit(n_slow)))
        peak = d.rss_peak_kib()
        ok = over = 0
        for got, hello_ok in outs:
            assert hello_ok and sorted(got) == list(range(1, per + 1))
            for m in got.values():
                if m[2] is None:
                    y = m[3]["outputs"]
                    assert list(next(iter(y.values()))["shape"]) == [items, 1, 512, 512]
                    ok += 1
                else:
                    assert m[2]["code"] == "E_OVERLOADED", m[2]
                    over += 1
        s = w.result("stats")
        assert s["limits"]["buffered_bytes"] == 0
        grew = (peak - base) * 1024
        print(f"accepted burst: {conns} x {per} x {items} MiB; {ok} answered, {over} "
              f"E_OVERLOADED; held at most {held // MiB} MiB; peak RSS {base // 1024} -> {peak // 1024} MiB "
              f"(+{grew // MiB} MiB, budget {BUDGET // MiB} MiB)")
        assert ok >= 1 and over >= 1
        # Requests held <= budget. On top, outside it: the running batch (an
        # aligned input copy, the outputs, the packed reply: ~40 MiB) and
        # replies waiting for their client (per-connection write caps).
        # Without the budget the 24 requests alone hold 288 MiB.
        assert grew < BUDGET + 128 * MiB, (base, peak)
