"""Bad input from the wire: each case gets its exact error code, protocol
errors close that connection alone (after the reply), and the daemon keeps
serving everybody else meanwhile."""
import struct
import time

import msgpack
import pytest

from tests.integration.daemon_wire import Wire, request, stats
from tests.support.daemon import TestDaemon

MAX_MESSAGE = 4096


@pytest.fixture(scope="module")
def d():
    with TestDaemon(args=["--max-message", str(MAX_MESSAGE)]) as daemon:
        yield daemon


def nested(depth):
    v = 1
    for _ in range(depth):
        v = [v]
    return v


# name -> (bytes sent, expected code, expected msgid in the reply)
PROTOCOL_CASES = {
    "not_msgpack_byte_c1": (b"\xc1\x00\x00", "E_PROTOCOL", 0),
    "top_level_not_array": (msgpack.packb({"a": 1}), "E_PROTOCOL", 0),
    "top_level_int": (msgpack.packb(7), "E_PROTOCOL", 0),
    "array_of_two": (msgpack.packb([0, 1]), "E_PROTOCOL", 0),
    "array_of_five": (msgpack.packb([0, 1, "hello", [], 5]), "E_PROTOCOL", 0),
    "type_not_int": (msgpack.packb(["0", 1, "hello", []]), "E_PROTOCOL", 0),
    "type_3": (msgpack.packb([3, 1, "hello", []]), "E_PROTOCOL", 0),
    "msgid_str": (msgpack.packb([0, "7", "hello", []]), "E_PROTOCOL", 0),
    "msgid_negative": (msgpack.packb([0, -7, "hello", []]), "E_PROTOCOL", 0),
    "msgid_over_uint32": (msgpack.packb([0, 1 << 32, "hello", []]), "E_PROTOCOL", 0),
    "method_not_str": (msgpack.packb([0, 7, 5, []]), "E_PROTOCOL", 7),
    "method_too_long": (msgpack.packb([0, 7, "m" * 65, []]), "E_PROTOCOL", 7),
    "params_not_array": (msgpack.packb([0, 7, "hello", {}]), "E_PROTOCOL", 7),
    "request_of_three": (msgpack.packb([0, 7, "hello"]), "E_PROTOCOL", 7),
    "response_from_client": (msgpack.packb([1, 7, None, None]), "E_PROTOCOL", 7),
    "over_deep_nesting": (msgpack.packb([0, 7, "hello", [nested(20)]]), "E_TOO_LARGE", 7),
    "over_limit_message": (msgpack.packb([0, 7, "hello", [{"x": b"a" * 5000}]],
                                         use_bin_type=True), "E_TOO_LARGE", 7),
    # Only the header of a 100 MB bin: refused before any payload arrives.
    "over_limit_declared_bin": (b"\x94\x00\x07\xa5hello\x91\x81\xa1x\xc6"
                                + struct.pack(">I", 100 << 20), "E_TOO_LARGE", 7),
    "over_limit_declared_array": (b"\x94\x00\x07\xa5hello\x91\xdd"
                                  + struct.pack(">I", 1 << 30), "E_TOO_LARGE", 7),
}


@pytest.mark.parametrize("case", sorted(PROTOCOL_CASES))
def test_protocol_error_code_then_close_others_unaffected(d, case):
    data, code, msgid = PROTOCOL_CASES[case]
    before = stats(d)["errors"][code]
    with Wire.connect(d) as other, Wire.connect(d) as bad:
        other.send_request("health")  # in flight on another connection
        # A good request first: answered before the bad bytes are looked at.
        bad.send(request(1, "hello") + data)
        msgs = bad.expect_eof()
        assert len(msgs) == 2, msgs
        assert msgs[0][:3] == [1, 1, None]
        err = msgs[1]
        assert err[0] == 1 and err[1] == msgid and err[3] is None, err
        assert err[2]["code"] == code, err
        assert err[2]["message"]
        # The other connection is still served, before and after.
        assert other.recv_one()[3]["status"] == "ok"
        assert other.result("hello")["server"] == "convd"
    # Counted exactly once.
    assert stats(d)["errors"][code] == before + 1


def test_protocol_error_logged_with_hex_sample(d):
    with Wire.connect(d) as bad:
        bad.send(b"\xc1\xde\xad\xbe\xef")
        bad.expect_eof()
    deadline = time.monotonic() + 60  # hang guard
    while "c1 de ad be ef" not in d.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.02)  # polls the log: the state waited for
    lines = [l for l in d.stderr_text().splitlines() if "c1 de ad be ef" in l]
    assert len(lines) == 1, d.stderr_text()
    assert " warn  " in lines[0] and "E_PROTOCOL" in lines[0]


def test_bytes_after_protocol_error_are_ignored(d):
    with Wire.connect(d) as bad:
        bad.send(b"\xc1" + request(5, "hello"))
        msgs = bad.expect_eof()
        assert len(msgs) == 1 and msgs[0][2]["code"] == "E_PROTOCOL"


def test_message_just_under_limit_is_accepted(d):
    # A request of exactly MAX_MESSAGE bytes passes; one byte more does not.
    def sized(n):
        pad = n - len(request(1, "hello", {"x": b""}))
        data = request(1, "hello", {"x": b"a" * pad})
        # bin8/bin16 header sizes differ; adjust until exact.
        while len(data) != n:
            pad += n - len(data)
            data = request(1, "hello", {"x": b"a" * pad})
        return data
    with Wire.connect(d) as w:
        w.send(sized(MAX_MESSAGE))
        assert w.recv_one()[2] is None
    with Wire.connect(d) as w:
        w.send(sized(MAX_MESSAGE + 1))
        msgs = w.expect_eof()
        assert msgs[-1][2]["code"] == "E_TOO_LARGE"


