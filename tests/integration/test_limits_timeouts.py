"""Connection timeouts, with short values set by flags: an idle connection is
closed after --idle-timeout, a message that does not arrive whole within
--read-timeout of its first byte is answered E_TIMEOUT and closed (also when
its bytes trickle in), never before its timeout, and counted; a client
waiting on its own slow requests, or sending slowly but in time, is not cut.
The upper bounds are only hang guards: how late a close comes after its
timeout depends on the machine's load, not on the daemon's correctness."""
import math
import socket
import time

import msgpack
import numpy as np
import pytest

from tests.integration.daemon_wire import Wire, request, stats
from tests.support.daemon import TestDaemon

IDLE_S, READ_S = 1, 1
# The daemon checks every quarter of the shorter timeout; a close this much
# after its timeout means a hang, not a late check.
HANG_S = 60
# The lower bounds allow for the clocks of client and daemon not starting
# at the same instant.
EARLY_S = 0.05

RNG = np.random.default_rng()


def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


@pytest.fixture(scope="module")
def models(tmp_path_factory, slow):
    d = tmp_path_factory.mktemp("models")
    slow.write(d / "slow.onnx")
    return d


@pytest.fixture(scope="module")
def d(models):
    with TestDaemon(models_dir=models, args=["--idle-timeout", str(IDLE_S),
                                            "--read-timeout", str(READ_S),
                                            "--workers", "1"]) as daemon:
        yield daemon


def closed_after(sock, limit=HANG_S):
    """Seconds until the daemon closes sock (reading everything it sends);
    fails (socket.timeout) when it is still open after limit."""
    t0 = time.monotonic()
    sock.settimeout(limit)
    data = b""
    try:
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    return time.monotonic() - t0, data


def test_idle_connection_closed_on_time(d):
    before = stats(d)["connections"]["idle_timeouts"]
    s = d.connect_raw()
    took, data = closed_after(s)
    s.close()
    assert data == b""  # closed quietly: nothing was pending
    assert took >= IDLE_S - EARLY_S, took
    assert stats(d)["connections"]["idle_timeouts"] == before + 1


def test_activity_restarts_the_idle_clock(d):
    with Wire.connect(d) as w:
        t_end = time.monotonic() + 2.5 * IDLE_S
        while True:  # a request every 0.4 s: never idle
            assert w.call("health")[2] is None
            t_last = time.monotonic()
            if t_last > t_end:
                break
            time.sleep(0.4 * IDLE_S)  # paces this client's requests
        w.expect_eof(timeout=HANG_S)
        took = time.monotonic() - t_last
        assert took >= IDLE_S - EARLY_S, took


def test_partial_message_hits_read_timeout(d):
    before = stats(d)
    msg = request(5, "infer", {"model": "slow", "inputs": {"x": tensor(
        np.zeros((1, 4, 64, 64), np.float32))}})
    s = d.connect_raw()
    s.sendall(msg[:len(msg) // 2])
    took, data = closed_after(s)
    s.close()
    assert took >= READ_S - EARLY_S, took
    resp = [msgpack.unpackb(data, raw=False)]
    assert resp[0][0] == 1 and resp[0][2]["code"] == "E_TIMEOUT", resp
    assert "read-timeout" in resp[0][2]["message"]
    after = stats(d)
    assert after["connections"]["read_timeouts"] == before["connections"]["read_timeouts"] + 1
    assert after["errors"]["E_TIMEOUT"] == before["errors"]["E_TIMEOUT"] + 1


def test_trickling_sender_is_cut_at_read_timeout(d):
    # One byte every 0.2 s keeps the idle clock fresh, but the whole message
    # would take far longer than read-timeout: it is cut (counted as a read
    # timeout, not an idle one) while bytes are still coming, and not before
    # read-timeout from its start.
    before = stats(d)["connections"]
    msg = request(6, "health", {"note": "x" * 300})
    assert (len(msg) - 1) * 0.2 > 30 * READ_S  # it really would be too slow
    s = d.connect_raw()
    t0 = time.monotonic()
    closed = None
    for i in range(len(msg) - 1):
        try:
            s.sendall(msg[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            closed = time.monotonic() - t0
            break
        time.sleep(0.2)  # paces the trickle; the close is the state awaited
    s.close()
    assert closed is not None, "a message trickling in for 60 s was not cut"
    assert closed >= READ_S - EARLY_S, closed
    after = stats(d)["connections"]
    assert after["read_timeouts"] == before["read_timeouts"] + 1
    assert after["idle_timeouts"] == before["idle_timeouts"]


def test_slow_but_in_time_sender_is_served(d):
    msg = request(7, "hello")
    with Wire.connect(d) as w:
        pieces = 4
        step = math.ceil(len(msg) / pieces)
        for i in range(0, len(msg), step):  # the whole message in ~0.45 s
            w.send(msg[i:i + step])
            time.sleep(0.15)  # paces a slow but in-time sender
        resp = w.recv_one()
        assert resp[:3] == [1, 7, None]


def test_client_waiting_on_its_own_slow_work_is_not_cut(d, slow):
    # One request that computes for ~2.5 idle-timeouts: the connection sends
    # nothing meanwhile, but it has work in flight, so it is not idle.
    items = min(4096, math.ceil(2.5 * IDLE_S / slow.item_s) + 1)
    with Wire.connect(d, timeout=slow.limit(items)) as w:
        w.result("load", {"name": "slowbig", "path": "slow.onnx", "max_batch": items})
        x = RNG.standard_normal((items, 4, 64, 64)).astype(np.float32)
        t0 = time.monotonic()
        resp = w.call("infer", {"model": "slowbig", "inputs": {"x": tensor(x)}},
                      timeout=slow.limit(items))
        took = time.monotonic() - t0
        assert resp[2] is None, resp[2]
        assert took > IDLE_S, (took, str(slow))  # it did outlast the idle timeout
        assert w.call("unload", {"name": "slowbig"})[2] is None


def test_zero_turns_the_timeouts_off(tmp_path):
    with TestDaemon(tmp_path, args=["--idle-timeout", "0", "--read-timeout", "0"]) as d2:
        s = d2.connect_raw()
        msg = request(1, "hello")
        s.sendall(msg[:3])
        time.sleep(1.6)  # a slow client: longer than the 1 s timeouts elsewhere
        s.sendall(msg[3:])
        w = Wire(s)
        assert w.recv_one()[:3] == [1, 1, None]
        time.sleep(1.6)  # an idle client, as long
        assert w.call("health")[2] is None
        w.close()
