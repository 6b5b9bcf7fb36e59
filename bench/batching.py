#!/usr/bin/env python3
"""Dynamic batching under load: 64 concurrent clients on a ResNet-18-shaped
model (or --model: a bench model such as resnet50-u90, or an ONNX file),
throughput and latency with max_batch=1 against dynamic batching, in one run,
interleaved: does batching raise throughput under many clients
(bench/results/serving.md).

    make && bench/batching.py [--size 224] [--clients 64] [--duration 20]
                              [--rounds 2] [--batch-max 16] [--delay-us 2000]
                              [--workers 1] [--threads 2] [--json FILE]
    bench/batching.py --model resnet50-u90 --workers 0 --threads 0   # issue 25: daemon defaults

--workers 0 leaves the daemon's own default (--threads 0 is all cores).
Bench models (bench/benchmodels.py, the names of bench/anchors.py) are 224x224
and cached outside the checkout.

One daemon (--workers W --threads T) holds the same model file twice:
`b1` loaded with max_batch 1, `dyn` with max_batch --batch-max and
max_delay_us --delay-us. For each round and configuration, convbench runs a
closed loop of --clients concurrent clients (one connection each, one
request in flight each) for --duration seconds after a warm-up; the table
shows throughput (requests/s), latency p50/p99 (convbench's, client side) and
the mean batch the daemon formed (its stats). Every request must succeed.
"""
import argparse
import json
import pathlib
import shlex
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchutil import run_json  # noqa: E402  (shared with bench/overhead.py)
from tests.integration.daemon_wire import Wire  # noqa: E402
from tests.models.builders import resnet18, save  # noqa: E402
from tests.support import paths  # noqa: E402
from tests.support.daemon import TestDaemon  # noqa: E402


def convbench(sock, model, clients, duration, warmup):
    cmd = [paths.binary("convbench"), "--socket", sock, "--model", model,
           "--concurrency", str(clients), "--connections", str(clients),
           "--duration", str(duration), "--warmup", str(warmup), "--timeout", "600000",
           "--json", "--no-progress"]
    return run_json(cmd, "convbench")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-max", type=int, default=16)
    ap.add_argument("--delay-us", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--daemon-args", default="", help="more daemon flags, e.g. '--batch-lanes off' (issue 25's A/B)")
    ap.add_argument("--model", help="a bench model name (resnet50-u90, ...) or an ONNX file; default: "
                    "a ResNet-18-shaped model built here at --size")
    ap.add_argument("--json", help="write the raw numbers here")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="convd-batching") as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "models").mkdir()
        label = "ResNet-18-shaped"
        if not a.model:
            save(resnet18(np.random.default_rng(18), size=a.size), tmp / "models" / "r18.onnx")
        else:
            src = pathlib.Path(a.model)
            if not src.is_file():
                sys.path.insert(0, str(ROOT / "bench"))
                import anchors
                import benchmodels
                src = anchors.model_files([a.model], benchmodels.cache_dir())[a.model]
            shutil.copy2(src, tmp / "models" / "r18.onnx")
            label, a.size = a.model, 224
        results = {"b1": [], "dyn": []}
        workers = ["--workers", str(a.workers)] if a.workers > 0 else []
        with TestDaemon(tmp, args=["--models", str(tmp / "models"), *workers,
                                   "--threads", str(a.threads), "--max-connections", "4096",
                                   "--max-batch", "1", *shlex.split(a.daemon_args)]) as d:
            with Wire.connect(d, timeout=600) as w:
                w.result("load", {"name": "b1", "path": "r18.onnx", "max_batch": 1})
                w.result("load", {"name": "dyn", "path": "r18.onnx", "max_batch": a.batch_max,
                                  "max_delay_us": a.delay_us})
            for rnd in range(a.rounds):
                order = ["b1", "dyn"] if rnd % 2 == 0 else ["dyn", "b1"]
                for name in order:
                    with Wire.connect(d, timeout=600) as w:
                        s0 = w.result("stats")["models"][name]
                    out = convbench(d.socket, name, a.clients, a.duration, a.warmup)
                    with Wire.connect(d, timeout=600) as w:
                        s1 = w.result("stats")["models"][name]
                    if out["requests"]["errors"]:
                        sys.exit(f"{name}: errors {out['errors']}")
                    db = s1["batches"] - s0["batches"]
                    mean_batch = (s1["items"] - s0["items"]) / db if db else 0
                    row = {"round": rnd, "model": name, "rps": out["throughput_rps"],
                           "p50_ms": out["latency_ms"]["p50"], "p99_ms": out["latency_ms"]["p99"],
                           "requests": out["requests"]["ok"], "mean_batch": mean_batch,
                           "compute_p50_ms": s1["compute_us"]["p50"] / 1000}
                    results[name].append(row)
                    print(json.dumps(row), flush=True)
        med = lambda xs: float(np.median(xs))
        print(f"\n{label}, {a.size}x{a.size}, {a.clients} clients, workers {a.workers or 'default'}, "
              f"threads {a.threads} {a.daemon_args}; median of {a.rounds} round(s) of {a.duration:g} s\n")
        print("| config | throughput (req/s) | p50 (ms) | p99 (ms) | mean batch | daemon compute p50 (ms) |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, label in (("b1", "max_batch=1"),
                            ("dyn", f"max_batch={a.batch_max}, max_delay_us={a.delay_us}")):
            r = results[name]
            print(f"| {label} | {med([x['rps'] for x in r]):.1f} | {med([x['p50_ms'] for x in r]):.1f} "
                  f"| {med([x['p99_ms'] for x in r]):.1f} | {med([x['mean_batch'] for x in r]):.2f} "
                  f"| {med([x['compute_p50_ms'] for x in r]):.1f} |")
        gain = med([x["rps"] for x in results["dyn"]]) / med([x["rps"] for x in results["b1"]])
        print(f"\nthroughput gain of dynamic batching: {gain:.2f}x")
        if a.json:
            pathlib.Path(a.json).write_text(json.dumps({"args": vars(a), "results": results,
                                                         "gain": gain}, indent=1))


if __name__ == "__main__":
    main()
