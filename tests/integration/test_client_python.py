"""The Python client package (client/python/convd) against a real daemon."""
import os
import socket
import threading
import time

import msgpack
import numpy as np
import pytest

import convd
from tests.integration import client_models
from tests.support.threads import Thread

# Guards the waits below against a hang; none of them is a pass criterion.
HANG_S = 60


@pytest.fixture
def d(scale2_daemon):
    return scale2_daemon


@pytest.fixture
def c(d):
    with convd.Client(d.socket, timeout=10) as client:
        yield client


def test_hello(c):
    h = c.hello()
    assert h["server"] == "convd"
    assert h["protocol"] == convd.PROTOCOL
    assert "cpu" in h["features"]
    assert isinstance(h["version"], str) and h["version"]


def test_health(c):
    h = c.health()
    assert h["status"] == "ok"
    assert 0 <= h["uptime_s"] < 3600
    assert h["models"] == len(c.models())


def test_models_is_a_list(c):
    ms = c.models()
    assert isinstance(ms, list)
    for m in ms:
        assert m["name"] and m["inputs"] and m["outputs"]


def test_stats_counts_requests(c):
    before = c.stats()["requests"]["total"]
    for _ in range(5):
        c.hello()
    s = c.stats()
    assert s["requests"]["total"] >= before + 6
    assert s["connections"]["current"] >= 1


def test_unknown_method_keeps_connection(c):
    with pytest.raises(convd.ConvdError) as e:
        c.call("no_such_method")
    assert e.value.code == "E_METHOD"
    assert e.value.message
    assert str(e.value).startswith("E_METHOD: ")
    assert c.health()["status"] == "ok"


def test_connect_missing_socket(tmp_path):
    path = str(tmp_path / "nothing.sock")
    with pytest.raises(convd.ConvdError) as e:
        convd.Client(path)
    assert e.value.code == "E_CONNECT"
    assert path in e.value.message


def test_env_socket(d, monkeypatch):
    monkeypatch.setenv("CONVD_SOCKET", d.socket)
    with convd.Client() as c:
        assert c.path == d.socket
        assert c.hello()["server"] == "convd"


