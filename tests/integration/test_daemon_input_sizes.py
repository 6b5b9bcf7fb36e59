"""Models whose input has symbolic H and W (issue 22, item 3) through the
daemon: the first plan's size from the model's .conf, `load` or
--input-shape; requests of other sizes, interleaved and batched by size,
equal onnxruntime's; the planned sizes in `models` and `convctl models`;
max_shapes bounds them; a size the model cannot take fails alone; a model
with symbolic dims and no size is refused; static models unchanged."""
import json
import os
import subprocess
import threading

import numpy as np
import onnxruntime as ort
import pytest

import convd
from tests.models import builders
from tests.support import paths
from tests.support.daemon import TestDaemon
from tests.support.threads import Thread

RNG = np.random.default_rng()
HANG_S = 120  # guards the joins below against a hang; not a pass criterion
TOL = 1e-4


def ctl(d, *args):
    e = {k: v for k, v in os.environ.items() if k != "CONVD_SOCKET"}
    return subprocess.run([paths.binary("convctl"), "--socket", d.socket, *args], capture_output=True, text=True,
                          timeout=60, env=e)


def check_close(got, sess, x):
    want = sess.run(None, {"input": x})
    names = [o.name for o in sess.get_outputs()]
    for name, w in zip(names, want):
        assert got[name].shape == w.shape, (name, got[name].shape, w.shape)
        err = np.abs(got[name] - w) / np.maximum(1.0, np.abs(w))
        assert err.max() <= TOL, (name, x.shape, float(err.max()))


def small_convs(path, rng):
    """An unpadded 3x3 conv and a 2x2 pool: an input under 3x3 leaves nothing to compute."""
    g = builders.Graph(rng)
    x = g.input("input", [2, "H", "W"])
    y = g.conv(x, 2, 3, 3, pad=0)
    y = g.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    builders.save(g.build([y]), path)


