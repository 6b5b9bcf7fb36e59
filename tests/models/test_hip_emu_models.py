"""Whole models on the hip-emu backend (the HIP kernels of backends/hip/ run by
the CPU emulator, backends/hip/backend-hip.c): ResNet- and MobileNet-shaped
models (tests/models/builders.py, small random sizes so emulation stays fast)
run with `convd-run --device hip-emu` and must agree within 1e-4 (relative,
scaled by max(1, |ref|)) with the CPU backend and with onnxruntime, at batch
1 and > 1; a pruned model takes the sparse route (CSR SpMM, the CPU reference
under emulation); the daemon serves a model on hip-emu; and `convd --device
hip` on a machine without an AMD GPU exits 1 at once with the reason.

CD_TEST_HIP_DEVICE=hip:N runs the model tests on a real AMD GPU instead
(bench/gpu-check does); the default is hip-emu."""
import json
import os
import subprocess
import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.integration.daemon_wire import Wire
from tests.models import builders as B
from tests.models.builders import ri
from tests.models.runner import TOL, convd_run, random_inputs
from tests.support import paths
from tests.support.daemon import TestDaemon


DEVICE = os.environ.get("CD_TEST_HIP_DEVICE", "hip-emu")
REAL = DEVICE != "hip-emu"
KPREFIX = "hip:" if REAL else "hip-emu:"  # kernel names are "<backend>:<kernel>"


def resnet(rng):
    return B.resnet50(rng, classes=ri(rng, 5, 40), size=ri(rng, 32, 48), width=0.125)


def mobilenet(rng):
    return B.mobilenetv2(rng, classes=ri(rng, 5, 40), size=ri(rng, 32, 48), width=0.25)


def rel_err(got, want):
    return float((np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))).max())


def run_device(model, tmp_path, feeds, device, batch, env=None, tag=""):
    """Outputs (name -> array) and the --json report of convd-run on device."""
    args = []
    for i, (name, arr) in enumerate(feeds.items()):
        p = tmp_path / f"in{tag}_{i}_b{batch}.npy"
        np.save(p, arr)
        args += ["--input", f"{name}={p}"]
    out = tmp_path / f"out{tag}_{device}_b{batch}"
    r = convd_run(model, args + ["--output-dir", out, "--batch", batch, "--max-batch", 3, "--device", device,
                                 "--json", "--info"], env=env)
    info = json.loads(r.stdout)
    return {o["name"]: np.load(o["file"]) for o in info["outputs"]}, info


def check_model(model, tmp_path, rng, env=None, tag=""):
    """hip-emu vs cpu vs onnxruntime at batch 1 and 3; returns the hip-emu report."""
    for batch in (1, 3):
        sess, feeds = random_inputs(model, batch, rng)
        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        hip, info = run_device(model, tmp_path, feeds, DEVICE, batch, env, tag)
        cpu, _ = run_device(model, tmp_path, feeds, "cpu", batch, env, tag)
        for name, want in ref.items():
            assert hip[name].shape == want.shape
            e_ort, e_cpu = rel_err(hip[name], want), rel_err(hip[name], cpu[name])
            print(f"{os.path.basename(model)} batch {batch} {name}: max |ref| {np.abs(want).max():.3g}, "
                  f"vs onnxruntime {e_ort:.2e}, vs cpu {e_cpu:.2e}")
            assert e_ort <= TOL, f"{name}: hip-emu vs onnxruntime {e_ort:.3g} > {TOL} (batch {batch})"
            assert e_cpu <= TOL, f"{name}: hip-emu vs cpu backend {e_cpu:.3g} > {TOL} (batch {batch})"
            # Also relative to the output's scale (stricter when outputs are small).
            scale = max(float(np.abs(want).max()), 1e-3)
            assert float(np.abs(hip[name] - want).max()) <= TOL * scale, (name, batch, scale)
    return info


