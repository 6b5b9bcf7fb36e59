"""Plans at every instruction-set level this CPU has: no Conv, Gemm or Pool of
the ResNet-50- and MobileNetV2-shaped models (dense, and ResNet-50 pruned to
90%) runs on a reference kernel, and the blocked layout follows the level.

A level is a pair of caps: ONEDNN_MAX_CPU_ISA for oneDNN and CONVD_MAX_ISA for
our own kernels. On an AVX-512 machine that gives avx512 (no caps), avx2 and
scalar (oneDNN at SSE4.1, our kernels portable C); on an AVX2 machine avx2
and scalar. Every level a machine has is checked, so the same test proves on
one AVX-512 machine what an AVX2-only CPU would see."""
import json

import numpy as np
import pytest

from tests.models import builders as B
from tests.models.runner import convd_run
from tests.models.test_sparse_models import prune


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


FLAGS = cpu_flags()
# level -> (environment, our kernels' ISA, the blocked layouts oneDNN may pick)
LEVELS = {
    "avx512": ({"ONEDNN_MAX_CPU_ISA": "ALL", "CONVD_MAX_ISA": "avx512"}, "avx512f", {"NCHW16C"}),
    "avx2": ({"ONEDNN_MAX_CPU_ISA": "AVX2", "CONVD_MAX_ISA": "avx2"}, "avx2", {"NCHW8C"}),
    "scalar": ({"ONEDNN_MAX_CPU_ISA": "SSE41", "CONVD_MAX_ISA": "scalar"}, "scalar", {"NCHW8C"}),
}
HAVE = {"avx512": {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= FLAGS,
        "avx2": {"avx2", "fma"} <= FLAGS, "scalar": True}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("isa-models")
    rng = np.random.default_rng(11)
    r50 = B.save(B.resnet50(rng), d / "resnet50.onnx")
    out = {"resnet50": r50, "mobilenetv2": B.save(B.mobilenetv2(rng), d / "mobilenetv2.onnx")}
    out["resnet50-u90"] = prune(r50, d / "resnet50-u90.onnx", "unstructured", 0.9)
    return out


@pytest.mark.parametrize("level", list(LEVELS))
@pytest.mark.parametrize("model", ["resnet50", "mobilenetv2", "resnet50-u90"])
def test_plan_has_no_reference_kernel(models, level, model, tmp_path):
    if not HAVE[level]:
        pytest.skip(f"this CPU has no {level}")
    env, isa, layouts = LEVELS[level]
    env = dict(env, XDG_CACHE_HOME=str(tmp_path), OMP_WAIT_POLICY="passive")
    if model.endswith("u90"):
        # Sparse kernels wherever they apply, whatever the calibration says
        # (under ASan it prefers dense): their layers and the reorders around
        # them are what this case is for.
        env["CONVD_PLAN"] = "sparse"
    r = convd_run(models[model], ["--info", "--json", "--threads", "1"], env=env)
    info = json.loads(r.stdout)
    assert info["cpu"]["kernels_isa"] == isa, info["cpu"]
    assert info["layout"] in layouts, info["cpu"]
    slow = [(l["name"], l["op"], l["kernel"]) for l in info["layers"] if l["reference"]]
    assert not slow, f"{level}: layers on a reference kernel: {slow}"
    assert not any("ref" in l["kernel"].split(":") for l in info["layers"]), info["layers"]
    assert "reference kernel" not in r.stderr, r.stderr
    # Dense layers run in the level's blocked layout; the sparse ones in NCHW.
    dense = [l for l in info["layers"] if l["kernel"].startswith("dnnl") and l["op"].startswith("Conv")]
    assert all(l["layout"] in layouts | {"NCHW"} for l in dense), [l["layout"] for l in dense]
    if model.endswith("u90"):
        assert any(l["kernel"].startswith("sparse") for l in info["layers"])
    else:
        assert len(dense) > 20 and sum(l["layout"] in layouts for l in dense) >= len(dense) - 2, \
            [l["layout"] for l in dense]
