"""The slow model of the integration tests, sized from a measured speed.

Tests that need inference to take a while (requests queueing behind it,
deadlines expiring in the queue, work in flight at a signal or a close) use
this one model family. How long an item takes depends on the CPU (AVX-512 or
AVX2, its clock, its cores, what else runs on it), so the model is not sized
from an assumed speed: a small probe is timed in-process with
`convd-run --bench` under the environment and thread setting of the test
daemon, and the number of layers is chosen so that one item takes about
TARGET_S. The chosen model is then timed too; that figure (item_s) is what
tests derive their waits from.

    slow = slow_model.get()             # measured once per process (cached)
    slow.write(path)                    # x [N, 4, 64, 64] -> y [N, 4, 64, 64]
    slow.item_s                         # measured seconds per item (median)
    slow.limit(items)                   # generous time limit for that work

Inputs and outputs stay small (64 KiB per item), so pipelined requests are
read long before their answers could fill a connection's output buffer; the
work is in 96-channel 3x3 convs between them.

CD_TEST_SLOW_MS sets the target (default 30 ms per item).
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from . import paths
from .daemon import process_env

CH, HW, MID = 4, 64, 96
TARGET_S = float(os.environ.get("CD_TEST_SLOW_MS", "30")) / 1000.0
# 3: ch -> mid -> mid -> ch, the least that still has a mid x mid layer.
# 128: ~40 MiB of weights, ~87 GFLOP per item; a CPU that runs that in less
# than the target gets a shorter item (reported, and the waits follow it).
MIN_LAYERS, MAX_LAYERS = 3, 128
PROBE_LAYERS = 4
# Waits derived from item_s: this many times the expected work, at least
# LIMIT_FLOOR_S (start-up, loading, a busy shared machine).
LIMIT_FACTOR, LIMIT_FLOOR_S = 20.0, 30.0

_cache = {}
# Every measurement made in this process, for the end-of-session summary.
reports = []


def write(path, layers, ch=CH, hw=HW, mid=MID, seed=7):
    """x [N, ch, hw, hw] -> `layers` 3x3 convs (ch -> mid -> ... -> mid -> ch,
    bias, ReLU between) -> y [N, ch, hw, hw]. Fixed weights; returns the path."""
    assert layers >= 2
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        cin = ch if i == 0 else mid
        cout = ch if i == layers - 1 else mid
        w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        last = i == layers - 1
        out = "y" if last else f"a{i}"
        nodes.append(helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [out if last else f"c{i}"],
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"c{i}"], [out]))
        prev = out
    graph = helper.make_graph(
        nodes, "slow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", ch, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", ch, hw, hw])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def measure(path, threads=0, runs=10, warmup=3):
    """(median, min) seconds of one item of the model at `path`, timed by
    convd-run in the environment of a test daemon."""
    cmd = [paths.binary("convd-run"), str(path), "--bench", str(runs),
           "--warmup", str(warmup), "--threads", str(threads), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=process_env(), timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {r.returncode}:\n{r.stderr}")
    bench = json.loads(r.stdout)["bench"]
    return bench["median_ms"] / 1000.0, bench["min_ms"] / 1000.0


class SlowModel:
    def __init__(self, layers, item_s, min_s, target_s, threads, steps):
        self.layers, self.item_s, self.min_s = layers, item_s, min_s
        self.target_s, self.threads, self.steps = target_s, threads, steps

    def write(self, path):
        return write(path, self.layers)

    def input(self, rng, batch=1):
        return rng.standard_normal((batch, CH, HW, HW)).astype(np.float32)

    def limit(self, items, floor=LIMIT_FLOOR_S):
        """Seconds to wait for `items` items of this model's work (run one
        after another): generous, so a busy machine does not time out."""
        return max(floor, LIMIT_FACTOR * items * self.item_s)

    def describe(self):
        steps = ", ".join(f"{n} layers {t * 1e3:.1f} ms" for n, t in self.steps)
        return (f"slow model: {self.layers} layers, {self.item_s * 1e3:.1f} ms per item "
                f"(min {self.min_s * 1e3:.1f} ms; target {self.target_s * 1e3:.0f} ms, "
                f"threads {self.threads or 'all'}; timed: {steps})")

    __str__ = describe


def _clamp(n):
    return max(MIN_LAYERS, min(MAX_LAYERS, n))


def get(threads=0, target_s=TARGET_S):
    """The slow model for daemons running `--threads threads` (0: all cores),
    sized so one item takes about target_s on this machine. Measured once per
    process; the figures are printed and kept in `reports`."""
    key = (str(paths.BUILD), threads, target_s)
    if key in _cache:
        return _cache[key]
    steps = []
    with tempfile.TemporaryDirectory(prefix="convd-slow") as tmp:
        def timed(layers):
            t, t_min = measure(write(os.path.join(tmp, f"s{layers}.onnx"), layers), threads)
            steps.append((layers, t))
            return t, t_min

        # Nearly all the work is in the mid x mid layers (the two ends are
        # ~4% of one), so time per mid layer is what scales.
        t, t_min = timed(PROBE_LAYERS)
        layers = PROBE_LAYERS
        for _ in range(3):
            per_layer = t / (layers - 2)
            want = _clamp(2 + round(target_s / per_layer))
            if want == layers:
                break
            layers = want
            t, t_min = timed(layers)
            if 0.7 * target_s <= t <= 1.5 * target_s or layers in (MIN_LAYERS, MAX_LAYERS):
                break
    slow = SlowModel(layers, t, t_min, target_s, threads, steps)
    _cache[key] = slow
    reports.append(slow.describe())
    print(slow.describe())
    return slow
