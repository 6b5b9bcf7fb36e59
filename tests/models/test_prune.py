"""convctl prune (offline magnitude pruning, sparse/prune.h): every mode writes a
model onnxruntime loads and runs; a 0% copy computes exactly what the original
does; the per-layer sparsity printed (table and --json) is what numpy measures
in the written file; the structure of each mode holds in the file; skip rules;
error cases and exit codes (2 usage, 1 failure). Runs under CONVD_BUILD=build-san
too (ASan/LSan fail the process on any leak or bad access)."""
import json
import os
import re
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.models import builders as B
from tests.support import paths

MODES = ["unstructured", "filter", "filter:l1", "channel", "channel:l1", "block:4x1", "block:2x3", "nm:2:4",
         "nm:1:3"]


def prune(*args, check=True):
    r = subprocess.run([paths.binary("convctl"), "prune", *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    assert "Sanitizer" not in r.stderr, r.stderr
    if check:
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def mixed_model(rng, c=16):
    """Stem conv, a ResNet basic block, an inverted residual (depthwise), a
    grouped conv (the last conv), Gemm with B as [K, N], MatMul X @ W, Gemm
    with transB."""
    g = B.Graph(rng)
    x = g.input("x", [3, 12, 12])
    y = g.conv_bn_relu(x, 3, c, 3)
    y = B.resnet_basic(g, y, c, c)
    y = B.mbv2_inverted(g, y, c, 24, expand=2, stride=2)
    y = g.relu(g.conv(y, 24, 24, 3, group=3))
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y])], axis=1)
    y = g.relu(g.gemm(y, 24, 20, trans_b=False))
    w = g.init(rng.normal(0, 0.3, (20, 12)).astype(np.float32))
    y = g.node("MatMul", [y, w])
    y = g.gemm(y, 12, 5)
    return g.build([y])


def save(model, path):
    return B.save(model, path)


def weights(path):
    """{initializer name: array} of a model file (external data resolved)."""
    m = onnx.load(str(path))
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def canonical(model, layer, arr):
    """The [out, in*k] matrix of a layer's weight as sparse/prune.h sees it."""
    node = next(n for n in model.graph.node if (n.name or n.output[0]) == layer["name"])
    if node.op_type == "Conv":
        return arr.reshape(arr.shape[0], -1)
    if node.op_type == "Gemm":
        tb = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return arr if tb else arr.T
    return arr.T if node.input[1] == layer["weight"] else arr  # MatMul X @ W or W @ X


def run_ort(path, feeds):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def feeds_for(path, rng, batch=2):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return {i.name: rng.uniform(-1, 1, [batch] + list(i.shape[1:])).astype(np.float32) for i in s.get_inputs()}


def check_structure(mode, w, o, groups):
    """Asserts the structure of mode in the pruned canonical matrix w (o: the
    original). Returns (units, zero units) as convctl counts them."""
    k, cols = w.shape
    kpg = k // groups
    changed = w != o
    assert np.all(w[changed] == 0), "a weight changed to a nonzero value"
    if mode == "unstructured":
        return w.size, int((w == 0).sum())
    if mode.startswith("filter"):
        rows_zero = np.all(w == 0, axis=1)
        assert np.all(rows_zero | np.all(w == o, axis=1)), "a filter is partly pruned"
        return k, int(rows_zero.sum())
    if mode.startswith("block:"):
        bh, bw = map(int, mode[6:].split("x"))
        units = zero = 0
        for g in range(groups):
            for r0 in range(0, kpg, bh):
                for c0 in range(0, cols, bw):
                    blk = w[g * kpg + r0:g * kpg + min(r0 + bh, kpg), c0:c0 + bw]
                    orig = o[g * kpg + r0:g * kpg + min(r0 + bh, kpg), c0:c0 + bw]
                    units += 1
                    if np.all(blk == 0):
                        zero += 1
                    else:
                        assert np.array_equal(blk, orig), "a block is partly pruned"
        return units, zero
    if mode.startswith("nm:"):
        n, m = map(int, mode[3:].split(":"))
        units = 0
        for c0 in range(0, cols, m):
            run = w[:, c0:c0 + m]
            keep = min(n, run.shape[1])
            assert np.all((run != 0).sum(axis=1) == keep), "an N:M run keeps the wrong count"
            units += k
        return units, units
    raise AssertionError(mode)


