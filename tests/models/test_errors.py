"""Bad model files give a clear error and a non-zero exit of convd-run, never a
crash (also under ASan/UBSan: CONVD_BUILD=build-san)."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.models import builders as B
from tests.models.runner import convd_run


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
    m.graph.node.insert(len(m.graph.node) - 1, helper.make_node("Round", [m.graph.node[-2].output[0]], ["erf_out"],
                                                                name="my_round"))
    m.graph.node[-1].input[0] = "erf_out"
    p = tmp_path / "erf.onnx"
    onnx.save(m, str(p))
    err = fails(p, "E_UNSUPPORTED", "Round", "my_round", "supported:", "Conv")
    assert "my_round" in err


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
    for opset in (9, 22):
        m = small_model(rng)
        m.opset_import[0].version = opset
        p = tmp_path / f"opset{opset}.onnx"
        onnx.save(m, str(p))
        fails(p, "E_UNSUPPORTED", f"opset {opset}", "11 to 21")


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


# ---- hostile model files ------------------------------------------------------
# Files a program we do not control could write. Each must be refused with its
# exact code, by a clean exit 1 (no signal, no sanitizer report), quickly and
# without allocating what the file merely declares. docs/RELIABILITY.md lists
# them all.

def _model(nodes, inits=(), x_shape=(4,), out="y", opset=13):
    g = helper.make_graph(list(nodes), "hostile",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *x_shape])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _save(m, path):
    path.write_bytes(m.SerializeToString())
    return path


def _fold(op, a, b):
    """x -> Relu -> y, plus op(a, b) on int64 constants, folded at load."""
    return _model([helper.make_node("Constant", [], ["a"], value=numpy_helper.from_array(np.array([a], np.int64))),
                   helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(np.array([b], np.int64))),
                   helper.make_node(op, ["a", "b"], ["c"], name="fold_node"),
                   helper.make_node("Relu", ["x"], ["y"])])


I64_MIN, I64_MAX = -2**63, 2**63 - 1


def test_fold_int64_min_div_minus_one(tmp_path):
    """Was SIGFPE (exit 136) in the constant folding."""
    fails(_save(_fold("Div", I64_MIN, -1), tmp_path / "div.onnx"), "E_MODEL", "fold_node", "overflows")


def test_fold_div_by_zero(tmp_path):
    fails(_save(_fold("Div", 5, 0), tmp_path / "div0.onnx"), "E_MODEL", "fold_node", "division by zero")


@pytest.mark.parametrize("op,a,b", [("Add", I64_MAX, 1), ("Add", I64_MIN, -1), ("Sub", I64_MIN, 1),
                                    ("Sub", 0, I64_MIN), ("Mul", I64_MAX, 2), ("Mul", I64_MIN, -1),
                                    ("Mul", 2**32, 2**31)])
def test_fold_overflow(tmp_path, op, a, b):
    fails(_save(_fold(op, a, b), tmp_path / "ovf.onnx"), "E_MODEL", "fold_node", "overflows")


def test_fold_mod_not_supported(tmp_path):
    """Mod is not among the supported ops: refused by name before any arithmetic."""
    fails(_save(_fold("Mod", I64_MIN, -1), tmp_path / "mod.onnx"), "E_UNSUPPORTED", "fold_node", "Mod")


def test_fold_int_broadcast_to_new_shape(tmp_path):
    """[2,1] x [1,2] int64: taken element by element it read past both operands."""
    a = numpy_helper.from_array(np.array([[1], [2]], np.int64), "a")
    b = numpy_helper.from_array(np.array([[1, 2]], np.int64), "b")
    m = _model([helper.make_node("Mul", ["a", "b"], ["c"], name="fold_node"), helper.make_node("Relu", ["x"], ["y"])],
               [a, b])
    fails(_save(m, tmp_path / "bc.onnx"), "E_UNSUPPORTED", "fold_node")


def test_fold_broadcast_blowup(tmp_path):
    """Two tiny float constants broadcast to 2^27 and 2^31 elements: refused before allocating."""
    for rows, cols in ((8192, 16384), (65536, 32768)):
        a = numpy_helper.from_array(np.ones((rows, 1), np.float32), "a")
        b = numpy_helper.from_array(np.ones((1, cols), np.float32), "b")
        m = _model([helper.make_node("Add", ["a", "b"], ["c"], name="fold_node"),
                    helper.make_node("Relu", ["x"], ["y"])], [a, b])
        fails(_save(m, tmp_path / "blow.onnx"), "E_TOO_LARGE", "fold_node")


def test_fold_cast_nan_to_int(tmp_path):
    c = numpy_helper.from_array(np.array([np.nan, 1e30], np.float32), "f")
    m = _model([helper.make_node("Cast", ["f"], ["c"], to=TensorProto.INT64, name="fold_node"),
                helper.make_node("Relu", ["x"], ["y"])], [c])
    fails(_save(m, tmp_path / "cast.onnx"), "E_MODEL", "fold_node")


def test_reshape_target_overflow(tmp_path):
    s = numpy_helper.from_array(np.array([1, 2**62, 8], np.int64), "s")
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [s])
    fails(_save(m, tmp_path / "rs.onnx"), "E_TOO_LARGE", "rs")


def _raw_init(name, dtype, dims, raw):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def _init_model(t):
    """x -> Relu -> y plus one initializer (converted at load even when unread)."""
    return _model([helper.make_node("Relu", ["x"], ["y"])], [t])


def test_absurd_dims(tmp_path):
    big = _raw_init("w", TensorProto.FLOAT, [2**40], b"\0" * 4)
    fails(_save(_init_model(big), tmp_path / "d40.onnx"), "E_TOO_LARGE", "'w'")
    # Many large dims whose product overflows int64, even with a zero among them.
    ovf = _raw_init("w", TensorProto.FLOAT, [2**31 - 1] * 7 + [0], b"")
    fails(_save(_init_model(ovf), tmp_path / "dovf.onnx"), "E_TOO_LARGE", "'w'")
    neg = _raw_init("w", TensorProto.FLOAT, [4, -1], b"\0" * 16)
    fails(_save(_init_model(neg), tmp_path / "dneg.onnx"), "E_MODEL", "negative")


def test_zero_dims_where_not_allowed(tmp_path):
    # A graph input dim of 0.
    m = _model([helper.make_node("Relu", ["x"], ["y"])], x_shape=(0, 4))
    fails(_save(m, tmp_path / "in0.onnx"), "E_UNSUPPORTED", "x")
    # Conv weights with an empty kernel.
    w = numpy_helper.from_array(np.zeros((4, 3, 0, 3), np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="cv")], [w], x_shape=(3, 8, 8))
    fails(_save(m, tmp_path / "k0.onnx"), "E_MODEL", "cv")
    # A Gemm with no output features: an empty activation.
    w = numpy_helper.from_array(np.zeros((4, 0), np.float32), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [w])
    fails(_save(m, tmp_path / "n0.onnx"), "E_MODEL", "mm", "empty")


def test_activation_too_large(tmp_path):
    """A 1x1 conv to 8 channels of a 16384x16384 input: 2^31 elements per item (over 2^30)."""
    w = numpy_helper.from_array(np.ones((8, 1, 1, 1), np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="wide")], [w], x_shape=(1, 16384, 16384))
    fails(_save(m, tmp_path / "wide.onnx"), "E_TOO_LARGE", "wide")


def test_raw_data_longer_than_dims(rng, tmp_path):
    m = small_model(rng)
    t = m.graph.initializer[0]
    t.raw_data = t.raw_data + b"\0\0\0\0"
    p = tmp_path / "long.onnx"
    onnx.save(m, str(p))
    fails(p, "E_MODEL", t.name, "raw_data")


def test_typed_data_count_mismatch(tmp_path):
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.append(4)
    t.float_data.extend([1.0, 2.0, 3.0])  # 3 values for 4
    fails(_save(_init_model(t), tmp_path / "typed.onnx"), "E_MODEL", "'w'", "3 values")


# Runs argv[1:] in a child of a fresh, small interpreter and prints its exit
# status and peak RSS: a child spawned straight from pytest inherits pytest's
# own peak (vfork shares its memory until exec), which is what it measured.
_MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), ru.ru_maxrss)
"""


