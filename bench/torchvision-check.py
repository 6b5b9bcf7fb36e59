#!/usr/bin/env python3
"""Issue 22's check: every convolutional classification and segmentation model
of torchvision (Debian 12's 0.14.1; ViT, Swin and MaxViT are out of scope),
built as a user would: random weights, BatchNorm running statistics calibrated
on random inputs in train mode, then eval, `torch.onnx.export` with input name
`input` at opset 13 (convnext_tiny, efficientnet_b0 and mobilenet_v3_large
also at opset 17; the segmentation models with dynamic H and W). PyTorch,
convd (build/bin/convd-run) and onnxruntime run the same random input; the
table has, per model: loads?, relative L2 vs PyTorch (convd and, for scale,
onnxruntime), the first refusal or failure, and the segmentation models at a
second input size.

    bench/torchvision-check.py                       # every model (~30 min, exports cached)
    bench/torchvision-check.py --quick               # one model per family
    bench/torchvision-check.py --models resnet18,fcn_resnet50@17
    bench/torchvision-check.py --speed --rounds 5    # + 1-thread batch-1 latency vs onnxruntime
    bench/torchvision-check.py --out FILE            # default bench/results/torchvision-check.md

A model name may carry `@OPSET`. Torch runs under Debian's /usr/bin/python3
(this script re-runs itself there with --export); the rest runs under the
python3 that has onnxruntime. Exports are cached in $CONVD_BENCH_CACHE or
~/.cache/convd/torchvision/ (never in the checkout). Exit status 1 when a
model fails to load or differs from PyTorch by more than 1e-4 relative L2.
"""
import argparse
import atexit
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_PY = "/usr/bin/python3"
TOL = 1e-4
SLOW = 1.1  # speed: a model slower than this ratio gets its losing layer named
CONVD_RUN = os.path.join(ROOT, "build/bin/convd-run")  # copied at the start (a rebuild cannot swap it mid-run)
OUT_OF_SCOPE = ("vit_", "swin_", "maxvit")
SEGMENTATION = ("fcn_", "deeplabv3_", "lraspp_")
OPSET17 = ("convnext_tiny", "efficientnet_b0", "mobilenet_v3_large")
# Input sizes: 224 px (the classification models' own size, smaller than
# EfficientNet-B1+'s and EfficientNet-V2's); Inception-v3 at its 299;
# segmentation at 224 and a second, non-square size.
SIZE = {"inception_v3": 299}
SEG_SECOND = (160, 192)
QUICK = ["alexnet", "vgg11", "resnet18", "resnext50_32x4d", "wide_resnet50_2", "densenet121", "squeezenet1_1",
         "googlenet", "inception_v3", "shufflenet_v2_x1_0", "mobilenet_v2", "mobilenet_v3_small", "mnasnet1_0",
         "efficientnet_b0", "efficientnet_v2_s", "regnet_x_400mf", "regnet_y_400mf", "convnext_tiny",
         "convnext_tiny@17", "fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]


# ---- the torch side (runs under /usr/bin/python3) -------------------------------------------------------------
def build_model(name, size):
    """The model with random weights (seed 0) and BN statistics from random inputs, in eval mode."""
    import torch
    import torchvision.models as M

    torch.manual_seed(0)
    seg = name.startswith(SEGMENTATION)
    if seg:
        net = M.get_model(name, weights=None, weights_backbone=None)
    elif name in ("googlenet", "inception_v3"):
        net = M.get_model(name, weights=None, init_weights=True, aux_logits=False)
    else:
        net = M.get_model(name, weights=None)

    class Out(torch.nn.Module):  # segmentation models return {"out": ...}
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)["out"]

    model = Out(net) if seg else net
    # BN statistics from random inputs: cumulative average over a few batches in train mode.
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(3 if bns else 0):
            model(torch.randn(2, 3, size, size))
    return model.eval(), seg