def check_channels(w, o, groups, cpg, ksize):
    """Channel mode: every (group, input channel) slice is all zero or untouched."""
    k = w.shape[0]
    kpg = k // groups
    w4 = w.reshape(groups, kpg, cpg, ksize)
    o4 = o.reshape(groups, kpg, cpg, ksize)
    zero = np.all(w4 == 0, axis=(1, 3))
    same = np.all(w4 == o4, axis=(1, 3))
    assert np.all(zero | same), "an input channel is partly pruned"
    return groups * cpg, int(zero.sum())


def parse_table(out):
    """{layer: (params, before %, after %, structure)} from the human table."""
    rows = {}
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("layer"))
    for ln in lines[head + 1:]:
        if not ln.strip() or ln.startswith("total"):
            break
        cells = re.split(r"\s{2,}", ln.strip())
        assert len(cells) == 7, cells
        rows[cells[0]] = (int(cells[3]), float(cells[4].rstrip("%")), float(cells[5].rstrip("%")), cells[6])
    total = next(ln for ln in lines if ln.startswith("total"))
    m = re.match(r"total\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%", total)
    assert m, total
    return rows, (int(m.group(1)), float(m.group(2)), float(m.group(3)))


# ---- every mode ------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["global", "per-layer"])
@pytest.mark.parametrize("mode", MODES)
def test_mode_writes_runnable_model_with_measured_sparsity(rng, tmp_path, mode, scope):
    src = save(mixed_model(rng), tmp_path / "in.onnx")
    dst = tmp_path / "out.onnx"
    s = round(float(rng.uniform(0.3, 0.85)), 4)  # what the command line carries
    args = [src, dst, "--mode", mode, "--json"]
    if not mode.startswith("nm:"):
        args += ["--sparsity", repr(s)]
    if scope == "per-layer":
        args.append("--per-layer")
    info = json.loads(prune(*args).stdout)
    assert info["mode"] in (mode, mode + ":l2")
    assert info["scope"] == scope

    model = onnx.load(str(dst))
    onnx.checker.check_model(model)
    before, after = weights(src), weights(dst)
    feeds = feeds_for(dst, rng)
    out = run_ort(dst, feeds)
    assert all(np.all(np.isfinite(o)) for o in out)
    assert out[0].shape == run_ort(src, feeds)[0].shape

    total = zeros = 0
    for layer in info["layers"]:
        w, o = after[layer["weight"]], before[layer["weight"]]
        assert list(w.shape) == layer["shape"] and w.dtype == np.float32
        assert layer["params"] == w.size
        assert layer["zeros_before"] == int((o == 0).sum())
        assert layer["zeros_after"] == int((w == 0).sum()), layer["name"]
        assert layer["sparsity_after"] == pytest.approx((w == 0).mean(), abs=1e-12)
        if not layer["pruned"]:
            assert np.array_equal(w, o), f"{layer['name']} skipped but changed"
            continue
        wc, oc = canonical(model, layer, w), canonical(model, layer, o)
        if mode.startswith("channel"):
            groups, cpg, ksize = (layer["groups"], layer["shape"][1], int(np.prod(layer["shape"][2:]))) \
                if layer["op"] == "Conv" else (1, wc.shape[1], 1)
            units, zu = check_channels(wc, oc, groups, cpg, ksize)
        else:
            units, zu = check_structure(mode, wc, oc, layer["groups"])
        assert (layer["units"], layer["zero_units"]) == (units, zu), layer["name"]
        if scope == "per-layer" and not mode.startswith("nm:"):
            unit = w.size // units if mode != "unstructured" else 1
            if mode.startswith("block"):
                bh, bw = map(int, mode[6:].split("x"))
                unit = bh * bw
            assert abs((w == 0).sum() - s * w.size) <= unit / 2 + 1e-6, layer["name"]
        total += w.size
        zeros += int((w == 0).sum())
    if scope == "global" and mode in ("unstructured",):
        assert abs(zeros - s * total) <= 0.5 + 1e-6
    t = info["total"]
    assert t["pruned_params"] == total and t["pruned_zeros_after"] == zeros
    # Depthwise convs are skipped in filter/channel modes only.
    dw = [ly for ly in info["layers"] if ly["depthwise"]]
    assert dw
    for ly in dw:
        assert ly["pruned"] == (not mode.startswith(("filter", "channel")))


