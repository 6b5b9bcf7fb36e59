"""Shared-memory regions against a real daemon, over the raw wire: a memfd
sealed against shrinking is sent once (SCM_RIGHTS) with region_register, then
named by requests for inputs and outputs (docs/PROTOCOL.md, "Shared-memory
regions"). One test per hostile case, each with its exact error code; what
happens "in flight" is arranged by sending the messages in one write, so the
daemon handles them in one turn of its loop (no timing)."""
import fcntl
import mmap
import os
import socket
import tempfile
import threading
import time

import numpy as np
import pytest

from tests.integration.daemon_wire import Wire, request
from tests.integration.test_daemon_models import assert_close, conv_model, from_wire, reference, tensor
from tests.support.daemon import TestDaemon

C, H, W, COUT = 3, 6, 5, 4
IN_BYTES = C * H * W * 4
OUT_BYTES = COUT * H * W * 4
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, slow):
    d = tmp_path_factory.mktemp("models")
    conv_model(d / "conv.onnx", C, COUT, H, W, seed=1)
    slow.write(d / "slow.onnx")
    return d


@pytest.fixture(scope="module")
def d(models_dir):
    with TestDaemon(models_dir=models_dir,
                    args=["--max-batch", "4", "--workers", "2", "--max-regions-per-conn", "3",
                          "--max-region-bytes-per-conn", "64M"]) as daemon:
        yield daemon


@pytest.fixture
def w(d):
    with Wire.connect(d, timeout=60) as wire:
        yield wire


