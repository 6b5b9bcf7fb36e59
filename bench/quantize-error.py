#!/usr/bin/env python3
"""How far a quantized model (convctl quantize's OUT) is from its float32
original, run by onnxruntime on the same random inputs: the relative L2 error
of the output per input (median and max), and whether every zero weight of
the original is still zero in the int8 weights (docs/QUANTIZATION.md).

    bench/quantize-error.py F32.onnx INT8.onnx [--inputs 16] [--seed 1]

Issue 21's bound for the 90%-pruned ResNet-50: relative L2 <= 5e-2, zeros kept.
"""
import argparse

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("f32")
    ap.add_argument("int8")
    ap.add_argument("--inputs", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    m = onnx.load(a.int8)
    onnx.checker.check_model(m, full_check=True)
    s0 = ort.InferenceSession(a.f32, providers=["CPUExecutionProvider"])
    s1 = ort.InferenceSession(a.int8, providers=["CPUExecutionProvider"])
    i = s0.get_inputs()[0]
    shape = [1] + [int(d) for d in i.shape[1:]]
    rng = np.random.default_rng(a.seed)
    errs = []
    for _ in range(a.inputs):
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        y0, y1 = s0.run(None, {i.name: x})[0], s1.run(None, {i.name: x})[0]
        errs.append(float(np.linalg.norm(y0 - y1) / np.linalg.norm(y0)))
    print(f"onnxruntime, {a.inputs} random inputs in [-1, 1]: relative L2 median {np.median(errs):.3g}, "
          f"max {np.max(errs):.3g}")
    f32 = {t.name: numpy_helper.to_array(t) for t in onnx.load(a.f32).graph.initializer}
    q = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    zeros = kept = 0
    for n in m.graph.node:
        w = q.get(n.input[0]) if n.op_type == "DequantizeLinear" else None
        src = f32.get(n.input[0][:-len("_quantized")]) if n.input[0].endswith("_quantized") else None
        if w is not None and src is not None and src.shape == w.shape:
            zeros += int((src == 0).sum())
            kept += int(((src == 0) & (w == 0)).sum())
    print(f"zero weights of the float32 model: {zeros}, still zero in the int8 weights: {kept}")


if __name__ == "__main__":
    main()
