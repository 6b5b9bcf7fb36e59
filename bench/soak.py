#!/usr/bin/env python3
"""Soak: many concurrent connections of mixed infer/stats traffic for a
while; every request must be answered exactly once and no error may appear
but the ones the script provokes (issue 5, "Done when" #3; not in CI; the
recorded run is in docs/PERFORMANCE.md "Serving").

    make && bench/soak.py [--connections 1000] [--duration 60] [--workers 2]

Each connection runs a closed loop (one request in flight) of, by weight:
88 % infer on a tiny model (random batch 1..4, output checked against numpy),
10 % stats, 1 % hello, 1 % infer on a model that does not exist (provoked:
must be E_NOT_FOUND). At the end every connection drains its last answer and
the daemon's counters are checked against the script's: requests by method,
E_NOT_FOUND == provoked, no other error, nothing in flight, connections all
seen. Exit 0 when every check passes.
"""
import argparse
import asyncio
import collections
import pathlib
import random
import resource
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


class Totals:
    def __init__(self):
        self.sent = collections.Counter()
        self.ok = collections.Counter()
        self.errors = collections.Counter()
        self.unexpected = []
        self.lat = []


async def one_conn(sock, deadline, t, rng):
    reader, writer = await asyncio.open_unix_connection(sock, limit=1 << 24)
    up = msgpack.Unpacker(raw=False, strict_map_key=False)
    msgid = 0
    try:
        while time.monotonic() < deadline:
            msgid += 1
            r = rng.random()
            expect = None
            if r < 0.88:
                kind = "infer"
                x = rng.standard_normal((int(rng.integers(1, 5)), 3, 5, 7)).astype(np.float32)
                params = [{"model": "tiny", "inputs": {"x": {"dtype": "f32", "shape": list(x.shape),
                                                             "data": x.tobytes()}}}]
                expect = x
            elif r < 0.98:
                kind, params = "stats", []
            elif r < 0.99:
                kind, params = "hello", []
            else:
                kind, params = "infer_missing", [{"model": "nope", "inputs": {}}]
            method = "infer" if kind.startswith("infer") else kind
            t.sent[kind] += 1
            t0 = time.monotonic()
            writer.write(msgpack.packb([0, msgid, method, params], use_bin_type=True))
            await writer.drain()
            resp = None
            while resp is None:
                for obj in up:
                    resp = obj
                    break
                if resp is None:
                    data = await reader.read(1 << 20)
                    if not data:
                        raise EOFError("daemon closed the connection")
                    up.feed(data)
            t.lat.append(time.monotonic() - t0)
            if resp[0] != 1 or resp[1] != msgid:
                t.unexpected.append(f"answer to {resp[1]} while waiting for {msgid}")
                continue
            for extra in up:  # nothing more may be buffered: one answer each
                t.unexpected.append(f"extra message {extra[:2]}")
            if kind == "infer_missing":
                code = resp[2] and resp[2].get("code")
                if code == "E_NOT_FOUND":
                    t.errors["E_NOT_FOUND"] += 1
                else:
                    t.unexpected.append(f"missing model answered {resp[2]}")
                continue
            if resp[2] is not None:
                t.unexpected.append(f"{kind}: {resp[2]}")
                continue
            if expect is not None:
                y = resp[3]["outputs"]["y"]
                got = np.frombuffer(y["data"], np.float32).reshape(y["shape"])
                if not np.allclose(got, scale2_reference(expect), rtol=1e-4, atol=1e-4):
                    t.unexpected.append("wrong infer result")
            t.ok[kind] += 1
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except Exception:
            pass


async def run(sock, n, duration, seed):
    t = Totals()
    deadline = time.monotonic() + duration
    tasks = [one_conn(sock, deadline, t, np.random.default_rng(seed + i)) for i in range(n)]
    res = await asyncio.gather(*tasks, return_exceptions=True)
    for r in res:
        if isinstance(r, BaseException):
            t.unexpected.append(f"connection failed: {r!r}")
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, a.connections + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < a.connections + 64:
        sys.exit(f"RLIMIT_NOFILE hard limit {hard} is too low for {a.connections} connections")

    with tempfile.TemporaryDirectory(prefix="convd-soak") as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "models").mkdir()
        write_scale2(tmp / "models" / "tiny.onnx")
        with TestDaemon(tmp, args=["--models", str(tmp / "models"), "--workers", str(a.workers),
                                   "--max-connections", str(a.connections + 100),
                                   "--max-batch", "16", "--max-delay-us", "500"]) as d:
            with Wire.connect(d) as w:
                s0 = w.result("stats")
            t0 = time.monotonic()
            t = asyncio.run(run(d.socket, a.connections, a.duration, a.seed))
            elapsed = time.monotonic() - t0
            with Wire.connect(d) as w:
                s1 = w.result("stats")
            rss_mib = d.rss_kib() / 1024
        sent = sum(t.sent.values())
        answered = sum(t.ok.values()) + sum(t.errors.values())
        lat = np.array(t.lat) * 1000
        bm = lambda s, m: s["requests"]["by_method"][m]
        checks = {
            "every request answered exactly once": answered + len(t.unexpected) == sent and not t.unexpected,
            "daemon saw every infer": bm(s1, "infer") - bm(s0, "infer") == t.sent["infer"] + t.sent["infer_missing"],
            "daemon saw every stats (+1 of ours)": bm(s1, "stats") - bm(s0, "stats") == t.sent["stats"] + 1,
            "daemon saw every hello": bm(s1, "hello") - bm(s0, "hello") == t.sent["hello"],
            "E_NOT_FOUND == provoked": s1["errors"]["E_NOT_FOUND"] == t.sent["infer_missing"],
            "no other error": all(v == 0 for k, v in s1["errors"].items() if k != "E_NOT_FOUND"),
            "nothing in flight": s1["requests"]["in_flight"] == 0,
            "all connections accepted": s1["connections"]["total"] - s0["connections"]["total"] >= a.connections,
            "no rejected connection": s1["connections"]["rejected"] == 0,
        }
        m = s1["models"]["tiny"]
        print(f"{a.connections} connections, {elapsed:.1f} s, {sent} requests "
              f"({sent / elapsed:.0f}/s): {dict(t.sent)}")
        print(f"client round trip ms: p50 {np.percentile(lat, 50):.1f}  p99 {np.percentile(lat, 99):.1f}  "
              f"max {lat.max():.1f}; daemon: batches {m['batches']}, mean batch "
              f"{m['items'] / max(1, m['batches']):.2f} items, compute p50 {m['compute_us']['p50']:.0f} us; "
              f"RSS {rss_mib:.0f} MiB")
        for k, v in checks.items():
            print(f"  {'ok  ' if v else 'FAIL'} {k}")
        for u in t.unexpected[:10]:
            print("  unexpected:", u)
        sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