def _run_measured(path):
    """convd-run on path; returns (exit code, stderr, seconds, peak RSS in MiB) of that one process."""
    import subprocess
    import sys
    import time
    from tests.support import paths
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", _MEASURE, paths.binary("convd-run"), str(path)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    secs = time.monotonic() - t0
    code, maxrss = r.stdout.decode().split()[-2:]
    return int(code), r.stderr.decode("utf-8", "replace"), secs, int(maxrss) / 1024


@pytest.mark.parametrize("dtype,itemsize", [(TensorProto.INT64, 8), (TensorProto.FLOAT, 4)])
def test_huge_declared_initializer_fails_fast(tmp_path, dtype, itemsize):
    """2^31 elements declared (16 GiB as int64, [2, 2^30]) with 8 bytes of data:
    refused before any buffer is allocated, in well under a second of work."""
    t = _raw_init("huge", dtype, [2, 2**30], b"\0" * 8)
    p = _save(_init_model(t), tmp_path / "huge.onnx")
    rc, err, secs, rss = _run_measured(p)
    assert rc == 1 and "error E_MODEL" in err and "huge" in err, err
    assert "Sanitizer" not in err
    assert secs < 20 and rss < 1024, f"{secs:.1f} s, {rss:.0f} MiB"
    # The same through the typed field, and through a Constant node.
    t = TensorProto()
    t.name, t.data_type = "huge", TensorProto.INT64
    t.dims.extend([2, 2**30])
    t.int64_data.append(1)
    fails(_save(_init_model(t), tmp_path / "huge2.onnx"), "E_MODEL", "huge")
    m = _model([helper.make_node("Constant", [], ["c"], value=_raw_init("cv", TensorProto.INT64, [2, 2**30], b"\0" * 8),
                                 name="const_node"), helper.make_node("Relu", ["x"], ["y"])])
    fails(_save(m, tmp_path / "huge3.onnx"), "E_MODEL", "const_node")
    # One element over the cap (2^31 + 1 elements): E_TOO_LARGE, also before allocating.
    t = _raw_init("huge", dtype, [2**31 + 1], b"\0" * 8)
    fails(_save(_init_model(t), tmp_path / "huge4.onnx"), "E_TOO_LARGE", "huge")


