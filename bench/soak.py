#!/usr/bin/env python3
"""Soak: mixed load on one daemon for a long while (10 minutes by default);
every request must be answered exactly once, nothing but the provoked
errors may appear, and the daemon's RSS must not grow. Not in CI; the
recorded run is in docs/RELIABILITY.md ("Soak").

    make && bench/soak [--minutes 10] [--clients 8] [--workers 2]

Over the Unix socket only, at the same time:

- infer clients (--clients, pipelined up to 4 deep) on two models: `tiny`
  (a 1x1 conv + Relu, checked against numpy) and `conv` (3x3 conv + Relu,
  checked against onnxruntime), random batch sizes; now and then a stats;
- a load/unload cycle of a third model, `cycle`, with a client inferring on
  it: between an unload and the next load its answer is E_NOT_FOUND
  (provoked, counted);
- idle connections (--idle) that only say hello once a minute;
- slow clients that trickle each request a few bytes at a time and read the
  answers a few bytes at a time;
- clients that disconnect mid-request: half a message then close, or a
  whole infer then close without reading.

Every connection tracks its msgids: an answer to a msgid not in flight (lost
or sent twice) fails the run, as does a request still unanswered at the end.
The daemon's RSS is sampled every --sample seconds and printed; after the
warm-up (the first fifth of the run, at least 1 minute when the run is 5
minutes or more) the median of the last minute of samples may be at most 5 %
above the median of the first minute after warm-up. Exit 0 when every check
passes.
"""
import argparse
import asyncio
import collections
import pathlib
import random
import resource
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgpack  # noqa: E402
import numpy as np  # noqa: E402

from tests.integration.client_models import scale2_reference, write_scale2  # noqa: E402
from tests.integration.daemon_wire import Wire  # noqa: E402
from tests.support.daemon import TestDaemon  # noqa: E402

CONV = dict(cin=3, cout=8, h=16, w=16)


class Totals:
    def __init__(self):
        self.sent = collections.Counter()      # by kind
        self.ok = collections.Counter()        # answered with a result
        self.errors = collections.Counter()    # by code
        self.provoked = collections.Counter()  # errors the script causes, by code
        self.unexpected = []
        self.abandoned = 0                     # requests of clients that hung up on purpose
        self.cycles = 0

    def bad(self, what):
        if len(self.unexpected) < 1000:
            self.unexpected.append(what)


def pack(msgid, method, params=None):
    return msgpack.packb([0, msgid, method, [] if params is None else [params]],
                         use_bin_type=True)


def tensor(x):
    return {"dtype": "f32", "shape": list(x.shape), "data": x.tobytes()}


def from_wire(t):
    return np.frombuffer(t["data"], np.float32).reshape(t["shape"])


class Conn:
    """One connection with its msgids in flight: every answer must match one
    of them, once."""

    def __init__(self, t, name):
        self.t, self.name = t, name
        self.pending = {}
        self.next_id = 0
        self.up = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 28)

    async def open(self, sock):
        self.reader, self.writer = await asyncio.open_unix_connection(sock, limit=1 << 24)
        return self

    def new_request(self, kind, method, params, check=None, allowed=()):
        self.next_id = (self.next_id + 1) % (1 << 32)
        msgid = self.next_id
        self.pending[msgid] = (kind, check, allowed)
        self.t.sent[kind] += 1
        return msgid, pack(msgid, method, params)

    def on_answer(self, resp):
        t = self.t
        if not (isinstance(resp, list) and len(resp) == 4 and resp[0] == 1):
            t.bad(f"{self.name}: not a response: {str(resp)[:80]}")
            return
        entry = self.pending.pop(resp[1], None)
        if entry is None:
            t.bad(f"{self.name}: answer to msgid {resp[1]}, not in flight (lost or sent twice)")
            return
        kind, check, allowed = entry
        if resp[2] is not None:
            code = resp[2].get("code") if isinstance(resp[2], dict) else str(resp[2])
            t.errors[code] += 1
            if code in allowed:
                t.provoked[code] += 1
            else:
                t.bad(f"{self.name}: {kind}: {resp[2]}")
            return
        if check is not None and not check(resp[3]):
            t.bad(f"{self.name}: {kind}: wrong result")
            return
        t.ok[kind] += 1

    async def read_some(self, n=1 << 20):
        data = await self.reader.read(n)
        if not data:
            raise EOFError(f"{self.name}: daemon closed the connection "
                           f"with {len(self.pending)} in flight")
        self.up.feed(data)
        for obj in self.up:
            self.on_answer(obj)

    async def drain_answers(self, timeout=120):
        deadline = time.monotonic() + timeout
        while self.pending and time.monotonic() < deadline:
            await asyncio.wait_for(self.read_some(), deadline - time.monotonic())

    async def close(self):
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except Exception:
            pass


