#!/usr/bin/env python3
"""Quantized models: convd int8 against onnxruntime int8 and DeepSparse 1.8.0
int8, and against the f32 runs of the same models, in one interleaved run
(docs/PERFORMANCE.md, "int8").

    bench/setup-deepsparse                  # once: DeepSparse's own venv, outside the checkout
    bench/int8.py [--models resnet50,resnet18,mobilenetv2,resnet50-u90,resnet50-u95,resnet50-b90,resnet50-f50]
                  [--threads 1,all] [--batch 1,16] [--rounds 3] [--iters 10] [--warmup 2]
                  [--isa native|avx512|avx2] [--json FILE] [--write]
    bench/int8.py --check 200 [--models ...]   # correctness: convd int8 vs onnxruntime int8
    bench/int8.py --from-json FILE [--write]

Files: the f32 models of bench/benchmodels.py (bench/anchors.py's names:
224x224, random weights; the pruned ones by `convctl prune`), each quantized
the standard way, once, next to it (NAME-qdq.onnx): onnxruntime's
quant_pre_process (BN folded into the convs, as a torchvision export is),
then quantize_static, QDQ, per-channel s8 weights, u8 activations,
calibrated on 16 inputs uniform in [-1, 1] (seed 2). DeepSparse reads a copy
whose opset imports other than ai.onnx are removed (NAME-qdq-ds.onnx).

Engines, at T threads (--threads; all = the CPUs of the affinity mask) and
batch B (--batch), all fed the same input (uniform in [-1, 1], seed 1):
  convd-f32    build/bin/convd-run F32FILE --bench N --threads T --batch B
  convd-int8   build/bin/convd-run QFILE (the int8 kernels where the planner
               times them faster: CONVD_INT8 auto, the default)
  ort-f32, ort-int8   onnxruntime CPU EP, intra_op_num_threads=T, on the f32
               file and on QFILE; median of N run() calls
  ds-int8      DeepSparse compile_model(QFILE-ds, batch_size=B, num_cores=T)
convd-run runs with its own wait policy (runtime/omp-env.c). Each round runs every
(T, B, model) cell with the engines in an order that rotates every round; the
table shows the median of the round medians (ms per batch) and the ratios
(> 1: convd int8 is faster).

--isa avx512 caps convd at AVX-512 without VNNI (CONVD_MAX_ISA=avx512,
ONEDNN_MAX_CPU_ISA=AVX512_CORE), DeepSparse at NM_ARCH=avx512; avx2 as
bench/anchors.py caps it. onnxruntime cannot be capped (MLAS reads CPUID).

--check N: N inputs (uniform in [-1, 1], seed 3, in batches of 16) through
convd-run (int8, 1 thread) and onnxruntime int8 on each QFILE: the relative
L2 error of each input's output and whether the top-1 class agrees.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import shutil
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import anchors  # noqa: E402  (its DeepSparse worker, Ort, model files, machine info)

ENGINES = ("convd-int8", "convd-f32", "ort-int8", "ort-f32", "ds-int8")
CAPS = dict(anchors.CAPS, avx512={"convd": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "CONVD_MAX_ISA": "avx512"},
                                  "deepsparse": {"NM_ARCH": "avx512"}})
TITLE = "## int8"


def log(msg):
    print(f"[int8] {msg}", file=sys.stderr, flush=True)


# ---- the files ----------------------------------------------------------------------

def quantized(f32):
    """QFILE and its DeepSparse copy for the f32 file (made once, next to it)."""
    q, ds = f32.with_name(f32.stem + "-qdq.onnx"), f32.with_name(f32.stem + "-qdq-ds.onnx")
    if not q.exists():
        import onnx
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
        from onnxruntime.quantization.shape_inference import quant_pre_process

        class Reader(CalibrationDataReader):
            def __init__(self):
                rng = np.random.default_rng(2)
                name = onnx.load(str(f32), load_external_data=False).graph.input[0].name
                self.it = iter([{name: rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)} for _ in range(16)])

            def get_next(self):
                return next(self.it, None)

        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            pre, out = pathlib.Path(tmp) / "pre.onnx", pathlib.Path(tmp) / "q.onnx"
            quant_pre_process(str(f32), str(pre))
            quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
            shutil.move(str(out), str(q))
        log(f"quantized {q.name} in {time.perf_counter() - t0:.0f} s")
    if not ds.exists():
        import onnx
        m = onnx.load(str(q))
        keep = [o for o in m.opset_import if o.domain in ("", "ai.onnx")]
        del m.opset_import[:]
        m.opset_import.extend(keep)
        onnx.save(m, str(ds))
    return q, ds


# ---- the engines ----------------------------------------------------------------------

def convd_run(ctx, path, threads, batch, *args, env=None):
    e = dict(os.environ, **ctx["caps"]["convd"], **(env or {}))
    cmd = [str(ctx["bindir"] / "convd-run"), str(path), "--threads", str(threads), "--batch", str(batch),
           "--max-batch", str(batch), *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=e, timeout=ctx["timeout"])
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r


def worker_commands():
    """What int8.py adds to anchors.py's DeepSparse worker: compile at a batch size."""
    def load_batch(req, engines):
        from deepsparse import compile_model
        engines[req["key"]] = compile_model(req["path"], batch_size=req["batch"], num_cores=req["num_cores"])
        return {}

    return {"load_batch": load_batch}  # timing: anchors.py's own "bench" command


