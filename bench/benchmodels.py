"""The whole-model ONNX files of the benchmarks that share them
(bench/sparse-models.py, bench/anchors.py): generated once from
tests/models/builders.py into a cache outside the checkout, then pruned there
with `convctl prune`. A file's name carries its parameters, so every script
that asks for the same model gets the same file.

    base = model_file(cache_dir(None), "resnet50", 224, 0)
    u90 = pruned_file(base, "u90")
"""
import os
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tests.models import builders  # noqa: E402
from tests.support import paths  # noqa: E402

MODEL_VERSION = 1
MODELS = {"resnet50": builders.resnet50, "resnet18": builders.resnet18, "mobilenetv2": builders.mobilenetv2}
# variant -> (convctl prune --mode, --sparsity, --skip); always --per-layer.
VARIANTS = {
    "u0": ("unstructured", 0.0, "first"), "u30": ("unstructured", 0.3, "first"),
    "u50": ("unstructured", 0.5, "first"), "u70": ("unstructured", 0.7, "first"),
    "u80": ("unstructured", 0.8, "first"), "u90": ("unstructured", 0.9, "first"),
    "u95": ("unstructured", 0.95, "first"), "b90": ("block:4x1", 0.9, "first"),
    "b90x8": ("block:8x1", 0.9, "first"),
    "f30": ("filter", 0.3, "first,Gemm"), "f50": ("filter", 0.5, "first,Gemm"),
}


def _log(msg):
    print(f"[bench-models] {msg}", file=sys.stderr, flush=True)


def cache_dir(arg=None):
    """--cache DIR, else $CONVD_BENCH_CACHE, else ~/.cache/convd/bench-models."""
    return pathlib.Path(arg or os.environ.get("CONVD_BENCH_CACHE")
                        or pathlib.Path.home() / ".cache" / "convd" / "bench-models")


def model_file(cache, name, size, seed, log=_log):
    """The dense model `name` (1000 classes, width 1), generated atomically when missing."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{name}-s{size}-w1-c1000-seed{seed}-v{MODEL_VERSION}.onnx"
    if not path.exists():
        model = MODELS[name](np.random.default_rng(seed), classes=1000, size=size, width=1.0)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        builders.save(model, tmp)
        os.replace(tmp, path)
        log(f"generated {path}")
    return path


def pruned_file(base, variant, log=_log):
    """`base` pruned as VARIANTS[variant] says (convctl prune), next to it; made when missing."""
    mode, s, skip = VARIANTS[variant]
    out = base.with_name(base.stem + f"-{variant}.onnx")
    if not out.exists():
        tmp = out.with_suffix(f".tmp{os.getpid()}.onnx")
        cmd = [paths.binary("convctl"), "prune", str(base), str(tmp), "--mode", mode, "--sparsity", str(s),
               "--per-layer", "--skip", skip]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr}")
        os.replace(tmp, out)
        log(f"pruned {out.name}")
    return out