def export_worker(name, opset, size, out_dir):
    import numpy as np
    import torch

    model, seg = build_model(name, size)
    sizes = [(size, size)] + ([SEG_SECOND] if seg else [])
    with torch.no_grad():
        for i, (h, w) in enumerate(sizes):
            x = torch.randn(1, 3, h, w)
            np.save(os.path.join(out_dir, f"in{i}.npy"), x.numpy())
            np.save(os.path.join(out_dir, f"out{i}.npy"), model(x).numpy())
    x = torch.randn(1, 3, size, size)
    axes = {"input": {2: "height", 3: "width"}, "output": {2: "height", 3: "width"}} if seg else None
    path = os.path.join(out_dir, "model.onnx")
    torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"], opset_version=opset,
                      dynamic_axes=axes, do_constant_folding=True)


def f64_worker(name, size, out_dir):
    """The same model (rebuilt: same seed, same statistics) in float64 on the saved inputs: the exact result
    that PyTorch's own float32 and the engines are measured against when they differ by more than TOL."""
    import numpy as np
    import torch

    model, _ = build_model(name, size)
    n = len([f for f in os.listdir(out_dir) if re.fullmatch(r"in\d+\.npy", f)])
    with torch.no_grad():
        x = torch.from_numpy(np.load(os.path.join(out_dir, "in0.npy")))
        same = rel_l2(model(x).numpy(), np.load(os.path.join(out_dir, "out0.npy")))
        if same > 1e-6:
            sys.exit(f"the rebuilt model differs from the exported one ({same:.1e})")
        model.double()
        for i in range(n):
            x = torch.from_numpy(np.load(os.path.join(out_dir, f"in{i}.npy"))).double()
            np.save(os.path.join(out_dir, f"out{i}_f64.npy"), model(x).numpy())


# ---- the convd / onnxruntime side ------------------------------------------------------------------------------
def all_models():
    out = subprocess.run([TORCH_PY, "-c", "import torchvision.models as M\n"
                          "print(' '.join(M.list_models(module=M) + M.list_models(module=M.segmentation)))"],
                         capture_output=True, text=True, check=True).stdout.split()
    names = [n for n in out if not n.startswith(OUT_OF_SCOPE)]
    return names + [f"{n}@17" for n in OPSET17]


def cache_dir():
    return os.environ.get("CONVD_BENCH_CACHE") or os.path.expanduser("~/.cache/convd/torchvision")