# ---- the clients ----------------------------------------------------------------------

def infer_check(model, x, refs):
    if model == "tiny":
        want = scale2_reference(x)
    else:
        want = refs[x.tobytes()]
    return lambda r: np.allclose(from_wire(r["outputs"]["y"]), want, rtol=1e-4, atol=1e-4)


async def infer_client(sock, deadline, t, rng, inputs, refs, idx):
    c = await Conn(t, f"infer#{idx}").open(sock)
    depth = 1 + idx % 4
    try:
        while time.monotonic() < deadline:
            while len(c.pending) < depth:
                if rng.random() < 0.03:
                    _, data = c.new_request("stats", "stats", None)
                else:
                    model = "tiny" if rng.random() < 0.5 else "conv"
                    x = inputs[model][int(rng.integers(len(inputs[model])))]
                    _, data = c.new_request(f"infer:{model}", "infer",
                                            {"model": model, "inputs": {"x": tensor(x)}},
                                            infer_check(model, x, refs))
                c.writer.write(data)
            await c.writer.drain()
            await c.read_some()
        await c.drain_answers()
    finally:
        await c.close()
    if c.pending:
        t.bad(f"{c.name}: {len(c.pending)} requests never answered")


async def cycle_client(sock, deadline, t, rng, inputs):
    """Loads and unloads `cycle`; another connection infers on it meanwhile."""
    admin = await Conn(t, "cycle-admin").open(sock)
    user = await Conn(t, "cycle-user").open(sock)
    stop = asyncio.Event()

    async def use():
        while not stop.is_set():
            x = inputs["tiny"][int(rng.integers(len(inputs["tiny"])))]
            _, data = user.new_request("infer:cycle", "infer",
                                       {"model": "cycle", "inputs": {"x": tensor(x)}},
                                       lambda r, x=x: np.allclose(from_wire(r["outputs"]["y"]),
                                                                  scale2_reference(x)),
                                       allowed=("E_NOT_FOUND",))
            user.writer.write(data)
            await user.writer.drain()
            await user.read_some()
            await asyncio.sleep(0.005)

    task = asyncio.create_task(use())
    try:
        while time.monotonic() < deadline:
            for method, params in (("load", {"name": "cycle", "path": "cycle.onnx"}),
                                   ("unload", {"name": "cycle"})):
                _, data = admin.new_request(method, method, params)
                admin.writer.write(data)
                await admin.writer.drain()
                await admin.drain_answers()
                await asyncio.sleep(0.2 + rng.random() * 0.3)
            t.cycles += 1
    finally:
        stop.set()
        try:
            await task
        except Exception as e:
            t.bad(f"cycle-user: {e!r}")
        await user.drain_answers()
        await admin.close()
        await user.close()


async def idle_client(sock, deadline, t, idx):
    c = await Conn(t, f"idle#{idx}").open(sock)
    try:
        while True:
            _, data = c.new_request("hello", "hello", None)
            c.writer.write(data)
            await c.writer.drain()
            await c.drain_answers()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.sleep(min(60.0, left))
    finally:
        await c.close()


