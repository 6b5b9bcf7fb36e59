"""Bad model files give a clear error and a non-zero exit of convd-run, never a
crash (also under ASan/UBSan: CONVD_BUILD=build-san)."""
import os
import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.models import builders as B
from tests.models.runner import convd_run


@pytest.fixture
def rng():
    seed = int(os.environ.get("CD_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def small_model(rng, opset=13):
    g = B.Graph(rng, opset)
    x = g.input("x", [3, 8, 8])
    y = g.conv_bn_relu(x, 3, 8, 3)
    y = B.fc_head(g, y, 8, 4)
    return g.build([y])


def fails(path, code, *needles, args=()):
    """Asserts convd-run exits 1 (not by a signal) with code and needles in stderr."""
    r = convd_run(path, args, check=False)
    assert r.returncode == 1, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert f"error {code}" in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, f"{n!r} not in {r.stderr!r}"
    assert "Sanitizer" not in r.stderr
    return r.stderr


def test_truncated_file(rng, tmp_path):
    data = small_model(rng).SerializeToString()
    for cut in (len(data) // 2, len(data) - 3, 7):
        p = tmp_path / f"t{cut}.onnx"
        p.write_bytes(data[:cut])
        fails(p, "E_MODEL")


def test_random_bytes(rng, tmp_path):
    p = tmp_path / "r.onnx"
    p.write_bytes(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    fails(p, "E_MODEL")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    fails(p, "E_MODEL", "not an ONNX model")


def test_valid_protobuf_not_a_model(rng, tmp_path):
    """A serialized TensorProto and a GraphProto are valid protobuf but not models."""
    t = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "t")
    p = tmp_path / "tensor.onnx"
    p.write_bytes(t.SerializeToString())
    fails(p, "E_MODEL")
    p2 = tmp_path / "graph.onnx"
    p2.write_bytes(small_model(rng).graph.SerializeToString())
    fails(p2, "E_MODEL")


def test_missing_file(tmp_path):
    fails(tmp_path / "nope.onnx", "E_IO")


def test_unsupported_op_names_op_and_node(rng, tmp_path):
    m = small_model(rng)
    m.graph.node.insert(len(m.graph.node) - 1, helper.make_node("Erf", [m.graph.node[-2].output[0]], ["erf_out"],
                                                                name="my_erf"))
    m.graph.node[-1].input[0] = "erf_out"
    p = tmp_path / "erf.onnx"
    onnx.save(m, str(p))
    err = fails(p, "E_UNSUPPORTED", "Erf", "my_erf", "supported:", "Conv")
    assert "my_erf" in err


def test_unknown_attribute(rng, tmp_path):
    m = small_model(rng)
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    conv.attribute.append(helper.make_attribute("frobnicate", 3))
    p = tmp_path / "attr.onnx"
    onnx.save(m, str(p))
    fails(p, "E_UNSUPPORTED", "frobnicate", conv.name)


def test_bad_attribute_value(rng, tmp_path):
    m = small_model(rng)
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    conv.attribute.append(helper.make_attribute("auto_pad", "MIDDLE"))
    p = tmp_path / "autopad.onnx"
    onnx.save(m, str(p))
    fails(p, "E_UNSUPPORTED", "auto_pad", "MIDDLE")
    # group that does not divide the channels
    m = small_model(rng)
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    for a in conv.attribute:
        if a.name == "group":
            a.i = 2
    p = tmp_path / "group.onnx"
    onnx.save(m, str(p))
    fails(p, "E_MODEL", "groups")
    # wrong attribute type
    m = small_model(rng)
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    for a in conv.attribute:
        if a.name == "group":
            conv.attribute.remove(a)
            break
    conv.attribute.append(helper.make_attribute("group", 1.5))
    p = tmp_path / "gtype.onnx"
    onnx.save(m, str(p))
    fails(p, "E_MODEL", "group")


def test_missing_initializer(rng, tmp_path):
    m = small_model(rng)
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    wname = conv.input[1]
    for t in m.graph.initializer:
        if t.name == wname:
            m.graph.initializer.remove(t)
            break
    p = tmp_path / "noinit.onnx"
    onnx.save(m, str(p))
    fails(p, "E_MODEL", wname)


def test_wrong_opset(rng, tmp_path):
    for opset in (9, 18):
        m = small_model(rng)
        m.opset_import[0].version = opset
        p = tmp_path / f"opset{opset}.onnx"
        onnx.save(m, str(p))
        fails(p, "E_UNSUPPORTED", f"opset {opset}", "11 to 17")


def test_raw_data_size_mismatch(rng, tmp_path):
    m = small_model(rng)
    t = m.graph.initializer[0]
    t.raw_data = t.raw_data[:-4]
    p = tmp_path / "short.onnx"
    onnx.save(m, str(p))
    fails(p, "E_MODEL", t.name)


def _external(rng, tmp_path, location, make_file=True):
    m = small_model(rng)
    t = next(t for t in m.graph.initializer if t.dims and len(t.dims) == 4)
    data = t.raw_data
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(len(data)))):
        e = t.external_data.add()
        e.key, e.value = k, v
    d = tmp_path / "models"
    d.mkdir(exist_ok=True)
    if make_file:
        (tmp_path / "secret.bin").write_bytes(data)
    p = d / "ext.onnx"
    onnx.save(m, str(p))
    return p, data


def test_external_data_escaping_folder(rng, tmp_path):
    p, _ = _external(rng, tmp_path, "../secret.bin")
    fails(p, "E_MODEL", "escapes")
    p, _ = _external(rng, tmp_path, str(tmp_path / "secret.bin"))
    fails(p, "E_MODEL", "escapes")
    # A symlink inside the folder that points outside it.
    p, _ = _external(rng, tmp_path, "link.bin")
    os.symlink(tmp_path / "secret.bin", tmp_path / "models" / "link.bin")
    fails(p, "E_MODEL", "escapes")


def test_external_data_truncated(rng, tmp_path):
    p, data = _external(rng, tmp_path, "w.bin", make_file=False)
    (tmp_path / "models" / "w.bin").write_bytes(data[:-8])
    fails(p, "E_MODEL", "past the end")
    (tmp_path / "models" / "w.bin").unlink()
    fails(p, "E_MODEL", "w.bin")


def test_input_shape_mismatch(rng, tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(small_model(rng), str(p))
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 9, 8), np.float32))
    fails(p, "E_SHAPE", "x", args=["--input", tmp_path / "x.npy"])


