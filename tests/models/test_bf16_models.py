"""The dense float32 convs in bf16 (CONVD_BF16, backends/cpu/dnnl-conv-bf16.c),
an opt-in precision, on a small ResNet and MobileNetV2 against onnxruntime's
float32 run of the same file: `on` plans every plain and depthwise conv in
bf16 where oneDNN runs it natively and shows it as the layer's dtype; the
outputs stay within bf16's error (relative L2 <= 2e-2, the same top class);
`off` plans none and keeps the float32 tolerance. Where the CPU has no bf16
(AVX2, plain AVX-512, or ONEDNN_MAX_CPU_ISA below it), `on` plans float32
and the float32 tolerance holds: that is checked everywhere."""
import json

import numpy as np
import pytest

from tests.models import builders as B
from tests.models.runner import compare, convd_run, random_inputs


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("bf16-models")
    rng = np.random.default_rng(31)
    return {
        "resnet18": B.save(B.resnet18(rng, classes=10, size=64, width=0.5), d / "resnet18-small.onnx"),
        "mobilenetv2": B.save(B.mobilenetv2(rng, classes=10, size=64, width=0.5), d / "mobilenetv2-small.onnx"),
    }


def plan(model, mode):
    r = convd_run(model, ["--info", "--json", "--threads", "1"], env={"CONVD_BF16": mode})
    info = json.loads(r.stdout)
    return info, [l for l in info["layers"] if l["op"].startswith("Conv")]


def native_bf16(info):
    isa = info["cpu"]["dnnl_isa"]
    return "bf16" in isa or "amx" in isa


def run_bf16(model, tmp_path, batch, rng, mode):
    """convd-run's outputs under CONVD_BF16=mode and onnxruntime's float32 ones."""
    sess, feeds = random_inputs(model, batch, rng)
    args = []
    for i, (name, arr) in enumerate(feeds.items()):
        np.save(tmp_path / f"in{i}.npy", arr)
        args += ["--input", f"{name}={tmp_path / f'in{i}.npy'}"]
    out = tmp_path / f"out-{mode}-{batch}"
    r = convd_run(model, args + ["--output-dir", out, "--batch", batch, "--max-batch", 3, "--json"],
                  env={"CONVD_BF16": mode})
    got = {o["name"]: np.load(o["file"]) for o in json.loads(r.stdout)["outputs"]}
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    return got, want


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2"])
def test_bf16_on_plans_bf16_and_stays_within_its_error(models, name, rng, tmp_path):
    info, convs = plan(models[name], "on")
    bf16 = [l for l in convs if l["dtype"] == "bf16"]
    if not native_bf16(info):
        assert not bf16, bf16
        for batch in (1, 3):
            compare(models[name], tmp_path, batch, rng, extra=("--max-batch", "3"))
        pytest.skip(f"bf16 not run: oneDNN runs {info['cpu']['dnnl_isa']} here, without native bf16 "
                    "(float32 planned and checked instead)")
    # Every conv but the depthwise ones (declined: slower in bf16) runs bf16.
    plain = [l for l in convs if l["params"] != l["out_shape"][1] * 10]  # a 3x3 depthwise conv: 9 weights + bias
    assert [l["name"] for l in bf16] == [l["name"] for l in plain], \
        [(l["name"], l["kernel"]) for l in convs if l["dtype"] != "bf16"]
    assert all(l["kernel"].startswith("dnnl:bf16:") for l in bf16)
    for batch in (1, 3):
        got, want = run_bf16(models[name], tmp_path, batch, rng, "on")
        for out, w in want.items():
            g = got[out].astype(np.float64)
            rel = np.linalg.norm(g - w) / np.linalg.norm(w)
            assert 0 < rel <= 2e-2, f"{out}: relative L2 {rel:.3g} against float32 (batch {batch})"
            # The top-1 class is float32's, or one within bf16's error of
            # it: a random model's two best scores can lie closer than that.
            for gi, wi in zip(g.reshape(batch, -1), w.reshape(batch, -1)):
                err = np.abs(gi - wi).max()
                assert wi[gi.argmax()] >= wi.max() - 2 * err, (gi.argmax(), wi.argmax(), err)


def test_bf16_off_plans_none_and_keeps_float32(models, rng, tmp_path):
    _, convs = plan(models["resnet18"], "off")
    assert all(l["dtype"] == "f32" for l in convs), [(l["name"], l["dtype"]) for l in convs]
    compare(models["resnet18"], tmp_path, 2, rng, extra=("--max-batch", "3"))


def test_bf16_auto_takes_it_per_layer(models, rng, tmp_path):
    """auto times each conv's bf16 wirings against its float32 kernel at load:
    any mix is right, and the outputs stay within bf16's error."""
    info, convs = plan(models["mobilenetv2"], "auto")
    assert all(l["dtype"] in ("f32", "bf16") for l in convs)
    assert all((l["dtype"] == "bf16") == l["kernel"].startswith("dnnl:bf16:") for l in convs)
    got, want = run_bf16(models["mobilenetv2"], tmp_path, 2, rng, "auto")
    for out, w in want.items():
        rel = np.linalg.norm(got[out].astype(np.float64) - w) / np.linalg.norm(w)
        assert rel <= 2e-2, f"{out}: relative L2 {rel:.3g}"