def measure(ctx, engine, model, T, B, env=None, ds="ds"):
    """One cell: engine (convd-int8 on QFILE, any other convd-* on the f32
    file, with env; ort-*; DeepSparse on the file ctx["files"][model][ds])."""
    f = ctx["files"][model]
    x = ctx["x"][B]
    try:
        if engine.startswith("convd"):
            path = f["q"] if engine == "convd-int8" else f["f32"]
            r = convd_run(ctx, path, T, B, "--bench", ctx["iters"], "--warmup", ctx["warmup"], "--json", env=env)
            return {"ms": json.loads(r.stdout)["bench"]["median_ms"]}
        if engine.startswith("ort"):
            sess = ctx["ort"][(model, engine, T)]
            xa = np.load(x)
            return {"ms": sess.bench(xa, ctx["iters"], ctx["warmup"])}
        key = f"{model}|{T}|{B}|{ds}"
        if key not in ctx["ds_loaded"]:
            ctx["ds"].call(cmd="load_batch", key=key, path=str(f[ds]), batch=B, num_cores=T)
            ctx["ds_loaded"].add(key)
        return {"ms": ctx["ds"].call(cmd="bench", key=key, path=str(f[ds]), input=str(x), iters=ctx["iters"],
                                     warmup=ctx["warmup"])["median_ms"]}
    except Exception as e:  # one failed cell; the run goes on
        log(f"{engine} {model} T={T} B={B}: {type(e).__name__}: {e}")
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def int8_layers(ctx, model):
    r = convd_run(ctx, ctx["files"][model]["q"], 1, 1, "--info", "--json")
    layers = json.loads(r.stdout)["layers"]
    convs = [l for l in layers if l["op"].startswith("Conv")]
    return {"convs": len(convs), "int8": sum(l.get("dtype") == "int8" for l in convs),
            "kernels": sorted({l["kernel"] for l in convs if l.get("dtype") == "int8"})}


# ---- the run ---------------------------------------------------------------------------

def setup(a, names):
    from tests.support import paths
    import benchmodels
    ctx = {"caps": CAPS[a.isa], "iters": a.iters, "warmup": a.warmup, "timeout": a.timeout, "files": {},
           "ort": {}, "ds": None, "ds_loaded": set(), "x": {}}
    ctx["tmp"] = pathlib.Path(tempfile.mkdtemp(prefix="convd-int8-"))
    ctx["bindir"] = ctx["tmp"] / "bin"
    ctx["bindir"].mkdir()
    for b in ("convd-run", "convctl"):  # copies: a rebuild cannot swap them mid-run
        shutil.copy2(paths.binary(b), ctx["bindir"] / b)
    f32s = anchors.model_files(names, benchmodels.cache_dir(a.cache))
    for n in names:
        q, ds = quantized(f32s[n])
        ctx["files"][n] = {"f32": f32s[n], "q": q, "ds": ds}
    for B in a.batch:
        ctx["x"][B] = ctx["tmp"] / f"x{B}.npy"
        np.save(ctx["x"][B], np.random.default_rng(1).uniform(-1, 1, (B, 3, 224, 224)).astype(np.float32))
    return ctx