def test_default_socket_rule(monkeypatch):
    # The daemon's own rule: root -> /run/convd, anyone else -> XDG_RUNTIME_DIR.
    monkeypatch.delenv("CONVD_SOCKET", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert convd.default_socket() == "/run/convd/convd.sock" == convd.SYSTEM_SOCKET
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert convd.default_socket() == "/run/user/1000/convd.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    with pytest.raises(convd.ConvdError) as e:
        convd.Client()
    assert e.value.code == "E_CONNECT" and "CONVD_SOCKET" in e.value.message


def test_context_manager_closes(d):
    with convd.Client(d.socket) as c:
        c.health()
    with pytest.raises(convd.ConvdError) as e:
        c.health()
    assert e.value.code == "E_CLOSED"


def test_threads_share_one_client(c):
    errors = []

    def work(i):
        try:
            for j in range(50):
                if (i + j) % 2:
                    assert c.hello()["server"] == "convd"
                else:
                    with pytest.raises(convd.ConvdError) as e:
                        c.call(f"nope_{i}_{j}")
                    assert e.value.code == "E_METHOD"
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _fake_server(tmp_path, handler):
    """A one-connection Unix server running handler(conn) on a thread."""
    path = str(tmp_path / "fake.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def run():
        conn, _ = srv.accept()
        try:
            handler(conn)
        finally:
            conn.close()
            srv.close()

    t = Thread(target=run, daemon=True)  # join() raises the handler's failure
    t.start()
    return path, t


def _read_request(conn, unpacker):
    while True:
        for msg in unpacker:
            return msg
        data = conn.recv(65536)
        if not data:
            return None
        unpacker.feed(data)


def test_timeout_then_late_answer_is_dropped(tmp_path):
    gave_up, done = threading.Event(), threading.Event()

    def handler(conn):
        u = msgpack.Unpacker(raw=False)
        first = _read_request(conn, u)
        # Answer the first request only once the client has given up on it.
        assert gave_up.wait(HANG_S)
        conn.sendall(msgpack.packb([1, first[1], None, {"n": "first"}]))
        second = _read_request(conn, u)
        conn.sendall(msgpack.packb([1, second[1], None, {"n": "second"}]))
        assert done.wait(HANG_S)  # open until the client has read it

    path, t = _fake_server(tmp_path, handler)
    with convd.Client(path) as c:
        t0 = time.monotonic()
        with pytest.raises(convd.ConvdError) as e:
            c.call("hello", timeout=0.1)
        assert e.value.code == "E_TIMEOUT"
        assert time.monotonic() - t0 >= 0.09  # not before its timeout
        gave_up.set()
        assert c.call("hello", timeout=HANG_S) == {"n": "second"}
        done.set()
    t.join()


def test_server_closes(tmp_path):
    def handler(conn):
        _read_request(conn, msgpack.Unpacker(raw=False))

    path, t = _fake_server(tmp_path, handler)
    with convd.Client(path) as c:
        with pytest.raises(convd.ConvdError) as e:
            c.health()
        assert e.value.code == "E_CLOSED"
        with pytest.raises(convd.ConvdError) as e:
            c.health()
        assert e.value.code == "E_CLOSED"
    t.join(HANG_S)


def test_server_sends_garbage(tmp_path):
    done = threading.Event()

    def handler(conn):
        _read_request(conn, msgpack.Unpacker(raw=False))
        conn.sendall(b"\xc1\xc1\xc1")
        assert done.wait(HANG_S)  # open until the client has judged the bytes

    path, t = _fake_server(tmp_path, handler)
    with convd.Client(path) as c:
        with pytest.raises(convd.ConvdError) as e:
            c.health()
        done.set()
        assert e.value.code == "E_PROTOCOL"
    t.join()


def test_tensor_codec_round_trip():
    rng = np.random.default_rng()
    for dt in ["<f4", "<f2", "<f8", "i1", "u1", "<i2", "<i4", "<i8", "?"]:
        shape = tuple(rng.integers(1, 5, size=rng.integers(1, 5)))
        a = (rng.standard_normal(shape) * 10).astype(dt)
        t = convd.encode_tensor(a)
        assert t["shape"] == list(shape)
        assert len(t["data"]) == a.nbytes
        b = convd.decode_tensor(t)
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(a, b)
    # Non-contiguous and big-endian inputs are converted, not refused.
    a = np.arange(24, dtype=">f4").reshape(4, 6)[:, ::2]
    np.testing.assert_array_equal(convd.decode_tensor(convd.encode_tensor(a)), a)
    with pytest.raises(convd.ConvdError) as e:
        convd.encode_tensor(np.zeros(3, dtype=np.complex64))
    assert e.value.code == "E_DTYPE"


def test_infer_unknown_model(c):
    with pytest.raises(convd.ConvdError) as e:
        c.infer("no_such_model", {"x": np.ones((1, 3, 5, 7), np.float32)})
    assert e.value.code == "E_NOT_FOUND"


def test_infer_matches_reference(c):
    m = [m for m in c.models() if m["name"] == "scale2"][0]
    max_batch = max(1, int(m.get("max_batch") or 1))
    rng = np.random.default_rng()
    for batch in {1, int(rng.integers(1, max_batch + 1)), max_batch}:
        x = rng.standard_normal((batch, 3, 5, 7)).astype(np.float32) * 3
        out = c.infer("scale2", {"x": x})
        assert list(out) == ["y"]
        ref = client_models.scale2_reference(x)
        assert out["y"].shape == ref.shape and out["y"].dtype == np.float32
        assert np.all(np.abs(out["y"] - ref) <= 1e-4 * np.maximum(1, np.abs(ref)))
    out = c.infer("scale2", {"x": x}, outputs=["y"])
    assert list(out) == ["y"]


def test_infer_errors(c):
    x = np.ones((1, 3, 5, 7), np.float32)
    cases = [({"nope": x}, "E_PARAMS"), ({}, "E_PARAMS"),
             ({"x": x, "extra": x}, "E_PARAMS"),
             ({"x": np.ones((3, 5, 7), np.float32)}, "E_SHAPE"),
             ({"x": np.ones((1, 3, 7, 5), np.float32)}, "E_SHAPE"),
             ({"x": np.ones((1, 3, 5, 7), np.float64)}, "E_DTYPE")]
    for inputs, code in cases:
        with pytest.raises(convd.ConvdError) as e:
            c.infer("scale2", inputs)
        assert e.value.code == code, (list(inputs), e.value)
    assert c.health()["status"] == "ok"


def test_load_unload(c):
    name = f"copy_{os.getpid()}"
    m = c.load(name, "scale2.onnx", max_batch=2)
    assert m["name"] == name and m["max_batch"] == 2
    assert name in [x["name"] for x in c.models()]
    x = np.random.default_rng().standard_normal((2, 3, 5, 7)).astype(np.float32)
    np.testing.assert_allclose(c.infer(name, {"x": x})["y"],
                               client_models.scale2_reference(x), rtol=1e-4, atol=1e-4)
    with pytest.raises(convd.ConvdError) as e:
        c.infer(name, {"x": np.ones((3, 3, 5, 7), np.float32)})
    assert e.value.code == "E_SHAPE"
    assert c.unload(name) == {"name": name}
    with pytest.raises(convd.ConvdError) as e:
        c.unload(name)
    assert e.value.code == "E_NOT_FOUND"
    with pytest.raises(convd.ConvdError) as e:
        c.load(name, "../escape.onnx")
    assert e.value.code == "E_ACCESS"
