"""convd's methods over raw msgpack-RPC: hello, health, models, stats, the
params envelope, pipelining, framing (split and coalesced messages)."""
import random
import time

import msgpack
import pytest

from tests.integration.daemon_wire import Wire, request, stats
from tests.support.daemon import TestDaemon


@pytest.fixture(scope="module")
def d():
    with TestDaemon(args=["--max-message", "1M", "--workers", "3"]) as daemon:
        yield daemon


@pytest.fixture
def w(d):
    with Wire.connect(d) as wire:
        yield wire


def test_hello_result(w):
    r = w.result("hello")
    assert set(r) == {"server", "version", "protocol", "device", "features"}
    assert r["server"] == "convd"
    assert r["version"] == "0.1.0"
    assert r["protocol"] == 1
    assert r["device"] == "cpu"
    assert "cpu" in r["features"]
    assert all(isinstance(f, str) for f in r["features"])


def test_health_result(w):
    r = w.result("health")
    assert set(r) == {"status", "uptime_s", "models", "cpu"}
    assert set(r["cpu"]) == {"model", "kernels_isa", "kernels_capped", "dnnl_isa", "layout",
                             "block"}
    assert r["status"] == "ok"
    assert isinstance(r["uptime_s"], float) and r["uptime_s"] >= 0
    assert r["models"] == 0


def test_health_uptime_grows(w):
    a = w.result("health")["uptime_s"]
    time.sleep(0.05)  # the time whose passing uptime must show (a lower bound)
    assert w.result("health")["uptime_s"] >= a + 0.04


def test_models_without_models_dir_is_empty(w):
    assert w.result("models") == {"models": []}


def test_stats_result_shape(d, w):
    r = w.result("stats")
    for k in ("uptime_s", "connections", "requests", "errors", "bytes_in",
              "bytes_out", "rss_bytes", "models", "settings"):
        assert k in r, k
    assert {"current", "total", "rejected"} <= set(r["connections"])
    assert r["connections"]["current"] >= 1
    assert {"total", "by_method"} <= set(r["requests"])
    assert set(r["requests"]["by_method"]) >= {"hello", "health", "models", "stats",
                                                "load", "unload", "infer", "unknown"}
    assert "E_PROTOCOL" in r["errors"] and "E_METHOD" in r["errors"]
    assert all(k.startswith("E_") for k in r["errors"])
    assert r["rss_bytes"] > 1 << 20
    assert r["models"] == {}
    # The settings section comes from the one settings table.
    s = r["settings"]
    assert s["max-message"] == 1 << 20
    assert s["workers"] == 3
    assert s["socket"] == d.socket
    assert s["device"] == "cpu"
    assert s["log-level"] == "info"
    assert "help" not in s and "version" not in s


def test_stats_counts_requests_and_errors(w):
    before = w.result("stats")
    for _ in range(5):
        w.result("hello")
    assert w.error("no_such_method") == "E_METHOD"
    after = w.result("stats")
    bm0, bm1 = before["requests"]["by_method"], after["requests"]["by_method"]
    assert bm1["hello"] - bm0["hello"] == 5
    assert bm1["unknown"] - bm0["unknown"] == 1
    assert bm1["stats"] - bm0["stats"] == 1  # the `after` call itself
    assert after["requests"]["total"] - before["requests"]["total"] == 7
    assert after["errors"]["E_METHOD"] - before["errors"]["E_METHOD"] == 1
    assert after["bytes_in"] > before["bytes_in"]
    assert after["bytes_out"] > before["bytes_out"]


@pytest.mark.parametrize("params", [[], [None], [{}]], ids=["empty", "nil", "empty_map"])
def test_methods_without_params_accept_empty_forms(w, params):
    for i, m in enumerate(["hello", "health", "models", "stats"]):
        w.send(msgpack.packb([0, 100 + i, m, params]))
        resp = w.recv_one()
        assert resp[:3] == [1, 100 + i, None], resp


@pytest.mark.parametrize("params", [[5], ["x"], [[1, 2]], [{}, {}]],
                         ids=["int", "str", "array", "two_maps"])
