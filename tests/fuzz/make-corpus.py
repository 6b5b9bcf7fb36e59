#!/usr/bin/env python3
"""Writes the seed corpus of a fuzz target into a folder. By default, that of
tests/fuzz/fuzz-onnx-load.c:
small valid models from tests/models/builders.py (every op family the
lowering knows, shape sub-graphs, residuals, BN folding) and a few broken
ones (truncated, folding edge cases, a cycle, external data). Each seed is one
configuration byte (max_batch, blocked layout, plan mode; see the target)
followed by the file. Generated, never committed:

    python3 tests/fuzz/make-corpus.py build/fuzz/onnx-seeds

With --rpc, the seeds of tests/fuzz/fuzz-rpc-reader.c (the wire): requests
of every method, infer requests that pass and that fail each check against
the target's model signatures (picked by msgid % 4), pipelined and split
streams, truncated, over-limit and garbage messages. Each is one
configuration byte (read size, message limit, budget skip; see the target)
followed by the bytes a client sends:

    python3 tests/fuzz/make-corpus.py --rpc build/fuzz/rpc-seeds
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tests.models import builders as B  # noqa: E402

SMALL = 6  # spatial size: small weights keep the seeds a few KB


def valid_models(rng):
    out = {}

    g = B.Graph(rng)
    x = g.input("x", [3, SMALL, SMALL])
    out["conv-bn-relu-fc"] = g.build([B.fc_head(g, g.conv_bn_relu(x, 3, 4, 3), 4, 3)])

    g = B.Graph(rng)
    x = g.input("x", [4, SMALL, SMALL])
    out["resnet-basic"] = g.build([B.resnet_basic(g, x, 4, 4)])

    g = B.Graph(rng)
    x = g.input("x", [4, SMALL, SMALL])
    out["resnet-bottleneck"] = g.build([B.resnet_bottleneck(g, x, 4, 2, 8, stride=2)])

    g = B.Graph(rng)
    x = g.input("x", [2, SMALL, SMALL])
    out["mbv2"] = g.build([B.mbv2_inverted(g, x, 2, 2, expand=2)])

    g = B.Graph(rng)
    x = g.input("x", [4, SMALL, SMALL])
    out["fire"] = g.build([B.squeeze_fire(g, x, 4, 2, 2, 2)])

    for dyn in (False, True):
        g = B.Graph(rng)
        x = g.input("x", [4, SMALL, SMALL])
        y = B.channel_shuffle(g, x, 4, SMALL, SMALL, 2, dynamic=dyn)
        out[f"shuffle-{'dyn' if dyn else 'static'}"] = g.build([y], out_shapes={y: ["N", 4, SMALL, SMALL]})

    g = B.Graph(rng)
    x = g.input("x", [4, SMALL, SMALL])
    out["se"] = g.build([B.se_block(g, x, 4, gate="hardsigmoid")])

    g = B.Graph(rng, opset=11)
    x = g.input("x", [3, SMALL, SMALL])
    y = g.node("MaxPool", [g.conv(x, 3, 4, 3, stride=2, auto_pad="SAME_UPPER")], kernel_shape=[2, 2], ceil_mode=1)
    y = g.node("AveragePool", [y], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)
    y = g.node("Flatten", [g.node("LeakyRelu", [y], alpha=0.2)], axis=1)
    out["pools-opset11"] = g.build([g.node("Softmax", [y])])

    g = B.Graph(rng)
    x = g.input("x", [5, 4])
    y = g.node("MatMul", [x, g.init(rng.standard_normal((4, 3)).astype(np.float32))])
    y = g.node("Sub", [y, g.init(np.float32([1.0, 2.0, 3.0]))])
    y = g.node("Div", [y, g.init(np.float32(2.0))])
    y = g.node("Transpose", [g.node("HardSwish", [y])], perm=[0, 2, 1])
    out["matmul-transpose"] = g.build([y])

    g = B.Graph(rng)
    x = g.input("x", [2, 3, 4])
    y = g.node("Unsqueeze", [x, g.init(np.array([2], np.int64))])
    y = g.node("Squeeze", [y, g.init(np.array([2], np.int64))])
    y = g.node("Reshape", [y, g.init(np.array([0, -1], np.int64))])
    y = g.node("Clip", [y, g.init(np.float32(0.0)), g.init(np.float32(1.0))])
    y = g.node("Concat", [y, g.node("Sigmoid", [y])], axis=1)
    out["reshape-concat"] = g.build([g.node("Identity", [g.node("Dropout", [y])])])
    return out


def raw(name, dtype, dims, data):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.raw_data = data
    return t


def tiny(nodes, inits=(), opset=13):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def broken_models():
    i64 = lambda v, n: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    out = {}
    for op, a, b in (("Div", -2**63, -1), ("Mul", 2**62, 4), ("Add", 2**63 - 1, 1), ("Sub", 3, 0)):
        out[f"fold-{op}"] = tiny([i64([a], "a"), i64([b], "b"), helper.make_node(op, ["a", "b"], ["c"]),
                                  helper.make_node("Relu", ["x"], ["y"])])
    out["cycle"] = tiny([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                         helper.make_node("Relu", ["a"], ["y"])])
    out["huge-decl"] = tiny([helper.make_node("Relu", ["x"], ["y"])], [raw("h", TensorProto.INT64, [2, 2**30], b"\0" * 8)])
    out["broadcast"] = tiny([helper.make_node("Add", ["p", "q"], ["c"]), helper.make_node("Relu", ["x"], ["y"])],
                            [numpy_helper.from_array(np.ones((64, 1), np.float32), "p"),
                             numpy_helper.from_array(np.ones((1, 64), np.float32), "q")])
    ext = raw("w", TensorProto.FLOAT, [4, 4], b"")
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "64"), ("length", "64")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    out["external"] = tiny([helper.make_node("MatMul", ["x", "w"], ["y"])], [ext])
    return out


def rpc_streams():
    import struct

    import msgpack

    pk = lambda o: msgpack.packb(o, use_bin_type=True)
    req = lambda msgid, method, params=None: pk([0, msgid, method, [params] if params is not None else []])

    def tensor(dtype, shape, fill=b"\0"):
        size = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "i32": 4, "i64": 8, "bool": 1}
        n = 1
        for d in shape:
            n *= d
        data = (fill * (n * size.get(dtype, 1)))[: n * size.get(dtype, 1)]
        return {"dtype": dtype, "shape": list(shape), "data": data}

    nan = struct.pack("<f", float("nan"))
    inf = struct.pack("<f", float("inf"))
    out = {}
    # Every method, with and without params.
    for i, m in enumerate(("hello", "health", "stats", "models", "metrics", "load", "unload", "plan", "nosuch")):
        out[f"method-{m}"] = req(i, m) + req(100 + i, m, {"name": "m1", "path": "m1.onnx", "max_batch": 4})
    # infer against each signature (msgid % 4: img, two, vec, deep), valid.
    img = {"x": tensor("f32", [2, 3, 8, 8], nan + inf)}
    two = {"a": tensor("f32", [3, 4]), "b": tensor("i64", [3, 2])}
    vec = {"in": tensor("u8", [1])}
    deep = {"t": tensor("f16", [1, 2, 1, 2, 1, 2, 1, 2])}
    out["infer-img"] = req(0, "infer", {"model": "img", "inputs": img, "timeout_ms": 100})
    out["infer-two"] = req(1, "infer", {"model": "two", "inputs": two, "outputs": ["s"]})
    out["infer-two-big"] = req(5, "infer", {"model": "two", "inputs": two, "outputs": ["s", "big"]})
    out["infer-vec"] = req(2, "infer", {"model": "vec", "inputs": vec, "outputs": None})
    out["infer-deep"] = req(3, "infer", {"model": "deep", "inputs": deep})
    # Each check failing once.
    bad = {
        "dtype": {"x": tensor("f64", [1, 3, 8, 8])},
        "unknown-dtype": {"x": {"dtype": "f8", "shape": [1], "data": b"\0"}},
        "rank": {"x": tensor("f32", [1, 3, 8])},
        "dim": {"x": tensor("f32", [1, 3, 8, 9])},
        "empty-dim": {"x": tensor("f32", [0, 3, 8, 8])},
        "batch": {"x": tensor("f32", [9, 3, 8, 8])},
        "short-data": {"x": {"dtype": "f32", "shape": [1, 3, 8, 8], "data": b"\0" * 10}},
        "overflow": {"x": {"dtype": "f32", "shape": [2**62, 2**62, 1, 1], "data": b""}},
        "negative": {"x": {"dtype": "f32", "shape": [-1, 3, 8, 8], "data": b""}},
        "float-dim": {"x": {"dtype": "f32", "shape": [1.5], "data": b""}},
        "not-map": {"x": [1, 2, 3]},
        "unknown-input": {"z": tensor("f32", [1])},
    }
    for k, inputs in bad.items():
        out[f"infer-bad-{k}"] = req(4, "infer", {"model": "img", "inputs": inputs})
    # Shared-memory regions: the methods, region tensors and 'into', good and bad.
    out["region-methods"] = (req(0, "region_register", {"name": "r"}) + req(1, "region_list") +
                             req(2, "region_unregister", {"name": "r"}) + req(3, "region_register", {"name": "x y"}) +
                             req(4, "region_register", {"name": "n" * 65}) + req(5, "region_register"))
    rimg = {"x": {"dtype": "f32", "shape": [2, 3, 8, 8], "region": "r", "offset": 64}}
    out["infer-region"] = req(0, "infer", {"model": "img", "inputs": rimg,
                                           "into": {"y": {"region": "r", "offset": 4096, "size": 1 << 20}}})
    out["infer-region-two"] = req(1, "infer", {"model": "two", "inputs": {
        "a": {"dtype": "f32", "shape": [3, 4], "region": "q", "offset": 0}, "b": tensor("i64", [3, 2])},
        "into": {"s": {"region": "q", "offset": 1 << 63, "size": (1 << 64) - 1}}})
    out["infer-region-bad"] = (
        req(0, "infer", {"model": "img", "inputs": {"x": {"dtype": "f32", "shape": [2, 3, 8, 8], "region": "r"}}}) +
        req(0, "infer", {"model": "img", "inputs": {"x": {"dtype": "f32", "shape": [2, 3, 8, 8], "region": "",
                                                          "offset": 0}}}) +
        req(0, "infer", {"model": "img", "inputs": img, "into": {"y": {"region": "r", "offset": -1, "size": 1}}}) +
        req(0, "infer", {"model": "img", "inputs": img, "into": {"nope": {"region": "r", "offset": 0, "size": 1}}}) +
        req(0, "infer", {"model": "img", "inputs": img, "into": []}))
    out["infer-extra-key"] = req(0, "infer", {"model": "img", "inputs": img, "pad": b"x" * 64})
    out["infer-no-model"] = req(0, "infer", {"inputs": img})
    out["infer-outputs-empty"] = req(0, "infer", {"model": "img", "inputs": img, "outputs": []})
    out["infer-timeout-neg"] = req(0, "infer", {"model": "img", "inputs": img, "timeout_ms": -1})
    out["infer-two-disagree"] = req(1, "infer", {"model": "two", "inputs": {"a": tensor("f32", [2, 4]), "b": tensor("i64", [3, 2])}})
    # Names as bin (some clients send every string so).
    out["infer-as-bin"] = msgpack.packb([0, 0, b"infer", [{b"model": b"img", b"inputs": {b"x": {b"dtype": b"f32", b"shape": [1, 3, 8, 8], b"data": b"\0" * 768}}}]], use_bin_type=True)
    out["method-not-utf8"] = msgpack.packb([0, 7, b"\xff\xfe", []], use_bin_type=True)
    # Envelopes: notification, response from a client, bad msgid, short array, not an array.
    out["notify"] = pk([2, "ping", [{}]]) + req(9, "hello")
    out["response"] = pk([1, 3, None, {"ok": True}]) + pk([1, 4, {"code": "E_PARAMS", "message": "x"}, None])
    out["bad-msgid"] = pk([0, -1, "hello", []]) + pk([0, "x", "hello", []])
    out["short"] = pk([0, 1, "hello"])
    out["not-array"] = pk({"a": 1}) + pk(7)
    out["params-two"] = req(1, "hello") + pk([0, 2, "infer", [{}, {}]])
    out["params-not-array"] = pk([0, 2, "infer", {"model": "img"}])
    # Streams: pipelined, same msgid twice, truncated, garbage after a good one.
    out["pipelined"] = b"".join(req(i, m) for i, m in enumerate(["hello", "health", "stats"] * 3))
    out["same-msgid"] = req(7, "infer", {"model": "img", "inputs": img}) * 2
    full = req(0, "infer", {"model": "img", "inputs": img})
    out["truncated"] = req(1, "hello") + full[: len(full) // 2]
    out["garbage"] = req(1, "hello") + bytes(range(0xc1, 0xff)) * 2
    # Over the limits: a declared str / bin / array / map far too large, deep nesting.
    out["huge-bin"] = req(1, "hello") + b"\x94\x00\x01\xa5infer\x91\xc6\xff\xff\xff\xff"
    out["huge-array"] = b"\xdd\xff\xff\xff\xff"
    out["huge-map"] = b"\x94\x00\x01\xa5infer\x91\xdf\x7f\xff\xff\xff"
    out["deep"] = b"\x94\x00\x01\xa5hello" + b"\x91" * 40 + b"\xc0"
    return out


def main_rpc(d):
    os.makedirs(d, exist_ok=True)
    n = 0
    for name, data in rpc_streams().items():
        # Configurations: whole reads of 64; one byte at a time; 7-byte reads
        # with the small message limit and the budget skip.
        for cfg in (0x3f, 0x00, 0xc6):
            with open(os.path.join(d, f"{name}-{cfg:02x}"), "wb") as f:
                f.write(bytes([cfg]) + data)
            n += 1
    print(f"{n} seeds in {d}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--rpc":
        return main_rpc(sys.argv[2])
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(5)
    n = 0
    models = {**valid_models(rng), **broken_models()}
    for name, m in models.items():
        data = m.SerializeToString()
        # Configurations: plain; blocked NCHW16C, dense plan; NCHW8C, compaction, max_batch 17.
        for cfg in (0x00, 0x05, 0x3e):
            with open(os.path.join(d, f"{name}-{cfg:02x}"), "wb") as f:
                f.write(bytes([cfg]) + data)
            n += 1
        if name == "conv-bn-relu-fc":
            with open(os.path.join(d, f"{name}-truncated"), "wb") as f:
                f.write(b"\0" + data[: len(data) // 2])
            n += 1
    print(f"{n} seeds in {d}")


if __name__ == "__main__":
    main()
