#!/usr/bin/env python3
"""The dense float32 convs in bf16 (CONVD_BF16, backends/cpu/dnnl-conv-bf16.c):
convd bf16 against convd f32, onnxruntime f32, DeepSparse 1.8.0 f32 and, for
scale, convd int8 and onnxruntime int8 on the same model quantized, in one
interleaved run (docs/PERFORMANCE.md, "bf16").

    bench/setup-deepsparse                  # once: DeepSparse's own venv, outside the checkout
    bench/bf16.py [--models resnet50,resnet18,mobilenetv2] [--threads 1,all] [--batch 1,16]
                  [--rounds 3] [--iters 10] [--warmup 2] [--json FILE] [--write]
    bench/bf16.py --check 64 [--models ...]  # accuracy: convd bf16 and f32 against onnxruntime f32
    bench/bf16.py --from-json FILE [--write]

Files: bench/int8.py's (bench/benchmodels.py's f32 models, 224x224, random
weights; NAME-qdq.onnx quantized by onnxruntime's quantize_static). Engines,
at T threads and batch B, all fed the same input (uniform in [-1, 1], seed 1):
  convd-bf16   convd-run F32FILE with CONVD_BF16=on (every conv oneDNN runs
               natively in bf16: the faster of its two wirings per layer)
  convd-auto   the same with CONVD_BF16=auto (per layer, bf16 where it timed
               faster than the float32 kernel at load)
  convd-f32    convd-run F32FILE (the default: CONVD_BF16=off)
  convd-int8   convd-run QFILE
  ort-f32, ort-int8   onnxruntime CPU EP, intra_op_num_threads=T
  ds-f32       DeepSparse compile_model(F32FILE, batch_size=B, num_cores=T)
Each round runs every cell with the engines in an order that rotates every
round; the table shows the median of the round medians (ms per batch) and
ratios (> 1: convd bf16 is faster). Where oneDNN has no native bf16 (the
`bf16` column of the header says so), convd-bf16 plans float32: the run
says so rather than measuring a path that is not there.

--check N: N inputs (uniform in [-1, 1], seed 3, batches of 16) through
convd-run (1 thread) with CONVD_BF16=on and off and through onnxruntime f32:
each input's relative L2 error against onnxruntime and the top-1 agreement.
"""
import json
import pathlib
import shutil
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import anchors  # noqa: E402
import int8  # noqa: E402  (its files, convd-run wrapper and DeepSparse worker commands)

ENGINES = ("convd-bf16", "convd-auto", "convd-f32", "convd-int8", "ort-f32", "ort-int8", "ds-f32")
BF16_ENV = {"convd-bf16": {"CONVD_BF16": "on"}, "convd-auto": {"CONVD_BF16": "auto"}, "convd-f32": {"CONVD_BF16": "off"}}
TITLE = "## bf16"


def log(msg):
    print(f"[bf16] {msg}", file=sys.stderr, flush=True)


def measure(ctx, engine, model, T, B):
    return int8.measure(ctx, engine, model, T, B, env=BF16_ENV.get(engine), ds="f32")


def bf16_layers(ctx, model, mode):
    r = int8.convd_run(ctx, ctx["files"][model]["f32"], 1, 1, "--info", "--json", env={"CONVD_BF16": mode})
    info = json.loads(r.stdout)
    convs = [l for l in info["layers"] if l["op"].startswith("Conv")]
    return {"convs": len(convs), "bf16": sum(l.get("dtype") == "bf16" for l in convs),
            "dnnl_isa": info["cpu"]["dnnl_isa"],
            "kernels": sorted({l["kernel"] for l in convs if l.get("dtype") == "bf16"})}


def describe(ctx, model):
    return {"on": bf16_layers(ctx, model, "on"), "auto": bf16_layers(ctx, model, "auto")}


def run_bench(a, names):
    return int8.run_bench(a, names, ENGINES, measure, describe)


def run_check(a, names):
    ctx = int8.setup(a, names)
    out = {"cpu": anchors.cpu_info(), "rev": anchors.git_rev(), "n": a.check, "models": {}}
    try:
        rng = np.random.default_rng(3)
        for n in names:
            ort = anchors.Ort(ctx["files"][n]["f32"], threads=2)
            errs = {"on": [], "off": []}
            agree = {"on": [], "off": []}
            for start in range(0, a.check, 16):
                B = min(16, a.check - start)
                x = rng.uniform(-1, 1, (B, 3, 224, 224)).astype(np.float32)
                xp, yp = ctx["tmp"] / "cx.npy", ctx["tmp"] / "cy.npy"
                np.save(xp, x)
                want = ort.run(x).reshape(B, -1).astype(np.float64)
                for mode in ("on", "off"):
                    int8.convd_run(ctx, ctx["files"][n]["f32"], 1, B, "--input", xp, "--output", yp,
                                   env={"CONVD_BF16": mode})
                    got = np.load(yp).reshape(B, -1).astype(np.float64)
                    errs[mode] += list(int8.rel_l2(got, want))
                    agree[mode] += list(got.argmax(1) == want.argmax(1))
            out["models"][n] = {m: {"median_rel_l2": float(np.median(errs[m])), "max_rel_l2": float(np.max(errs[m])),
                                    "top1_agree": float(np.mean(agree[m]))} for m in errs}
            out["models"][n]["layers"] = bf16_layers(ctx, n, "on")
            log(f"{n}: {out['models'][n]}")
    finally:
        shutil.rmtree(ctx["tmp"], ignore_errors=True)
    return out


