"""Models with symbolic H and W (issue 22, item 3) in convd-run against
onnxruntime: planned at one size at load (--input-shape) and run at that
size and at others (each gets a plan of its own), at batch 1 and 2, on the
fast and the reference kernels; and the refusals."""
import json

import numpy as np
import onnxruntime as ort
import pytest

from tests.models import builders
from tests.models.runner import TOL, convd_run
from tests.models.test_sparse_models import rng  # noqa: F401 (fixture: CD_TEST_SEED fixes the draws)


def run_at(model, tmp_path, sess, shape, load_shape, kernels, rng):
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    p = tmp_path / f"x_{'x'.join(map(str, shape))}.npy"
    np.save(p, x)
    out = tmp_path / f"out_{'x'.join(map(str, shape))}_{kernels}"
    args = ["--input", f"input={p}", "--output-dir", out, "--json"]
    if load_shape:
        args += ["--input-shape", load_shape]
    env = {"CONVD_CPU_KERNELS": kernels} if kernels == "ref" else None
    info = json.loads(convd_run(model, args, env=env).stdout)
    want = sess.run(None, {"input": x})
    for o, w in zip(sess.get_outputs(), want):
        got = np.load(next(e["file"] for e in info["outputs"] if e["name"] == o.name))
        assert got.shape == w.shape, (o.name, got.shape, w.shape)
        err = np.abs(got - w) / np.maximum(1.0, np.abs(w))
        assert err.max() <= TOL, (o.name, shape, float(err.max()))


def three_sizes(model, tmp_path, kernels, rng, lo=9):
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    h0, w0 = 8 * int(rng.integers(3, 6)), 8 * int(rng.integers(3, 6))
    load = f"input=1x3x{h0}x{w0}"
    sizes = [(h0, w0), (h0 + 8 + int(rng.integers(0, 8)), w0), (int(rng.integers(lo, 30)), int(rng.integers(lo, 50)))]
    for batch in (1, 2):
        for h, w in sizes:
            run_at(model, tmp_path, sess, (batch, 3, h, w), load, kernels, rng)
    # No --input-shape: the input file's size is the first plan's.
    run_at(model, tmp_path, sess, (1, 3, sizes[2][0], sizes[2][1]), None, kernels, rng)


@pytest.mark.parametrize("kernels", ["fast", "ref"])
def test_segnet_three_sizes(tmp_path, kernels, rng):
    model = tmp_path / "seg.onnx"
    builders.save(builders.dynamic_hw_segnet(rng), model)
    three_sizes(model, tmp_path, kernels, rng)


@pytest.mark.parametrize("form", ["slice", "gather"])
def test_fcn_head_with_resize_three_sizes(tmp_path, form, rng):
    """A segmentation head whose Resize takes its output size from Shape of
    the input (torchvision's FCN export): each size's plan folds it anew."""
    model = tmp_path / "fcn.onnx"
    builders.save(builders.fcn_head(rng, dynamic=True, form=form), model)
    three_sizes(model, tmp_path, "fast", rng, lo=16)


def test_symbolic_dims_refusals(tmp_path):
    model = tmp_path / "seg.onnx"
    builders.save(builders.dynamic_hw_segnet(np.random.default_rng(1)), model)
    r = convd_run(model, [], check=False)  # random inputs: no size anywhere
    assert r.returncode == 1 and "E_UNSUPPORTED" in r.stderr and "dim 2 is symbolic ('H')" in r.stderr
    r = convd_run(model, ["--input-shape", "input=1x3xHx8"], check=False)
    assert r.returncode == 1 and "E_PARAMS" in r.stderr
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 4, 32, 32), np.float32))  # C is fixed at 3
    r = convd_run(model, ["--input-shape", "1x3x32x32", "--input", f"input={x}"], check=False)
    assert r.returncode == 1 and "E_SHAPE" in r.stderr and "dim 1 must be 3, got 4" in r.stderr
