#!/usr/bin/env python3
"""Pruned whole models: convd's sparse-aware plan vs its dense plan vs
onnxruntime, on the same pruned files, in one interleaved run, so that the
sparse speed-ups are measured against the same load as their baselines.

    bench/sparse-models.py [--models resnet50,mobilenetv2] [--batches 1,8] [--threads 1]
                           [--variants u0,u30,...] [--rounds 3] [--iters 7] [--warmup 2]
                           [--layers] [--write] [--json FILE] [--cache DIR] [--quick]
                           [--from-json FILE]

Models: ResNet-50- and MobileNetV2-shaped (tests/models/builders.py, random
weights, BN unfused as PyTorch exports them, 224x224), generated into
$CONVD_BENCH_CACHE or ~/.cache/convd/bench-models, then pruned there with
`convctl prune`:

  u0 .. u95  --mode unstructured --per-layer --skip first   (0/30/50/70/80/90/95%)
  b90        --mode block:4x1    --per-layer --skip first   (90% in 4x1 output-channel blocks)
  b90x8      --mode block:8x1    --per-layer --skip first   (90% in 8x1 output-channel blocks)
  f30, f50   --mode filter       --per-layer --skip first,Gemm  (every conv but the first)

Engines, all with the same thread count T, OMP_WAIT_POLICY=passive:
  ours   convd-run FILE --bench N --threads T (auto plan: compaction + planner)
  dense  the same with CONVD_PLAN=dense (no compaction, oneDNN everywhere)
  ort    onnxruntime CPU EP, intra_op_num_threads=T, ORT_ENABLE_ALL, sequential
Each round measures every (batch, variant, engine) once (median of N runs
after W warm-ups), the engine order rotating per round; the table shows the
median of the round medians. Speedups: dense/ours and ort/ours, next to the
ideal 1/(1-s) (the dense FLOPs over the nonzero FLOPs for filter pruning).

--layers adds, for u90 and b90 at batch 1, `convctl plan --json` of the
auto plan and of the dense plan (per-layer medians), paired by layer name,
and the geometric mean of the per-layer speedup of 1x1 and 3x3 convs.
--write replaces the "## Pruned models" section of bench/results/pruned-models.md
(re-read just before writing) with the tables.
"""
import argparse
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import benchmodels  # noqa: E402  (the model files, shared with bench/anchors.py)
from tests.support import paths  # noqa: E402

VARIANTS = benchmodels.VARIANTS
ENGINES = ("ours", "dense", "ort")


def log(msg):
    print(f"[sparse-models] {msg}", file=sys.stderr, flush=True)


def model_file(cache, name, size, seed):
    return benchmodels.model_file(cache, name, size, seed, log=log)


def pruned_file(base, variant):
    return benchmodels.pruned_file(base, variant, log=log)


def convd_bench(model, batch, threads, iters, warmup, plan):
    env = dict(os.environ, CONVD_PLAN=plan, OMP_WAIT_POLICY="passive")
    cmd = [paths.binary("convd-run"), str(model), "--batch", str(batch), "--max-batch", str(batch), "--threads",
           str(threads), "--bench", str(iters), "--warmup", str(warmup), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-2000:]}")
    return json.loads(r.stdout)["bench"]["median_ms"]


class Ort:
    def __init__(self, path, threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.inp = self.sess.get_inputs()[0]

    def bench(self, batch, iters, warmup):
        x = np.random.default_rng(0).uniform(-1, 1, [batch] + list(self.inp.shape[1:])).astype(np.float32)
        for _ in range(warmup):
            self.sess.run(None, {self.inp.name: x})
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            self.sess.run(None, {self.inp.name: x})
            ts.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(ts))


def plan_json(model, threads, runs, plan):
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    cmd = [paths.binary("convctl"), "plan", str(model), "--json", "--threads", str(threads), "--runs", str(runs),
           "--plan", plan]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def ideal(model_plan):
    t = model_plan["total"]
    return t["flops_dense"] / max(1, t["flops_run"])


def median(xs):
    return float(np.median(xs)) if xs else float("nan")


