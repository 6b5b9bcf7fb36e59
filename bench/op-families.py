#!/usr/bin/env python3
"""convd-run against onnxruntime on the model families issue 22 unblocked, as
tests/models/builders.py writes them (no torch): the shapes of torchvision's
densenet121 (stem, dense blocks 1-2, transition), convnext_tiny (stages 1-2,
opset 13 with the LayerNorm/GELU patterns and opset 17 with the op), a
shufflenet_v2_x1_0 stage (116 channels, 28x28, 4 units) and mnasnet1_0's
head; and the segmentation heads of builders.py (fcn_head, lraspp_head,
unet_decoder). Random weights, 224 px, batch 1, interleaved rounds; the best median
of the rounds per engine.

    bench/op-families.py [--threads 1] [--rounds 3] [--iters 30] [--models densenet,convnext13,...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.models import builders as B  # noqa: E402


def densenet(rng):
    g = B.Graph(rng, 13)
    x = g.input("input", [3, 224, 224])
    y = g.conv_bn_relu(x, 3, 64, 7, 2)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y, c = B.densenet_block(g, y, 64, 32, 6)
    y = B.densenet_transition(g, y, c, c // 2)
    y, c = B.densenet_block(g, y, c // 2, 32, 12)
    return g.build([y])


def convnext(rng, opset):
    g = B.Graph(rng, opset)
    x = g.input("input", [3, 224, 224])
    y = B.layernorm2d(g, g.conv(x, 3, 96, 4, stride=4, pad=0), 96)
    for _ in range(3):
        y = B.convnext_block(g, y, 96)
    y = g.conv(B.layernorm2d(g, y, 96), 96, 192, 2, stride=2, pad=0)
    for _ in range(3):
        y = B.convnext_block(g, y, 192)
    return g.build([y])


def shufflenet(rng):
    g = B.Graph(rng, 13)
    x = g.input("input", [116, 28, 28])
    y = x
    for _ in range(4):
        y = B.channel_shuffle(g, B.shufflenet_v2_unit(g, y, 116), 116, 28, 28, 2)
    return g.build([y])


def mnasnet_head(rng):
    g = B.Graph(rng, 13)
    x = g.input("input", [320, 7, 7])
    return g.build([B.mnasnet_head(g, x, 320, 1280, 1000)])


MODELS = {"densenet": densenet, "convnext13": lambda r: convnext(r, 13), "convnext17": lambda r: convnext(r, 17),
          "shufflenet": shufflenet, "mnasnet-head": mnasnet_head}
# The segmentation heads (Resize through Shape/Slice/Concat, ConvTranspose) at 224 px (U-Net 128 px).
MODELS.update({"fcn-head": lambda r: B.fcn_head(r, size=224, classes=21, width=32),
               "lraspp-head": lambda r: B.lraspp_head(r, size=224, classes=21, width=32),
               "unet": lambda r: B.unet_decoder(r, size=128, classes=3, width=32)})


def convd_ms(path, threads, iters):
    r = subprocess.run([os.path.join(ROOT, "build/bin/convd-run"), path, "--bench", str(iters), "--warmup", "5",
                        "--threads", str(threads)], capture_output=True, text=True, check=True)
    return float(re.search(r"median ([0-9.]+) ms", r.stdout).group(1))


def ort_ms(path, threads, iters):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    x = np.random.rand(1, *[int(d) for d in i.shape[1:]]).astype(np.float32)
    for _ in range(5):
        s.run(None, {i.name: x})
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        s.run(None, {i.name: x})
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--models", default=",".join(MODELS))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        print(f"threads {a.threads}, batch 1, best median of {a.rounds} interleaved rounds of {a.iters} runs")
        print(f"{'model':14} {'convd ms':>9} {'ort ms':>9} {'ratio':>6}")
        for name in a.models.split(","):
            path = B.save(MODELS[name](np.random.default_rng(0)), os.path.join(d, name + ".onnx"))
            c, o = [], []
            for _ in range(a.rounds):
                c.append(convd_ms(path, a.threads, a.iters))
                o.append(ort_ms(path, a.threads, a.iters))
            print(f"{name:14} {min(c):9.2f} {min(o):9.2f} {min(c) / min(o):6.2f}")


if __name__ == "__main__":
    main()