def export(name, opset, size):
    d = os.path.join(cache_dir(), f"{name}-op{opset}-{size}px-v1")
    if os.path.exists(os.path.join(d, "done")):
        return d, None
    os.makedirs(d, exist_ok=True)
    r = subprocess.run([TORCH_PY, os.path.abspath(__file__), "--export", name, str(opset), str(size), d],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        return d, "export: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    open(os.path.join(d, "done"), "w").close()
    return d, None


def rel_l2(got, want):
    import numpy as np
    got, want = got.astype(np.float64), want.astype(np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def first_error(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    for l in lines:
        if "error" in l.lower():
            return l.replace("convd-run: ", "")[:160]
    return (lines[-1] if lines else "no output")[:160]


def convd(model, x_path, out_dir, threads):
    import numpy as np
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run([CONVD_RUN, model, "--input", f"input={x_path}",
                        "--output-dir", out_dir, "--threads", str(threads), "--json"], capture_output=True,
                       text=True, errors="replace", timeout=1800)
    if r.returncode != 0:
        return None, first_error(r.stderr + r.stdout)
    return np.load(os.path.join(out_dir, "output.npy")), None


def ort_session(model, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def convd_ms(model, shape, threads, iters):
    r = subprocess.run([CONVD_RUN, model, "--bench", str(iters), "--warmup", "3", "--input-shape",
                        "input=" + "x".join(map(str, shape)), "--threads", str(threads), "--json"],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["bench"]["median_ms"]


def ort_ms(sess, x, iters):
    import numpy as np
    for _ in range(3):
        sess.run(None, {"input": x})
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, {"input": x})
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


def exact_errors(row, d, name, size, outs):
    """When an error is above TOL: each engine's (and PyTorch's float32) distance to the float64 result."""
    import numpy as np
    if not all(os.path.exists(os.path.join(d, f"out{i}_f64.npy")) for i in range(len(outs))):
        r = subprocess.run([TORCH_PY, os.path.abspath(__file__), "--f64", name, str(size), d], capture_output=True,
                           text=True, timeout=3600)
        if r.returncode != 0:
            row["fail"] = "float64 reference: " + (r.stderr.strip().splitlines() or ["?"])[-1]
            return
    worst = {}
    for i, per in enumerate(outs):
        exact = np.load(os.path.join(d, f"out{i}_f64.npy"))
        per = dict(per, pytorch=np.load(os.path.join(d, f"out{i}.npy")))
        for k, v in per.items():
            if v is not None:
                worst[k] = max(worst.get(k, 0.0), rel_l2(v, exact))
    row["exact"] = worst


def check(spec, a):
    import numpy as np
    name, _, op = spec.partition("@")
    opset = int(op or 13)
    size = SIZE.get(name, 224)
    row = {"model": name, "opset": opset, "input": f"{size}", "load": "no", "l2": None, "ort_l2": None,
           "l2_2": None, "fail": ""}
    t0 = time.time()
    d, err = export(name, opset, size)
    if err:
        row["fail"] = err
        return row
    model = os.path.join(d, "model.onnx")
    x = np.load(os.path.join(d, "in0.npy"))
    want = np.load(os.path.join(d, "out0.npy"))
    got, err = convd(model, os.path.join(d, "in0.npy"), os.path.join(d, "convd"), a.threads)
    if err:
        row["fail"] = err
    else:
        row["load"] = "yes"
        row["l2"] = rel_l2(got, want)
    sess = ort_session(model, a.threads)
    ort_y = sess.run(None, {"input": x})[0]
    row["ort_l2"] = rel_l2(ort_y, want)
    outs = [{"convd": got, "ort": ort_y}]
    if name.startswith(SEGMENTATION) and got is not None:
        row["input"] += f", {SEG_SECOND[0]}x{SEG_SECOND[1]}"
        got2, err = convd(model, os.path.join(d, "in1.npy"), os.path.join(d, "convd1"), a.threads)
        x2 = np.load(os.path.join(d, "in1.npy"))
        outs.append({"convd": got2, "ort": sess.run(None, {"input": x2})[0]})
        if err:
            row["fail"] = f"at {SEG_SECOND}: {err}"
        else:
            row["l2_2"] = rel_l2(got2, np.load(os.path.join(d, "out1.npy")))
    if got is not None and max(row["l2"], row["l2_2"] or 0) > TOL:
        exact_errors(row, d, name, size, outs)
    if a.speed and got is not None:
        sess1 = ort_session(model, 1)
        # Runs per round: as many as take ~1.5 s (at least 3), so that the big models fit the time.
        iters = max(3, min(a.iters, int(1500 / max(ort_ms(sess1, x, 1), 1e-3))))
        c, o = [], []
        for _ in range(a.rounds):  # interleaved: convd, ort, convd, ort, ...
            c.append(convd_ms(model, x.shape, 1, iters))
            o.append(ort_ms(sess1, x, iters))
        row["convd_ms"], row["ort_ms"] = float(np.median(c)), float(np.median(o))
        if row["convd_ms"] > SLOW * row["ort_ms"]:
            row["losing"] = losing_layer(model, x.shape, iters)
    row["secs"] = time.time() - t0
    return row


def losing_layer(model, shape, iters):
    """The layer group (bench/model-latency.py's per-layer profiles, 1 thread) where convd loses most time."""
    import importlib.util
    import pathlib
    spec = importlib.util.spec_from_file_location("model_latency", os.path.join(ROOT, "bench/model-latency.py"))
    ml = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ml)
    extra = ["--input-shape", "input=" + "x".join(map(str, shape))]
    with tempfile.TemporaryDirectory() as tmp:
        cp = ml.convd_profile(pathlib.Path(model), 1, 1, 1, iters, 3, {}, extra=extra)
        op = ml.ort_profile(pathlib.Path(model), 1, 1, iters, 3, tmp, shape=list(shape))
    top = ml.merge_profiles(cp, op)[0]
    return (f"{top['layers']} (x{top['convd_n']}): {top['convd_ms']:.1f} vs {top['ort_ms']:.1f} ms "
            f"[{top['convd_kernels']}]")


def status(row):
    """pass: within TOL of PyTorch; float32: further, but no further from the float64 result than PyTorch's
    own float32 (x2): the model, not the engine, amplifies rounding; FAIL otherwise."""
    if row["load"] != "yes" or row["fail"] or row["l2"] is None:
        return "FAIL"
    if max(row["l2"], row["l2_2"] or 0) <= TOL:
        return "pass"
    e = row.get("exact")
    return "float32" if e and e["convd"] <= 2 * e["pytorch"] else "FAIL"


def bad(row):
    return status(row) == "FAIL"


def fmt(v):
    return "" if v is None else f"{v:.1e}"


def exact_cell(row):
    e = row.get("exact")
    return "" if not e else f"{fmt(e.get('convd'))} / {fmt(e.get('ort'))} / {fmt(e['pytorch'])}"


def table(rows, a):
    head = ("| model | opset | input px | loads | rel L2 vs PyTorch | onnxruntime's | 2nd size | status "
            "| vs float64: convd / ort / PyTorch f32 | first failure |")
    sep = "|---|---|---|---|---|---|---|---|---|---|"
    if a.speed:
        head += " convd ms | ort ms | ratio | losing layer group (convd vs ort) |"
        sep += "---|---|---|---|"
    out = [head, sep]
    for r in rows:
        line = (f"| {r['model']} | {r['opset']} | {r['input']} | {r['load']} | {fmt(r['l2'])} | {fmt(r['ort_l2'])} "
                f"| {fmt(r['l2_2'])} | {status(r)} | {exact_cell(r)} | {r['fail'].replace('|', '/')} |")
        if a.speed:
            if "convd_ms" in r:
                line += (f" {r['convd_ms']:.1f} | {r['ort_ms']:.1f} | {r['convd_ms'] / r['ort_ms']:.2f} "
                         f"| {r.get('losing', '')} |")
            else:
                line += " | | | |"
        out.append(line)
    return "\n".join(out)


def header(a):
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    tv = subprocess.run([TORCH_PY, "-c", "import torchvision, torch; print(torchvision.__version__, "
                         "torch.__version__)"], capture_output=True, text=True).stdout.strip()
    return (f"# torchvision check\n\ncommit {commit}, {cpu}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"torchvision/torch {tv}, load average {os.getloadavg()[0]:.2f} at the end.\n"
            f"Command: `bench/torchvision-check.py {' '.join(sys.argv[1:])}`. Random weights, BN statistics "
            f"calibrated on random inputs, batch 1; convd-run and onnxruntime with {a.threads} thread(s) for the "
            f"check" + (f"; speed: 1 thread, median of {a.rounds} interleaved rounds of {a.iters} runs"
                        if a.speed else "") + f". Pass: rel L2 <= {TOL:g}.\n\n")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--export":
        export_worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--f64":
        f64_worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", help="comma-separated; NAME or NAME@OPSET")
    ap.add_argument("--quick", action="store_true", help="one model per family")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--speed", action="store_true", help="1-thread latency vs onnxruntime")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/torchvision-check.md"))
    a = ap.parse_args()
    global CONVD_RUN
    tmp = tempfile.mkdtemp(prefix="tv-check-")
    atexit.register(shutil.rmtree, tmp, True)
    shutil.copy(CONVD_RUN, tmp)
    CONVD_RUN = os.path.join(tmp, "convd-run")
    specs = a.models.split(",") if a.models else QUICK if a.quick else all_models()
    rows = []
    for spec in specs:
        row = check(spec, a)
        rows.append(row)
        print(table([row], a).splitlines()[-1], f"({row.get('secs', 0):.0f} s)", flush=True)
    text = header(a) + table(rows, a) + "\n"
    failed = [f"{r['model']}@{r['opset']}" for r in rows if bad(r)]
    f32 = [f"{r['model']}@{r['opset']}" for r in rows if status(r) == "float32"]
    text += (f"\n{len(rows) - len(failed) - len(f32)} of {len(rows)} within {TOL:g} of PyTorch"
             + (f"; above it but as close to the float64 result as PyTorch's own float32 (x2): {', '.join(f32)}"
                if f32 else "") + (f"; failing: {', '.join(failed)}" if failed else "") + ".\n")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
