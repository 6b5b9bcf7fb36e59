"""Interoperability and reply limits over raw msgpack-RPC: method names and
every other str sent as bin (what some client libraries do), unknown
notifications ignored without closing, names echoed in errors always valid
UTF-8, infer refusing params it does not take, and replies over --max-reply
refused with E_TOO_LARGE before anything is computed."""
import msgpack
import numpy as np
import pytest

from tests.integration.daemon_wire import Wire, request, stats
from tests.models.builders import Graph, save
from tests.support.daemon import TestDaemon

RNG = np.random.default_rng()
X = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)


def tiny_model(path):
    g = Graph(np.random.default_rng(8))
    y = g.relu(g.conv(g.input("x", [2, 4, 4]), 2, 2, 1))
    return save(g.build([y], "tiny"), path)


def wide_model(path):
    """1x1 conv 1 -> 256 channels on 64x64: 16 KiB in, 4 MiB out per item."""
    g = Graph(np.random.default_rng(9))
    y = g.conv(g.input("x", [1, 64, 64]), 1, 256, 1)
    return save(g.build([y], "wide"), path)


def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    models = tmp_path_factory.mktemp("models")
    tiny_model(models / "tiny.onnx")
    wide_model(models / "wide.onnx")
    # --max-reply 1M: one item of `wide` (4 MiB of output) is over it.
    with TestDaemon(models_dir=models, args=["--max-reply", "1M"]) as daemon:
        yield daemon


def packb(obj):
    # Python bytes become msgpack bin (use_bin_type=True): a client that
    # keeps every name as bytes sends them all as bin.
    return msgpack.packb(obj, use_bin_type=True)


def test_notification_named_as_bin_then_request_on_same_connection(d):
    before = stats(d)["requests"]["notifications"]
    with Wire.connect(d) as w:
        # A third-party client opens with a notification named in bin.
        w.send(packb([2, b"client.hello", [{b"name": b"thirdparty", b"version": 3}]]))
        w.send(packb([0, 1, b"hello", []]))
        resp = w.recv_one()
        assert resp[:3] == [1, 1, None] and resp[3]["server"] == "convd"
        # Unknown notifications of every name shape: all ignored, still open.
        w.send(packb([2, "no.such.method", []]))
        w.send(packb([2, b"\xff\xfe not utf-8", []]))
        w.send(packb([2, "n" * 200, [1, 2, 3]]))
        assert w.call("health")[2] is None
    assert stats(d)["requests"]["notifications"] - before == 4


def test_method_as_bin_request(d):
    with Wire.connect(d) as w:
        w.send(packb([0, 7, b"health", []]))
        resp = w.recv_one()
        assert resp[:3] == [1, 7, None] and resp[3]["status"] == "ok"
        # An unknown method as bin: E_METHOD, connection open.
        w.send(packb([0, 8, b"nope", []]))
        resp = w.recv_one()
        assert resp[1] == 8 and resp[2]["code"] == "E_METHOD"
        assert "'nope'" in resp[2]["message"]
        assert w.call("hello")[2] is None


def test_infer_with_every_name_as_bin(d):
    with Wire.connect(d) as w:
        tiny = [m for m in w.result("models")["models"] if m["name"] == "tiny"][0]
        out = tiny["outputs"][0]["name"]
        params = {b"model": b"tiny", b"outputs": [out.encode()], b"timeout_ms": 60000,
                  b"inputs": {b"x": {b"dtype": b"f32", b"shape": list(X.shape),
                                     b"data": X.tobytes()}}}
        w.send(packb([0, 3, b"infer", [params]]))
        resp = w.recv_one()
        assert resp[1] == 3 and resp[2] is None, resp[2]
        # The same request with str names gives the same bytes back.
        ref = w.result("infer", {"model": "tiny", "inputs": {"x": tensor(X)}})
        assert resp[3]["outputs"][out] == ref["outputs"][out]