def test_zero_sparsity_copy_computes_the_same(rng, tmp_path):
    src = save(mixed_model(rng), tmp_path / "in.onnx")
    feeds = feeds_for(src, rng, batch=3)
    ref = run_ort(src, feeds)
    for mode in ["unstructured", "filter", "channel", "block:4x1"]:
        dst = tmp_path / f"zero-{mode.replace(':', '_')}.onnx"
        prune(src, dst, "--sparsity", "0", "--mode", mode)
        got = run_ort(dst, feeds)
        for a, b in zip(got, ref):
            assert np.array_equal(a, b), mode
        wa, wb = weights(src), weights(dst)
        assert all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_full_sparsity_zeros_every_selected_weight(rng, tmp_path):
    src = save(mixed_model(rng), tmp_path / "in.onnx")
    dst = tmp_path / "out.onnx"
    info = json.loads(prune(src, dst, "--sparsity", "100%", "--json", "--skip", "first").stdout)
    after = weights(dst)
    for ly in info["layers"]:
        if ly["pruned"]:
            assert not after[ly["weight"]].any()
    assert info["total"]["pruned_sparsity_after"] == 1.0
    out = run_ort(dst, feeds_for(dst, rng))
    assert np.all(np.isfinite(out[0]))


def test_table_matches_numpy(rng, tmp_path):
    src = save(mixed_model(rng), tmp_path / "in.onnx")
    dst = tmp_path / "out.onnx"
    r = prune(src, dst, "--sparsity", "0.63", "--mode", "block:4x1", "--skip", "last")
    assert r.stdout.startswith(f"pruned {src} -> {dst}: mode block:4x1, sparsity 63.00% global")
    rows, (tp, tb, ta) = parse_table(r.stdout)
    info = json.loads(prune(src, tmp_path / "again.onnx", "--sparsity", "0.63", "--mode", "block:4x1",
                            "--skip", "last", "--json").stdout)
    assert list(rows) == [ly["name"] for ly in info["layers"]]
    before, after = weights(src), weights(dst)
    allp = allz = allz0 = 0
    for ly in info["layers"]:
        params, b, a, structure = rows[ly["name"]]
        w, o = after[ly["weight"]], before[ly["weight"]]
        assert params == w.size
        assert abs(a - 100 * (w == 0).mean()) <= 0.0051, ly["name"]
        assert abs(b - 100 * (o == 0).mean()) <= 0.0051, ly["name"]
        if ly["pruned"]:
            assert structure.startswith("zero 4x1 blocks "), structure
        else:
            assert structure.startswith("skipped: --skip last"), structure
        allp += w.size
        allz += int((w == 0).sum())
        allz0 += int((o == 0).sum())
    assert tp == allp
    assert abs(ta - 100 * allz / allp) <= 0.0051
    assert abs(tb - 100 * allz0 / allp) <= 0.0051
    # The same arguments give the same file.
    assert weights(tmp_path / "again.onnx").keys() == after.keys()
    assert all(np.array_equal(after[k], weights(tmp_path / "again.onnx")[k]) for k in after)


# ---- layouts and storage -----------------------------------------------------------


def test_fc_layouts_filter_mode(rng, tmp_path):
    """Gemm B [K, N] (transB 0), Gemm B [N, K] (transB 1), MatMul X @ W [K, N] and
    W [M, K] @ X: a pruned filter is an output neuron in every layout."""
    g = B.Graph(rng)
    x = g.input("x", [6, 4])
    w0 = g.init(rng.normal(0, 1, (8, 6)).astype(np.float32))
    y = g.node("MatMul", [w0, x])                       # [N, 8, 4]
    y = g.node("Flatten", [y], axis=1)                  # [N, 32]
    y = g.gemm(y, 32, 10, trans_b=False)
    y = g.gemm(y, 10, 12, trans_b=True)
    w3 = g.init(rng.normal(0, 1, (12, 7)).astype(np.float32))
    y = g.node("MatMul", [y, w3])
    src = save(g.build([y]), tmp_path / "fc.onnx")
    dst = tmp_path / "out.onnx"
    info = json.loads(prune(src, dst, "--sparsity", "0.5", "--mode", "filter", "--per-layer", "--json").stdout)
    assert [ly["op"] for ly in info["layers"]] == ["MatMul", "Gemm", "Gemm", "MatMul"]
    after = weights(dst)
    out_axis = [0, 1, 0, 1]  # the axis that indexes output neurons in the file
    for ly, ax in zip(info["layers"], out_axis):
        w = after[ly["weight"]]
        n_out = w.shape[ax]
        zero = np.all(w == 0, axis=1 - ax)
        assert zero.sum() == ly["zero_units"]
        assert abs(zero.sum() - n_out / 2) <= 0.5, ly["name"]
        assert (w == 0).sum() == zero.sum() * w.shape[1 - ax]
    feeds = feeds_for(dst, rng)
    assert run_ort(dst, feeds)[0].shape == run_ort(src, feeds)[0].shape