def run_bench(a, names, engines=ENGINES, measure_cell=None, describe=None):
    """Every (round, threads, batch, model, engine) cell, the engines' order
    rotating every round. bench/bf16.py passes its own engines, measure_cell
    (ctx, engine, model, T, B) and describe (ctx, model): the model's facts."""
    measure_cell, describe = measure_cell or measure, describe or int8_layers
    ctx = setup(a, names)
    import onnxruntime
    res = {"cpu": anchors.cpu_info(), "isa": a.isa, "caps": ctx["caps"], "rev": anchors.git_rev(),
           "ort": onnxruntime.__version__, "threads": a.threads, "batch": a.batch, "rounds": a.rounds,
           "iters": a.iters, "models": {}, "cells": {}, "load": [os.getloadavg()[0]]}
    try:
        ctx["ds"] = anchors.DeepSparse(anchors.deepsparse_python(a.deepsparse_python), ctx["caps"]["deepsparse"],
                                       a.timeout, script=__file__)
        res["ds_info"] = ctx["ds"].call(cmd="info")
        for n in names:
            res["models"][n] = describe(ctx, n)
            log(f"{n}: {res['models'][n]}")
            for T in a.threads:
                ctx["ort"][(n, "ort-int8", T)] = anchors.Ort(ctx["files"][n]["q"], threads=T)
                ctx["ort"][(n, "ort-f32", T)] = anchors.Ort(ctx["files"][n]["f32"], threads=T)
        for r in range(a.rounds):
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            for T in a.threads:
                for B in a.batch:
                    for n in names:
                        for e in order:
                            m = measure_cell(ctx, e, n, T, B)
                            res["cells"].setdefault(f"{n}|{T}|{B}|{e}", []).append(m)
                            log(f"round {r + 1}: {n} T={T} B={B} {e}: {m}")
        res["load"].append(os.getloadavg()[0])
    finally:
        if ctx["ds"]:
            ctx["ds"].close()
        shutil.rmtree(ctx["tmp"], ignore_errors=True)
    return res


def rel_l2(got, want):
    """Per row: ||got - want|| / ||want||."""
    return np.linalg.norm(got - want, axis=1) / np.maximum(np.linalg.norm(want, axis=1), 1e-30)


def run_check(a, names):
    """convd int8 (1 thread) against onnxruntime int8 on a.check inputs."""
    ctx = setup(a, names)
    out = {"cpu": anchors.cpu_info(), "isa": a.isa, "rev": anchors.git_rev(), "n": a.check, "models": {}}
    try:
        rng = np.random.default_rng(3)
        for n in names:
            ort = anchors.Ort(ctx["files"][n]["q"], threads=2)
            # The same file run as the ONNX spec defines QDQ (no fused int8
            # kernels): how far onnxruntime is from itself, the floor of what
            # any engine not bit-identical to its kernels can reach.
            spec = anchors.Ort(ctx["files"][n]["q"], threads=2, optimize=False)
            errs, agree, serrs, sagree = [], [], [], []
            for start in range(0, a.check, 16):
                B = min(16, a.check - start)
                x = rng.uniform(-1, 1, (B, 3, 224, 224)).astype(np.float32)
                xp, yp = ctx["tmp"] / "cx.npy", ctx["tmp"] / "cy.npy"
                np.save(xp, x)
                convd_run(ctx, ctx["files"][n]["q"], 2, B, "--input", xp, "--output", yp)
                got, want = np.load(yp).reshape(B, -1).astype(np.float64), ort.run(x).reshape(B, -1)
                sref = spec.run(x).reshape(B, -1).astype(np.float64)
                errs += list(rel_l2(got, want))
                agree += list(got.argmax(1) == want.argmax(1))
                serrs += list(rel_l2(sref, want))
                sagree += list(sref.argmax(1) == want.argmax(1))
            out["models"][n] = {"median_rel_l2": float(np.median(errs)), "max_rel_l2": float(np.max(errs)),
                                "p99_rel_l2": float(np.quantile(errs, 0.99)), "top1_agree": float(np.mean(agree)),
                                "ort_spec_median_rel_l2": float(np.median(serrs)),
                                "ort_spec_max_rel_l2": float(np.max(serrs)),
                                "ort_spec_top1_agree": float(np.mean(sagree)), "int8": int8_layers(ctx, n)}
            log(f"{n}: {out['models'][n]}")
    finally:
        shutil.rmtree(ctx["tmp"], ignore_errors=True)
    return out


# ---- the table ---------------------------------------------------------------------------

def med(cell):
    v = [m["ms"] for m in cell if "ms" in m]
    return float(np.median(v)) if v else None


def fmt_ms(v):
    return f"{v:.2f}" if v is not None else "-"


def ratio(a, b):
    """a / b as "1.23x", "-" where either is missing."""
    return f"{a / b:.2f}x" if a and b else "-"


