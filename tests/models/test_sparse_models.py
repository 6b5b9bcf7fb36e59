"""Pruned whole models through the sparse-aware planner (runtime/compact.c,
runtime/planner.c): models from builders.py pruned with `convctl prune` in
every mode at 0/50/90/99/100% (100%: all-zero layers, the classifier
included) must give

  - convd (auto plan: compaction + cost-model kernel choice) == onnxruntime
    on the same pruned file (relative error <= 1e-4),
  - == convd's dense plan of the same file (CONVD_PLAN=dense: no compaction,
    dense kernels; relative error <= 1e-5),
  - and CONVD_PLAN=sparse (every conv/FC on the sparse kernels, also on the
    portable scalar path) == the dense plan (<= 1e-5),

at batch 1 and at a batch of 2..9. Plus: filter-pruned residual networks
(the Add keeps the union of its branches' channels), zero filters whose bias
is not zero (act(bias) folded into 1x1 consumers, border maps behind
padded ones, kept behind residual Adds),
the planner's choice (dense at 0-30%, sparse at 90%), `convctl plan` output,
--json, --tune and its cache, usage errors. Fresh random shapes and weights
per run (CD_TEST_SEED fixes them)."""
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.models import builders as B
from tests.models.builders import ri
from tests.models.runner import convd_run, random_inputs
from tests.support import paths

TOL_ORT = 1e-4
TOL_DENSE = 1e-5
SPARSITIES = [0.0, 0.5, 0.9, 0.99, 1.0]
MODES = ["unstructured", "filter", "channel", "block:4x1"]


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    """The planner's cache in a private folder, holding a calibration recorded
    on a quiet run of this machine (as tests/unit/test-runtime-planner.c does):
    the plan choices below then test the cost model, not how busy the machine
    is at the moment."""
    xdg = tmp_path_factory.mktemp("xdg")
    write_quiet_calibration(xdg / "convd")
    return {"XDG_CACHE_HOME": str(xdg), "OMP_WAIT_POLICY": "passive"}


# The 16 figures of runtime/planner.c's calib-v7.txt (1 thread, quiet machine,
# recorded before the aligned-shift 3x3 path, whose k x k CSR rate is higher:
# fixed figures, so the plan choices below do not move with the kernels).
QUIET_RATES = ("1.85218e+08 1.8609e+08 1.48969e+07 7.76101e+07 3.68204e+07 2.01581e+06 1.106e+08 "
               "6.61366e+07 5.03632e+06 8.44208e+07 7.15134e+07 4.35097e+06 3.17043e+07 0.001238 "
               "0.000785 0.00079")


def write_quiet_calibration(folder):
    """Three samples (enough that none is measured) for every thread count."""
    cpu = "unknown-cpu"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip().replace("\t", " ").replace("|", " ")
                break
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "calib-v7.txt", "w") as f:
        for threads in range(1, (os.cpu_count() or 1) + 1):
            for _ in range(3):
                f.write(f"{cpu}\t{threads} {QUIET_RATES}\n")


def convctl(*args, check=True, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([paths.binary("convctl"), *map(str, args)], capture_output=True, text=True, timeout=600,
                       env=e)
    assert "Sanitizer" not in r.stderr, r.stderr
    if check:
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def prune(src, dst, mode, sparsity):
    args = ["prune", src, dst, "--mode", mode, "--per-layer"]
    if not mode.startswith("nm:"):
        args += ["--sparsity", sparsity]
    convctl(*args)
    return dst


def run_convd(model, tmp_path, feeds, tag, env):
    args = []
    for i, (name, arr) in enumerate(feeds.items()):
        p = tmp_path / f"in_{tag}_{i}.npy"
        np.save(p, arr)
        args += ["--input", f"{name}={p}"]
    batch = next(iter(feeds.values())).shape[0]
    out_dir = tmp_path / f"out_{tag}"
    r = convd_run(model, args + ["--output-dir", out_dir, "--batch", batch, "--json"], env=env)
    assert "Sanitizer" not in r.stderr, r.stderr
    info = json.loads(r.stdout)
    return {o["name"]: np.load(o["file"]) for o in info["outputs"]}


def rel_err(got, want):
    return float((np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))).max())


