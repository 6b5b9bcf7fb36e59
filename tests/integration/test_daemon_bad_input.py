"""The rest of the bad-input matrix against a real daemon: hostile frames next
to a well-behaved client, 10,000 connections opened and dropped, NaN and Inf
inputs, empty tensors, a msgid used twice, requests after a half-close. Each
asserts the exact outcome (docs/RELIABILITY.md, "Bad input on the wire")."""
import os
import socket
import struct
import threading
import time

import msgpack
import numpy as np
import pytest

from tests.integration.daemon_wire import Wire, request, stats
from tests.integration.test_daemon_models import conv_model, from_wire, reference, tensor
from tests.support.daemon import TestDaemon

C, H, W, COUT = 3, 6, 5, 4
MAX_MESSAGE = 1 << 20


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    conv_model(d / "lin.onnx", C, COUT, H, W, seed=12, relu=False)  # conv + bias
    conv_model(d / "conv.onnx", C, COUT, H, W, seed=12)             # the same + relu
    return d


@pytest.fixture(scope="module")
def d(models_dir):
    with TestDaemon(models_dir=models_dir,
                    args=["--max-batch", "4", "--workers", "2",
                          "--max-message", str(MAX_MESSAGE)]) as daemon:
        yield daemon


def x_of(seed, batch=1):
    return np.random.default_rng(seed).standard_normal((batch, C, H, W)).astype(np.float32)


class GoodClient(threading.Thread):
    """Infers on its own connection until stopped; every answer must be the
    right one, none missing."""

    def __init__(self, d, models_dir):
        super().__init__(daemon=True)
        self.d, self.path = d, str(models_dir / "lin.onnx")
        self.stop_ev = threading.Event()
        self.done = 0
        self.error = None

    def run(self):
        try:
            with Wire.connect(self.d, timeout=60) as w:
                i = 0
                while not self.stop_ev.is_set():
                    x = x_of(1000 + i % 7)
                    resp = w.call("infer", {"model": "lin", "inputs": {"x": tensor(x)}})
                    assert resp[2] is None, resp
                    got = from_wire(resp[3]["outputs"]["y"])
                    np.testing.assert_allclose(got, reference(self.path, x)["y"],
                                               rtol=1e-4, atol=1e-4)
                    self.done += 1
                    i += 1
        except Exception as e:  # reported by finish()
            self.error = e

    def finish(self, at_least=1):
        self.stop_ev.set()
        self.join(60)
        assert not self.is_alive()
        assert self.error is None, self.error
        assert self.done >= at_least


@pytest.fixture
def good(d, models_dir):
    g = GoodClient(d, models_dir)
    g.start()
    deadline = time.monotonic() + 60  # hang guard
    while g.done == 0 and g.error is None:
        assert time.monotonic() < deadline, "the good client got no answer"
        time.sleep(0.01)  # polls the good client's count: the state waited for
    yield g
    g.finish()


def fd_count(d):
    return len(os.listdir(f"/proc/{d.proc.pid}/fd"))


def wait_for(pred, timeout=60.0):
    """Waits until pred() holds; the deadline only guards against a hang."""
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.02)  # polls the state waited for
    return pred()


# ---- frames ---------------------------------------------------------------------

def infer_bytes(msgid, x, model="lin"):
    return request(msgid, "infer", {"model": model, "inputs": {"x": tensor(x)}})


