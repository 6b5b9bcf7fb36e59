"""Whole MobileNetV2 (tests/models/builders.py) with our depthwise 3x3 kernel
forced onto every depthwise layer (CONVD_DW3X3=on; by default it is kept only
where it timed faster than oneDNN at load), at each vector ISA level this CPU
has: equal to onnxruntime within 1e-4 at batches 1 and 3, and the plan names
the kernel ("dnnl:dw3x3:avx512f" in nChw16c, "dnnl:dw3x3:avx2" in nChw8c)."""
import json

import numpy as np
import pytest

from tests.models import builders as B
from tests.models.runner import convd_run
from tests.models.test_isa_levels import HAVE, LEVELS

TOL = 1e-4


@pytest.mark.parametrize("level", ["avx512", "avx2"])
def test_mobilenetv2_with_dw3x3_matches_onnxruntime(level, rng, tmp_path):
    import onnxruntime as ort
    if not HAVE[level]:
        pytest.skip(f"this CPU has no {level}")
    env = dict(LEVELS[level][0], CONVD_DW3X3="on", XDG_CACHE_HOME=str(tmp_path), OMP_WAIT_POLICY="passive")
    path = B.save(B.mobilenetv2(rng, classes=10, size=64, width=0.5), tmp_path / "mbv2.onnx")
    info = json.loads(convd_run(path, ["--info", "--json", "--threads", "1"], env=env).stdout)
    dw = [l["kernel"] for l in info["layers"] if "dw3x3" in l["kernel"]]
    assert len(dw) == 17 and all(k.endswith(LEVELS[level][1]) for k in dw), [l["kernel"] for l in info["layers"]]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    for batch in (1, 3):
        x = rng.uniform(-1, 1, (batch, 3, 64, 64)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        convd_run(path, ["--input", f"{name}={tmp_path / 'x.npy'}", "--output", tmp_path / "y.npy", "--threads",
                         "1"], env=env)
        got, want = np.load(tmp_path / "y.npy"), sess.run(None, {name: x})[0]
        assert got.shape == want.shape
        err = (np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))).max()
        assert err <= TOL, f"{level} batch {batch}: max relative error {err:.3g}"
