"""A small ResNet with our Winograd 3x3 conv forced on (CONVD_WINOGRAD,
backends/cpu/winograd.h) against onnxruntime: every stride-1 3x3 conv plans
on it, at each tile (and on oneDNN's own Winograd where this CPU has it), and
the whole model stays within 1e-4; off plans none."""
import json

import numpy as np
import pytest

from tests.models import builders as B
from tests.models.runner import compare, convd_run


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    d = tmp_path_factory.mktemp("wino-models")
    return B.save(B.resnet18(np.random.default_rng(26), classes=10, size=64, width=0.5), d / "resnet18-small.onnx")


def kernels(model, env):
    r = convd_run(model, ["--info", "--json", "--threads", "1"], env=env)
    return [(l["name"], l["kernel"]) for l in json.loads(r.stdout)["layers"] if l["op"].startswith("Conv")]


@pytest.mark.parametrize("mode", ["f2", "f4", "f6", "on", "onednn"])
def test_resnet_winograd_forced_matches_onnxruntime(resnet, mode, rng, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVD_WINOGRAD", mode)
    ks = kernels(resnet, {"CONVD_WINOGRAD": mode})
    wino = [k for _, k in ks if "wino" in k]
    # ResNet-18 has 13 stride-1 3x3 convs (the stem is 7x7, the downsampling ones stride 2).
    # oneDNN 2.6 has its f32 Winograd on AVX-512 only: under the AVX2 cap it declines all.
    assert len(wino) == 13 or (mode == "onednn" and not wino), ks
    tile = {"f2": "F2x2", "f4": "F4x4", "f6": "F6x6", "onednn": "jit"}.get(mode)
    assert not tile or all(tile in k for k in wino), wino
    for batch in (1, 3):
        compare(resnet, tmp_path, batch, rng, extra=("--max-batch", "3"))


def test_resnet_winograd_off_plans_none(resnet):
    ks = kernels(resnet, {"CONVD_WINOGRAD": "off"})
    assert not any("wino" in k for _, k in ks), ks
