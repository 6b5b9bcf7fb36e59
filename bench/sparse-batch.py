#!/usr/bin/env python3
"""Batch throughput of pruned models: convd in process with batches run whole
(CONVD_BATCH_SPLIT=off, as before issue 25's split) and image by image
(auto), against DeepSparse at the same batch and thread count, in one
interleaved run.

    bench/setup-deepsparse        # once
    bench/sparse-batch.py [--models resnet50-u90,resnet18-u90] [--threads 1,2]
                          [--batches 1,16,64] [--rounds 3] [--iters 3] [--isa native|avx2]
                          [--json FILE]

Engines, every one fed the same input (uniform in [-1, 1], seed 1):
  convd-whole  build/bin/convd-run FILE --batch B --threads T --bench N
               --warmup 1 with CONVD_BATCH_SPLIT=off (its own median)
  convd        the same with the default (auto: image by image for these)
  deepsparse   compile_model(FILE, batch_size=B, num_cores=T) in the venv of
               bench/setup-deepsparse; median of N timed run() calls
In each round every (model, threads, batch) runs each engine in turn, the
order rotating; the table shows the median over rounds of each engine's
median, per image, and the ratios. Prints Markdown; --json keeps the raw
figures. --isa avx2 caps convd (CONVD_MAX_ISA=avx2, ONEDNN_MAX_CPU_ISA=AVX2)
and DeepSparse (NM_ARCH=avx2) as bench/anchors.py does; the table's header
line names the cap.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import anchors  # noqa: E402  (DeepSparse worker, model files)


def ds_commands():
    """Worker commands with a batch size (anchors' load is batch 1)."""
    import time

    def load_batch(req, engines):
        from deepsparse import compile_model
        t0 = time.perf_counter()
        engines[req["key"]] = compile_model(req["path"], batch_size=req["batch"], num_cores=req["threads"])
        return {"compile_s": time.perf_counter() - t0}

    return {"load_batch": load_batch}  # timed with the worker's own "bench" command


def convd_ms(binary, path, batch, threads, iters, split, x, caps):
    env = dict(os.environ, CONVD_BATCH_SPLIT=split, **caps)
    cmd = [str(binary), str(path), "--batch", str(batch), "--threads", str(threads), "--bench", str(iters),
           "--warmup", "1", "--input", str(x)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return float(re.search(r"median ([\d.]+) ms", r.stdout + r.stderr).group(1))


def main():
    if "--deepsparse-worker" in sys.argv:
        return anchors.deepsparse_worker(ds_commands())
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50-u90,resnet18-u90")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--no-deepsparse", action="store_true")
    ap.add_argument("--isa", choices=sorted(anchors.CAPS), default="native")
    a = ap.parse_args()
    caps = anchors.CAPS[a.isa]
    import numpy as np
    cache = pathlib.Path(os.environ.get("CONVD_BENCH_CACHE", pathlib.Path.home() / ".cache/convd/bench-models"))
    models = a.models.split(",")
    files = anchors.model_files(models, cache)
    threads = [int(t) for t in a.threads.split(",")]
    batches = [int(b) for b in a.batches.split(",")]
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sparse-batch-"))
    binary = tmp / "convd-run"
    shutil.copy(ROOT / "build/bin/convd-run", binary)
    rng = np.random.default_rng(1)
    xs = {}
    for b in batches:
        xs[b] = tmp / f"x{b}.npy"
        np.save(xs[b], rng.uniform(-1, 1, (b, 3, 224, 224)).astype(np.float32))
    ds = None
    if not a.no_deepsparse:
        ds = anchors.DeepSparse(anchors.deepsparse_python(None), caps["deepsparse"], 1800, script=__file__)
        for m in models:
            for t in threads:
                for b in batches:
                    if b > 1:
                        ds.call(cmd="load_batch", key=f"{m}/{t}/{b}", path=str(files[m]), batch=b, threads=t)
    res = {}
    engines = ["convd-whole", "convd"] + (["deepsparse"] if ds else [])
    for r in range(a.rounds):
        for m in models:
            for t in threads:
                for b in batches:
                    order = engines[r % len(engines):] + engines[:r % len(engines)]
                    for e in order:
                        if e == "deepsparse" and b == 1:
                            continue
                        if e == "deepsparse":
                            ms = ds.call(cmd="bench", path="", key=f"{m}/{t}/{b}", input=str(xs[b]), warmup=1,
                                         iters=a.iters)["median_ms"]
                        else:
                            ms = convd_ms(binary, files[m], b, t, a.iters, "off" if e == "convd-whole" else "auto",
                                          xs[b], caps["convd"])
                        res.setdefault(f"{m}|{t}|{b}|{e}", []).append(ms)
                        print(f"round {r} {m} T{t} B{b} {e}: {ms:.1f} ms", file=sys.stderr, flush=True)
    if ds:
        ds.close()
    shutil.rmtree(tmp)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1))
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"ISA: {a.isa} (convd caps {caps['convd'] or 'none'}, DeepSparse {caps['deepsparse'] or 'its own'}); "
          f"CPU {anchors.cpu_info()['model']}\n")
    print("| model | threads | batch | convd whole batch ms (per image) | convd image by image ms (per image) "
          "| whole / by image | DeepSparse ms (per image) | DeepSparse / convd |")
    print("|---|---|---|---|---|---|---|---|")
    for m in models:
        for t in threads:
            for b in batches:
                w, s = med[f"{m}|{t}|{b}|convd-whole"], med[f"{m}|{t}|{b}|convd"]
                d = med.get(f"{m}|{t}|{b}|deepsparse")
                dtxt = f"{d:.1f} ({d / b:.2f})" if d else "-"
                rtxt = f"{d / s:.2f}" if d else "-"
                print(f"| {m} | {t} | {b} | {w:.1f} ({w / b:.2f}) | {s:.1f} ({s / b:.2f}) | {w / s:.2f} | {dtxt} "
                      f"| {rtxt} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