def markdown(res):
    if "n" in res:  # --check
        lines = [f"### int8 correctness: convd against onnxruntime int8, {res['n']} inputs ({res['isa']})", "",
                 f"CPU {res['cpu']['model']}; convd {res['rev']}; `bench/int8.py --check {res['n']}`.", "",
                 "onnxruntime-spec is onnxruntime running the same file without graph optimisations (QDQ as the ONNX",
                 "spec defines it), against onnxruntime's int8 kernels: the floor for an engine not bit-identical to",
                 "those kernels.", "",
                 "| model | int8 convs | median rel. L2 | p99 | max | top-1 agrees | onnxruntime-spec: median | max |"
                 " top-1 |", "|---|---|---|---|---|---|---|---|---|"]
        for n, m in res["models"].items():
            spec = (f"{m['ort_spec_median_rel_l2']:.2e} | {m['ort_spec_max_rel_l2']:.2e} | "
                    f"{100 * m['ort_spec_top1_agree']:.1f}%" if "ort_spec_median_rel_l2" in m else "- | - | -")
            lines.append(f"| {n} | {m['int8']['int8']}/{m['int8']['convs']} | {m['median_rel_l2']:.2e} | "
                         f"{m['p99_rel_l2']:.2e} | {m['max_rel_l2']:.2e} | {100 * m['top1_agree']:.1f}% | {spec} |")
        return "\n".join(lines) + "\n"
    ds = res.get("ds_info", {})
    lines = [f"### int8: {res['isa']} ({res['cpu']['model']}, {res['cpu']['cores']} cores)", "",
             f"convd {res['rev']} (caps {res['caps']['convd'] or 'none'}); onnxruntime {res['ort']}; DeepSparse "
             f"{ds.get('version', '?')} isa {ds.get('isa', '?')} vnni {ds.get('vnni', '?')} "
             f"({ds.get('binaries', '?')}). {res['rounds']} rounds x {res['iters']} runs, median of round medians, "
             f"ms per batch; load average {res['load'][0]:.2f} -> {res['load'][-1]:.2f}. "
             "Ratios > 1: convd int8 is faster.", "",
             "| model | threads | batch | convd int8 | convd f32 | ORT int8 | ORT f32 | DeepSparse int8 | "
             "f32/int8 (convd) | ORT int8 / convd int8 | DS int8 / convd int8 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    f = fmt_ms
    for T in res["threads"]:
        for B in res["batch"]:
            for n in res["models"]:
                c = {e: med(res["cells"].get(f"{n}|{T}|{B}|{e}", [])) for e in ENGINES}
                lines.append(f"| {n} | {T} | {B} | {f(c['convd-int8'])} | {f(c['convd-f32'])} | {f(c['ort-int8'])} | "
                             f"{f(c['ort-f32'])} | {f(c['ds-int8'])} | {ratio(c['convd-f32'], c['convd-int8'])} | "
                             f"{ratio(c['ort-int8'], c['convd-int8'])} | {ratio(c['ds-int8'], c['convd-int8'])} |")
    lines += ["", "int8 convs per model (planner's choice): " + "; ".join(
        f"{n} {m['int8']}/{m['convs']}" for n, m in res["models"].items())]
    return "\n".join(lines) + "\n"


def int_list(text, cores):
    return [cores if v == "all" else int(v) for v in text.split(",")]


def parse(argv, doc, models):
    """The command line shared with bench/bf16.py: (args, model names)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=models)
    ap.add_argument("--threads", default="1,all")
    ap.add_argument("--batch", default="1,16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--isa", choices=sorted(CAPS), default="native")
    ap.add_argument("--check", type=int, default=0)
    ap.add_argument("--cache")
    ap.add_argument("--deepsparse-python")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json")
    ap.add_argument("--from-json")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    a.threads, a.batch = int_list(a.threads, cores), int_list(a.batch, cores)
    return a, a.models.split(",")


def finish(a, res, md, title, script):
    """--json, the tables on stdout, --write into docs/PERFORMANCE.md's section `title`."""
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1))
    print(md)
    if a.write:
        anchors.replace_section(ROOT / "docs" / "PERFORMANCE.md", title,
                                f"{title}\n\nMade by `{script}` (the command and method are in its header).\n\n{md}")
    return 0


def main(argv=None):
    if argv is None and "--deepsparse-worker" in sys.argv:
        return anchors.deepsparse_worker(worker_commands())
    a, names = parse(argv, __doc__, ",".join(anchors.ALL_MODELS))
    if a.from_json:
        res = json.loads(pathlib.Path(a.from_json).read_text())
    else:
        res = run_check(a, names) if a.check else run_bench(a, names)
    return finish(a, res, markdown(res), f"{TITLE}: {res['isa']}" + (" correctness" if "n" in res else ""),
                  "bench/int8.py")


if __name__ == "__main__":
    sys.exit(main())