async def slow_client(sock, deadline, t, rng, inputs, idx):
    """Trickles each request in small pieces and reads answers a few bytes
    at a time, each message within the read timeout."""
    c = await Conn(t, f"slow#{idx}").open(sock)
    try:
        while time.monotonic() < deadline:
            x = inputs["tiny"][int(rng.integers(len(inputs["tiny"])))]
            _, data = c.new_request("infer:tiny-slow", "infer",
                                    {"model": "tiny", "inputs": {"x": tensor(x)}},
                                    infer_check("tiny", x, None))
            step = max(1, len(data) // 40)
            for i in range(0, len(data), step):
                c.writer.write(data[i:i + step])
                await c.writer.drain()
                await asyncio.sleep(0.02)
            while c.pending:
                await c.read_some(64)
                await asyncio.sleep(0.001)
    finally:
        await c.close()


async def quitter(sock, deadline, t, rng, inputs, idx):
    """Hangs up mid-request: half a message, or a whole infer whose answer is
    never read."""
    while time.monotonic() < deadline:
        c = await Conn(t, f"quit#{idx}").open(sock)
        x = inputs["conv"][int(rng.integers(len(inputs["conv"])))]
        _, data = c.new_request("infer:abandoned", "infer",
                                {"model": "conv", "inputs": {"x": tensor(x)}})
        if rng.random() < 0.5:
            data = data[:int(rng.integers(1, len(data)))]
        c.writer.write(data)
        await c.writer.drain()
        await asyncio.sleep(rng.random() * 0.05)
        await c.close()
        t.abandoned += 1
        c.pending.clear()
        await asyncio.sleep(0.1 + rng.random() * 0.2)


async def sample_rss(d, deadline, every, samples):
    t0 = time.monotonic()
    while True:
        samples.append((time.monotonic() - t0, d.rss_kib() / 1024))
        if time.monotonic() >= deadline:
            return
        await asyncio.sleep(min(every, max(0.0, deadline - time.monotonic())))


async def run(d, a, inputs, refs):
    t = Totals()
    samples = []
    deadline = time.monotonic() + a.minutes * 60
    rng = lambda i: np.random.default_rng(a.seed + i)
    jobs = [infer_client(d.socket, deadline, t, rng(i), inputs, refs, i) for i in range(a.clients)]
    jobs.append(cycle_client(d.socket, deadline, t, rng(100), inputs))
    jobs += [idle_client(d.socket, deadline, t, i) for i in range(a.idle)]
    jobs += [slow_client(d.socket, deadline, t, rng(200 + i), inputs, i) for i in range(a.slow)]
    jobs += [quitter(d.socket, deadline, t, rng(300 + i), inputs, i) for i in range(a.quitters)]
    jobs.append(sample_rss(d, deadline, a.sample, samples))
    res = await asyncio.gather(*jobs, return_exceptions=True)
    for r in res:
        if isinstance(r, BaseException):
            t.bad(f"client failed: {r!r}")
    return t, samples


def rss_verdict(samples, minutes):
    """(baseline MiB, final MiB, growth) over the samples after warm-up."""
    total = minutes * 60
    warm = max(total / 5, 60.0 if total >= 300 else 0.0)
    window = min(60.0, (total - warm) / 3)
    after = [r for s, r in samples if warm <= s < warm + window]
    last = [r for s, r in samples if s >= total - window]
    if not after or not last:
        return None, None, 0.0, warm
    base, final = statistics.median(after), statistics.median(last)
    return base, final, final / base - 1.0, warm


def settled_stats(w, timeout=60):
    """The daemon's stats once it counts w's connection as its only one: it
    has seen every other close (the soak's, the readiness probe's). The
    deadline only guards against a hang: past it the stats are returned as
    they are, and the "connections back to one" check fails."""
    deadline = time.monotonic() + timeout
    while ((s := w.result("stats"))["connections"]["current"] != 1
           and time.monotonic() < deadline):
        time.sleep(0.05)  # polls the counter: the state waited for
    return s


def fd_count(d):
    return len(list(pathlib.Path(f"/proc/{d.proc.pid}/fd").iterdir()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--clients", type=int, default=8, help="pipelining infer clients")
    ap.add_argument("--idle", type=int, default=50, help="idle connections")
    ap.add_argument("--slow", type=int, default=4, help="trickling clients")
    ap.add_argument("--quitters", type=int, default=2, help="clients hanging up mid-request")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sample", type=float, default=10, help="seconds between RSS samples")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))

    import onnxruntime as ort

    from tests.integration.test_daemon_models import conv_model

    with tempfile.TemporaryDirectory(prefix="convd-soak") as tmp:
        tmp = pathlib.Path(tmp)
        models = tmp / "models"
        models.mkdir()
        write_scale2(models / "tiny.onnx")
        write_scale2(models / "cycle.onnx")
        conv_model(models / "conv.onnx", CONV["cin"], CONV["cout"], CONV["h"], CONV["w"], seed=7)
        r = np.random.default_rng(a.seed)
        inputs = {
            "tiny": [r.standard_normal((int(r.integers(1, 5)), 3, 5, 7)).astype(np.float32)
                     for _ in range(32)],
            "conv": [r.standard_normal((int(r.integers(1, 5)), CONV["cin"], CONV["h"], CONV["w"]))
                     .astype(np.float32) for _ in range(32)],
        }
        sess = ort.InferenceSession(str(models / "conv.onnx"), providers=["CPUExecutionProvider"])
        refs = {x.tobytes(): sess.run(None, {"x": x})[0] for x in inputs["conv"]}
        with TestDaemon(tmp, args=["--models", str(models), "--workers", str(a.workers),
                                   "--max-batch", "16", "--max-delay-us", "500"]) as d:
            # cycle.onnx was in the scan: start the cycle from unloaded.
            # Both fd counts are taken in the same state: one client
            # connection open (ours), every other close seen by the daemon.
            with Wire.connect(d) as w:
                w.result("unload", {"name": "cycle"})
                s0 = settled_stats(w)
                fds0 = fd_count(d)
            t0 = time.monotonic()
            t, samples = asyncio.run(run(d, a, inputs, refs))
            elapsed = time.monotonic() - t0
            with Wire.connect(d) as w:
                s1 = settled_stats(w)
                fds1 = fd_count(d)
            peak = d.rss_peak_kib() / 1024

        sent = sum(t.sent.values())
        answered = sum(t.ok.values()) + sum(t.errors.values())
        base, final, growth, warm = rss_verdict(samples, a.minutes)
        err1 = {k: v - s0["errors"].get(k, 0) for k, v in s1["errors"].items()
                if v - s0["errors"].get(k, 0)}
        print(f"{elapsed / 60:.1f} min, {sent} requests ({sent / elapsed:.0f}/s), "
              f"{answered} answered, {t.abandoned} abandoned on purpose; "
              f"{t.cycles} load/unload cycles")
        print(f"sent by kind: {dict(sorted(t.sent.items()))}")
        print(f"errors by code (client): {dict(t.errors)}; provoked: {dict(t.provoked)}; "
              f"daemon: {err1}")
        print("RSS MiB over time (s: MiB):")
        per_line = 8
        for i in range(0, len(samples), per_line):
            print("   " + "  ".join(f"{s:5.0f}: {m:6.1f}" for s, m in samples[i:i + per_line]))
        if base is not None:
            print(f"RSS after warm-up ({warm:.0f} s): {base:.1f} MiB -> last minute {final:.1f} MiB "
                  f"({growth * 100:+.2f} %); peak {peak:.1f} MiB; fds {fds0} -> {fds1}")
        checks = {
            "every request answered exactly once (msgids tracked per connection)":
                not t.unexpected and answered == sent - t.abandoned,
            "no error but the provoked ones": sum(t.errors.values()) == sum(t.provoked.values()),
            "RSS growth after warm-up at most 5 %": base is not None and growth <= 0.05,
            "nothing in flight at the end": s1["requests"]["in_flight"] == 0,
            "connections back to one (ours)": s1["connections"]["current"] == 1,
            "no rejected connection": s1["connections"]["rejected"] == 0,
            "fd count back to the start": fds1 <= fds0,
        }
        for k, v in checks.items():
            print(f"  {'ok  ' if v else 'FAIL'} {k}")
        for u in t.unexpected[:10]:
            print("  unexpected:", u)
        sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