@pytest.fixture
def seg_dir(tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    builders.save(builders.dynamic_hw_segnet(np.random.default_rng(int(RNG.integers(1 << 30)))), d / "seg.onnx")
    (d / "seg.onnx.conf").write_text("input_shape = input=1x3x32x32\nmax_batch = 4\nmax_delay_us = 20000\n")
    return d


def test_sizes_interleaved_equal_onnxruntime(tmp_path, seg_dir):
    sess = ort.InferenceSession(str(seg_dir / "seg.onnx"), providers=["CPUExecutionProvider"])
    sizes = [(32, 32), (40, 24), (32 + 2 * int(RNG.integers(1, 8)), 16 + int(RNG.integers(0, 9)))]
    with TestDaemon(tmp_path, models_dir=seg_dir, args=["--max-shapes", "4"]) as d:
        with convd.Client(d.socket, timeout=HANG_S) as c:
            m = c.models()[0]
            assert m["inputs"][0]["shape"] == [-1, 3, 32, 32]
            assert m["inputs"][0]["dynamic"] == [2, 3]
            assert m["shapes"] == [[[-1, 3, 32, 32]]] and m["max_shapes"] == 4
            for h, w in sizes + sizes[::-1]:  # one at a time, sizes interleaved
                x = RNG.uniform(-1, 1, (int(RNG.integers(1, 3)), 3, h, w)).astype(np.float32)
                check_close(c.infer("seg", {"input": x}), sess, x)
            planned = [s[0][2:] for s in c.models()[0]["shapes"]]
            assert sorted(planned) == sorted(map(list, set(sizes)))
        # Two sizes from four clients at once: queued requests of the two
        # sizes batch by size (max_delay_us) and each equals onnxruntime.
        errors = []

        def client(h, w):
            try:
                with convd.Client(d.socket, timeout=HANG_S) as c:
                    for _ in range(6):
                        x = RNG.uniform(-1, 1, (1, 3, h, w)).astype(np.float32)
                        check_close(c.infer("seg", {"input": x}), sess, x)
            except Exception as e:  # reported below
                errors.append(repr(e))

        ts = [Thread(target=client, args=sizes[i % 2]) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(HANG_S)
        assert not errors, errors
        # convctl models: the dims and the planned sizes.
        r = ctl(d, "models", "--json")
        assert r.returncode == 0, r.stderr
        js = json.loads(r.stdout)["models"][0]
        assert js["inputs"][0]["dynamic"] == [2, 3] and len(js["shapes"]) == len(set(sizes)) and js["shapes_bytes"] > 0
        r = ctl(d, "models")
        assert r.returncode == 0, r.stderr
        assert f"seg: input sizes (input: dims 2,3 symbolic), {len(set(sizes))} of at most 4 planned" in r.stdout
        assert "[N, 3, 40, 24]" in r.stdout and "[N, 3, 32, 32]  (at load)" in r.stdout


def test_max_shapes_bounds_and_a_bad_size_fails_alone(tmp_path):
    mdir = tmp_path / "models"
    mdir.mkdir()
    small_convs(mdir / "small.onnx", np.random.default_rng(int(RNG.integers(1 << 30))))
    sess = ort.InferenceSession(str(mdir / "small.onnx"), providers=["CPUExecutionProvider"])
    with TestDaemon(tmp_path, models_dir=mdir, args=["--input-shape", "1x2x8x8", "--max-shapes", "2"]) as d:
        with convd.Client(d.socket, timeout=HANG_S) as c:
            with pytest.raises(convd.ConvdError) as e:
                c.infer("small", {"input": np.zeros((1, 2, 2, 2), np.float32)})
            assert e.value.code == "E_MODEL" and "empty" in str(e.value)
            for h, w in [(8, 8), (12, 10), (14, 14), (8, 8), (12, 10)]:  # room for the first and one more
                x = RNG.uniform(-1, 1, (1, 2, h, w)).astype(np.float32)
                got = c.infer("small", {"input": x})
                want = sess.run(None, {"input": x})[0]
                assert np.abs(next(iter(got.values())) - want).max() <= TOL * max(1.0, np.abs(want).max())
            shapes = c.models()[0]["shapes"]
            assert len(shapes) == 2 and shapes[0] == [[-1, 2, 8, 8]] and shapes[1] == [[-1, 2, 12, 10]]
            with pytest.raises(convd.ConvdError) as e:  # a fixed dim: refused on the loop as before
                c.infer("small", {"input": np.zeros((1, 3, 8, 8), np.float32)})
            assert e.value.code == "E_SHAPE" and "dim 1 must be 2" in str(e.value)


def test_symbolic_dims_need_a_size(tmp_path, seg_dir):
    os.remove(seg_dir / "seg.onnx.conf")
    with TestDaemon(tmp_path, models_dir=seg_dir) as d:
        assert "dim 2 is symbolic ('H')" in d.stderr_text()
        with convd.Client(d.socket, timeout=HANG_S) as c:
            assert c.models() == []
            with pytest.raises(convd.ConvdError) as e:
                c.call("load", {"name": "seg", "path": "seg.onnx"})
            assert e.value.code == "E_UNSUPPORTED" and "input-shape" in str(e.value)
            with pytest.raises(convd.ConvdError) as e:
                c.call("load", {"name": "seg", "path": "seg.onnx", "input_shape": "1x3xHxW"})
            assert e.value.code == "E_PARAMS"
            c.call("load", {"name": "seg", "path": "seg.onnx", "input_shape": "input=1x3x24x24", "max_shapes": 3})
            m = c.models()[0]
            assert m["inputs"][0]["shape"] == [-1, 3, 24, 24] and m["max_shapes"] == 3
            x = RNG.uniform(-1, 1, (1, 3, 20, 36)).astype(np.float32)
            sess = ort.InferenceSession(str(seg_dir / "seg.onnx"), providers=["CPUExecutionProvider"])
            check_close(c.infer("seg", {"input": x}), sess, x)


def test_static_model_refuses_other_sizes_as_before(tmp_path):
    mdir = tmp_path / "models"
    mdir.mkdir()
    g = builders.Graph(np.random.default_rng(int(RNG.integers(1 << 30))))
    x = g.input("input", [3, 16, 16])
    builders.save(g.build([g.relu(g.conv(x, 3, 4, 3))]), mdir / "fixed.onnx")
    with TestDaemon(tmp_path, models_dir=mdir, args=["--input-shape", "1x3x32x32"]) as d:
        with convd.Client(d.socket, timeout=HANG_S) as c:
            m = c.models()[0]
            assert "dynamic" not in m["inputs"][0] and "shapes" not in m
            with pytest.raises(convd.ConvdError) as e:
                c.infer("fixed", {"input": np.zeros((1, 3, 32, 32), np.float32)})
            assert e.value.code == "E_SHAPE" and "input 'input' dim 2 must be 16, got 32" in str(e.value)


def test_regions_at_other_sizes(tmp_path, seg_dir):
    """Shared-memory regions with per-size plans: an input of another size
    read from a region is computed as sent inline; an output into a region at
    another size is refused (E_REGION: its size is known only once the plan of
    that size exists), at the first plan's size it is written there."""
    sess = ort.InferenceSession(str(seg_dir / "seg.onnx"), providers=["CPUExecutionProvider"])
    with TestDaemon(tmp_path, models_dir=seg_dir, args=["--max-shapes", "4"]) as d:
        with convd.Client(d.socket, timeout=HANG_S) as c, convd.Region(1 << 20) as r:
            c.register_region(r, "r")
            x = r.array((1, 3, 40, 24), "f32")
            x[:] = RNG.uniform(-1, 1, x.shape)
            check_close(c.infer("seg", {"input": x}), sess, np.array(x))
            name = sess.get_outputs()[0].name
            y = r.array((1, 1), "f32", offset=1 << 19)
            with pytest.raises(convd.ConvdError) as e:
                c.infer("seg", {"input": x}, into={name: y})
            assert e.value.code == "E_REGION" and "another size" in e.value.message
            x32 = r.array((1, 3, 32, 32), "f32")
            x32[:] = RNG.uniform(-1, 1, x32.shape)
            want = sess.run(None, {"input": np.array(x32)})[0]
            y = r.array(want.shape, "f32", offset=1 << 19)
            got = c.infer("seg", {"input": x32}, into={name: y})[name]
            assert np.shares_memory(got, y)
            assert np.abs(np.array(y) - want).max() <= TOL * max(1.0, float(np.abs(want).max()))
            del x, y, x32, got
