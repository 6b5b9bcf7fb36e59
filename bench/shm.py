#!/usr/bin/env python3
"""Big tensors through convd (issue 23): the segmentation-shaped model (a 1x1
conv 3 -> 21 channels at 512x1024: 6 MiB in, 42 MiB out) at 1 thread, in one
run:

  in-process   convd-run --bench N --threads 1 (median)
  inline       convbench --concurrency 1: the tensors in the messages (p50)
  inline py    the Python client (convd.Client.infer) in a loop, one request
               at a time: the same messages (p50)
  shm          convbench --concurrency 1 --shm: inputs and outputs in a
               shared-memory region, named by the requests (p50)
  raw          the input's and the output's bytes together sent one way over
               a Unix socket pair (sendall / recv_into, median)

    make && bench/shm.py [--requests 40] [--bench 20] [--rounds 3] [--json FILE]

The rounds interleave the five measurements (the machine is shared and
noisy); the table shows the median over rounds of each figure.

Targets (docs/PERFORMANCE.md, "Big tensors"): shm p50 <= 1.1x in-process;
inline p50 <= in-process + 1.5x raw; the Python client inline within 1.2x of
the C client's.
"""
import argparse
import json
import pathlib
import socket
import statistics
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client" / "python"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from benchutil import run_json  # noqa: E402
from tests.support import paths  # noqa: E402
from tests.support.daemon import TestDaemon  # noqa: E402

CIN, COUT, H, W = 3, 21, 512, 1024


def write_seg(path):
    """x [N, 3, 512, 1024] -> logits [N, 21, 512, 1024]: a 1x1 conv with bias."""
    rng = np.random.default_rng(23)
    w = rng.standard_normal((COUT, CIN, 1, 1)).astype(np.float32)
    b = rng.standard_normal(COUT).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["logits"], kernel_shape=[1, 1])], "seg",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", CIN, H, W])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", COUT, H, W])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def raw_transfer_ms(nbytes, rounds=15):
    """Median ms to send nbytes one way over a socketpair (a reader thread
    recv_into a preallocated buffer)."""
    a, b = socket.socketpair()
    data = memoryview(bytearray(nbytes))
    sink = memoryview(bytearray(nbytes))
    times = []
    for _ in range(rounds + 2):
        done = threading.Event()

        def reader():
            got = 0
            while got < nbytes:
                got += b.recv_into(sink[got:], nbytes - got)
            done.set()

        t = threading.Thread(target=reader)
        t.start()
        t0 = time.perf_counter()
        a.sendall(data)
        done.wait()
        times.append((time.perf_counter() - t0) * 1e3)
        t.join()
    a.close()
    b.close()
    return statistics.median(times[2:])


def python_inline_ms(sock, requests):
    """p50 ms of convd.Client.infer on the model, one request at a time (a
    fresh random input, a warm-up request first)."""
    import convd
    x = np.random.default_rng().standard_normal((1, CIN, H, W)).astype(np.float32)
    times = []
    with convd.Client(sock) as c:
        c.infer("seg", {"x": x})
        for _ in range(requests):
            t0 = time.perf_counter()
            out = c.infer("seg", {"x": x})
            times.append((time.perf_counter() - t0) * 1e3)
            del out
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=40, help="measured requests per convbench run")
    ap.add_argument("--bench", type=int, default=20, help="convd-run --bench runs")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median taken)")
    ap.add_argument("--json", help="write the numbers here")
    a = ap.parse_args()
    in_bytes, out_bytes = CIN * H * W * 4, COUT * H * W * 4
    rows = []
    with tempfile.TemporaryDirectory(prefix="convd-shm") as tmp:
        models = pathlib.Path(tmp) / "models"
        models.mkdir()
        write_seg(models / "seg.onnx")
        with TestDaemon(pathlib.Path(tmp), models_dir=models,
                        args=["--threads", "1", "--workers", "1", "--max-batch", "1",
                              "--max-message", "256M"]) as d:
            def bench(*extra):
                out = run_json([paths.binary("convbench"), "--socket", d.socket, "--model", "seg",
                                "--concurrency", 1, "--requests", a.requests, "--warmup", 1, "--no-progress",
                                "--json", *extra], "convbench")
                if out["requests"]["errors"]:
                    sys.exit(f"convbench {' '.join(extra)}: errors {out['errors']}")
                return out["latency_ms"]["p50"]

            for _ in range(a.rounds):
                row = {"in_process_ms": run_json([paths.binary("convd-run"), models / "seg.onnx", "--threads", 1,
                                                  "--bench", a.bench, "--json"], "convd-run")["bench"]["median_ms"]}
                row["shm_p50_ms"] = bench("--shm")
                row["inline_p50_ms"] = bench()
                row["inline_py_p50_ms"] = python_inline_ms(d.socket, a.requests)
                row["raw_transfer_ms"] = raw_transfer_ms(in_bytes + out_bytes)
                rows.append(row)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    inproc, shm, inline, raw = med["in_process_ms"], med["shm_p50_ms"], med["inline_p50_ms"], med["raw_transfer_ms"]
    inline_py = med["inline_py_p50_ms"]
    res = {"in_process_ms": inproc, "inline_p50_ms": inline, "inline_py_p50_ms": inline_py, "shm_p50_ms": shm,
           "raw_transfer_ms": raw,
           "rounds": rows,
           "in_bytes": in_bytes, "out_bytes": out_bytes,
           "shm_over_in_process": shm / inproc,
           "inline_over_target": inline / (inproc + 1.5 * raw),
           "inline_py_over_c": inline_py / inline}
    print(f"segmentation-shaped 1x1 conv {CIN}->{COUT} at {H}x{W}, 1 thread "
          f"({in_bytes / 2**20:.1f} MiB in, {out_bytes / 2**20:.1f} MiB out)")
    print(f"  medians over {a.rounds} interleaved rounds")
    print(f"  in-process (convd-run --bench {a.bench}, median)  {inproc:8.2f} ms")
    print(f"  shm        (convbench --shm, p50)            {shm:8.2f} ms  = {shm / inproc:.2f}x in-process "
          f"(target <= 1.1x)")
    print(f"  inline     (convbench, p50)                  {inline:8.2f} ms  "
          f"(target <= in-process + 1.5 x raw = {inproc + 1.5 * raw:.2f} ms)")
    print(f"  inline py  (convd.Client.infer, p50)         {inline_py:8.2f} ms  = {inline_py / inline:.2f}x the C "
          f"client (target <= 1.2x)")
    print(f"  raw        (socketpair, in+out bytes, median) {raw:8.2f} ms")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