@pytest.mark.parametrize("build", [resnet, mobilenet], ids=["resnet", "mobilenet"])
def test_model_on_hip_emu_matches_cpu_and_onnxruntime(build, tmp_path, rng):
    model = B.save(build(rng), tmp_path / f"{build.__name__}.onnx")
    t0 = time.monotonic()
    info = check_model(model, tmp_path, rng)
    print(f"{build.__name__}: {time.monotonic() - t0:.1f} s for both batches on both devices")
    kernels = [layer["kernel"] for layer in info["layers"]]
    assert all(k.startswith(KPREFIX) for k in kernels), kernels
    if build is mobilenet:
        assert KPREFIX + "dwconv" in kernels
    # Weights, constants and the arena live in (emulated) device memory.
    s = info["summary"]
    assert s["device_bytes"] >= s["weight_bytes"] + s["activation_bytes"], s
    assert s["residual_in_place"] == 0, s  # the HIP backend's caps do not allow it


@pytest.mark.parametrize("name", ["densenet", "shufflenet_v2", "shufflenet_v2_slice", "convnext", "convnext_opset17",
                                  "mnasnet_head"])
def test_issue22_families_on_hip_emu(name, tmp_path, rng):
    """Pad/AveragePool, Split/Slice, LayerNorm (op and pattern), GELU and ReduceMean run on the HIP kernels."""
    from tests.models.test_models import MODELS
    model = B.save(MODELS[name](rng), tmp_path / f"{name}.onnx")
    info = check_model(model, tmp_path, rng)
    kernels = [layer["kernel"] for layer in info["layers"]]
    assert all(k.startswith(KPREFIX) for k in kernels), kernels


def test_expand_tile_and_gather_of_activations_on_hip_emu(tmp_path, rng):
    """An SE-style Expand of a pooled [N,C,1,1] to [N,C,H,W], a Tile and a Gather over channels (issue 22,
    second part) on the HIP kernels, the Expand's shape folded from Shape(x)."""
    from onnx import TensorProto
    g = B.Graph(rng, 13)
    c, h, w = ri(rng, 2, 8), ri(rng, 3, 9), ri(rng, 3, 9)
    x = g.input("input", [c, h, w])
    y = g.node("Relu", [g.conv(x, c, c, 3)])
    e = g.node("Expand", [g.node("GlobalAveragePool", [y]), g.node("Shape", [y])])
    z = g.node("Mul", [y, g.node("Sigmoid", [e])])
    idx = rng.integers(-c, c, ri(rng, 1, 6)).astype(np.int64)
    sel = g.node("Gather", [z, g.init(idx, "idx")], axis=1)
    t = g.node("Tile", [sel, g.init(np.array([1, 1, 1, 2], np.int64), "rep")])
    model = B.save(g.build([t]), tmp_path / "shape_ops.onnx")
    info = check_model(model, tmp_path, rng)
    kernels = [layer["kernel"] for layer in info["layers"]]
    assert all(k.startswith(KPREFIX) for k in kernels), kernels
    for k in ("gather", "tile"):
        assert KPREFIX + k in kernels, kernels


def prune_convs(model, rng, frac=0.8, kxk=False):
    """Zeroes frac of the weights of every 1x1 convolution (unstructured), and
    of the k x k ones too when kxk is set."""
    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "Conv" or node.input[1] not in inits:
            continue
        w = numpy_helper.to_array(inits[node.input[1]]).copy()
        if w.shape[2:] != (1, 1) and not kxk:
            continue
        w[rng.random(w.shape) < frac] = 0.0
        inits[node.input[1]].CopyFrom(numpy_helper.from_array(w, node.input[1]))
    return model


def test_pruned_model_takes_the_sparse_route_on_hip_emu(tmp_path, rng):
    model = B.save(prune_convs(resnet(rng), rng), tmp_path / "resnet-pruned.onnx")
    info = check_model(model, tmp_path, rng, env={"CONVD_PLAN": "sparse"}, tag="sp")
    kernels = [layer["kernel"] for layer in info["layers"]]
    assert KPREFIX + ("rocsparse-csr-spmm" if REAL else "csr-spmm-cpu-ref") in kernels, kernels