def test_float_data_constant_node_and_external_data(rng, tmp_path):
    """Weights stored as float_data, as a Constant node, and as external data
    are all read; the pruned ones come out as float32 raw_data in the file."""
    g = B.Graph(rng)
    x = g.input("x", [4, 6, 6])
    y = g.conv(x, 4, 8, 3)
    y = g.conv(y, 8, 8, 1)
    src_model = g.build([y])
    # Conv 1: float_data instead of raw_data.
    t = src_model.graph.initializer[0]
    arr = numpy_helper.to_array(t)
    t.ClearField("raw_data")
    t.float_data.extend(arr.ravel().tolist())
    # Conv 2: its weight moved into a Constant node.
    w2 = next(i for i in src_model.graph.initializer if i.name == src_model.graph.node[1].input[1])
    src_model.graph.initializer.remove(w2)
    src_model.graph.node.insert(0, helper.make_node("Constant", [], [w2.name], value=w2))
    src = save(src_model, tmp_path / "fd.onnx")
    dst = tmp_path / "fd-out.onnx"
    info = json.loads(prune(src, dst, "--sparsity", "0.5", "--json").stdout)
    assert [ly["pruned"] for ly in info["layers"]] == [True, True]
    m = onnx.load(str(dst))
    t = m.graph.initializer[0]
    assert len(t.raw_data) == 4 * arr.size and not t.float_data
    assert np.array_equal(np.frombuffer(t.raw_data, "<f4").reshape(arr.shape) != 0,
                          numpy_helper.to_array(t) != 0)
    const = numpy_helper.to_array(m.graph.node[0].attribute[0].t)
    assert (const == 0).sum() == info["layers"][1]["zeros_after"]
    feeds = feeds_for(dst, rng)
    run_ort(dst, feeds)

    # External data: the pruned weights become inline raw_data, the others
    # still point into the (same-folder) data file.
    ext_dir = tmp_path / "ext"
    ext_dir.mkdir()
    model = mixed_model(rng)
    onnx.save(model, str(ext_dir / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.bin", size_threshold=0)
    info = json.loads(prune(ext_dir / "m.onnx", ext_dir / "p.onnx", "--sparsity", "0.7", "--skip", "first",
                            "--json").stdout)
    pm = onnx.load(str(ext_dir / "p.onnx"), load_external_data=False)
    by_name = {t.name: t for t in pm.graph.initializer}
    for ly in info["layers"]:
        t = by_name[ly["weight"]]
        assert (t.data_location == TensorProto.EXTERNAL) == (not ly["pruned"]), ly["name"]
    feeds = feeds_for(ext_dir / "m.onnx", rng)
    assert run_ort(ext_dir / "p.onnx", feeds)[0].shape == run_ort(ext_dir / "m.onnx", feeds)[0].shape
    r = prune(ext_dir / "m.onnx", ext_dir / "p2.onnx", "--sparsity", "0.7", "--skip", "first")
    assert "warning" not in r.stderr  # same folder: the references resolve
    (tmp_path / "elsewhere").mkdir()
    r = prune(ext_dir / "m.onnx", tmp_path / "elsewhere" / "p.onnx", "--sparsity", "0.7", "--skip", "first")
    assert "still refer to external data" in r.stderr and "copy the external data file" in r.stderr
    after, before = weights(ext_dir / "p.onnx"), weights(ext_dir / "m.onnx")
    for ly in info["layers"]:
        assert int((after[ly["weight"]] == 0).sum()) == ly["zeros_after"]
        if not ly["pruned"]:
            assert np.array_equal(after[ly["weight"]], before[ly["weight"]])


def test_shared_weight_pruned_once(rng, tmp_path):
    g = B.Graph(rng)
    x = g.input("x", [8, 5, 5])
    w = g.init(rng.normal(0, 1, (8, 8, 3, 3)).astype(np.float32))
    y = g.node("Conv", [x, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = g.node("Conv", [y, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    src = save(g.build([y]), tmp_path / "tied.onnx")
    dst = tmp_path / "out.onnx"
    info = json.loads(prune(src, dst, "--sparsity", "0.5", "--json").stdout)
    a, b = info["layers"]
    assert a["pruned"] and not b["pruned"] and b["skipped"].startswith("shares weight with")
    assert info["total"]["params"] == a["params"]
    assert int((weights(dst)[w] == 0).sum()) == a["zeros_after"] == b["zeros_after"] == 288
    run_ort(dst, feeds_for(dst, rng))


# ---- skip rules ----------------------------------------------------------------------


def test_skip_first_last_names_and_op_types(rng, tmp_path):
    model = mixed_model(rng)
    src = save(model, tmp_path / "in.onnx")
    before = weights(src)
    info0 = json.loads(prune(src, tmp_path / "all.onnx", "--sparsity", "0.5", "--json").stdout)
    convs = [ly for ly in info0["layers"] if ly["op"] == "Conv"]
    first, last = convs[0], convs[-1]
    gemm = [ly for ly in info0["layers"] if ly["op"] == "Gemm"]
    named = convs[2]

    dst = tmp_path / "skip.onnx"
    info = json.loads(prune(src, dst, "--sparsity", "0.5", "--skip", "first,last", "--skip",
                            f"{named['name']},Gemm", "--skip", convs[3]["weight"], "--json").stdout)
    after = weights(dst)
    skipped = {ly["name"]: ly["skipped"] for ly in info["layers"] if not ly["pruned"]}
    assert skipped[first["name"]].startswith("--skip first")
    assert skipped[last["name"]].startswith("--skip last")
    assert skipped[named["name"]] == f"--skip {named['name']}"
    assert skipped[convs[3]["name"]] == f"--skip {convs[3]['weight']}"
    for ly in gemm:
        assert skipped[ly["name"]] == "--skip Gemm"
    for ly in info["layers"]:
        same = np.array_equal(after[ly["weight"]], before[ly["weight"]])
        assert same == (not ly["pruned"]), ly["name"]
    assert info["total"]["pruned_layers"] == len(info["layers"]) - len(skipped)


def test_depthwise_skipped_in_filter_mode_unless_asked(rng, tmp_path):
    src = save(mixed_model(rng), tmp_path / "in.onnx")
    r = prune(src, tmp_path / "f.onnx", "--sparsity", "0.4", "--mode", "filter")
    assert "skipped: depthwise (filter mode)" in r.stdout
    assert "1 depthwise conv skipped in filter mode (--include-depthwise prunes them)" in r.stdout
    info = json.loads(prune(src, tmp_path / "g.onnx", "--sparsity", "0.4", "--mode", "channel",
                            "--include-depthwise", "--json").stdout)
    dw = [ly for ly in info["layers"] if ly["depthwise"]]
    assert dw and all(ly["pruned"] for ly in dw)


# ---- errors ----------------------------------------------------------------------------


def fails(code, *args, needle=None):
    r = prune(*args, check=False)
    assert r.returncode == code, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout == ""
    if needle:
        assert needle in r.stderr, r.stderr
    return r.stderr


@pytest.fixture
def small(rng, tmp_path):
    return save(mixed_model(rng, c=8), tmp_path / "small.onnx")


def test_usage_errors_exit_2(small, tmp_path):
    out = tmp_path / "o.onnx"
    fails(2, small, needle="IN.onnx and OUT.onnx are required")
    fails(2, small, out, needle="--sparsity S is required")
    fails(2, small, out, "--sparsity", "1.5", needle="out of range 0..1")
    fails(2, small, out, "--sparsity", "50", needle="write 50% for a percentage")
    fails(2, small, out, "--sparsity", "150%", needle="out of range 0..100%")
    fails(2, small, out, "--sparsity", "-0.2", needle="out of range")
    fails(2, small, out, "--sparsity", "half", needle="bad sparsity 'half'")
    fails(2, small, out, "--sparsity", needle="--sparsity needs a value")
    fails(2, small, out, "--sparsity", "0.5", "--mode", "random", needle="unknown mode 'random'")
    fails(2, small, out, "--sparsity", "0.5", "--mode", "block:4", needle="block wants RxC")
    fails(2, small, out, "--sparsity", "0.5", "--mode", "nm:4:4", needle="N must be below M")
    fails(2, small, out, "--sparsity", "0.5", "--mode", "filter:l3", needle="takes :l1 or :l2")
    fails(2, small, out, "--mode", "nm:2:4", "--sparsity", "0.9", needle="contradicts --mode nm:2:4")
    fails(2, small, out, "--sparsity", "0.5", "--frobnicate", needle="unknown option '--frobnicate'")
    fails(2, small, out, "extra", "--sparsity", "0.5", needle="unexpected argument 'extra'")
    assert not out.exists()
    # nm:N:M needs no --sparsity, and a matching one is accepted.
    prune(small, out, "--mode", "nm:2:4", "--sparsity", "50%")
    r = subprocess.run([paths.binary("convctl"), "prune", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--per-layer" in r.stdout and "block:RxC" in r.stdout
    r = subprocess.run([paths.binary("convctl"), "help", "prune"], capture_output=True, text=True)
    assert r.returncode == 0 and "nm:N:M" in r.stdout


def test_bad_models_exit_1(rng, small, tmp_path):
    out = tmp_path / "o.onnx"
    fails(1, tmp_path / "missing.onnx", out, "--sparsity", "0.5", needle="E_IO: cannot open")
    fails(1, tmp_path, out, "--sparsity", "0.5", needle="is not a regular file")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    fails(1, junk, out, "--sparsity", "0.5", needle="E_MODEL")
    data = open(small, "rb").read()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    fails(1, cut, out, "--sparsity", "0.5", needle="E_MODEL")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    fails(1, empty, out, "--sparsity", "0.5", needle="no graph")
    # A raw_data length that disagrees with the dims.
    m = onnx.load(str(small))
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:-4]
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    fails(1, bad, out, "--sparsity", "0.5", needle="raw_data has")
    # No Conv/Gemm/MatMul with a constant weight.
    g = B.Graph(rng)
    x = g.input("x", [3, 4, 4])
    none = save(g.build([g.relu(x)]), tmp_path / "none.onnx")
    fails(1, none, out, "--sparsity", "0.5", needle="no prunable layer")
    # Everything skipped.
    fails(1, small, out, "--sparsity", "0.5", "--skip", "Conv,Gemm,MatMul", needle="no prunable layer left")
    fails(1, small, out, "--sparsity", "0.5", "--skip", "no_such_node", needle="--skip no_such_node")
    fails(1, none, out, "--sparsity", "0.5", "--skip", "first", needle="no prunable layer")
    # Cannot write OUT: the error names it and no temporary file is left.
    fails(1, small, tmp_path / "no" / "dir" / "o.onnx", "--sparsity", "0.5", needle="E_IO: cannot create")
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_float16_weights_are_listed_not_pruned(rng, tmp_path):
    g = B.Graph(rng)
    x = g.input("x", [2, 4, 4])
    w16 = g.init(rng.normal(0, 1, (4, 2, 1, 1)).astype(np.float16))
    y = g.node("Conv", [g.node("Cast", [x], to=TensorProto.FLOAT16), w16])
    y = g.conv(g.node("Cast", [y], to=TensorProto.FLOAT), 4, 4, 1)
    src = save(g.build([y]), tmp_path / "h.onnx")
    info = json.loads(prune(src, tmp_path / "o.onnx", "--sparsity", "0.5", "--json").stdout)
    a, b = info["layers"]
    assert not a["pruned"] and a["skipped"] == "data type 10 (float32 only)"
    assert b["pruned"]
    assert np.array_equal(weights(tmp_path / "o.onnx")[w16], weights(src)[w16])
    assert weights(tmp_path / "o.onnx")[w16].dtype == np.float16