def test_truncated_frame_then_close_is_dropped_quietly(d, good):
    """Half an infer, then the client closes: nothing to answer, counted as
    eof_mid_message; the good client is not disturbed."""
    before = stats(d)["connections"]["eof_mid_message"]
    data = infer_bytes(1, x_of(1))
    for cut in (1, 5, len(data) // 2, len(data) - 1):
        with Wire.connect(d) as w:
            w.send(data[:cut])  # the bytes reach the daemon before the close
    assert wait_for(lambda: stats(d)["connections"]["eof_mid_message"] == before + 4)


def test_truncated_frame_then_half_close_answers_the_whole_ones(d, good):
    """Two whole requests and a cut third, then SHUT_WR: both whole ones are
    answered, the cut one is dropped (it can never complete) and the daemon
    closes the connection."""
    with Wire.connect(d) as w:
        third = infer_bytes(3, x_of(3))
        w.send(infer_bytes(1, x_of(1)) + infer_bytes(2, x_of(2)) + third[:len(third) // 2])
        w.sock.shutdown(socket.SHUT_WR)
        msgs = w.expect_eof()
    assert sorted(m[1] for m in msgs) == [1, 2]
    assert all(m[2] is None for m in msgs)


GARBAGE = {
    # random bytes: the first is never a valid msgpack-RPC message start
    "random": (b"\xc1" + bytes(np.random.default_rng(5).integers(0, 256, 4096, np.uint8)),
               "E_PROTOCOL", 0),
    "text": (b"GET / HTTP/1.1\r\nHost: convd\r\n\r\n", "E_PROTOCOL", 0),
    "nul_bytes": (b"\x00" * 64, "E_PROTOCOL", 0),
    # a whole message bigger than --max-message, arriving in full
    "oversized": (request(9, "infer", {"model": "lin", "inputs": {"x": {
        "dtype": "f32", "shape": [1], "data": b"\0" * (MAX_MESSAGE + 10)}}}), "E_TOO_LARGE", 9),
    # only a header declaring 4 GiB - 1 of bin: refused before any payload
    "oversized_declared": (b"\x94\x00\x09\xa5infer\x91\x81\xa1x\xc6" + struct.pack(">I", 0xffffffff),
                           "E_TOO_LARGE", 9),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_garbage_and_oversized_frames_exact_code_others_served(d, good, case):
    data, code, msgid = GARBAGE[case]
    before = good.done
    with Wire.connect(d) as bad:
        bad.send(infer_bytes(1, x_of(1)))  # a good request first: answered first
        try:
            bad.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed before the rest of a large frame was sent
        msgs = bad.expect_eof()
    # The infer queued before the bad bytes is still answered before the
    # close; its answer comes from a worker, so the error may come first.
    assert len(msgs) == 2, msgs
    ok = [m for m in msgs if m[1] == 1 and m[2] is None]
    assert len(ok) == 1 and "y" in ok[0][3]["outputs"], msgs
    err = [m for m in msgs if m is not ok[0]][0]
    assert err[0] == 1 and err[1] == msgid and err[3] is None, err
    assert err[2]["code"] == code, err
    assert wait_for(lambda: good.done > before)


# ---- connections ---------------------------------------------------------------------

def test_ten_thousand_connections_opened_and_dropped(d, good):
    """10,000 connections, each dropped: at once, after half a request, or
    after a whole infer it never reads. Bounded in time; afterwards the daemon
    serves a new client and holds as many fds as before."""
    base = fd_count(d)
    half = infer_bytes(1, x_of(1))[:40]
    whole = infer_bytes(1, x_of(1))
    t0 = time.monotonic()
    for i in range(10000):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(d.socket)
        if i % 3 == 1:
            s.sendall(half)
        elif i % 3 == 2 and i % 30 == 2:  # some whole requests, never read
            s.sendall(whole)
        s.close()
        if i % 500 == 499:  # keep under --max-connections: let the loop catch up
            assert wait_for(lambda: stats(d)["connections"]["current"] <= 50, 30)
    elapsed = time.monotonic() - t0
    assert elapsed < 120, elapsed
    assert wait_for(lambda: fd_count(d) <= base, 30), (fd_count(d), base)
    with Wire.connect(d) as w:
        resp = w.call("infer", {"model": "lin", "inputs": {"x": tensor(x_of(4))}})
        assert resp[2] is None
    # The good client and the stats call's own; the daemon may still be
    # reading the EOF of the one just closed, so give it a moment.
    assert wait_for(lambda: stats(d)["connections"]["current"] == 2, 10), stats(d)["connections"]
    assert stats(d)["connections"]["rejected"] == 0


# ---- values ---------------------------------------------------------------------------

def special_input():
    x = x_of(21, batch=2)
    x[0, 0, 1, 1] = np.nan
    x[0, 1, 3, 2] = np.inf
    x[1, 2, 0, 0] = -np.inf
    x[1, 0, 4, 4] = np.inf
    x[1, 1, 4, 4] = -np.inf  # +inf and -inf in one window: NaN
    return x


def assert_same_specials(got, ref):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-4, atol=1e-4)


def test_nan_and_inf_inputs_are_computed_like_onnxruntime(d, models_dir):
    """NaN and Inf inputs are computed, not refused: the NaN and +-Inf
    positions of every output equal onnxruntime's and the finite values
    agree, with one documented difference: Relu. Relu(-inf) is 0 and
    Relu(+inf) +inf in both (oneDNN's relu gave NaN for -inf: 0 * -inf);
    Relu(NaN) is 0 in convd, as in its reference kernel (x > 0 ? x : 0),
    where onnxruntime keeps the NaN (ONNX says max(0, x), NaN unspecified)."""
    x = special_input()
    with Wire.connect(d) as w:
        lin = w.call("infer", {"model": "lin", "inputs": {"x": tensor(x)}})
        relu = w.call("infer", {"model": "conv", "inputs": {"x": tensor(x)}})
    assert lin[2] is None and relu[2] is None, (lin, relu)
    ref = reference(str(models_dir / "lin.onnx"), x)["y"]
    assert np.isnan(ref).any() and np.isposinf(ref).any() and np.isneginf(ref).any()
    assert_same_specials(from_wire(lin[3]["outputs"]["y"]), ref)
    ref_relu = reference(str(models_dir / "conv.onnx"), x)["y"]
    assert np.isposinf(ref_relu).any() and (ref_relu[np.isneginf(ref)] == 0).all()
    assert np.isnan(ref_relu).any()
    assert_same_specials(from_wire(relu[3]["outputs"]["y"]), np.nan_to_num(ref_relu, nan=0.0,
                                                                          posinf=np.inf))


@pytest.mark.parametrize("shape", [[0, C, H, W], [1, 0, H, W], [1, C, 0, W], [1, C, H, 0],
                                   [0]])
def test_empty_tensor_is_e_shape(d, good, shape):
    """A dim of 0 anywhere (so no data) is E_SHAPE naming the input; the
    connection stays open."""
    with Wire.connect(d) as w:
        resp = w.call("infer", {"model": "lin", "inputs": {"x": {
            "dtype": "f32", "shape": shape, "data": b""}}})
        assert resp[3] is None and resp[2]["code"] == "E_SHAPE", resp
        assert "'x'" in resp[2]["message"]
        assert w.result("health")["status"] == "ok"


# ---- msgids and half-close --------------------------------------------------------------

def test_same_msgid_twice_in_flight_both_answered(d, models_dir, good):
    """convd does not track msgids: two requests in flight with one msgid are
    both run and both answered with that msgid, each with its own result (in
    either order, as any two requests)."""
    path = str(models_dir / "lin.onnx")
    xs = [x_of(31), x_of(32)]
    refs = [reference(path, x)["y"] for x in xs]
    with Wire.connect(d) as w:
        w.send(infer_bytes(7, xs[0]) + infer_bytes(7, xs[1]))
        msgs = w.recv(2)
        assert [m[1] for m in msgs] == [7, 7]
        got = [from_wire(m[3]["outputs"]["y"]) for m in msgs]
        matched = sorted(int(np.allclose(g, refs[1], rtol=1e-4, atol=1e-4)) for g in got)
        assert matched == [0, 1], "each answer is one of the two results, both present"
        # and nothing more arrives for it
        w.sock.settimeout(0.3)
        with pytest.raises(socket.timeout):
            w.sock.recv(1)


def test_requests_after_half_close_are_all_answered(d, models_dir, good):
    """Infers sent, then shutdown(SHUT_WR): every answer still arrives, right,
    then the daemon closes."""
    path = str(models_dir / "lin.onnx")
    xs = [x_of(40 + i, batch=1 + i % 3) for i in range(12)]
    with Wire.connect(d, timeout=60) as w:
        w.send(b"".join(infer_bytes(i + 1, x) for i, x in enumerate(xs)))
        w.sock.shutdown(socket.SHUT_WR)
        msgs = w.expect_eof(timeout=60)
    assert sorted(m[1] for m in msgs) == list(range(1, 13))
    for m in msgs:
        assert m[2] is None, m
        np.testing.assert_allclose(from_wire(m[3]["outputs"]["y"]), reference(path, xs[m[1] - 1])["y"],
                                   rtol=1e-4, atol=1e-4)
