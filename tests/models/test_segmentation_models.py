"""Segmentation heads (tests/models/builders.py: fcn_head, lraspp_head,
unet_decoder) on fresh random sizes: Resize (bilinear to the input size
through Shape/Slice/Concat as torchvision exports it, nearest 2x) and
ConvTranspose, compared with onnxruntime at batch 1 and > 1 on the fast and
the reference CPU kernels (max relative error <= 1e-4 and relative L2 <=
1e-4), and on hip-emu against the CPU backend and onnxruntime."""
import os
import random

import numpy as np
import pytest

from tests.models import builders as B
from tests.models.runner import compare, convd_run, random_inputs
from tests.models.test_hip_emu_models import KPREFIX, check_model, run_device


@pytest.fixture
def rng():
    seed = int(os.environ.get("CD_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def ri(rng, lo, hi):
    return int(rng.integers(lo, hi + 1))


MODELS = {
    "fcn": lambda rng: B.fcn_head(rng, size=ri(rng, 24, 40), classes=ri(rng, 2, 9)),
    "fcn_gather": lambda rng: B.fcn_head(rng, size=ri(rng, 24, 40), classes=ri(rng, 2, 9), form="gather"),
    "fcn_opset11": lambda rng: B.fcn_head(rng, size=ri(rng, 24, 40), opset=11),
    "fcn_opset18": lambda rng: B.fcn_head(rng, size=ri(rng, 24, 40), opset=18),
    "lraspp": lambda rng: B.lraspp_head(rng, size=ri(rng, 24, 40), classes=ri(rng, 2, 9)),
    "unet": lambda rng: B.unet_decoder(rng, size=4 * ri(rng, 6, 10), classes=ri(rng, 2, 5)),
}


def rel_l2(model, tmp_path, rng, device="cpu"):
    sess, feeds = random_inputs(model, 2, rng)
    want = sess.run(None, feeds)[0]
    got, _ = run_device(model, tmp_path, feeds, device, 2, tag="l2")
    got = next(iter(got.values()))
    return float(np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want), 1e-30))


@pytest.mark.parametrize("kernels", [None, "ref"], ids=["fast", "ref"])
@pytest.mark.parametrize("name", list(MODELS))
def test_segmentation_head_matches_onnxruntime(name, kernels, rng, tmp_path):
    model = B.save(MODELS[name](rng), tmp_path / f"{name}.onnx")
    for batch in (1, ri(rng, 2, 3)):
        compare(model, tmp_path, batch, rng, kernels=kernels)
    if kernels is None:
        e = rel_l2(model, tmp_path, rng)
        print(f"{name}: relative L2 {e:.2e}")
        assert e <= 1e-4


@pytest.mark.parametrize("name", ["fcn", "lraspp", "unet"])
def test_segmentation_head_on_hip_emu(name, rng, tmp_path):
    model = B.save(MODELS[name](rng), tmp_path / f"{name}.onnx")
    info = check_model(model, tmp_path, rng)
    kernels = [layer["kernel"] for layer in info["layers"]]
    assert all(k.startswith(KPREFIX) for k in kernels), kernels
    assert KPREFIX + "resize" in kernels
    if name == "unet":
        assert KPREFIX + "deconv" in kernels
    assert rel_l2(model, tmp_path, rng, "hip-emu") <= 1e-4


def test_segmentation_kernels_on_cpu(rng, tmp_path):
    """The CPU runs Resize on its tables and ConvTranspose on oneDNN (not the reference loops)."""
    model = B.save(MODELS["unet"](rng), tmp_path / "unet.onnx")
    import json
    layers = json.loads(convd_run(model, ["--info", "--json"]).stdout)["layers"]
    kinds = {l["kernel"] for l in layers}
    assert "resize-tables" in kinds, kinds
    deconv = [l["kernel"] for l in layers if "ConvTranspose" in l["op"]]
    assert deconv and all(k.startswith("dnnl:") for k in deconv), (deconv, layers[:3])
    assert all(l["flops"] > 0 and l["params"] > 0 for l in layers if "ConvTranspose" in l["op"])