def check_model(path, tmp_path, rng, env, batches=None, sparse_isas=("",)):
    """convd auto == ort, auto == dense plan, sparse plan == dense plan; at batch 1 and 2..9.
    The plans are compared at TOL_DENSE, tighter than the f32 bound, with the
    direct dense conv: Winograd's own rounding (~1e-5, within the 1e-4 bound;
    tests/unit/test-winograd.c) is not what this compares."""
    env = {**env, "CONVD_WINOGRAD": "off"}
    for batch in batches or (1, ri(rng, 2, 9)):
        sess, feeds = random_inputs(path, batch, rng)
        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        dense = run_convd(path, tmp_path, feeds, f"d{batch}", {**env, "CONVD_PLAN": "dense"})
        auto = run_convd(path, tmp_path, feeds, f"a{batch}", {**env, "CONVD_PLAN": "auto"})
        for name, want in ref.items():
            assert auto[name].shape == want.shape
            e = rel_err(auto[name], want)
            assert e <= TOL_ORT, f"{path}: {name} auto vs onnxruntime {e:.3g} (batch {batch})"
            e = rel_err(auto[name], dense[name])
            assert e <= TOL_DENSE, f"{path}: {name} auto vs dense plan {e:.3g} (batch {batch})"
        for isa in sparse_isas:
            e2 = {**env, "CONVD_PLAN": "sparse"}
            if isa:
                e2["CONVD_MAX_ISA"] = isa
            sp = run_convd(path, tmp_path, feeds, f"s{batch}{isa}", e2)
            for name in ref:
                e = rel_err(sp[name], dense[name])
                assert e <= TOL_DENSE, f"{path}: {name} sparse plan ({isa or 'best'}) vs dense plan {e:.3g}"


def small_net(rng):
    """Stem, a basic and a bottleneck residual block (projection, stride 2),
    an inverted residual (depthwise, ReLU6), a fire module (concat), a
    squeeze-excitation block, a 1x1 conv and an FC head."""
    g = B.Graph(rng)
    c, h = ri(rng, 8, 20), ri(rng, 9, 16)
    x = g.input("x", [3, h, h + ri(rng, 0, 3)])
    y = g.conv_bn_relu(x, 3, c, 3)
    y = B.resnet_basic(g, y, c, c)
    y = B.resnet_bottleneck(g, y, c, ri(rng, 4, 12), 2 * c, 2)
    y = B.mbv2_inverted(g, y, 2 * c, 2 * c, expand=2)
    e1, e3 = ri(rng, 4, 12), ri(rng, 4, 12)
    y = B.squeeze_fire(g, y, 2 * c, ri(rng, 4, 10), e1, e3)  # channel concat after compaction
    y = B.se_block(g, y, e1 + e3)                              # broadcast Mul: its channels stay
    y = g.conv_bn_relu(y, e1 + e3, 3 * c, 1)
    y = B.fc_head(g, y, 3 * c, ri(rng, 5, 20), softmax=False)
    return g.build([y])


@pytest.mark.parametrize("mode", MODES)
def test_pruned_models_match_onnxruntime_and_dense_plan(mode, tmp_path, rng, cache_env):
    src = B.save(small_net(rng), tmp_path / "m.onnx")
    for s in SPARSITIES:
        dst = prune(src, tmp_path / f"m-{s}.onnx", mode, s)
        check_model(dst, tmp_path, rng, cache_env)


def test_nm_pruned_model_and_portable_sparse_path(tmp_path, rng, cache_env):
    src = B.save(small_net(rng), tmp_path / "m.onnx")
    dst = prune(src, tmp_path / "m-24.onnx", "nm:2:4", None)
    check_model(dst, tmp_path, rng, cache_env, sparse_isas=("", "scalar"))
    dst = prune(src, tmp_path / "m-90.onnx", "unstructured", 0.9)
    check_model(dst, tmp_path, rng, cache_env, batches=(ri(rng, 1, 9),), sparse_isas=("scalar", "avx2"))


def plan_json(model, *extra, env=None):
    r = convctl("plan", model, "--json", "--runs", "2", *extra, env=env)
    return json.loads(r.stdout)


def weighted(plan):
    return [l for l in plan["layers"] if l["weighted"]]


def test_filter_pruned_residual_network_keeps_union_and_compacts(tmp_path, rng, cache_env):
    g = B.Graph(rng)
    c = ri(rng, 12, 24)
    x = g.input("x", [3, 12, 12])
    y = g.conv_bn_relu(x, 3, c, 3)
    for _ in range(ri(rng, 2, 3)):
        y = B.resnet_bottleneck(g, y, c, ri(rng, 6, 12), c)
    y = B.resnet_bottleneck(g, y, c, 8, 2 * c, 2)
    y = B.fc_head(g, y, 2 * c, 7, softmax=False)
    src = B.save(g.build([y]), tmp_path / "r.onnx")
    dst = prune(src, tmp_path / "r-f50.onnx", "filter", 0.5)
    check_model(dst, tmp_path, rng, cache_env)
    plan = plan_json(dst, env=cache_env)
    assert plan["total"]["compacted_layers"] > 0
    # Inner bottleneck convs lost filters; the output keeps its shape (checked vs ort above).
    shrunk = [l for l in weighted(plan) if l["compaction"]]
    assert any(l["out_shape"][1] < l["in_shape"][1] or "filters" in l["compaction"] for l in shrunk)
    assert plan["total"]["flops_skipped"] > 0.2 * plan["total"]["flops_dense"]