def test_bad_npy_input(rng, tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(small_model(rng), str(p))
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}")
    fails(p, "E_PARAMS", args=["--input", tmp_path / "bad.npy"])
    np.save(tmp_path / "f64.npy", np.zeros((1, 3, 8, 8)))
    fails(p, "E_DTYPE", args=["--input", tmp_path / "f64.npy"])


def test_unsupported_cases_are_clean(rng, tmp_path):
    """Ops we do not run in some configuration fail the load with E_UNSUPPORTED and a reason."""
    g = B.Graph(rng)
    x = g.input("x", [3, 4, 4])
    y = g.node("Transpose", [x], perm=[1, 0, 2, 3])  # moves the batch
    p = B.save(g.build([y]), tmp_path / "tr.onnx")
    fails(p, "E_UNSUPPORTED", "batch")
    g = B.Graph(rng)
    x = g.input("x", [3, 4, 4])
    y = g.node("Conv", [x, x])  # weights computed at run time
    p = tmp_path / "cw.onnx"
    onnx.save(g.build([y], out_shapes={y: ["N", 3, 1, 1]}), str(p))
    fails(p, "E_UNSUPPORTED", "weights")


def test_mutated_models_never_crash(rng, tmp_path):
    """Random byte flips of a valid model: every run either works or fails cleanly."""
    data = bytearray(small_model(rng).SerializeToString())
    for i in range(25):
        d = bytearray(data)
        for _ in range(int(rng.integers(1, 8))):
            d[int(rng.integers(0, len(d)))] = int(rng.integers(0, 256))
        p = tmp_path / f"mut{i}.onnx"
        p.write_bytes(bytes(d))
        r = convd_run(p, check=False)
        assert r.returncode in (0, 1), f"mutation {i}: exit {r.returncode}\n{r.stderr}"
        assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