def test_pruned_model_kxk_layers_take_the_im2col_sparse_route(tmp_path, rng):
    """Pruned 3x3 (and the 7x7 stem) convolutions of a ResNet-50-shaped model
    run as im2col + the CSR SpMM (the CPU reference of it under hip-emu),
    within 1e-4 of the CPU backend and onnxruntime."""
    onnx_model = prune_convs(resnet(rng), rng, kxk=True)
    kxk = {n.name for n in onnx_model.graph.node if n.op_type == "Conv" and
           any(numpy_helper.to_array(i).shape[2:] != (1, 1) for i in onnx_model.graph.initializer
               if i.name == n.input[1])}
    model = B.save(onnx_model, tmp_path / "resnet-pruned-kxk.onnx")
    info = check_model(model, tmp_path, rng, env={"CONVD_PLAN": "sparse"}, tag="kxk")
    route = KPREFIX + ("im2col-rocsparse-csr-spmm" if REAL else "im2col-csr-spmm-cpu-ref")
    layers = [layer for layer in info["layers"] if layer["name"] in kxk]
    assert len(layers) >= 16, (len(layers), sorted(kxk))  # ResNet-50: 16 3x3 convs and the stem
    if REAL:  # rocSPARSE needs >= 16 output pixels per image; smaller ones stay dense
        layers = [layer for layer in layers if layer["out_shape"][2] * layer["out_shape"][3] >= 16]
    # A 3x3 conv (pad 1) on a 1x1 map reads only padding off-centre: the lowering
    # crops it to a 1x1 conv (runtime/lower-conv-taps.c), which takes the 1x1 route.
    cropped = [la for la in layers if la["in_shape"][2] == 1 or la["in_shape"][3] == 1]
    layers = [la for la in layers if la not in cropped]
    assert all(layer["kernel"] == route for layer in layers), [(la["name"], la["kernel"]) for la in layers]
    route_1x1 = KPREFIX + ("rocsparse-csr-spmm" if REAL else "csr-spmm-cpu-ref")
    assert all(la["kernel"] == route_1x1 for la in cropped), [(la["name"], la["kernel"]) for la in cropped]


def test_daemon_serves_a_model_on_hip_emu(tmp_path, rng):
    models = tmp_path / "models"
    models.mkdir()
    model = B.save(mobilenet(rng), models / "mbv2.onnx")
    with TestDaemon(tmp_path, models_dir=models, args=["--device", DEVICE]) as d:
        with Wire.connect(d) as w:
            assert w.result("hello")["device"] == DEVICE
            for batch in (1, 2):
                sess, feeds = random_inputs(model, batch, rng)
                x = feeds["input"]
                resp = w.call("infer", {"model": "mbv2", "inputs": {
                    "input": {"dtype": "f32", "shape": list(x.shape), "data": x.tobytes()}}}, timeout=120)
                assert resp[2] is None, resp[2]
                out = next(iter(resp[3]["outputs"].values()))
                got = np.frombuffer(out["data"], np.float32).reshape(out["shape"])
                want = sess.run(None, feeds)[0]
                assert rel_err(got, want) <= TOL
            # Device memory is reported per model: weights at least, plus the
            # arenas of the workers that ran it.
            entry = w.result("models")["models"][0]
            weights = entry["weight_bytes"]
            assert entry["device_bytes"] >= weights > 0
            assert w.result("stats")["models"]["mbv2"]["device_bytes"] == entry["device_bytes"]
        assert f"--device {DEVICE}: " in d.stderr_text()


def start_convd(tmp_path, device, args=()):
    t0 = time.monotonic()
    r = subprocess.run([paths.binary("convd"), "--socket", str(tmp_path / "s.sock"), "--device", device,
                        *args], capture_output=True, text=True, timeout=60)
    return r, time.monotonic() - t0


