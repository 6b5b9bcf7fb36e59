"""Channel Slice/Split as views with no copy (runtime/plan-view.c), against onnxruntime.

On the CPU a slice that keeps one contiguous run of every item (a channel window of NCHW, whole
blocks of nChw16c / nChw8c, or after a reorder to NCHW when it cuts a block) is planned as a view
of its source: no Slice layer, `slices: N views` in the summary. Each test checks both that the
view was taken (so a silent fall-back to the copy fails it) and the numbers at batch 1 and at a
batch of different images, with the fast and the reference kernels, and on hip-emu, which keeps
the copies."""
import json
import subprocess

import numpy as np
import pytest

from tests.models import builders as B
from tests.models.builders import ri
from tests.models.runner import compare, convd_run
from tests.support import paths


def ints(g, values):
    return g.init(np.array(values, np.int64), "i")


def plan(path, device="cpu"):
    r = convd_run(path, ["--info", "--json", "--device", device])
    info = json.loads(r.stdout)
    return info["summary"], [layer["op"] for layer in info["layers"]]


def check_numbers(path, tmp_path, rng, device="cpu"):
    extra = ["--device", device]
    compare(path, tmp_path, 1, rng, extra=extra)
    compare(path, tmp_path, ri(rng, 2, 4), rng, extra=extra)
    if device == "cpu":
        compare(path, tmp_path, ri(rng, 2, 4), rng, kernels="ref")


def sizes_at(rng, parts, blocks):
    """parts channel counts: multiples of 16 (blocks=16), of 8 but not all of 16 (8), or any (0)."""
    if blocks == 16:
        return [16 * ri(rng, 1, 3) for _ in range(parts)]
    if blocks == 8:
        s = [8 * ri(rng, 1, 5) for _ in range(parts)]
        s[0] = 8 if s[0] % 16 == 0 else s[0]  # the cut after part 0 is inside a 16-block
        return s
    return [ri(rng, 1, 40) for _ in range(parts)]


@pytest.mark.parametrize("blocks", [0, 8, 16])
@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("form", ["split", "slice"])
def test_channel_split_feeds_convs_concat_and_output(form, parts, blocks, rng, tmp_path):
    """conv -> Split (or Slices) -> part 0 into a conv, part 1 into a conv and a Concat with itself,
    part 2 (of 3) a model output: views on the CPU, copies on hip-emu, the same numbers."""
    g = B.Graph(rng, 13)
    cin, h = ri(rng, 1, 5), ri(rng, 3, 9)
    s = sizes_at(rng, parts, blocks)
    x = g.input("x", [cin, h, h])
    y = g.node("Relu", [g.conv(x, cin, sum(s), 3)])
    if form == "split":
        outs = g.node("Split", [y, ints(g, s)], n_out=parts, axis=1)
    else:
        cuts = np.cumsum([0] + s)
        outs = [g.node("Slice", [y, ints(g, [int(cuts[j])]), ints(g, [int(cuts[j + 1])]), ints(g, [1])])
                for j in range(parts)]
    y0 = g.conv(outs[0], s[0], ri(rng, 1, 9), 1)
    q1 = g.node("Relu", [g.conv(outs[1], s[1], s[1], 3)])
    y1 = g.node("Concat", [outs[1], q1], axis=1)
    path = B.save(g.build([y0, y1] + outs[2:]), tmp_path / "m.onnx")
    summary, ops = plan(path)
    assert (summary["slice_views"], summary["slice_copies"]) == (parts, 0), summary
    assert "Slice" not in ops and "Split" not in ops, ops
    assert ops.count("Slice(copy)") == parts - 2, ops  # the output part is copied out
    check_numbers(path, tmp_path, rng)
    summary, ops = plan(path, "hip-emu")
    assert (summary["slice_views"], summary["slice_copies"]) == (0, parts), summary
    check_numbers(path, tmp_path, rng, "hip-emu")


@pytest.mark.parametrize("case", ["step2", "h_window", "channel_of_h_window_source"])
def test_slices_that_are_not_one_run_stay_copies(case, rng, tmp_path):
    """A channel slice with a step, an H window of a multi-channel tensor: Slice layers (copies)."""
    g = B.Graph(rng, 13)
    c, h = ri(rng, 4, 20), ri(rng, 4, 9)
    x = g.input("x", [c, h, h])
    y = g.node("Relu", [g.conv(x, c, c, 3)])
    if case == "step2":
        z = g.node("Slice", [y, ints(g, [1]), ints(g, [c]), ints(g, [1]), ints(g, [2])])
    elif case == "h_window":
        z = g.node("Slice", [y, ints(g, [1]), ints(g, [h - 1]), ints(g, [2])])
    else:  # H and C windows at once: not one run per item
        z = g.node("Slice", [y, ints(g, [1, 1]), ints(g, [c, h - 1]), ints(g, [1, 2])])
    path = B.save(g.build([g.node("Relu", [z])]), tmp_path / "m.onnx")
    summary, ops = plan(path)
    assert (summary["slice_views"], summary["slice_copies"]) == (0, 1), summary
    assert ops.count("Slice") == 1, ops
    check_numbers(path, tmp_path, rng)


@pytest.mark.parametrize("form", ["split", "slice"])
def test_shufflenet_units_take_views(form, rng, tmp_path):
    """Two ShuffleNetV2 units (Split or Slices, channel shuffle, Concat) as torchvision exports them."""
    from tests.models.test_models import m_shufflenet_v2
    path = B.save(m_shufflenet_v2(rng, form), tmp_path / "shufflenet.onnx")
    summary, ops = plan(path)
    assert (summary["slice_views"], summary["slice_copies"]) == (4, 0), summary
    assert not any(op in ("Slice", "Split") for op in ops), ops
    r = subprocess.run([paths.binary("convctl"), "plan", str(path), "--json"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    total = json.loads(r.stdout)["total"]
    assert (total["slice_views"], total["slice_copies"]) == (4, 0), total
    check_numbers(path, tmp_path, rng)
    check_numbers(path, tmp_path, rng, "hip-emu")


def test_view_of_a_view_and_a_reshape_of_a_view(rng, tmp_path):
    """A Slice of a Split part (offsets add up) and a Flatten of a part into a Gemm."""
    g = B.Graph(rng, 13)
    c, h = ri(rng, 3, 24), ri(rng, 2, 6)
    x = g.input("x", [2 * c, h, h])
    y = g.node("Relu", [g.conv(x, 2 * c, 2 * c, 1)])
    a, b = g.node("Split", [y, ints(g, [c, c])], n_out=2, axis=1)
    lo = ri(rng, 1, c - 1)  # 0 would take all of it: an alias, no Slice
    a2 = g.node("Slice", [a, ints(g, [lo]), ints(g, [c]), ints(g, [1])])
    f = g.node("Flatten", [b], axis=1)
    w = g.init(rng.uniform(-1, 1, (7, c * h * h)).astype(np.float32), "w")
    z = g.node("Gemm", [f, w], transB=1)
    path = B.save(g.build([g.node("Relu", [a2]), z]), tmp_path / "m.onnx")
    summary, ops = plan(path)
    assert (summary["slice_views"], summary["slice_copies"]) == (3, 0), summary
    check_numbers(path, tmp_path, rng)
