"""A batch the daemon runs image by image (--batch-split) on more than one
thread takes its images in lanes (runtime/batch-lanes.c): every answer
equals onnxruntime's and the daemon's own answer to the request alone, for
both outputs; `stats` counts the batches run so (`compute.batch_lane_runs`)
and `models` shows each extra lane's arena; --batch-lanes off runs none."""
import numpy as np
import onnxruntime as ort
import pytest

from tests.integration.daemon_wire import Wire, assert_close, from_wire, request, tensor
from tests.models.builders import Graph, save
from tests.support.daemon import TestDaemon

RNG = np.random.default_rng()
C = int(RNG.integers(2, 5))
HW = int(RNG.integers(6, 17))
MAX_WAVES = 50  # hang guard: a wave of pipelined requests almost always forms a batch


def two_output_cnn(path):
    g = Graph(np.random.default_rng(11))
    x = g.input("x", [C, HW, HW])
    y = g.conv_bn_relu(x, C, 16, 3)
    y = g.relu(g.conv(y, 16, 8, 3))
    z = g.conv(x, C, 3, 1)
    return save(g.build([y, z], "lanes_cnn"), path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    two_output_cnn(d / "cnn.onnx")
    return d


def wave(w, xs, first_id):
    w.send(b"".join(request(first_id + i, "infer", {"model": "cnn", "inputs": {"x": tensor(x)}})
                    for i, x in enumerate(xs)))
    got = {m[1]: m for m in w.recv(len(xs), timeout=120)}
    assert len(got) == len(xs)  # every request answered exactly once
    out = []
    for i in range(len(xs)):
        m = got[first_id + i]
        assert m[2] is None, m[2]
        out.append({k: from_wire(v) for k, v in m[3]["outputs"].items()})
    return out


@pytest.mark.parametrize("lanes", ["on", "off"])
def test_split_batches_in_lanes_equal_requests_alone(models, lanes):
    args = ["--workers", "1", "--threads", "2", "--max-batch", "8", "--max-delay-us", "20000",
            "--batch-split", "on", "--plan", "sparse", "--batch-lanes", lanes]
    sess = ort.InferenceSession(str(models / "cnn.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    with TestDaemon(models_dir=models, args=args) as d, Wire.connect(d, timeout=120) as w:
        (entry,) = w.result("models")["models"]
        assert entry["lane_activation_bytes"] > 0
        assert entry["lane_activation_bytes"] * 4 <= entry["activation_bytes"]  # one image, not 8
        sizes = [int(RNG.integers(1, 4)) for _ in range(int(RNG.integers(5, 12)))]
        xs = [RNG.standard_normal((b, C, HW, HW)).astype(np.float32) for b in sizes]
        alone = [wave(w, [x], 1000 + i)[0] for i, x in enumerate(xs)]
        for x, a in zip(xs, alone):
            for name, ref in zip(names, sess.run(None, {"x": x})):
                assert_close(a[name], ref)
        # Waves until a batch of several requests ran (state, not time).
        for n in range(MAX_WAVES):
            for got, a in zip(wave(w, xs, 10000 + n * 100), alone):
                for name in names:
                    assert_close(got[name], a[name])
            if w.result("stats")["models"]["cnn"]["batch_size"]["max"] > 1:
                break
        s = w.result("stats")
        assert s["models"]["cnn"]["batch_size"]["max"] > 1
        runs = s["compute"]["batch_lane_runs"]
        if lanes == "on":
            assert runs >= 1 and s["compute"]["batch_lane_images"] >= 2 * runs, s["compute"]
        else:
            assert runs == 0, s["compute"]