def test_bin_that_is_not_utf8_is_not_a_str(d):
    with Wire.connect(d) as w:
        # Where a str is expected: E_PARAMS, the connection stays open.
        w.send(packb([0, 4, "infer", [{"model": b"ti\xffny", "inputs": {"x": tensor(X)}}]]))
        resp = w.recv_one()
        assert resp[1] == 4 and resp[2]["code"] == "E_PARAMS"
        assert "not valid UTF-8" in resp[2]["message"]
        w.send(packb([0, 5, "infer", [{"model": "tiny", "inputs": {"x": {
            "dtype": b"\xc3\x28", "shape": list(X.shape), "data": X.tobytes()}}}]]))
        resp = w.recv_one()
        assert resp[1] == 5 and resp[2]["code"] == "E_PARAMS"
        assert w.call("hello")[2] is None
    with Wire.connect(d) as w:
        # As a request's method it is a bad envelope: E_PROTOCOL, closed.
        w.send(packb([0, 6, b"hel\xfflo", []]))
        got = w.expect_eof()
        assert len(got) == 1 and got[0][1] == 6 and got[0][2]["code"] == "E_PROTOCOL"


def raw_with_str(obj, placeholder, raw):
    """packb(obj) with the str `placeholder` (same length as raw) replaced by
    the bytes raw kept as a str: a str that is not UTF-8, which no msgpack
    library packs on purpose but any peer may send."""
    assert len(placeholder) == len(raw) < 32
    data = packb(obj)
    tag = bytes([0xa0 | len(raw)])
    assert data.count(tag + placeholder.encode()) == 1
    return data.replace(tag + placeholder.encode(), tag + raw)


def test_errors_that_echo_names_are_valid_utf8(d):
    bad = b"m\xff\xfe\xc3("  # invalid UTF-8 inside a str
    with Wire.connect(d) as w:  # Wire decodes with raw=False: strict UTF-8
        for i, method in enumerate(("infer", "unload", "plan")):
            key = "model" if method != "unload" else "name"
            w.send(raw_with_str([0, 10 + i, method, [{key: "PLACE"}]], "PLACE", bad))
            resp = w.recv_one()
            assert resp[1] == 10 + i and resp[2]["code"] == "E_NOT_FOUND", resp
            assert "m\\xff\\xfe\\xc3(" in resp[2]["message"], resp[2]["message"]
        w.send(raw_with_str([0, 20, "infer", [{"model": "tiny", "inputs": {"PLACE": tensor(X)}}]],
                            "PLACE", bad))
        resp = w.recv_one()
        assert resp[2]["code"] == "E_PARAMS" and "\\xff" in resp[2]["message"]
        w.send(raw_with_str([0, 21, "ABCDE", []], "ABCDE", b"no\xff\xfe!"))
        resp = w.recv_one()
        assert resp[2]["code"] == "E_METHOD"
        assert w.call("hello")[2] is None


def test_infer_refuses_params_it_does_not_take(d):
    with Wire.connect(d) as w:
        code = w.error("infer", {"model": "tiny", "inputs": {"x": tensor(X)}, "pad": b"0" * 1000})
        assert code == "E_PARAMS"
        resp = w.call("infer", {"model": "tiny", "inputs": {"x": tensor(X)}, "padding": None})
        assert resp[2]["code"] == "E_PARAMS" and "'padding'" in resp[2]["message"]
        # A key given twice (the second could carry anything) is refused too.
        body = packb({"model": "tiny", "inputs": {"x": tensor(X)}})
        dup = bytes([body[0] + 1]) + body[1:] + packb("model") + packb("tiny")
        w.send(packb([0, 99, "infer", []])[:-1] + b"\x91" + dup)
        resp = w.recv_one()
        assert resp[1] == 99 and resp[2]["code"] == "E_PARAMS" and "twice" in resp[2]["message"]
        assert w.call("infer", {"model": "tiny", "inputs": {"x": tensor(X)}})[2] is None


def test_reply_over_max_reply_is_refused_connection_fine(d):
    x = RNG.standard_normal((1, 1, 64, 64)).astype(np.float32)
    before = stats(d)
    with Wire.connect(d) as w:
        resp = w.call("infer", {"model": "wide", "inputs": {"x": tensor(x)}})
        assert resp[2]["code"] == "E_TOO_LARGE", resp[2]
        assert "max-reply" in resp[2]["message"]
        # Refused before it ran: nothing was computed for it.
        after = w.result("stats")
        assert after["models"]["wide"]["batches"] == before["models"]["wide"]["batches"]
        assert after["models"]["wide"]["errors_by_code"]["E_TOO_LARGE"] >= 1
        # The same connection, and others, carry on.
        assert w.call("infer", {"model": "tiny", "inputs": {"x": tensor(X)}})[2] is None
    with Wire.connect(d) as w2:
        assert w2.call("health")[2] is None