def test_params_not_a_map_is_e_params_and_connection_stays(w, params):
    w.send(msgpack.packb([0, 9, "hello", params]))
    resp = w.recv_one()
    assert resp[1] == 9 and resp[3] is None
    assert resp[2]["code"] == "E_PARAMS"
    assert w.result("health")["status"] == "ok"


def test_unknown_method_keeps_connection_open(w):
    assert w.error("frobnicate") == "E_METHOD"
    resp = w.call("hello\x00\x01weird")
    assert resp[2]["code"] == "E_METHOD"
    assert "frobnicate" not in resp[2]["message"]
    assert w.result("hello")["server"] == "convd"


def test_unknown_method_name_is_sanitised_in_message(w):
    w.send(msgpack.packb([0, 3, b"\xff\xfebad", []], use_bin_type=False))
    resp = w.recv_one()  # the unpacker decodes str as UTF-8: must not fail
    assert resp[2]["code"] == "E_METHOD"


def test_notification_gets_no_response(d, w):
    before = w.result("stats")["requests"]["notifications"]
    w.send(msgpack.packb([2, "hello", []]))
    assert w.call("health")[2] is None  # the next response is the health one
    assert w.result("stats")["requests"]["notifications"] == before + 1


def test_pipelined_requests_matched_by_msgid(w):
    methods = ["hello", "health", "models", "stats", "nope"]
    ids = random.sample(range(1, 1 << 32), 500)
    sent = {i: random.choice(methods) for i in ids}
    w.send(b"".join(request(i, m) for i, m in sent.items()))
    got = {}
    for resp in w.recv(len(ids)):
        assert resp[0] == 1
        assert resp[1] not in got, "msgid answered twice"
        got[resp[1]] = resp
    assert set(got) == set(ids)
    for i, m in sent.items():
        if m == "nope":
            assert got[i][2]["code"] == "E_METHOD"
        else:
            assert got[i][2] is None
            if m == "hello":
                assert got[i][3]["server"] == "convd"
            if m == "models":
                assert got[i][3] == {"models": []}


def test_msgid_extremes(w):
    for msgid in (0, 1, 0xFFFFFFFF):
        w.send(request(msgid, "health"))
        assert w.recv_one()[1] == msgid


def test_messages_split_byte_by_byte(w):
    data = request(41, "hello") + request(42, "health") + request(43, "nope")
    for i in range(len(data)):
        w.send(data[i:i + 1])
        time.sleep(0.002)  # separate reads on the daemon side
    r = w.recv(3)
    assert [x[1] for x in r] == [41, 42, 43]
    assert r[0][3]["server"] == "convd"
    assert r[1][3]["status"] == "ok"
    assert r[2][2]["code"] == "E_METHOD"


def test_several_messages_in_one_send(w):
    data = b"".join(request(i, "hello") for i in range(1, 11))
    w.send(data)
    r = w.recv(10)
    assert sorted(x[1] for x in r) == list(range(1, 11))


def test_message_and_half_in_one_send(w):
    a, b = request(1, "hello"), request(2, "health")
    w.send(a + b[:3])
    assert w.recv_one()[1] == 1
    time.sleep(0.05)  # paces the sender: the rest comes in a later read
    w.send(b[3:])
    assert w.recv_one()[1] == 2


def test_many_connections_each_get_their_own_answers(d):
    wires = [Wire.connect(d) for _ in range(20)]
    try:
        for k, wire in enumerate(wires):
            wire.send(b"".join(request(k * 1000 + i, "hello") for i in range(10)))
        for k, wire in enumerate(wires):
            got = sorted(r[1] for r in wire.recv(10))
            assert got == [k * 1000 + i for i in range(10)]
    finally:
        for wire in wires:
            wire.close()


def test_stats_connections_current_tracks_open_connections(d):
    base = stats(d)["connections"]["current"]
    wires = [Wire.connect(d) for _ in range(5)]
    try:
        for wire in wires:
            wire.result("health")  # accepted for sure
        assert stats(d)["connections"]["current"] == base + 5
    finally:
        for wire in wires:
            wire.close()
    deadline = time.monotonic() + 60  # hang guard
    while stats(d)["connections"]["current"] != base and time.monotonic() < deadline:
        time.sleep(0.02)  # polls the counter: the state waited for
    assert stats(d)["connections"]["current"] == base