def bias_model(rng, c, k, zero, biases, h=6):
    """conv A (3x3, pad 1, k filters, `zero` of them all-zero with the given
    biases) -> Relu -> {B: 1x1 no pad, C: 3x3 pad 1} -> Add -> D (1x1) with a
    residual Add of A's output -> Relu."""
    def init(name, arr):
        return numpy_helper.from_array(np.asarray(arr, np.float32), name)
    wa = rng.normal(0, 0.5, (k, c, 3, 3))
    ba = rng.uniform(-0.5, 0.5, k)
    for i, (z, b) in enumerate(zip(zero, biases)):
        wa[z] = 0
        ba[z] = b
    wb, bb = rng.normal(0, 0.3, (k, k, 1, 1)), rng.uniform(-0.2, 0.2, k)
    wc, bc = rng.normal(0, 0.2, (k, k, 3, 3)), rng.uniform(-0.2, 0.2, k)
    wd, bd = rng.normal(0, 0.3, (k, k, 1, 1)), rng.uniform(-0.2, 0.2, k)
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["a0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a0"], ["a"]),
        helper.make_node("Conv", ["a", "wb", "bb"], ["b"]),
        helper.make_node("Conv", ["a", "wc", "bc"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["b", "c"], ["bc_sum"]),
        helper.make_node("Conv", ["bc_sum", "wd", "bd"], ["d"]),
        helper.make_node("Add", ["d", "a"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "bias", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", k, h, h])],
        [init("wa", wa), init("ba", ba), init("wb", wb), init("bb", bb), init("wc", wc), init("bc", bc),
         init("wd", wd), init("bd", bd)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_bias_on_dropped_filter_folds_or_stays(tmp_path, rng, cache_env):
    # A's zero filters feed a 1x1 consumer (act(bias) folds into its bias), a
    # padded 3x3 (it gets a border map) and a residual (the channels stay).
    c, k = ri(rng, 2, 6), ri(rng, 8, 16)
    zero = list(rng.choice(k, 4, replace=False))
    biases = [0.7, -0.3, 0.4, -0.9]
    m = bias_model(rng, c, k, zero, biases)
    onnx.checker.check_model(m)
    path = str(tmp_path / "bias.onnx")
    onnx.save(m, path)
    check_model(path, tmp_path, rng, cache_env)
    # Without the residual Add the union no longer pins A's channels.
    m2 = bias_model(rng, c, k, zero, biases)
    del m2.graph.node[6:]
    m2.graph.node.append(helper.make_node("Relu", ["d"], ["y"]))
    path2 = str(tmp_path / "bias2.onnx")
    onnx.save(m2, path2)
    check_model(path2, tmp_path, rng, cache_env)
    plan = plan_json(path2, "--plan", "compact", env=cache_env)
    a = weighted(plan)[0]
    assert a["structure"]["zero_filters"] == 4
    # The two relu(negative bias) = 0 planes are gone; the two positive ones fold
    # into B's bias (1x1) and into a border map after C (3x3, padded).
    assert a["out_shape"][1] == k - 4, a
    assert sum(l["op"].startswith("BorderMap") for l in plan["layers"]) == 1
    # With the residual Add, A's channels are tied to D's live output: all stay.
    a = weighted(plan_json(path, "--plan", "compact", env=cache_env))[0]
    assert a["out_shape"][1] == k, a
    # All consumers 1x1 without padding: every constant plane folds into their biases.
    m3 = bias_model(rng, c, k, zero, biases)
    m3.graph.node[3].CopyFrom(helper.make_node("Conv", ["a", "wb", "bb"], ["c"]))
    del m3.graph.node[6:]
    m3.graph.node.append(helper.make_node("Relu", ["d"], ["y"]))
    path3 = str(tmp_path / "bias3.onnx")
    onnx.save(m3, path3)
    check_model(path3, tmp_path, rng, cache_env)
    a = weighted(plan_json(path3, "--plan", "compact", env=cache_env))[0]
    assert a["out_shape"][1] == k - 4, a


def wide_net(rng):
    """Three layers big enough for the sparse kernels to pay: 1x1, 3x3, 1x1."""
    g = B.Graph(rng)
    x = g.input("x", [128, 14, 14])
    y = g.relu(g.conv(x, 128, 256, 1))
    y = g.relu(g.conv(y, 256, 256, 3))
    y = g.conv(y, 256, 256, 1)
    return g.build([y])


def test_planner_dense_at_low_sparsity_sparse_at_90(tmp_path, rng, cache_env):
    # At 1 thread: at 2, 1x1 sparse layers on 14x14 planes scaled ~1.3x in a
    # per-layer profile where oneDNN's 1x1 scale ~2x (ResNet-50 u90, this
    # machine), so at 90% they sit near the break-even and the calibrated
    # choice follows the noise (it failed 1 run in ~8 in CI).
    src = B.save(wide_net(rng), tmp_path / "w.onnx")
    for s in (0.0, 0.3):
        dst = prune(src, tmp_path / f"w-{s}.onnx", "unstructured", s)
        plan = plan_json(dst, "--threads", "1", env=cache_env)
        assert plan["total"]["sparse_layers"] == 0, s
        assert all(l["kernel"].startswith("dnnl") for l in weighted(plan))
    dst = prune(src, tmp_path / "w-0.9.onnx", "unstructured", 0.9)
    plan = plan_json(dst, "--threads", "1", env=cache_env)
    # Under make SAN=1 our sparse kernels run instrumented and oneDNN does not:
    # the calibrated model then rightly prefers dense; the choice is not checked.
    if os.environ.get("CONVD_BUILD", "build") != "build-san":
        assert plan["total"]["sparse_layers"] >= 2, [l["kernel"] for l in weighted(plan)]
    for l in weighted(plan):
        if l["sparse"]:
            assert l["kernel"].startswith("sparse:")
            assert l["pred_ms"] is not None and l["pred_ms"] < l["pred_dense_ms"]
            assert l["flops_skipped"] > 0.85 * l["flops_dense"]
    check_model(dst, tmp_path, rng, cache_env, batches=(1,))


def test_convctl_plan_table_json_and_tune_cache(tmp_path, rng, cache_env):
    src = B.save(small_net(rng), tmp_path / "m.onnx")
    dst = prune(src, tmp_path / "m-90.onnx", "block:4x1", 0.9)
    r = convctl("plan", dst, "--runs", "3", "--batch", "2", "--vs-dense", env=cache_env)
    out = r.stdout
    for col in ("layer", "density", "structure", "kernel", "pred ms", "meas ms", "skipped"):
        assert col in out
    assert "total:" in out and "measured" in out and "dense plan" in out
    plan = plan_json(dst, "--batch", "3", env=cache_env)
    assert plan["batch"] == 3
    w = weighted(plan)
    assert w and all(l["measured_ms"] is not None for l in w)
    assert any(l["structure"]["best_block"] and l["structure"]["best_block"]["h"] >= 4 for l in w[1:])
    assert plan["total"]["flops_dense"] >= plan["total"]["flops_run"]
    # --tune: every candidate measured once, then read back from the cache.
    cache = tmp_path / "tc"
    t1 = plan_json(dst, "--tune", "--tune-cache", cache, env=cache_env)
    assert (cache / "tune-v5.txt").exists()
    n1 = len((cache / "tune-v5.txt").read_text().splitlines())
    tuned = [l for l in weighted(t1) if l["tuned_ms"] is not None]
    assert tuned and n1 >= 1
    plan_json(dst, "--tune", "--tune-cache", cache, env=cache_env)
    assert len((cache / "tune-v5.txt").read_text().splitlines()) == n1
    # Usage and load errors.
    assert convctl("plan", check=False).returncode == 2
    assert convctl("plan", dst, "--plan", "fast", check=False).returncode == 2
    assert convctl("plan", dst, "--batch", "0", check=False).returncode == 2
    r = convctl("plan", tmp_path / "missing.onnx", check=False)
    assert r.returncode == 1 and "E_IO" in r.stderr


def test_daemon_tune_flag_plans_with_measurements(tmp_path, rng, cache_env):
    """convd --tune on --tune-cache DIR: models loaded at start are tuned (the
    cache fills) and answer like onnxruntime."""
    import convd
    from tests.support.daemon import TestDaemon

    models = tmp_path / "models"
    models.mkdir()
    src = B.save(small_net(rng), tmp_path / "m.onnx")
    prune(src, models / "m90.onnx", "unstructured", 0.9)
    cache = tmp_path / "tc"
    with TestDaemon(models_dir=models, args=["--tune", "on", "--tune-cache", str(cache), "--threads", "1"],
                    env=cache_env) as d:
        sess, feeds = random_inputs(models / "m90.onnx", 2, rng)
        want = sess.run(None, feeds)[0]
        with convd.Client(d.socket) as c:
            got = c.infer("m90", feeds)
        got = next(iter(got.values())) if isinstance(got, dict) else got[0]
        assert rel_err(np.asarray(got), want) <= TOL_ORT
    assert (cache / "tune-v5.txt").exists() and (cache / "tune-v5.txt").read_text().strip()
    r = subprocess.run([paths.binary("convd"), "--tune", "maybe"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "tune" in r.stderr


def test_grouped_conv_off_onednn_jit_is_timed_at_load(tmp_path, rng):
    """A dense grouped conv whose groups are not whole blocks of channels
    (RegNet's groups of 8 at a block of 16; oneDNN 2.6 runs it on its gemm
    path; here 4, 12 or 20 channels, whole blocks of neither 8 nor 16) is timed
    against the sparse kernels at load without --tune (the tune cache gains a
    line for it, once), and the model answers like onnxruntime whichever wins.
    Measured calibration, not QUIET_RATES: the timing is the point."""
    g = B.Graph(rng)
    gw = int(rng.choice([4, 12, 20]))
    groups = ri(rng, 2, 6)
    c, h = gw * groups, ri(rng, 9, 20)
    x = g.input("x", [c, h, h + ri(rng, 0, 3)])
    y = g.conv_bn_relu(x, c, c, 3, stride=ri(rng, 1, 2), group=groups)
    y = g.conv_bn_relu(y, c, c, 1)
    y = g.conv_bn_relu(y, c, c, 3, group=groups)
    path = B.save(g.build([y]), tmp_path / "grouped.onnx")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    plan = plan_json(path, env=env)
    tune = tmp_path / "xdg" / "convd" / "tune-v5.txt"
    lines = tune.read_text().splitlines()
    assert sum(" g%d " % groups in l for l in lines) >= 1, lines  # the grouped convs were timed
    for l in weighted(plan):
        if l["in_shape"][1] == c and l["tuned_ms"] is not None:
            assert l["tuned_dense_ms"] > 0 and l["tuned_sparse_ms"] > 0
            assert not l["sparse"] or l["tuned_sparse_ms"] * 1.05 < l["tuned_dense_ms"]
    plan_json(path, env=env)
    assert len(tune.read_text().splitlines()) == len(lines)  # read back, not timed again
    check_model(path, tmp_path, rng, env, batches=(1, ri(rng, 2, 5)))


def test_tall_matmul_pruned_runs_sparse_and_is_timed_at_load(tmp_path, rng):
    """A ConvNeXt-style pointwise MLP: MatMuls over a [N, H, W, C] tensor (a
    Gemm of H*W rows per item), pruned to 80/100%: the sparse FC kernel takes
    any number of rows (16 at a time), the planner times such a Gemm at load
    (its cost model's Gemm rates are those of one row), and every plan answers
    like onnxruntime, at batch 1 and more (0% is test_pruned_models_... 's)."""
    g = B.Graph(rng)
    c, h = ri(rng, 8, 40), ri(rng, 3, 12)
    x = g.input("x", [c, h, h + ri(rng, 0, 3)])
    y = g.node("Transpose", [x], perm=[0, 2, 3, 1])
    w1 = g.init(rng.normal(0, 0.3, (c, 4 * c)).astype(np.float32))
    y = g.node("MatMul", [y, w1])
    y = g.node("Add", [y, g.init(rng.normal(0, 0.1, (4 * c,)).astype(np.float32))])
    y = g.relu(y)
    w2 = g.init(rng.normal(0, 0.3, (4 * c, c)).astype(np.float32))
    y = g.node("MatMul", [y, w2])
    y = g.node("Transpose", [y], perm=[0, 3, 1, 2])
    src = B.save(g.build([y]), tmp_path / "mlp.onnx")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    for s in (0.8, 1.0):
        dst = prune(src, tmp_path / f"mlp-{s}.onnx", "unstructured", s)
        plan = plan_json(dst, env=env)
        tall = [l for l in weighted(plan) if l["op"] in ("Gemm", "MatMul")]
        assert len(tall) == 2, plan["layers"]
        if s == 0.8:
            for l in tall:  # timed at load, not predicted
                assert l["tuned_dense_ms"] > 0 and l["tuned_sparse_ms"] > 0, l
                assert l["sparse"] == (l["tuned_sparse_ms"] * 1.05 < l["tuned_dense_ms"]), l
        check_model(dst, tmp_path, rng, env, batches=(1, ri(rng, 2, 4)))