@pytest.mark.skipif(REAL or os.path.exists("/dev/kfd"), reason="this machine may have an AMD GPU")
def test_convd_device_hip_without_gpu_exits_1_fast(tmp_path):
    r, secs = start_convd(tmp_path, "hip")
    assert r.returncode == 1, r.stderr
    assert secs < 10, secs
    assert "convd: --device hip: " in r.stderr
    plugin = paths.LIB / "libconvd-hip.so"
    if plugin.exists():  # the real plugin ran its probe against the real HIP runtime
        assert "no AMD GPU found" in r.stderr, r.stderr
    else:
        assert f"cannot load" in r.stderr and "make GPU=hip" in r.stderr, r.stderr
    assert not (tmp_path / "s.sock").exists()


def test_convd_device_hip_plugin_missing_names_the_path(tmp_path):
    missing = tmp_path / "no-such-libconvd-hip.so"
    r, secs = start_convd(tmp_path, "hip:0", ["--hip-plugin", str(missing)])
    assert r.returncode == 1, r.stderr
    assert f"cannot load {missing}" in r.stderr and "make GPU=hip" in r.stderr, r.stderr
    assert secs < 10, secs


def test_convd_device_not_a_device_is_usage_error(tmp_path):
    r, _ = start_convd(tmp_path, "gpu")
    assert r.returncode == 2, r.stderr
    assert "'gpu' is not a device" in r.stderr


def test_default_daemon_links_no_rocm():
    r = subprocess.run(["ldd", paths.binary("convd")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert "amdhip64" not in r.stdout and "rocsparse" not in r.stdout, r.stdout


class ValgrindDaemon(TestDaemon):
    """The default (CPU) daemon under valgrind's memcheck: any invalid access,
    use of uninitialised memory or definite leak makes it exit 99."""
    __test__ = False

    def command(self):
        return ["valgrind", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite",
                "--quiet"] + super().command()


@pytest.mark.skipif(os.environ.get("CONVD_BUILD", "build") != "build",
                    reason="valgrind runs the plain build (ASan builds cannot run under valgrind)")
@pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v valgrind"], capture_output=True).returncode != 0,
                    reason="valgrind not installed")
def test_valgrind_default_daemon_start_requests_sigterm_clean(tmp_path, rng):
    """Measured ~15-25 s on the shared 2-core machine (docs/GPU.md)."""
    models = tmp_path / "m"
    models.mkdir()
    model = B.save(mobilenet(rng), models / "mbv2.onnx")
    t0 = time.monotonic()
    d = ValgrindDaemon(tmp_path, models_dir=models, start_timeout=120)
    d.start()
    failure, step = None, "connect"
    try:
        with Wire.connect(d, timeout=120) as w:
            assert w.result("hello")["device"] == "cpu"
            for batch in (1, 3):
                sess, feeds = random_inputs(model, batch, rng)
                x = feeds["input"]
                step = f"infer at batch {batch}"
                resp = w.call("infer", {"model": "mbv2", "inputs": {
                    "input": {"dtype": "f32", "shape": list(x.shape), "data": x.tobytes()}}}, timeout=120)
                assert resp[2] is None, resp[2]
                out = next(iter(resp[3]["outputs"].values()))
                got = np.frombuffer(out["data"], np.float32).reshape(out["shape"])
                assert rel_err(got, sess.run(None, feeds)[0]) <= TOL
            step = "errors and stats"
            assert w.call("infer", {"model": "nope"})[2]["code"] == "E_NOT_FOUND"
            assert w.call("no-such-method")[2] is not None
            w.result("stats")
    except Exception as e:  # reported below, with what the daemon said
        failure = e
    finally:
        rc = d.stop(timeout=120)
    print(f"valgrind run: {time.monotonic() - t0:.1f} s")
    if failure is not None:
        raise AssertionError(f"{step}: {failure!r} after {time.monotonic() - t0:.1f} s; daemon exit {rc}; "
                             f"its stderr:\n{d.stderr_text()}") from failure
    assert rc == 0, f"exit {rc} (99 = memcheck errors):\n{d.stderr_text()}"