def fastest(cell):
    v = [m["ms"] for m in cell if "ms" in m]
    return min(v) if v else None


def markdown(res):
    """The table of medians of round medians, then the same of the fastest
    rounds: this machine's speed moves 2-3x from one process to the next, and
    the fastest round is the one that ran undisturbed."""
    if "n" in res:
        return check_markdown(res)
    return "\n".join([table(res, int8.med, "median of round medians"), table(res, fastest, "fastest round")])


def check_markdown(res):
    lines = [f"### bf16 accuracy: convd against onnxruntime f32, {res['n']} inputs", "",
             f"CPU {res['cpu']['model']}; convd {res['rev']}; `bench/bf16.py --check {res['n']}`.", "",
             "| model | bf16 convs (on) | bf16: median rel. L2 | max | top-1 agrees | f32: median rel. L2 | max |"
             " top-1 agrees |", "|---|---|---|---|---|---|---|---|"]
    for n, m in res["models"].items():
        on, off, L = m["on"], m["off"], m["layers"]
        lines.append(f"| {n} | {L['bf16']}/{L['convs']} | {on['median_rel_l2']:.2e} | {on['max_rel_l2']:.2e} | "
                     f"{100 * on['top1_agree']:.1f}% | {off['median_rel_l2']:.2e} | {off['max_rel_l2']:.2e} | "
                     f"{100 * off['top1_agree']:.1f}% |")
    return "\n".join(lines) + "\n"


def table(res, pick, what):
    ds = res.get("ds_info", {})
    isa = next(iter(res["models"].values()))["on"]["dnnl_isa"] if res["models"] else "?"
    lines = [f"### bf16 ({res['cpu']['model']}, {res['cpu']['cores']} cores, oneDNN {isa})", "",
             f"convd {res['rev']}; onnxruntime {res['ort']}; DeepSparse {ds.get('version', '?')} isa "
             f"{ds.get('isa', '?')}. {res['rounds']} rounds x {res['iters']} runs, {what} (each round's median), ms per "
             f"batch; load average {res['load'][0]:.2f} -> {res['load'][-1]:.2f}. Ratios > 1: convd bf16 is faster.",
             "",
             "| model | threads | batch | convd bf16 | convd bf16 auto | convd f32 | convd int8 | ORT f32 | ORT int8 | "
             "DeepSparse f32 | f32 / bf16 (convd) | ORT f32 / bf16 | DS f32 / bf16 | int8 / bf16 (convd) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    f, ratio = int8.fmt_ms, int8.ratio
    for T in res["threads"]:
        for B in res["batch"]:
            for n in res["models"]:
                c = {e: pick(res["cells"].get(f"{n}|{T}|{B}|{e}", [])) for e in ENGINES}
                lines.append(f"| {n} | {T} | {B} | {f(c['convd-bf16'])} | {f(c['convd-auto'])} | {f(c['convd-f32'])} | "
                             f"{f(c['convd-int8'])} | {f(c['ort-f32'])} | {f(c['ort-int8'])} | {f(c['ds-f32'])} | "
                             f"{ratio(c['convd-f32'], c['convd-bf16'])} | {ratio(c['ort-f32'], c['convd-bf16'])} | "
                             f"{ratio(c['ds-f32'], c['convd-bf16'])} | {ratio(c['convd-int8'], c['convd-bf16'])} |")
    lines += ["", "bf16 convs per model (on; auto): " + "; ".join(
        f"{n} {m['on']['bf16']}/{m['on']['convs']}; {m['auto']['bf16']}/{m['auto']['convs']}"
        for n, m in res["models"].items())]
    return "\n".join(lines) + "\n"


def main(argv=None):
    if argv is None and "--deepsparse-worker" in sys.argv:
        return anchors.deepsparse_worker(int8.worker_commands())
    a, names = int8.parse(argv, __doc__, "resnet50,resnet18,mobilenetv2")
    a.isa = "native"  # no caps: bf16 exists only where oneDNN runs it natively
    if a.from_json:
        res = json.loads(pathlib.Path(a.from_json).read_text())
    else:
        res = run_check(a, names) if a.check else run_bench(a, names)
    return int8.finish(a, res, markdown(res), TITLE + (" accuracy" if "n" in res else ""), "bench/bf16.py")


if __name__ == "__main__":
    sys.exit(main())