def memfd(size, seals=SEALS):
    fd = os.memfd_create("convd-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def send_register(w, name, fd):
    """Sends region_register with fd attached; returns its msgid."""
    msgid = w.next_id
    w.next_id += 1
    data = request(msgid, "region_register", {"name": name})
    fds = [] if fd is None else [fd]
    sent = socket.send_fds(w.sock, [data], fds)
    if sent < len(data):
        w.sock.sendall(data[sent:])
    return msgid


def register(w, name, fd):
    msgid = send_register(w, name, fd)
    resp = w.recv_one()
    assert resp[1] == msgid
    return resp


def region(w, name, size, seals=SEALS):
    """A registered region and its mapping."""
    fd = memfd(size, seals)
    resp = register(w, name, fd)
    assert resp[2] is None, resp[2]
    assert resp[3] == {"name": name, "size": size, "writable": True}
    m = mmap.mmap(fd, size)
    os.close(fd)
    return m


def x_of(seed, batch=1):
    return np.random.default_rng(seed).standard_normal((batch, C, H, W)).astype(np.float32)


def ref_in(name, off, shape):
    return {"dtype": "f32", "shape": list(shape), "region": name, "offset": off}


def code_of(resp):
    assert resp[3] is None and isinstance(resp[2], dict), resp
    return resp[2]["code"]


def test_infer_from_and_into_a_region(models_dir, w):
    m = region(w, "r", 1 << 16)
    x = x_of(1)
    view = np.frombuffer(m, np.float32)
    view[:x.size] = x.ravel()
    out_off = 4096
    r = w.result("infer", {"model": "conv", "inputs": {"x": ref_in("r", 0, x.shape)},
                           "into": {"y": {"region": "r", "offset": out_off, "size": OUT_BYTES}}})
    assert r["outputs"]["y"] == {"dtype": "f32", "shape": [1, COUT, H, W], "region": "r", "offset": out_off}
    got = np.frombuffer(m, np.float32, COUT * H * W, out_off).reshape(1, COUT, H, W)
    assert_close(got, reference(str(models_dir / "conv.onnx"), x)["y"])
    # A region input with an inline output, and the other way round.
    r = w.result("infer", {"model": "conv", "inputs": {"x": ref_in("r", 0, x.shape)}})
    assert_close(from_wire(r["outputs"]["y"]), got)
    r = w.result("infer", {"model": "conv", "inputs": {"x": tensor(x)},
                           "into": {"y": {"region": "r", "offset": 8192, "size": OUT_BYTES}}})
    assert_close(np.frombuffer(m, np.float32, COUT * H * W, 8192).reshape(got.shape), got)
    del view, got
    m.close()


def test_batched_requests_write_their_own_rows(models_dir, w):
    """Requests joined into one run each get their rows in their own range."""
    m = region(w, "b", 1 << 16)
    xs = [x_of(10 + i) for i in range(4)]
    view = np.frombuffer(m, np.float32)
    for i, x in enumerate(xs):
        view[i * 1024:i * 1024 + x.size] = x.ravel()
    data = b"".join(request(100 + i, "infer", {
        "model": "conv", "inputs": {"x": ref_in("b", i * 4096, x.shape)},
        "into": {"y": {"region": "b", "offset": 32768 + i * 4096, "size": OUT_BYTES}}})
        for i, x in enumerate(xs))
    w.send(data)
    for resp in w.recv(4):
        assert resp[2] is None, resp[2]
    ref = reference(str(models_dir / "conv.onnx"), np.concatenate(xs))["y"]
    for i in range(4):
        got = np.frombuffer(m, np.float32, COUT * H * W, 32768 + i * 4096).reshape(1, COUT, H, W)
        assert_close(got, ref[i:i + 1])
    del view, got
    m.close()


def test_list_and_unregister(w):
    assert w.result("region_list") == []
    region(w, "a", 4096).close()
    region(w, "b", 8192).close()
    listed = sorted(w.result("region_list"), key=lambda r: r["name"])
    assert listed == [{"name": "a", "size": 4096, "writable": True, "in_use": 0},
                      {"name": "b", "size": 8192, "writable": True, "in_use": 0}]
    assert w.result("region_unregister", {"name": "a"}) is None
    assert [r["name"] for r in w.result("region_list")] == ["b"]
    assert w.error("region_unregister", {"name": "a"}) == "E_NOT_FOUND"
    assert code_of(w.call("infer", {"model": "conv", "inputs": {"x": ref_in("a", 0, (1, C, H, W))}})) \
        == "E_NOT_FOUND"


def test_regions_are_per_connection(d, w):
    region(w, "mine", 4096).close()
    with Wire.connect(d) as other:
        assert other.result("region_list") == []
        assert code_of(other.call("infer", {"model": "conv",
                                            "inputs": {"x": ref_in("mine", 0, (1, C, H, W))}})) == "E_NOT_FOUND"


def test_same_name_twice_is_e_exists(w):
    region(w, "dup", 4096).close()
    assert code_of(register(w, "dup", memfd(4096))) == "E_EXISTS"


# ---- hostile regions -----------------------------------------------------------

def test_unsealed_memfd_is_refused(w):
    fd = memfd(4096, seals=0)
    resp = register(w, "u", fd)
    assert code_of(resp) == "E_REGION"
    assert "F_SEAL_SHRINK" in resp[2]["message"]
    # Why it must be refused: without the seal the client could truncate
    # what the daemon maps (a SIGBUS on the next access).
    os.ftruncate(fd, 0)
    os.close(fd)
    assert w.result("region_list") == []


def test_sealed_memfd_cannot_be_truncated(w):
    fd = memfd(4096)
    with pytest.raises(PermissionError):
        os.ftruncate(fd, 0)
    assert register(w, "s", fd)[2] is None
    with pytest.raises(PermissionError):
        os.ftruncate(fd, 100)
    os.close(fd)


def test_regular_file_is_refused(w, tmp_path):
    with open(tmp_path / "f", "wb+") as f:
        f.truncate(4096)
        resp = register(w, "file", f.fileno())
    assert code_of(resp) == "E_REGION" and "not a memfd" in resp[2]["message"]


def test_socket_and_pipe_are_refused(w):
    r, wr = os.pipe()
    assert code_of(register(w, "pipe", r)) == "E_REGION"
    os.close(r)
    os.close(wr)
    a, b = socket.socketpair()
    assert code_of(register(w, "sock", a.fileno())) == "E_REGION"
    a.close()
    b.close()


def test_register_without_a_descriptor(w):
    resp = register(w, "none", None)
    assert code_of(resp) == "E_REGION" and "no descriptor" in resp[2]["message"]


def test_empty_memfd_is_refused(w):
    assert code_of(register(w, "empty", memfd(0))) == "E_REGION"


def test_bad_names_are_e_params_and_use_up_their_descriptor(w):
    assert code_of(register(w, "", memfd(4096))) == "E_PARAMS"
    assert code_of(register(w, "x" * 65, memfd(4096))) == "E_PARAMS"
    assert code_of(register(w, "sp ace", memfd(4096))) == "E_PARAMS"
    # The refused descriptors are gone: the next register takes its own.
    assert code_of(register(w, "none", None)) == "E_REGION"
    region(w, "ok", 4096).close()


def test_descriptors_without_register_are_bounded(d, w):
    """A client that sends descriptors and never registers them: the daemon
    keeps a few, closes the rest, and stays up."""
    fds = [memfd(4096) for _ in range(40)]
    for i, fd in enumerate(fds):
        socket.send_fds(w.sock, [request(1000 + i, "health")], [fd])
    w.recv(40)
    for fd in fds:
        os.close(fd)
    assert w.result("health")["status"] == "ok"


def test_limits_per_connection(d):
    with Wire.connect(d) as w:
        for i in range(3):
            region(w, f"r{i}", 4096).close()
        assert code_of(register(w, "r3", memfd(4096))) == "E_TOO_LARGE"
    with Wire.connect(d) as w:
        assert code_of(register(w, "big", memfd(65 << 20))) == "E_TOO_LARGE"
        region(w, "fits", 64 << 20).close()


def test_regions_freed_when_the_connection_closes(d):
    def memfd_maps():
        with open(f"/proc/{d.proc.pid}/maps") as f:
            return sum("/memfd:convd-test" in line for line in f)

    def wait_maps(n, why):
        deadline = time.monotonic() + 20
        while memfd_maps() != n:
            assert time.monotonic() < deadline, why
            time.sleep(0.01)

    # The connections of the tests before this one close on the daemon's
    # own time: start from none of their regions.
    wait_maps(0, "regions of closed connections were not unmapped")
    with Wire.connect(d) as w:
        region(w, "gone", 1 << 20).close()
        assert memfd_maps() == 1
    wait_maps(0, "the region was not unmapped after the close")


def test_input_past_the_end(w):
    region(w, "small", 4096).close()
    for off in (4096 - IN_BYTES + 4, 4096, 1 << 40, (1 << 64) - 1):
        resp = w.call("infer", {"model": "conv", "inputs": {"x": ref_in("small", off, (1, C, H, W))}})
        assert code_of(resp) == "E_REGION", off
        assert "past the end" in resp[2]["message"]


def test_region_too_small_for_the_tensor(w):
    region(w, "tiny", 64).close()
    assert code_of(w.call("infer", {"model": "conv", "inputs": {"x": ref_in("tiny", 0, (1, C, H, W))}})) \
        == "E_REGION"
    resp = w.call("infer", {"model": "conv", "inputs": {"x": tensor(x_of(2))},
                            "into": {"y": {"region": "tiny", "offset": 0, "size": 64}}})
    assert code_of(resp) == "E_REGION" and "smaller than the tensor" in resp[2]["message"]
    resp = w.call("infer", {"model": "conv", "inputs": {"x": tensor(x_of(2))},
                            "into": {"y": {"region": "tiny", "offset": 32, "size": OUT_BYTES}}})
    assert code_of(resp) == "E_REGION"


def test_malformed_region_refs_are_e_params(w):
    region(w, "m", 4096).close()
    bad_inputs = [
        {"dtype": "f32", "shape": [1, C, H, W], "region": "m"},                      # no offset
        {"dtype": "f32", "shape": [1, C, H, W], "region": "m", "offset": -1},
        {"dtype": "f32", "shape": [1, C, H, W], "region": 7, "offset": 0},
        {"dtype": "f32", "shape": [1, C, H, W], "region": "m", "offset": 0, "data": b""},
        {"shape": [1, C, H, W], "region": "m", "offset": 0},
    ]
    for t in bad_inputs:
        assert code_of(w.call("infer", {"model": "conv", "inputs": {"x": t}})) == "E_PARAMS", t
    bad_into = [{"region": "m", "offset": 0}, [], {"region": "m", "offset": 0, "size": "1"},
                {"region": "m", "offset": 0, "size": 1, "more": 1}]
    for o in bad_into:
        assert code_of(w.call("infer", {"model": "conv", "inputs": {"x": tensor(x_of(3))},
                                        "into": {"y": o}})) == "E_PARAMS", o
    assert code_of(w.call("infer", {"model": "conv", "inputs": {"x": tensor(x_of(3))},
                                    "into": {"nope": {"region": "m", "offset": 0, "size": 4096}}})) == "E_PARAMS"


def test_overlap_within_one_request(w):
    region(w, "o", 1 << 16).close()
    resp = w.call("infer", {"model": "conv", "inputs": {"x": ref_in("o", 0, (1, C, H, W))},
                            "into": {"y": {"region": "o", "offset": IN_BYTES - 4, "size": OUT_BYTES}}})
    assert code_of(resp) == "E_REGION" and "this request's input" in resp[2]["message"]
    # Adjacent is fine.
    w.result("infer", {"model": "conv", "inputs": {"x": ref_in("o", 0, (1, C, H, W))},
                       "into": {"y": {"region": "o", "offset": IN_BYTES, "size": OUT_BYTES}}})


SLOW = (1, 4, 64, 64)
SLOW_BYTES = 4 * 64 * 64 * 4


def slow_infer(msgid, inp, out=None):
    p = {"model": "slow", "inputs": {"x": inp}}
    if out:
        p["into"] = {"y": out}
    return request(msgid, "infer", p)


def test_overlap_between_two_requests_in_flight(w):
    """A writes y into [S, 2S); B, read in the same turn, reads [S, 2S) as its
    input: refused; once A is answered, B's request runs. Two readers of the
    same bytes are fine."""
    region(w, "f", 4 * SLOW_BYTES).close()
    out_a = {"region": "f", "offset": SLOW_BYTES, "size": SLOW_BYTES}
    w.send(slow_infer(1, ref_in("f", 0, SLOW), out_a) +
           slow_infer(2, ref_in("f", SLOW_BYTES, SLOW)) +
           slow_infer(3, tensor(np.zeros(SLOW, np.float32)), dict(out_a, offset=SLOW_BYTES + 4)) +
           slow_infer(4, ref_in("f", 0, SLOW)) +
           request(5, "region_list"))
    got = {r[1]: r for r in w.recv(5, timeout=120)}
    assert got[1][2] is None, got[1]
    assert code_of(got[2]) == "E_REGION" and "of a request in flight" in got[2][2]["message"]
    assert code_of(got[3]) == "E_REGION"
    assert got[4][2] is None
    assert got[5][3][0]["in_use"] == 3  # A's input and output, and request 4's input
    w.send(slow_infer(6, ref_in("f", SLOW_BYTES, SLOW)))
    assert w.recv_one(timeout=120)[2] is None
    assert w.result("region_list")[0]["in_use"] == 0


def test_unregister_while_a_request_uses_it(models_dir, w):
    """The mapping stays until the request is done, and its output lands."""
    m = region(w, "busy", 2 * SLOW_BYTES)
    x = np.random.default_rng(5).standard_normal(SLOW).astype(np.float32)
    np.frombuffer(m, np.float32)[:x.size] = x.ravel()
    w.send(slow_infer(1, ref_in("busy", 0, SLOW), {"region": "busy", "offset": SLOW_BYTES, "size": SLOW_BYTES}) +
           request(2, "region_list") + request(3, "region_unregister", {"name": "busy"}) +
           request(4, "region_list"))
    got = {r[1]: r for r in w.recv(4, timeout=120)}
    assert got[2][3][0]["in_use"] == 2
    assert got[3][2] is None
    assert got[4][3] == []
    assert got[1][2] is None, got[1]
    y = np.frombuffer(m, np.float32, x.size, SLOW_BYTES).reshape(SLOW)
    assert_close(y, reference(str(models_dir / "slow.onnx"), x)["y"])
    del y
    m.close()


def test_connection_closed_while_a_request_uses_its_region(d, w):
    """The connection goes with a request in flight on its region: the
    daemon finishes or drops it and stays up."""
    with Wire.connect(d) as other:
        region(other, "z", 2 * SLOW_BYTES).close()
        other.send(slow_infer(1, ref_in("z", 0, SLOW), {"region": "z", "offset": SLOW_BYTES, "size": SLOW_BYTES}))
    assert w.result("health")["status"] == "ok"


def test_client_writes_into_its_region_during_requests(w):
    """It gets what it wrote (some values), never a crash."""
    m = region(w, "race", 1 << 16)
    view = np.frombuffer(m, np.float32)
    stop = threading.Event()

    def scribble():
        rng = np.random.default_rng(9)
        while not stop.is_set():
            view[:] = rng.standard_normal(view.size).astype(np.float32)

    t = threading.Thread(target=scribble, daemon=True)
    t.start()
    try:
        for _ in range(30):
            r = w.result("infer", {"model": "conv", "inputs": {"x": ref_in("race", 0, (1, C, H, W))},
                                   "into": {"y": {"region": "race", "offset": 4096, "size": OUT_BYTES}}})
            assert r["outputs"]["y"]["region"] == "race"
    finally:
        stop.set()
        t.join()
    assert w.result("health")["status"] == "ok"
    del view
    m.close()
