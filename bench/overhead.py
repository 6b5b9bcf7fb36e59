#!/usr/bin/env python3
"""Per-request overhead of convd against a raw Unix-socket ping-pong, in one
run: what the daemon adds to a request beyond the socket round trip itself
(bench/results/serving.md).

    make && make bench && bench/overhead.py [--iters 20000] [--rounds 3] [--json FILE]

The model is tiny (a 1x1 conv + ReLU on [1, 3, 5, 7]: ~200 multiply-adds), at
batch 1, max_delay_us 0. The client is bench/pingpong.c in both cases, so the
same blocking loop (write, then read until one whole message) measures:

  (a) raw:   two processes on a socketpair echoing a message of the request's
             size; unpinned (the scheduler's choice), then pinned to the same
             core and to two cores (taskset-equivalent sched_setaffinity);
  (b) convd: `pingpong --convd` sending a pre-packed infer request to a daemon
             started with --workers 1 --threads 1 (--threads T), the client unpinned.

overhead = convd round trip p50 - in-process compute p50, the compute being
the daemon's own compute histogram (stats: models.tiny.compute_us.p50, the
cd_model_run time of those very requests). The rounds interleave (a) and (b);
the table shows the median over rounds. The ratio overhead / raw p50 is the
figure with a target (<= 1.5x: the daemon should add at most half a socket
round trip), against the raw case that applies: unpinned,
i.e. the placement the scheduler picks for the real daemon too.
"""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgpack  # noqa: E402
import numpy as np  # noqa: E402

from benchutil import run_json  # noqa: E402  (shared with bench/batching.py)
from tests.integration.client_models import write_scale2  # noqa: E402
from tests.integration.daemon_wire import Wire  # noqa: E402
from tests.support import paths  # noqa: E402
from tests.support.daemon import TestDaemon  # noqa: E402


def pingpong(*args):
    return run_json([paths.binary("pingpong"), *args], f"pingpong {' '.join(map(str, args))}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--spin-us", type=int, default=0,
                    help="the daemon's --worker-spin-us (default 0: workers sleep at once)")
    ap.add_argument("--threads", type=int, default=1,
                    help="the daemon's --threads (2+: a job handed to the executor's team, not run on the caller)")
    ap.add_argument("--json", help="write the raw numbers here")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="convd-ovh") as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "models").mkdir()
        write_scale2(tmp / "models" / "tiny.onnx")
        x = np.random.default_rng(1).standard_normal((1, 3, 5, 7)).astype(np.float32)
        req = msgpack.packb([0, 1, "infer", [{"model": "tiny", "inputs": {
            "x": {"dtype": "f32", "shape": [1, 3, 5, 7], "data": x.tobytes()}}}]], use_bin_type=True)
        (tmp / "req.bin").write_bytes(req)
        rows = []
        with TestDaemon(tmp, args=["--models", str(tmp / "models"), "--workers", "1",
                                   "--threads", str(a.threads), "--max-delay-us", "0",
                                   "--worker-spin-us", str(a.spin_us)]) as d:
            for rnd in range(a.rounds):
                row = {}
                with Wire.connect(d) as w:
                    c0 = w.result("stats")["models"]["tiny"]["compute_us"]["count"]
                row["convd"] = pingpong("--convd", d.socket, "--request", tmp / "req.bin",
                                        "--iters", a.iters, "--warmup", a.warmup)
                with Wire.connect(d) as w:
                    s = w.result("stats")["models"]["tiny"]
                assert s["compute_us"]["count"] - c0 == a.iters + a.warmup
                row["compute_p50_us"] = s["compute_us"]["p50"]  # cumulative, dominated by this run
                for mode, pin in (("unpinned", ()), ("same-core", ("--cpu-a", 0, "--cpu-b", 0)),
                                  ("cross-core", ("--cpu-a", 0, "--cpu-b", 1))):
                    row[mode] = pingpong("--size", len(req), "--iters", a.iters,
                                         "--warmup", a.warmup, *pin)
                row["overhead_p50_us"] = row["convd"]["p50_us"] - row["compute_p50_us"]
                rows.append(row)
                print(json.dumps({"round": rnd, "convd_p50_us": row["convd"]["p50_us"],
                                  "compute_p50_us": row["compute_p50_us"],
                                  "overhead_p50_us": row["overhead_p50_us"],
                                  **{m + "_p50_us": row[m]["p50_us"]
                                     for m in ("unpinned", "same-core", "cross-core")}}), flush=True)
        med = lambda f: statistics.median(f(r) for r in rows)
        print(f"\n--threads {a.threads} --worker-spin-us {a.spin_us}; request {len(req)} bytes, {a.iters} round trips x {a.rounds} rounds (median)\n")
        print("| path | p50 (us) | p90 (us) | p99 (us) |")
        print("|---|---:|---:|---:|")
        for key, label in (("convd", "convd round trip (tiny model, batch 1)"),
                           ("unpinned", "raw ping-pong, unpinned"),
                           ("same-core", "raw ping-pong, same core"),
                           ("cross-core", "raw ping-pong, cross core")):
            print(f"| {label} | {med(lambda r: r[key]['p50_us']):.1f} | "
                  f"{med(lambda r: r[key]['p90_us']):.1f} | {med(lambda r: r[key]['p99_us']):.1f} |")
        comp, ovh, raw = med(lambda r: r["compute_p50_us"]), med(lambda r: r["overhead_p50_us"]), \
            med(lambda r: r["unpinned"]["p50_us"])
        print(f"\nin-process compute p50 {comp:.1f} us; overhead p50 {ovh:.1f} us = "
              f"{ovh / raw:.2f}x the unpinned raw round trip ({raw:.1f} us); "
              f"{ovh / med(lambda r: r['cross-core']['p50_us']):.2f}x the cross-core one")
        if a.json:
            pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