def gmean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,mobilenetv2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", action="store_true", help="per-layer table for u90/b90 at batch 1")
    ap.add_argument("--write", action="store_true", help="write the section into bench/results/pruned-models.md")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--cache", metavar="DIR")
    ap.add_argument("--quick", action="store_true", help="64x64 inputs, 1 round, few runs (smoke test)")
    ap.add_argument("--from-json", metavar="FILE", help="no measurement: the tables of an earlier --json")
    a = ap.parse_args(argv)
    if a.from_json:
        res = json.loads(pathlib.Path(a.from_json).read_text())
        md = markdown(res, a)
        print(md)
        if a.write:
            write_section(md)
        return 0
    if a.quick:
        a.size, a.rounds, a.iters, a.warmup = 64, 1, 3, 1
    if a.rounds < 1 or a.iters < 1 or a.threads < 1:
        ap.error("--rounds, --iters and --threads must be >= 1")
    models = a.models.split(",")
    batches = [int(b) for b in a.batches.split(",")]
    variants = a.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v} (known: {', '.join(VARIANTS)})")
    cache = benchmodels.cache_dir(a.cache)
    files = {}
    for m in models:
        base = model_file(cache, m, a.size, a.seed)
        for v in variants:
            files[m, v] = pruned_file(base, v)
    # The plan of every file (kernels, FLOPs): a dry `convctl plan` without runs.
    plans = {k: plan_json(f, a.threads, 0, "auto") for k, f in files.items()}
    load = os.getloadavg()
    log(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    sess = {k: Ort(f, a.threads) for k, f in files.items()}
    times = {}  # (model, variant, batch, engine) -> [round medians]
    order = list(ENGINES)
    for r in range(a.rounds):
        for b in batches:
            for m in models:
                for v in variants:
                    for e in order:
                        f = files[m, v]
                        t = (convd_bench(f, b, a.threads, a.iters, a.warmup, "auto" if e == "ours" else "dense")
                             if e != "ort" else sess[m, v].bench(b, a.iters, a.warmup))
                        times.setdefault((m, v, b, e), []).append(t)
            log(f"round {r + 1}/{a.rounds} batch {b} done")
        order = order[1:] + order[:1]
    load_end = os.getloadavg()
    res = {"threads": a.threads, "rounds": a.rounds, "iters": a.iters, "size": a.size,
           "load_start": load, "load_end": load_end, "rows": [], "layers": []}
    for m in models:
        for b in batches:
            for v in variants:
                t = {e: median(times[m, v, b, e]) for e in ENGINES}
                p = plans[m, v]["total"]
                res["rows"].append({"model": m, "variant": v, "batch": b, **{f"{e}_ms": t[e] for e in ENGINES},
                                    "vs_dense": t["dense"] / t["ours"], "vs_ort": t["ort"] / t["ours"],
                                    "ideal": ideal(plans[m, v]), "sparse_layers": p["sparse_layers"],
                                    "compacted_layers": p["compacted_layers"], "weighted": p["weighted_layers"]})
    if a.layers:
        for m in models:
            for v in ("u90", "b90"):
                if (m, v) not in files:
                    continue
                ours = plan_json(files[m, v], a.threads, max(a.iters, 10), "auto")
                dense = plan_json(files[m, v], a.threads, max(a.iters, 10), "dense")
                dl = {l["name"]: l for l in dense["layers"] if l["weighted"]}
                for l in ours["layers"]:
                    if not l["weighted"] or l["name"] not in dl:
                        continue
                    d = dl[l["name"]]
                    # Shapes of the dense plan: as in the file (ours may be compacted).
                    res["layers"].append({"model": m, "variant": v, "name": l["name"], "op": l["op"],
                                          "in": d["in_shape"], "out": d["out_shape"], "kernel": l["kernel"],
                                          "density": l["density"], "ours_ms": l["measured_ms"],
                                          "dense_ms": d["measured_ms"], "flops_dense": d["flops_dense"]})
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1))
    md = markdown(res, a)
    print(md)
    if a.write:
        write_section(md)
    return 0


def layer_kind(l):
    """'1x1', '3x3', 'dw', 'fc' or 'other' from the shapes and the dense FLOPs."""
    if len(l["out"]) == 2:
        return "fc"
    cin, cout, pix = l["in"][1], l["out"][1], l["out"][2] * l["out"][3]
    rs = l["flops_dense"] / max(1, 2 * cin * cout * pix)
    if rs < 0.5:
        return "dw"
    return "1x1" if abs(rs - 1) < 0.01 else "3x3" if abs(rs - 9) < 0.01 else "other"