def test_graph_cycles(tmp_path):
    m = _model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                helper.make_node("Relu", ["a"], ["y"])])
    fails(_save(m, tmp_path / "cycle.onnx"), "E_MODEL", "cycle")
    m = _model([helper.make_node("Add", ["x", "y"], ["y"])])  # a node reading its own output
    fails(_save(m, tmp_path / "self.onnx"), "E_MODEL", "cycle")


def test_external_data_offset_tricks(rng, tmp_path):
    p, data = _external(rng, tmp_path, "w.bin", make_file=False)
    (tmp_path / "models" / "w.bin").write_bytes(data)
    m = onnx.load(str(p), load_external_data=False)
    t = next(t for t in m.graph.initializer if t.data_location == TensorProto.EXTERNAL)

    def with_entries(name, **kv):
        for e in t.external_data:
            if e.key in kv:
                e.value = kv[e.key]
        q = tmp_path / "models" / name
        onnx.save(m, str(q))
        return q

    fails(with_entries("off.onnx", offset=str(len(data))), "E_MODEL", "past the end")
    fails(with_entries("offbig.onnx", offset=str(2**63 - 1)), "E_MODEL", "past the end")
    fails(with_entries("offneg.onnx", offset="-4"), "E_MODEL", "offset")
    fails(with_entries("offnan.onnx", offset="12abc"), "E_MODEL", "offset")
    fails(with_entries("len.onnx", offset="0", length=str(len(data) + 4)), "E_MODEL", "length")
    fails(with_entries("dir.onnx", location=".", length=str(len(data))), "E_MODEL")


def _varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def _with_graph_bytes(graph_bytes):
    """A ModelProto whose graph (field 7) is the given bytes."""
    m = helper.make_model(onnx.GraphProto(), opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    m.ClearField("graph")
    return m.SerializeToString() + b"\x3a" + _varint(len(graph_bytes)) + graph_bytes


def _io_graph():
    g = onnx.GraphProto()
    g.name = "g"
    g.input.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]))
    g.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    return g.SerializeToString()


def test_ten_million_empty_nodes_refused_before_unpacking(tmp_path):
    """20 MB of empty NodeProtos (2 bytes each, ~150 unpacked): the node count
    is read off the wire before protobuf-c builds them (was 1.5 GB and 5 s)."""
    p = tmp_path / "nodes.onnx"
    p.write_bytes(_with_graph_bytes(_io_graph() + b"\x0a\x00" * 10_000_000))
    rc, err, secs, rss = _run_measured(p)
    assert rc == 1 and "error E_TOO_LARGE" in err and "nodes" in err, err
    assert "Sanitizer" not in err
    assert secs < 20 and rss < 512, f"{secs:.1f} s, {rss:.0f} MiB"


def test_unpack_budget(tmp_path):
    """One node with 30,000,000 empty input names (60 MB): refused when the
    unpack reaches its budget (8x the file + 256 MiB), not after 1.2 GB."""
    node = helper.make_node("Relu", ["x"], ["y"]).SerializeToString() + b"\x0a\x00" * 30_000_000
    p = tmp_path / "inputs.onnx"
    p.write_bytes(_with_graph_bytes(_io_graph() + b"\x0a" + _varint(len(node)) + node))
    rc, err, secs, rss = _run_measured(p)
    assert rc == 1 and "error E_TOO_LARGE" in err and "unpack" in err, err
    assert "Sanitizer" not in err
    # ASan's allocator adds its own overhead to the budget's 750 MB.
    assert secs < 60 and rss < 2048, f"{secs:.1f} s, {rss:.0f} MiB"
