#!/usr/bin/env python3
"""Input sizes of a model with dynamic H and W (issue 22, item 3): what the
first request of a new size costs, and what requests of a known size see
while it is planned.

    make && bench/input-sizes.py [--width 0.5] [--size 224] [--new 256]
                                 [--workers 2] [--threads 2] [--rounds 3]

A ResNet-50-shaped model (builders.resnet50, --width) whose input H and W
are made symbolic is loaded with input_shape 1x3xSIZExSIZE. One client sends
requests of the known size back to back and records their latencies; after
a few, a second client sends one request of a new size (--new + round, so
each round plans a new one). Printed per round: the new-size request's
latency (its plan built on first use: import, lowering, planning, run), the
known-size latencies before and while it was built (median and max), and
how many known-size requests completed meanwhile (0 would mean they were
stalled behind the build). A second request of the new size shows the cost
once planned.
"""
import argparse
import pathlib
import statistics
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client" / "python"))

import numpy as np  # noqa: E402

import convd  # noqa: E402
from tests.models import builders  # noqa: E402
from tests.support.daemon import TestDaemon  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--width", type=float, default=0.5)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="convd-sizes") as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "models").mkdir()
        m = builders.resnet50(np.random.default_rng(1), size=a.size, width=a.width)
        for k, name in ((2, "H"), (3, "W")):
            m.graph.input[0].type.tensor_type.shape.dim[k].dim_param = name
        builders.save(m, tmp / "models" / "r50.onnx")
        (tmp / "models" / "r50.onnx.conf").write_text(f"input_shape = 1x3x{a.size}x{a.size}\nmax_shapes = 8\n")
        with TestDaemon(tmp, models_dir=tmp / "models",
                        args=["--workers", str(a.workers), "--threads", str(a.threads)]) as d:
            known = np.random.default_rng(2).uniform(-1, 1, (1, 3, a.size, a.size)).astype(np.float32)
            with convd.Client(d.socket, timeout=600) as c:
                for _ in range(3):
                    c.infer("r50", {"input": known})  # warm
            print(f"resnet50 width {a.width}, known {a.size}x{a.size}, workers {a.workers}, threads {a.threads}")
            print("round  new size   first ms  again ms  known before: med/max ms  during: n med/max ms")
            for r in range(a.rounds):
                n = a.new + 16 * r
                lat, stop, marks = [], threading.Event(), {}

                def known_loop():
                    with convd.Client(d.socket, timeout=600) as c:
                        while not stop.is_set():
                            t0 = time.perf_counter()
                            c.infer("r50", {"input": known})
                            lat.append((t0, (time.perf_counter() - t0) * 1e3))

                th = threading.Thread(target=known_loop)
                th.start()
                while len(lat) < 10:
                    time.sleep(0.01)
                x = np.random.default_rng(3).uniform(-1, 1, (1, 3, n, n)).astype(np.float32)
                with convd.Client(d.socket, timeout=600) as c:
                    marks["t0"] = time.perf_counter()
                    c.infer("r50", {"input": x})
                    marks["t1"] = time.perf_counter()
                    c.infer("r50", {"input": x})
                    marks["t2"] = time.perf_counter()
                stop.set()
                th.join()
                before = [ms for t, ms in lat if t + ms / 1e3 < marks["t0"]]
                during = [ms for t, ms in lat if t >= marks["t0"] and t + ms / 1e3 <= marks["t1"]]
                fmt = lambda v: f"{statistics.median(v):7.1f}/{max(v):7.1f}" if v else "      -/      -"
                print(f"{r:5d}  {n:4d}x{n:<4d} {1e3 * (marks['t1'] - marks['t0']):9.1f} "
                      f"{1e3 * (marks['t2'] - marks['t1']):9.1f}  {fmt(before):>24}  {len(during):3d} {fmt(during)}")


if __name__ == "__main__":
    main()