def test_over_limit_message_split_across_reads(d):
    data = request(7, "hello", {"x": b"z" * 20000})
    with Wire.connect(d) as w:
        try:
            for i in range(0, len(data), 1000):
                w.send(data[i:i + 1000])
                time.sleep(0.001)  # paces the sender: the message comes in pieces
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may close before we finish sending
        msgs = w.expect_eof()
        assert msgs[-1][2]["code"] == "E_TOO_LARGE"
    with Wire.connect(d) as w:
        assert w.result("health")["status"] == "ok"


def test_params_wrong_shape_is_e_params_not_protocol(d):
    with Wire.connect(d) as w:
        w.send(msgpack.packb([0, 3, "stats", [1, 2, 3]]))
        assert w.recv_one()[2]["code"] == "E_PARAMS"
        assert w.result("health")["status"] == "ok"


def test_client_disconnect_mid_message(d):
    before = stats(d)["connections"]["eof_mid_message"]
    data = request(1, "hello", {"x": b"q" * 1000})
    with Wire.connect(d) as w:
        w.send(data[:500])
    # The daemon reads the 500 bytes before it sees the end of the stream.
    deadline = time.monotonic() + 60  # hang guard
    while (stats(d)["connections"]["eof_mid_message"] == before
           and time.monotonic() < deadline):
        time.sleep(0.02)  # polls the counter: the state waited for
    assert stats(d)["connections"]["eof_mid_message"] == before + 1
    with Wire.connect(d) as w:
        assert w.result("hello")["server"] == "convd"


def test_half_close_still_gets_answers(d):
    import socket
    with Wire.connect(d) as w:
        w.send(b"".join(request(i, "hello") for i in range(1, 51)))
        w.sock.shutdown(socket.SHUT_WR)
        msgs = w.expect_eof()
        assert sorted(m[1] for m in msgs) == list(range(1, 51))


def test_client_gone_with_unread_responses(d):
    # 2000 pipelined requests and the client closes without reading: the
    # daemon's writes fail; it must drop the connection and carry on.
    with Wire.connect(d) as w:
        w.send(b"".join(request(i, "stats") for i in range(2000)))
    with Wire.connect(d) as w:
        assert w.result("health")["status"] == "ok"
    deadline = time.monotonic() + 60  # hang guard
    while stats(d)["connections"]["current"] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)  # polls the counter: the state waited for
    assert stats(d)["connections"]["current"] == 1


def test_connection_limit_refuses_with_e_overloaded(tmp_path):
    with TestDaemon(tmp_path, args=["--max-connections", "3"]) as d:
        # The readiness probe of TestDaemon is a connection too: wait until
        # the daemon has seen it close (only our first connection remains).
        wires = [Wire.connect(d)]
        wait_connections(wires[0], 1)
        wires += [Wire.connect(d) for _ in range(2)]
        try:
            for w in wires:
                assert w.result("health")["status"] == "ok"
            with Wire.connect(d) as extra:
                msgs = extra.expect_eof()
                assert len(msgs) == 1
                assert msgs[0][1] == 0 and msgs[0][2]["code"] == "E_OVERLOADED"
            wires.pop().close()
            wait_connections(wires[0], 2)  # the daemon has seen the close
            wires.append(Wire.connect(d))
            assert wires[-1].result("hello")["server"] == "convd"
            s = wires[0].result("stats")
            assert s["connections"]["rejected"] == 1
            assert s["connections"]["rejected_limit"] == 1
            # A refusal is counted once: as a rejected connection, not an error.
            assert s["errors"]["E_OVERLOADED"] == 0
        finally:
            for w in wires:
                w.close()
    assert "refusing connections" in d.stderr_text()


def wait_connections(w, n, timeout=60):
    """Waits until the daemon counts n open connections (w's among them);
    the deadline only guards against a hang."""
    deadline = time.monotonic() + timeout
    while (cur := w.result("stats")["connections"]["current"]) != n:
        assert time.monotonic() < deadline, f"{cur} connections, not {n}"
        time.sleep(0.02)  # polls the counter: the state waited for


class LimitedDaemon(TestDaemon):
    """A TestDaemon started under `prlimit --nofile=N:N` (few descriptors)."""
    __test__ = False

    def __init__(self, *a, nofile, **kw):
        super().__init__(*a, **kw)
        self.nofile = nofile

    def command(self):
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--"] + super().command()


def test_few_file_descriptors_sheds_load_and_recovers(tmp_path):
    with LimitedDaemon(tmp_path, nofile=64) as d:
        log = d.stderr_text()
        assert "max-connections 1024 lowered to 32 to fit RLIMIT_NOFILE 64" in log
        wires = []
        try:
            for _ in range(40):
                wires.append(Wire.connect(d))
            refused = 0
            for w in wires:
                try:
                    w.send(request(1, "health"))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # refused: answered and closed at accept
                m = w.recv_one()
                if m[2] is not None:
                    assert m[1] == 0 and m[2]["code"] == "E_OVERLOADED"
                    refused += 1
            assert refused >= 8
        finally:
            for w in wires:
                w.close()
        # Load shed, nothing broken: once the daemon has seen the closes, new
        # connections are served again.
        deadline = time.monotonic() + 60  # hang guard
        while True:
            with Wire.connect(d) as w:
                try:
                    w.send(request(7, "stats"))
                except (BrokenPipeError, ConnectionResetError):
                    pass
                m = w.recv_one()
            if m[1] == 7 and m[3]["connections"]["current"] == 1:
                break
            assert time.monotonic() < deadline, m
            time.sleep(0.05)  # polls the counter: the state waited for
        assert m[2] is None and m[3]["connections"]["rejected"] >= 8
    assert "refusing connections" in d.stderr_text()