def markdown(res, a):
    out = []
    la, lb = res["load_start"], res["load_end"]
    out.append(f"Measured {time.strftime('%Y-%m-%d')} with `bench/sparse-models.py"
               f"{' --layers' if res['layers'] else ''} --threads {res['threads']}` ({res['rounds']} rounds x "
               f"{res['iters']} runs, {res['size']}x{res['size']} inputs), {res['threads']} thread(s), "
               f"OMP_WAIT_POLICY=passive; load average {la[0]:.2f} at the start, {lb[0]:.2f} at the end.")
    out.append("")
    out.append("| model | pruning | batch | ours ms | dense plan ms | ORT ms | vs dense | vs ORT | 1/(1-s) | "
               "FLOP ratio | sparse / compacted layers |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in res["rows"]:
        mode, s, _ = VARIANTS[r["variant"]]
        name = {"unstructured": f"{s:.0%} unstructured", "block:4x1": f"{s:.0%} 4x1 blocks", "block:8x1": f"{s:.0%} 8x1 blocks",
                "filter": f"{s:.0%} filters"}[mode]
        out.append(f"| {r['model']} | {name} | {r['batch']} | {r['ours_ms']:.2f} | {r['dense_ms']:.2f} | "
                   f"{r['ort_ms']:.2f} | {r['vs_dense']:.2f}x | {r['vs_ort']:.2f}x | {1 / (1 - s):.1f}x | "
                   f"{r['ideal']:.1f}x | "
                   f"{r['sparse_layers']} / {r['compacted_layers']} of {r['weighted']} |")
    out.extend(speed_targets(res))
    if res["layers"]:
        out.append("")
        out.append("Per layer, batch 1 (`convctl plan --json` medians of the auto plan and of the dense plan "
                   "of the same file; a sparse layer's time includes no reorder, the reorders are their own "
                   "layers):")
        out.append("")
        out.append("| model | pruning | layer | op | in -> out | density | kernel | ours ms | dense ms | speedup |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for l in res["layers"]:
            sp = l["dense_ms"] / l["ours_ms"] if l["ours_ms"] else float("nan")
            out.append(f"| {l['model']} | {l['variant']} | {l['name']} | {l['op']} | "
                       f"{'x'.join(map(str, l['in'][1:]))} -> {'x'.join(map(str, l['out'][1:]))} | "
                       f"{l['density']:.2f} | {l['kernel']} | {l['ours_ms']:.3f} | {l['dense_ms']:.3f} | {sp:.2f}x |")
        out.append("")
        out.append("Geometric mean of the per-layer speedups (dense plan ms / ours ms) by layer kind:")
        out.append("")
        out.append("| model | pruning | 1x1 | 3x3 | depthwise | FC |")
        out.append("|---|---|---|---|---|---|")
        keys = sorted({(l["model"], l["variant"]) for l in res["layers"]})
        for mk, vk in keys:
            cells = []
            for kind in ("1x1", "3x3", "dw", "fc"):
                sp = [l["dense_ms"] / l["ours_ms"] for l in res["layers"]
                      if (l["model"], l["variant"]) == (mk, vk) and layer_kind(l) == kind and l["ours_ms"]]
                cells.append(f"{gmean(sp):.2f}x ({len(sp)})" if sp else "-")
            out.append(f"| {mk} | {vk} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def speed_targets(res):
    """The speed targets of the sparse plans (vs onnxruntime, vs the dense plan)
    that this run measures, met or not."""
    rows = {(r["model"], r["variant"], r["batch"]): r for r in res["rows"]}
    lines = ["", "Sparse speed targets measured by this run (same run, same threads):", "",
             "| target | measured | met |", "|---|---|---|"]

    def add(what, val, ok):
        lines.append(f"| {what} | {val} | {'yes' if ok else '**no**'} |")

    for v, want in (("u90", 2.5), ("u95", 3.5), ("b90", 4.0), ("b90x8", 4.0)):
        r = rows.get(("resnet50", v, 1))
        if r:
            add(f"ResNet-50 batch 1 {v} vs ORT >= {want}x", f"{r['vs_ort']:.2f}x", r["vs_ort"] >= want)
    for m in ("resnet50", "mobilenetv2"):
        for b in (1, 8):
            f, u = rows.get((m, "f50", b)), rows.get((m, "u0", b))
            if f and u:
                sp = u["ours_ms"] / f["ours_ms"]
                add(f"{m} batch {b} filter-pruned 50% >= 2x faster than unpruned", f"{sp:.2f}x", sp >= 2.0)
            for v in ("u0", "u30"):
                r = rows.get((m, v, b))
                if r:
                    add(f"{m} batch {b} {v} within 5% of the dense plan", f"{r['ours_ms'] / r['dense_ms']:.3f}x time",
                        r["ours_ms"] <= 1.05 * r["dense_ms"])
    for m in ("resnet50", "mobilenetv2"):
        for kind, want in (("1x1", 4.0), ("3x3", 3.0)):
            sp = [l["dense_ms"] / l["ours_ms"] for l in res["layers"]
                  if l["model"] == m and l["variant"] == "u90" and layer_kind(l) == kind and l["ours_ms"]]
            if sp:
                g = gmean(sp)
                add(f"{m} {kind} layers at 90% unstructured >= {want}x (geomean, in-model)", f"{g:.2f}x", g >= want)
    return lines


def write_section(md):
    doc = ROOT / "bench" / "results" / "pruned-models.md"
    text = doc.read_text() if doc.exists() else ""
    intro = (ROOT / "bench" / "sparse-models.md").read_text() if (ROOT / "bench" / "sparse-models.md").exists() else ""
    body = "## Pruned models\n\n" + (intro.rstrip() + "\n\n" if intro else "") + md
    m = re.search(r"^## Pruned models\n.*?(?=^## |\Z)", text, flags=re.S | re.M)
    if m:
        text = text[:m.start()] + body + ("\n" if m.end() < len(text) else "") + text[m.end():]
    else:
        text = text.rstrip() + "\n\n" + body
    doc.write_text(text)
    log(f"wrote the 'Pruned models' section of {doc}")


if __name__ == "__main__":
    sys.exit(main())
